"""Retrieval-augmented translation and checker-guided repair (paper, Secs. "RAG fine-tuning" and "Iterative repair").

The generator writes a theorem (statement line + proof) from an NL statement, with or without the top-5 retrieved
training theorems (formal text) in its context:

    plain   NL: <nl>\\nFormal:\\n                                   -> <statement>\\n<proof>\\n<eos>
    rag     Example:\\n<formal_1>\\n ... Example:\\n<formal_5>\\n NL: ...
    repair  (the same, then) Error: <checker error>\\nPrevious:\\n<rejected attempt>\\n before "NL:"

Repair: a sample the checker rejects is regenerated with the error and the rejected attempt in the prefix, up to
`rounds` times; a chain stops at the first attempt the checker accepts. Only the checker is consulted (the gold
statement never is); semantic correctness is judged afterwards (z3, equiv.py).

One model per replicate is trained on all four prompt kinds (pools); the repair pools pair a corrupted training
theorem (a near miss: a wrong hypothesis name, rule, factor, goal constant or relation, a dropped step) and its
checker error with the gold theorem.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from paperdag.methods.proofbridge.logic import check_error

ARMS = ("plain", "plain_repair", "rag", "rag_repair")  # (retrieval?, repair?) = (no, no) (no, yes) (yes, no) (yes, yes)
METHOD = "rag_repair"


def uses_retrieval(arm: str) -> bool:
    return arm.startswith("rag")


def uses_repair(arm: str) -> bool:
    return arm.endswith("repair")


def prompt(nl: str, examples: Sequence[str] = (), error: str | None = None, previous: str | None = None) -> str:
    context = "".join(f"Example:\n{e}\n" for e in examples)
    feedback = f"Error: {error}\nPrevious:\n{previous}\n" if error is not None else ""
    return f"{context}{feedback}NL: {nl}\nFormal:\n"


def target(formal: str) -> str:
    return f"{formal}\n"


def corrupt(formal: str, rng: random.Random) -> str:
    """A near miss of a theorem: one edit of the kind a translator makes (the checker must reject most of them)."""
    lines = formal.split("\n")
    statement, proof = lines[0], lines[1:]
    edit = rng.choice(("hypothesis", "rule", "drop", "goal", "relation", "exact", "factor"))
    if edit == "hypothesis":
        i = rng.randrange(len(proof) - 1) if len(proof) > 1 else 0
        words = proof[i].split()
        refs = [j for j, w in enumerate(words) if w[:1] in "hs" and w[1:].isdigit() and j > 1]
        if refs:
            j = rng.choice(refs)
            words[j] = rng.choice([w for w in ("h1", "h2", "h3", "s1", "s2") if w != words[j]])
            proof[i] = " ".join(words)
    elif edit == "rule":
        i = rng.randrange(len(proof) - 1) if len(proof) > 1 else 0
        words = proof[i].split()
        if len(words) > 3:
            words[3] = rng.choice([r for r in ("add", "mul", "subst", "nonneg") if r != words[3]])
            proof[i] = " ".join(words)
    elif edit == "drop" and len(proof) > 2:
        proof.pop(rng.randrange(len(proof) - 1))
    elif edit == "goal":
        head, goal = statement.rsplit(" : ", 1)
        words = goal.split()
        words[-1] = str(int(words[-1]) + rng.choice((-1, 1))) if words[-1].lstrip("-").isdigit() else words[-1]
        statement = f"{head} : {' '.join(words)}"
    elif edit == "relation":
        head, goal = statement.rsplit(" : ", 1)
        for a, b in ((">=", "<="), ("<=", ">="), (">", "<"), ("<", ">")):
            if f" {a} " in goal:
                goal = goal.replace(f" {a} ", f" {b} ", 1)
                break
        statement = f"{head} : {goal}"
    elif edit == "exact":
        proof[-1] = "exact h1" if proof[-1] != "exact h1" else "exact s1"
    else:
        for i, line in enumerate(proof):
            if " mul " in line:
                words = line.split()
                words[4] = str(int(words[4]) + 1)
                proof[i] = " ".join(words)
                break
    return "\n".join([statement, *proof])


def near_misses(formal: str, rng: random.Random, n: int, tries: int = 40) -> list[tuple[str, str]]:
    """Up to n distinct (rejected attempt, checker error) pairs for a theorem."""
    out: dict[str, str] = {}
    for _ in range(tries):
        if len(out) >= n:
            break
        bad = corrupt(formal, rng)
        err = check_error(bad)
        if err is not None and bad not in out:
            out[bad] = err
    return list(out.items())


@dataclass(frozen=True)
class Attempt:
    text: str
    error: str | None  # the checker's error; None: type-correct


Sampler = Callable[[list[str]], list[str]]  # prompts -> one sampled continuation each


def run_chains(sample: Sampler, nls: list[str], contexts: list[Sequence[str]], n_samples: int, rounds: int) -> list[list[list[Attempt]]]:
    """For each theorem, n_samples chains of attempts: a first sample, then up to `rounds` repair samples while
    the checker rejects the last attempt (rounds = 0: no repair). Returns [theorem][sample][attempt]."""
    chains: list[list[list[Attempt]]] = [[[] for _ in range(n_samples)] for _ in nls]
    pending = [(i, j) for i in range(len(nls)) for j in range(n_samples)]
    for round_ in range(rounds + 1):
        if not pending:
            break
        prompts = []
        for i, j in pending:
            last = chains[i][j][-1] if chains[i][j] else None
            prompts.append(prompt(nls[i], contexts[i], last.error if last else None, last.text if last else None))
        for (i, j), text in zip(pending, sample(prompts)):
            chains[i][j].append(Attempt(text.strip(), check_error(text.strip())))
        pending = [(i, j) for i, j in pending if chains[i][j][-1].error is not None]
    return chains


def sampler(model, tokenizer, temperature: float, seed: int, batch_size: int, max_new_tokens: int) -> Sampler:
    """Temperature sampling through the shared decoder (paperdag.lm.generate): argmax(logits / T + Gumbel noise)
    is a draw from softmax(logits / T); the noise comes from one seeded generator, so a run repeats bit for bit.
    temperature 0: greedy."""
    import torch

    from paperdag.lm import generate_batches

    gen = torch.Generator().manual_seed(seed)

    def rule(logits):
        if temperature == 0:
            return logits[0]
        u = torch.rand(logits[0].shape, generator=gen).clamp_(1e-9, 1 - 1e-9)
        return logits[0] / temperature - torch.log(-torch.log(u))

    def sample(prompts: list[str]) -> list[str]:
        ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths together: little padding
        out = generate_batches(model, [[ids[i] for i in order]], tokenizer.pad_token_id, tokenizer.eos_token_id, batch_size,
                               rule=rule, max_new_tokens=max_new_tokens)
        texts = [""] * len(ids)
        for i, toks in zip(order, out.tokens):
            texts[i] = tokenizer.decode(toks, skip_special_tokens=True)
        return texts

    return sample


def training_pools(tokenizer, rows: list[dict], contexts: dict[int, list[str]], near: dict[int, list[tuple[str, str]]]) -> dict[str, list]:
    """(prompt ids, target ids + eos) examples of the four prompt kinds over the training theorems: plain, rag
    (the theorem's retrieved examples, other families only), and both again with each near miss as the previous
    attempt."""
    eos = [tokenizer.eos_token_id]

    def enc(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    pools: dict[str, list] = {arm: [] for arm in ARMS}
    for r in rows:
        tgt = enc(target(r["formal"])) + eos
        ctx = contexts[r["id"]]
        pools["plain"].append((enc(prompt(r["nl"])), tgt))
        pools["rag"].append((enc(prompt(r["nl"], ctx)), tgt))
        for bad, err in near[r["id"]]:
            pools["plain_repair"].append((enc(prompt(r["nl"], (), err, bad)), tgt))
            pools["rag_repair"].append((enc(prompt(r["nl"], ctx, err, bad)), tgt))
    return pools
