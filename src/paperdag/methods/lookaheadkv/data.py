"""Long-context key-value retrieval tasks in two splits (lookaheadkv.md, "synthesize").

A context is `pairs` records `key v1 .. vm ;` with distinct keys and distinct value symbols (so each value token
appears once), the records separated by spans of filler words drawn from a filler vocabulary: the filler makes the
prompt T tokens long while the lookup stays 8-16 pairs. Every key, value and filler symbol is one word, so one
token once the tokenizer has learned the words; a prompt therefore has exactly `prompt_tokens` tokens (with bos).
A question asks for `asked` of the records, in its own order (a multi-record response, so that a draft of the
response costs many decode steps, as the paper's long responses do):

    question_after   <context> ? ka kb .. :   -> ka v1 .. vm ; kb v1 .. vm ; ..   the prompt's last tokens name the keys (SnapKV-friendly)
    question_before  ? ka kb .. : <context>   -> ka v1 .. vm ; kb v1 .. vm ; ..   the prompt's suffix is records and filler: no information

The answer's value tokens are generated after the prompt's KV cache has been evicted: a method that dropped a
record the answer needs cannot produce it. (The spec's third split, two-hop lookup, is left out: see README.)

The LM's training rows add two kinds that are no split: recall drills (a context, then many of its records
recalled: a dense lookup signal) and copy drills (random symbols, then a random stretch of them again), which form
the induction heads (attend to the token after an earlier occurrence of the current one, copy it) that the lookup
is made of; a curriculum (protocol.train_curriculum) trains them first.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal, get_args

from paperdag.lm.drills import copy_drill

SPLITS = ("question_after", "question_before")
Kind = Literal["question_after", "question_before", "drill", "copy"]  # an LM training row's kind (a mixture key)
KINDS: tuple[str, ...] = get_args(Kind)
# the eviction methods compared (eviction.prepare runs each); here, without torch, for the stages that only read results
METHODS = ("full", "streaming", "h2o", "snapkv", "draft", "lookahead", "oracle")
SETS = ("lm", "lookahead", "validation", "eval")  # LM training, lookahead training, SnapKV tuning, evaluation


@dataclass(frozen=True)
class TaskSizes:
    keys: int  # key symbols kaa, kab, ... (at most 676); a context draws `pairs` distinct ones
    values: int  # value symbols vaa, vab, ... (at most 676); a context draws pairs x value_tokens distinct ones
    fillers: int  # filler symbols faa, fab, ... (at most 676)
    pairs: int  # records per context
    value_tokens: int  # value symbols per record (a record's answer is its key and these)
    context_tokens: int  # tokens of the context: the records' plus filler
    asked: int = 1  # records a question asks for (the response recalls them in the question's order)

    def __post_init__(self) -> None:
        if self.pairs < 2:
            raise ValueError(f"pairs must be at least 2; got {self.pairs}")
        if max(self.keys, self.values, self.fillers) > 676 or min(self.values, self.fillers) < 1:
            raise ValueError("keys, values and fillers are two-letter symbols: 1..676 each; "
                             f"got {self.keys}, {self.values}, {self.fillers}")
        if not 1 <= self.asked <= self.pairs:
            raise ValueError(f"asked must lie in [1, pairs = {self.pairs}]; got {self.asked}")
        if self.keys < self.pairs:
            raise ValueError(f"keys ({self.keys}) must be at least pairs ({self.pairs}): keys in one context are distinct")
        if self.values < self.pairs * self.value_tokens:
            raise ValueError(f"values ({self.values}) must be at least pairs x value_tokens = {self.pairs * self.value_tokens}: "
                             "value symbols in one context are distinct")
        if self.context_tokens < self.record_tokens * self.pairs:
            raise ValueError(f"context_tokens ({self.context_tokens}) cannot hold {self.pairs} records of {self.record_tokens} tokens")

    @property
    def record_tokens(self) -> int:
        return self.value_tokens + 2  # key, values, `;`

    @property
    def response_tokens(self) -> int:
        return self.asked * self.record_tokens  # the asked records, `;` between them, and eos


def question_tokens(asked: int) -> int:
    """Tokens of a question asking for `asked` records: `? ka kb .. :`."""
    return asked + 2


def _letters(i: int) -> str:
    """i as two letters (aa, ab, ..., zz): byte-level BPE splits letters from digits, so symbols are letters only."""
    return chr(97 + i // 26 % 26) + chr(97 + i % 26)


def key_word(i: int) -> str:
    return "k" + _letters(i)


def value_word(i: int) -> str:
    return "v" + _letters(i)


def filler_word(i: int) -> str:
    return "f" + _letters(i)


def task_words(sizes: TaskSizes) -> list[str]:
    """Every key, value and filler word of the task, and the separators: the whole vocabulary of every example."""
    return ([key_word(i) for i in range(sizes.keys)] + [value_word(i) for i in range(sizes.values)]
            + [filler_word(i) for i in range(sizes.fillers)] + [";", "?", ":"])


def _context(sizes: TaskSizes, rng: random.Random) -> tuple[list[str], list[list[str]], str]:
    """Keys, their value lists, and the context text: the records in order, filler spans of random lengths between
    and around them (a uniformly random composition of the filler count), every token one word."""
    keys = [key_word(i) for i in rng.sample(range(sizes.keys), sizes.pairs)]
    symbols = [value_word(i) for i in rng.sample(range(sizes.values), sizes.pairs * sizes.value_tokens)]
    values = [symbols[i * sizes.value_tokens : (i + 1) * sizes.value_tokens] for i in range(sizes.pairs)]
    filler = sizes.context_tokens - sizes.record_tokens * sizes.pairs
    cuts = sorted(rng.randint(0, filler) for _ in range(sizes.pairs))  # pairs + 1 gaps summing to `filler`
    gaps = [b - a for a, b in zip([0, *cuts], [*cuts, filler], strict=True)]
    words: list[str] = []
    for i in range(sizes.pairs + 1):
        words += [filler_word(rng.randrange(sizes.fillers)) for _ in range(gaps[i])]
        if i < sizes.pairs:
            words += [keys[i], *values[i], ";"]
    return keys, values, " ".join(words)


def make_example(split: str, sizes: TaskSizes, rng: random.Random) -> dict[str, str]:
    """One example of `split`: prompt text, gold response text (without eos), the queried keys (space-separated)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {SPLITS}")
    keys, values, context = _context(sizes, rng)
    asked = rng.sample(range(sizes.pairs), sizes.asked)
    query = " ".join(keys[q] for q in asked)
    response = " ; ".join(" ".join([keys[q], *values[q]]) for q in asked)
    if split == "question_after":
        return {"prompt": f"{context} ? {query} :", "response": response, "query": query}
    return {"prompt": f"? {query} : {context}", "response": response, "query": query}


def encode(tokenizer, example: dict[str, str]) -> tuple[list[int], list[int]]:
    """(prompt ids, gold response ids + eos). A leading space makes every word its own (space-prefixed) BPE token."""
    prompt = tokenizer(" " + example["prompt"])["input_ids"]
    response = tokenizer(" " + example["response"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt, response


def make_drill(sizes: TaskSizes, rng: random.Random, queries: int) -> dict[str, str]:
    """A language-model training example only (not a split): the context, then `queries` records recalled in random
    order (`? k v .. ; k' v' .. ; ...`). Many retrievals per context give the tiny model a dense signal for learning
    to look records up (multi-query associative recall); the key it recalls is unpredictable, its values are not."""
    keys, values, context = _context(sizes, rng)
    asked = rng.sample(range(sizes.pairs), min(queries, sizes.pairs))
    return {"prompt": f"{context} ?", "response": " ; ".join(" ".join([keys[i], *values[i]]) for i in asked), "query": ""}


def make_copy(words: list[str], length: int, stretch: int, rng: random.Random) -> dict[str, str]:
    """A language-model training example only (not a split): paperdag.lm.copy_drill's `length` random symbols, then
    the `stretch` of them that starts at a random place, again: the densest signal there is for the induction heads
    the lookup is made of."""
    prompt, response = copy_drill(words, length, stretch, rng)
    return {"prompt": prompt, "response": response, "query": ""}


def make_rows(sizes: TaskSizes, min_train_pairs: int, train_contexts: list[int], lm_examples: int, drill_examples: int,
              drill_queries: int, lookahead_examples: int, validation_examples: int, eval_examples: int,
              rng: random.Random, copy_examples: int = 0, copy_tokens: int = 32, copy_stretch: int = 24) -> list[dict]:
    """Every example of every set. The LM's training rows (splits and recall drills) hold min_train_pairs..pairs
    records in a context of one of `train_contexts` lengths (a curriculum trains on the short ones first), the copy
    drills copy_tokens random task symbols (their context_tokens) and a copy_stretch of them; the lookahead-training,
    validation (SnapKV's tuning) and evaluation rows hold `pairs` records in the full context."""
    rows = []
    for split in (*SPLITS, "drill"):
        for _ in range(drill_examples if split == "drill" else lm_examples):
            context = rng.choice(train_contexts)
            most = max(2, min(sizes.pairs, context // sizes.record_tokens))
            pairs = rng.randint(min(min_train_pairs, most), most)
            small = TaskSizes(sizes.keys, sizes.values, sizes.fillers, pairs, sizes.value_tokens, context, min(sizes.asked, pairs))
            made = make_drill(small, rng, drill_queries) if split == "drill" else make_example(split, small, rng)
            rows.append({"set": "lm", "split": split, "pairs": small.pairs, "context_tokens": context, **made})
    for name, n in (("lookahead", lookahead_examples), ("validation", validation_examples), ("eval", eval_examples)):
        rows += [{"set": name, "split": s, "pairs": sizes.pairs, "context_tokens": sizes.context_tokens, **make_example(s, sizes, rng)}
                 for s in SPLITS for _ in range(n)]
    words = task_words(sizes)[:-3]  # keys, values and fillers, not the separators
    rows += [{"set": "lm", "split": "copy", "pairs": 0, "context_tokens": copy_tokens, **make_copy(words, copy_tokens, copy_stretch, rng)}
             for _ in range(copy_examples)]
    return rows
