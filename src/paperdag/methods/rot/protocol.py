"""The evaluation protocol: the three arms on each test problem, interleaved and timed one problem at a time.

    none    plain chain of thought: the model writes its own plan, then the work;
    static  static top-1 template: the stored solution whose key (its problem text, or its template text: the one
            that retrieves the right template more often on the validation split) is most similar to the query;
    rot     RoT's dynamic template: start node + reward-guided traversal over the thought graph (graph.py).

A problem's latency is its query encoding (template arms), template assembly and greedy generation; the arms run
in a rotating order per problem, so load on the machine falls on all of them alike."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from paperdag.methods.rot.graph import RoTConfig, ThoughtGraph, traverse
from paperdag.methods.rot.task import parse_answer, prompt

ARMS = ("none", "static", "rot")
STATIC_KEYS = ("problem", "template")


def static_top1(q: np.ndarray, keys: np.ndarray) -> int:
    """The stored solution maximising cos(q, key) (unit rows: inner product); the lowest index on a tie."""
    return int(np.argmax(keys @ q))


def tune_static(val_queries: np.ndarray, val_templates: list[list[str]], store_keys: dict[str, np.ndarray],
                store_templates: list[list[str]]) -> tuple[str, dict[str, float]]:
    """The static baseline's retrieval key: the one whose top-1 template equals the problem's own most often on the
    validation split (ties: the first of STATIC_KEYS); with every key's hit rate."""
    rates = {k: float(np.mean([store_templates[static_top1(q, store_keys[k])] == t for q, t in zip(val_queries, val_templates, strict=True)]))
             for k in STATIC_KEYS}
    return max(STATIC_KEYS, key=lambda k: rates[k]), rates


def greedy_solve(model, tokenizer, text: str, template: list[str] | None, max_new_tokens: int) -> tuple[str, int]:
    """The generation after the reasoning prefix and the tokens it took (eos included)."""
    from paperdag.lm import generate

    ids = tokenizer(prompt(text, template), add_special_tokens=False)["input_ids"]
    out = generate(model, [[ids]], tokenizer.pad_token_id, tokenizer.eos_token_id, max_new_tokens=max_new_tokens)
    return tokenizer.decode(out.tokens[0], skip_special_tokens=True), out.new_tokens


def run_arms(model, tokenizer, embed: Callable[[str], np.ndarray], tests: list[dict], graph: ThoughtGraph,
             node_emb: np.ndarray, static_keys: np.ndarray, store_templates: list[list[str]], config: RoTConfig,
             max_new_tokens: int, progress: Callable[[int], None] = lambda i: None) -> list[dict]:
    """One row per (test problem, arm): the template used, the answer, correctness, output tokens and latency."""
    rows = []
    for i, problem in enumerate(tests):
        for arm in ARMS[i % len(ARMS):] + ARMS[: i % len(ARMS)]:
            start = time.perf_counter()
            template, path, stop = None, [], ""
            if arm != "none":
                q = embed(problem["text"])  # (d,)
                if arm == "static":
                    template = store_templates[static_top1(q, static_keys)]
                else:
                    walk = traverse(node_emb @ q, graph, config)
                    path, stop = walk.nodes, walk.stop
                    template = [graph.texts[v] for v in path]
            generated, tokens = greedy_solve(model, tokenizer, problem["text"], template, max_new_tokens)
            seconds = time.perf_counter() - start
            answer = parse_answer(generated)
            rows.append({"problem": problem["id"], "kind": problem["kind"], "arm": arm, "template": template or [],
                         "template_exact": None if template is None else template == list(problem["template"]),
                         "path": path, "stop": stop, "generated": generated, "predicted": answer,
                         "correct": answer == problem["answer"], "output_tokens": tokens, "seconds": seconds})
        progress(i + 1)
    return rows


def training_pools(tokenizer, rows: list[dict]) -> dict[str, list[tuple[list[int], list[int]]]]:
    """Every store and training problem twice: solved from scratch ("none": writes its plan, then the work) and
    with its own template in the prefix ("template": writes the work only)."""
    from paperdag.methods.rot.task import target
    from paperdag.methods.rot.world import problem_of

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
