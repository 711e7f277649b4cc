"""What the tiny LM is trained on and the check that it learned the task: every store and training problem solved
from scratch and with its own template in the prefix (task.py's format). Apart from the retrieval (protocol.py), so
that a change to the retrieval does not make the trained models stale."""

from __future__ import annotations

import numpy as np

from paperdag.methods.rot.task import parse_answer, prompt, target
from paperdag.methods.rot.world import problem_of


def training_pools(tokenizer, rows: list[dict]) -> dict[str, list[tuple[list[int], list[int]]]]:
    """Every store and training problem twice: solved from scratch ("none": writes its plan, then the work) and
    with its own template in the prefix ("template": writes the work only)."""
    def ids(s: str) -> list[int]:
        return tokenizer(s, add_special_tokens=False)["input_ids"]

    eos = [tokenizer.eos_token_id]
    pools: dict[str, list[tuple[list[int], list[int]]]] = {"none": [], "template": []}
    for r in rows:
        p = problem_of(r)
        pools["none"].append((ids(prompt(p.text, None)), ids(target(p, False)) + eos))
        pools["template"].append((ids(prompt(p.text, p.template)), ids(target(p, True)) + eos))
    return pools


def accuracy_without_template(model, tokenizer, rows: list[dict], max_new_tokens: int, batch_size: int) -> float:
    """Share of `rows` answered right from scratch (no template), batched greedy decoding: the learnability check."""
    from paperdag.lm import generate_batches

    prompts = [tokenizer(prompt(r["text"], None), add_special_tokens=False)["input_ids"] for r in rows]
    out = generate_batches(model, [prompts], tokenizer.pad_token_id, tokenizer.eos_token_id, batch_size, max_new_tokens=max_new_tokens)
    answers = [parse_answer(tokenizer.decode(t, skip_special_tokens=True)) for t in out.tokens]
    return float(np.mean([a == r["answer"] for a, r in zip(answers, rows, strict=True)]))
