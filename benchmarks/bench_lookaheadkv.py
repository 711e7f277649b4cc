"""Benchmark the eviction cost of LookaheadKV against SnapKV, H2O and the draft-based method as the prompt grows: the
time from prompt ids to the evicted cache (prefill + scoring + eviction) of each method, per budget fraction of T,
and its overhead over the plain prefill timed beside it, on one replicate's trained model and lookahead module
(lookaheadkv.md: LKV's overhead within 25 % of SnapKV's, the draft method's >= 5x LKV's).

Prompts are the replicate's evaluation prompts (T of the pipeline) and, for longer T, random sequences of the
model's own vocabulary (the cost of prefill and scoring does not depend on what the tokens say). Every method goes
through the same `prepare` call; runs are interleaved and the fastest of --repeats counts (paperdag.timing).

    .venv/bin/python benchmarks/bench_lookaheadkv.py --lengths 256 512 1024   # writes benchmarks/results/lookaheadkv.json
    .venv/bin/python benchmarks/bench_lookaheadkv.py --untrained --lengths 256 512   # no pipeline outputs needed
    .venv/bin/python benchmarks/bench_lookaheadkv.py --lengths --draft-tokens 4 16 64  # the draft method's cost per draft length
    .venv/bin/python benchmarks/bench_lookaheadkv.py --lengths --batch-size 32  # 32 prompts per call: throughput, not latency

With several --draft-tokens, the draft method is timed at each length (`draft@m`; a draft runs on past eos: its cost
is what a response of m tokens would cost), so the draft length at which its cost reaches 5x LookaheadKV's shows.

--untrained times a tiny Llama of params.yaml's train_lm sizes and a lookahead module of train_lookahead's n_tokens,
both freshly initialised (seed 0), on random prompts only: what prefill and scoring cost does not depend on training.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
from pathlib import Path

import polars as pl
import torch
import yaml

from paperdag.lm import load_causal_lm, tiny_causal_lm, tiny_llama_config
from paperdag.methods.lookaheadkv import LookaheadKV, Setting, attach, budget_tokens, prepare
from paperdag.methods.lookaheadkv.metrics import overhead
from paperdag.timing import best_of_interleaved

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "lookaheadkv.json"
DATA = ROOT / "data" / "lookaheadkv"
TARGETS = ("LKV overhead / SnapKV overhead <= 1.25; draft overhead / LKV overhead >= 5 (overhead: time to the evicted cache "
           "minus the plain prefill's); the whole times' ratios beside them")
METHODS = ("full", "streaming", "h2o", "snapkv", "lookahead")  # and the draft method once per --draft-tokens


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA), help="the pipeline's outputs (model/<r>/, lookahead/<r>/, targets/<r>.parquet)")
    ap.add_argument("--replicate", default="0", help="which replicate's model and lookahead module")
    ap.add_argument("--lengths", type=int, nargs="*", default=[256, 512], help="prompt lengths T beyond the pipeline's")
    ap.add_argument("--budgets", type=float, nargs="+", default=[0.0625, 0.125, 0.25], help="per-head budgets as fractions of T")
    ap.add_argument("--batch-size", type=int, default=1, help="prompts per prepare call (1: a request's latency, as infer times it)")
    ap.add_argument("--window", type=int, default=8, help="SnapKV window w (and the draft method's SnapKV cache)")
    ap.add_argument("--draft-tokens", type=int, nargs="+", help="draft lengths of the draft-based method (each timed; default: "
                    "params.yaml's infer.draft_tokens, the pipeline's whole response)")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved runs per method; the fastest counts")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--untrained", action="store_true", help="a fresh model of params.yaml's sizes, random prompts only")
    args = ap.parse_args()
    args.draft_tokens = args.draft_tokens or [yaml.safe_load((ROOT / "params.yaml").read_text())["lookaheadkv"]["infer"]["draft_tokens"]]
    torch.set_num_threads(args.threads)
    data, r = Path(args.data), args.replicate
    prompts: dict[int, torch.Tensor] = {}
    if args.untrained:
        p = yaml.safe_load((ROOT / "params.yaml").read_text())["lookaheadkv"]
        lm = p["train_lm"]
        torch.manual_seed(0)
        model = tiny_causal_lm(tiny_llama_config(512, lm["hidden_size"], lm["num_layers"], lm["num_heads"], lm["num_kv_heads"],
                                                 lm["intermediate_size"], max_position_embeddings=max([1024, *args.lengths])))
        module, vocab = LookaheadKV.for_model(model, p["train_lookahead"]["n_tokens"], 8, 32.0), 512
    else:
        if not (data / "model" / r).is_dir() or not (data / "lookahead" / r).is_dir():
            raise SystemExit(f"{data} lacks model/{r}/ or lookahead/{r}/: run `dvc repro lookaheadkv-train_lookahead` first")
        model, tokenizer = load_causal_lm(data / "model" / r)
        module, vocab = LookaheadKV.load(data / "lookahead" / r), len(tokenizer)
        table = pl.read_parquet(data / "targets" / f"{r}.parquet").filter(pl.col("set") == "eval")
        prompts[len(table["prompt_ids"][0])] = torch.tensor(table["prompt_ids"].to_list()[: args.batch_size])
    attach(model.eval(), module)
    setting = Setting(window=args.window, kernel=7, lookahead=module)
    drafts = {f"draft@{m}": dataclasses.replace(setting, draft_tokens=m) for m in args.draft_tokens}
    draw = torch.Generator().manual_seed(0)
    for t in args.lengths:
        prompts[t] = torch.randint(3, vocab, (args.batch_size, t), generator=draw)
    rows = []
    for t, ids in sorted(prompts.items()):
        for budget in budget_tokens(args.budgets, t):
            if budget <= args.window:
                continue
            calls = [lambda m=m, ids=ids, b=budget: prepare(m, model, ids, b, setting) for m in METHODS]
            calls += [lambda s=s, ids=ids, b=budget: prepare("draft", model, ids, b, s) for s in drafts.values()]
            _, best = best_of_interleaved(calls, args.repeats)
            ms = {m: 1000 * s / ids.shape[0] for m, s in zip([*METHODS, *drafts], best, strict=True)}
            extra = {m: overhead(ms, m) for m in ms if m != "full"}  # over the plain prefill, as evaluate counts it
            rows.append({"prompt_tokens": t, "budget": budget, "ms_per_example": ms, "overhead_ms_per_example": extra,
                         "lkv_over_snapkv": ms["lookahead"] / ms["snapkv"], "draft_over_lkv": {d: ms[d] / ms["lookahead"] for d in drafts},
                         "lkv_over_full": ms["lookahead"] / ms["full"],
                         "overhead_lkv_over_snapkv": extra["lookahead"] / extra["snapkv"] if extra["snapkv"] > 0 else None,
                         "overhead_draft_over_lkv": {d: extra[d] / extra["lookahead"] if extra["lookahead"] > 0 else None for d in drafts}})
            print(f"T={t:5d} C={budget:4d}  " + "  ".join(f"{m} {v:7.3f}" for m, v in ms.items())
                  + f"  LKV/SnapKV {rows[-1]['lkv_over_snapkv']:.2f} (overheads {_fmt(rows[-1]['overhead_lkv_over_snapkv'])})  "
                  + "  ".join(f"{d}/LKV {v:.2f} (overheads {_fmt(rows[-1]['overhead_draft_over_lkv'][d])})"
                              for d, v in rows[-1]["draft_over_lkv"].items()), flush=True)
    result = {"replicate": "untrained" if args.untrained else r, "lookahead_tokens": module.n_tokens, "draft_tokens": args.draft_tokens,
              "window": args.window, "batch_size": args.batch_size, "threads": args.threads, "repeats": args.repeats,
              "machine": platform.platform(), "rows": rows, "targets": TARGETS}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
