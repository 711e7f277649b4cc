"""TokMem (ICLR 2026, arXiv 2510.00444): procedures stored as memory tokens of a frozen LM, added in rounds.

data: the synthetic procedure world and prompts. memory: the memory bank (tied rows, loss on m_i + response,
renormalisation of new rows), read-out of routing from the emitted token. metrics: EM, ROUGE-L, F1, forgetting.
"""

from __future__ import annotations

from paperdag.methods.tokmem.data import (
    LETTERS,
    RULES,
    SPLITS,
    Procedure,
    atomic_examples,
    call_examples,
    call_text,
    described_prompt,
    make_procedures,
    procedures_from,
    procedures_table,
    query_prompt,
    response,
    spaced,
)
from paperdag.methods.tokmem.memory import MemoryBank, fit_bank, routed, split_at_memory
from paperdag.methods.tokmem.metrics import exact_match, forgetting, lcs_length, multiset_f1, rouge_l

__all__ = [
    "LETTERS",
    "RULES",
    "SPLITS",
    "MemoryBank",
    "Procedure",
    "atomic_examples",
    "call_examples",
    "call_text",
    "described_prompt",
    "exact_match",
    "fit_bank",
    "forgetting",
    "lcs_length",
    "make_procedures",
    "multiset_f1",
    "procedures_from",
    "procedures_table",
    "query_prompt",
    "response",
    "rouge_l",
    "routed",
    "spaced",
    "split_at_memory",
]
