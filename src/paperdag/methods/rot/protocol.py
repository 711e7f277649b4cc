"""The evaluation protocol: the retrieval settings tuned on the validation split, then the three arms on each test
problem, interleaved and timed one problem at a time.

    none    plain chain of thought: the model writes its own plan, then the work;
    static  static top-1 template: the stored solution whose key is most similar to the query; the key (its problem
            text, its template text, or its template's steps against the query's clauses) is the one that retrieves
            the right template most often on the validation split;
    rot     RoT's dynamic template: start node + reward-guided traversal over the thought graph (graph.py), with the
            start weight alpha and the stop threshold theta tuned on the validation split.

A problem's latency is its query encoding (template arms), template assembly and greedy generation; the arms run
in a rotating order per problem, so load on the machine falls on all of them alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from paperdag.methods.rot.graph import Path, RoTConfig, ThoughtGraph, start_node, traverse
from paperdag.methods.rot.metrics import retrieval_scores, written_plan
from paperdag.methods.rot.query import Query, encode_query, similarity
from paperdag.methods.rot.task import parse_answer, plan_text, prompt

ARMS = ("none", "static", "rot")
STATIC_KEYS = ("problem", "template", "clauses")
STATIC_VIEW = {"problem": "problem", "template": "problem", "clauses": "clauses"}  # the query view each key needs


@dataclass(frozen=True)
class StaticIndex:
    """The stored solutions as the static baseline retrieves them: templates[t], key embeddings keys["problem"] and
    keys["template"] (T, d), and their steps (the graph's nodes): step_emb (n, d), step_template (n,), nodes of a
    template contiguous and in order."""

    templates: list[list[str]]
    keys: dict[str, np.ndarray]
    step_emb: np.ndarray
    step_template: np.ndarray

    def scores(self, query: Query, key: str) -> np.ndarray:
        """(T,) the similarity of every stored solution to the query under `key`:
        problem / template: cos(q, key_t), the whole query against the stored problem / the template's joined text;
        clauses: the query's clauses c against template t's steps s (Chamfer), 0.5 (mean_s max_c cos + mean_c max_s cos):
        every step of t asked for by some clause, and every clause served by some step of t."""
        if key in ("problem", "template"):
            return self.keys[key] @ query.whole  # (T,)
        if key != "clauses":
            raise ValueError(f"rot static key {key!r} unknown; use {STATIC_KEYS}")
        cos = query.parts @ self.step_emb.T  # (k, n)
        first = np.flatnonzero(np.r_[True, self.step_template[1:] != self.step_template[:-1]])  # (T,) each template's first node
        steps_asked = np.add.reduceat(cos.max(axis=0), first) / np.diff(np.r_[first, len(self.step_template)])  # (T,)
        clauses_served = np.maximum.reduceat(cos, first, axis=1).mean(axis=0)  # (k, T) -> (T,)
        return 0.5 * (steps_asked + clauses_served)

    def top1(self, query: Query, key: str) -> int:
        """The stored solution with the highest score; the lowest index on a tie."""
        return int(np.argmax(self.scores(query, key)))


def tune_static(val_queries: list[Query], val_templates: list[list[str]], index: StaticIndex) -> tuple[str, dict[str, float]]:
    """The static baseline's retrieval key: the one whose top-1 template equals the problem's own most often on the
    validation split (ties: the first of STATIC_KEYS); with every key's hit rate. val_queries: every view encoded."""
    rates = {k: float(np.mean([index.templates[index.top1(q, k)] == t for q, t in zip(val_queries, val_templates, strict=True)]))
             for k in STATIC_KEYS}
    return max(STATIC_KEYS, key=lambda k: rates[k]), rates


def rot_path(query: Query, graph: ThoughtGraph, node_emb: np.ndarray, config: RoTConfig) -> Path:
    """RoT's node path for one query: start rule on sim(query seen as config.start_query), traversal on
    sim(query seen as config.step_query)."""
    return traverse(similarity(query, node_emb, config.step_query), graph, config, similarity(query, node_emb, config.start_query))


def _middle_of_best(rates: dict[float, float]) -> float:
    """The grid value with the highest rate; on a tie the median of the tied values (the upper one of two): the
    middle of a plateau, farthest from the edges where the rate falls."""
    best = max(rates.values())
    tied = sorted(v for v, r in rates.items() if r == best)
    return tied[len(tied) // 2]


def tune_rot(val_queries: list[Query], val_templates: list[list[str]], graph: ThoughtGraph, node_emb: np.ndarray,
             config: RoTConfig, alphas: list[float], thetas: list[float]) -> tuple[RoTConfig, dict[str, object]]:
    """RoT's start weight and stop threshold on the validation split: alpha maximising the start rule's accuracy (the
    start node is the needed first step), then theta maximising the share of templates exactly the needed steps;
    ties: the middle of the tied values; an empty grid keeps config's value. With both grids' rates and the retrieval
    scores (retrieval_scores) before (config as given) and after tuning."""
    def assembled(cfg: RoTConfig) -> tuple[list[list[str]], list[str]]:
        paths = [rot_path(q, graph, node_emb, cfg) for q in val_queries]
        return [[graph.texts[v] for v in p.nodes] for p in paths], [p.stop for p in paths]

    starts = [similarity(q, node_emb, config.start_query) for q in val_queries]  # (n,) per query
    alpha_rates = {a: 100.0 * float(np.mean([graph.texts[start_node(s, graph, replace(config, alpha=a))] == t[0]
                                             for s, t in zip(starts, val_templates, strict=True)])) for a in alphas}
    tuned = replace(config, alpha=_middle_of_best(alpha_rates)) if alphas else config
    theta_rates = {th: retrieval_scores(*assembled(replace(tuned, theta=th)), val_templates)["template_exact"] for th in thetas}
    tuned = replace(tuned, theta=_middle_of_best(theta_rates)) if thetas else tuned
    report = {"alpha": tuned.alpha, "theta": tuned.theta, "alpha_start_accuracy": {str(a): r for a, r in alpha_rates.items()},
              "theta_template_exact": {str(t): r for t, r in theta_rates.items()},
              "val_given": retrieval_scores(*assembled(config), val_templates),
              "val_tuned": retrieval_scores(*assembled(tuned), val_templates)}
    return tuned, report


def greedy_solve(model, tokenizer, text: str, template: list[str] | None, max_new_tokens: int) -> tuple[str, int]:
    """The generation after the reasoning prefix and the tokens it took (eos included)."""
    from paperdag.lm import generate

    ids = tokenizer(prompt(text, template), add_special_tokens=False)["input_ids"]
    out = generate(model, [[ids]], tokenizer.pad_token_id, tokenizer.eos_token_id, max_new_tokens=max_new_tokens)
    return tokenizer.decode(out.tokens[0], skip_special_tokens=True), out.new_tokens


def run_arms(model, tokenizer, embed: Callable[[list[str]], np.ndarray], tests: list[dict], graph: ThoughtGraph,
             node_emb: np.ndarray, static: StaticIndex, static_key: str, config: RoTConfig, max_new_tokens: int,
             progress: Callable[[int], None] = lambda i: None) -> list[dict]:
    """One row per (test problem, arm): the template used, whether the plan the work follows (the template, or the
    one the model wrote) is the needed steps, the answer, correctness, output tokens and latency.
    embed: texts -> (k, d) unit rows (one encoder call per query and template arm, timed with it)."""
    rows = []
    for i, problem in enumerate(tests):
        for arm in ARMS[i % len(ARMS):] + ARMS[: i % len(ARMS)]:
            start = time.perf_counter()
            template, path, stop = None, [], ""
            if arm == "static":
                template = static.templates[static.top1(encode_query(embed, problem["text"], {STATIC_VIEW[static_key]}), static_key)]
            elif arm == "rot":
                walk = rot_path(encode_query(embed, problem["text"], {config.start_query, config.step_query}), graph, node_emb, config)
                path, stop = walk.nodes, walk.stop
                template = [graph.texts[v] for v in path]
            generated, tokens = greedy_solve(model, tokenizer, problem["text"], template, max_new_tokens)
            seconds = time.perf_counter() - start
            answer = parse_answer(generated)
            needed = list(problem["template"])
            rows.append({"problem": problem["id"], "kind": problem["kind"], "arm": arm, "template": template or [],
                         "template_exact": None if template is None else template == needed,
                         "start_right": None if template is None else template[:1] == needed[:1],
                         "plan_right": (written_plan(generated) if template is None else plan_text(template)) == plan_text(needed),
                         "path": path, "stop": stop, "generated": generated, "predicted": answer,
                         "correct": answer == problem["answer"], "output_tokens": tokens, "seconds": seconds})
        progress(i + 1)
    return rows
