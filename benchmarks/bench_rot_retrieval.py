"""Probe RoT's retrieval alone, no model: on the validation problems (the split the pipeline tunes on), the share of
dynamic templates exactly the needed steps, the start rule's accuracy, how templates go wrong (stopped short / late)
and how traversals stop, per query view (whole problem as the official code, opening clause, best clause) with the
code's alpha and theta and with them tuned on the validation split (protocol.tune_rot, the pipeline's rule); the
static baseline's hit rate per key. Only MiniLM encodings: seconds.

    .venv/bin/python benchmarks/bench_rot_retrieval.py               # validation split -> benchmarks/results/rot_retrieval.json
    .venv/bin/python benchmarks/bench_rot_retrieval.py --split test  # the same settings (tuned on validation) scored on test

Needs data/rot/problems.parquet (`dvc repro rot-synthesize`); the grids and views come from params.yaml rot.infer.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import numpy as np
import polars as pl
import torch
import yaml

from paperdag.methods.rot import RoTConfig, build_graph
from paperdag.methods.rot.metrics import retrieval_scores
from paperdag.methods.rot.protocol import STATIC_KEYS, StaticIndex, rot_path, tune_rot, tune_static
from paperdag.methods.rot.query import VIEWS, encode_queries, similarity
from paperdag.retrieval import encode, load_encoder

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "rot_retrieval.json"
SETTINGS = {  # name: (start_query, step_query)
    "official (problem / problem)": ("problem", "problem"),
    "clauses / clauses": ("clauses", "clauses"),
    "problem / clauses": ("problem", "clauses"),
    "opening / clauses": ("opening", "clauses"),
}


def cos_ranges(queries: list, needed: list[list[str]], graph, node_emb: np.ndarray) -> dict[str, dict[str, float]]:
    """Per query view, the cosine of a query with a step it needs and with one it does not (each distinct step text
    once per query): mean, min and max."""
    first = {t: graph.texts.index(t) for t in dict.fromkeys(graph.texts)}  # a node per distinct step text
    out = {}
    for view in VIEWS:
        pairs = [(float(similarity(q, node_emb, view)[v]), text in steps) for q, steps in zip(queries, needed, strict=True)
                 for text, v in first.items()]
        for label, want in (("needed", True), ("other", False)):
            xs = [c for c, n in pairs if n == want]
            out[f"{view}_{label}"] = {"mean": float(np.mean(xs)), "min": min(xs), "max": max(xs)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", default=str(ROOT / "data/rot/problems.parquet"))
    ap.add_argument("--split", choices=("val", "test"), default="val", help="where the tuned settings are scored (tuning: always val)")
    ap.add_argument("--out", default=None, help=f"JSON results (default {RESULTS.name}, _test for --split test)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if not Path(args.problems).exists():
        sys.exit(f"{args.problems} is missing: run `dvc repro rot-synthesize` first")
    infer = yaml.safe_load((ROOT / "params.yaml").read_text())["rot"]["infer"]
    problems = pl.read_parquet(args.problems)
    store = problems.filter(pl.col("split") == "store").sort("id")
    templates = [list(t) for t in store["template"]]
    encoder = load_encoder(infer["encoder"])

    def embed(texts: list[str]) -> np.ndarray:
        return encode(encoder, texts, progress=False)

    node_emb = embed([s for t in templates for s in t])  # (n, d)
    config = RoTConfig(alpha=infer["alpha"], w_sim=infer["w_sim"], w_seq=infer["w_seq"], theta=infer["theta"], max_steps=infer["max_steps"])
    graph = build_graph(templates, node_emb, config)
    static = StaticIndex(templates, {"problem": embed(store["text"].to_list()), "template": embed([" ".join(t) for t in templates])},
                         node_emb, graph.template)

    def split(name: str) -> tuple[list, list[list[str]]]:
        rows = problems.filter(pl.col("split") == name).sort("id")
        return encode_queries(embed, rows["text"].to_list(), VIEWS), [list(t) for t in rows["template"]]

    val_q, val_t = split("val")
    eval_q, eval_t = (val_q, val_t) if args.split == "val" else split("test")
    out: dict[str, object] = {"split": args.split, "problems": len(eval_t), "tuned_on": "val",
                              "cos": cos_ranges(eval_q, eval_t, graph, node_emb), "rot": {}}
    for name, (start_q, step_q) in SETTINGS.items():
        given = replace(config, start_query=start_q, step_query=step_q)
        tuned, _ = tune_rot(val_q, val_t, graph, node_emb, given, infer["alpha_grid"], infer["theta_grid"])
        scored = {}
        for label, cfg in (("code's alpha, theta", given), ("tuned on val", tuned)):
            paths = [rot_path(q, graph, node_emb, cfg) for q in eval_q]
            scored[label] = {"alpha": cfg.alpha, "theta": cfg.theta,
                             **retrieval_scores([[graph.texts[v] for v in p.nodes] for p in paths], [p.stop for p in paths], eval_t),
                             "semantic_jumps": sum(graph.edges[a][b][0] == "semantic" for p in paths for a, b in pairwise(p.nodes))}
        out["rot"][name] = scored
    key, rates = tune_static(val_q, val_t, static)
    out["static"] = {"key_tuned_on_val": key, "val_hit_rate": rates,
                     "hit_rate": {k: 100.0 * sum(static.templates[static.top1(q, k)] == t for q, t in zip(eval_q, eval_t, strict=True))
                                  / len(eval_t) for k in STATIC_KEYS}}
    target = Path(args.out) if args.out else RESULTS.with_name(RESULTS.stem + ("" if args.split == "val" else "_test") + ".json")
    target.write_text(json.dumps(out, indent=2) + "\n")
    print(f"{args.split}: {len(eval_t)} problems (alpha, theta tuned on val)")
    print(f"{'start / step query':30s} {'setting':20s} {'alpha':>5s} {'theta':>5s} {'exact%':>7s} {'start%':>7s} {'short%':>7s} "
          f"{'late%':>7s} jumps stops")
    for name, scored in out["rot"].items():
        for label, s in scored.items():
            print(f"{name:30s} {label:20s} {s['alpha']:5.2f} {s['theta']:5.2f} {s['template_exact']:7.1f} {s['start_accuracy']:7.1f} "
                  f"{s['stopped_short']:7.1f} {s['stopped_late']:7.1f} {s['semantic_jumps']:5d} {s['stops']}")
    print(f"static top-1 (key tuned on val: {key}): hit % per key {out['static']['hit_rate']}")
    for view in VIEWS:
        need, other = out["cos"][f"{view}_needed"], out["cos"][f"{view}_other"]
        print(f"cos with the query seen as {view:8s}: needed step mean {need['mean']:.3f} [{need['min']:.3f}, {need['max']:.3f}], "
              f"other step mean {other['mean']:.3f} [{other['min']:.3f}, {other['max']:.3f}]")
    print(f"wrote {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")


if __name__ == "__main__":
    main()
