"""Benchmark the eviction cost of LookaheadKV against SnapKV and the draft-based method, in one process: the time
from prompt ids to the evicted cache (prefill + scoring + eviction) of each method, and the overhead over a plain
prefill (lookaheadkv.md: LKV's overhead >= 5x lower than the draft method's; LKV's time within 25% of SnapKV's).

Every method goes through the same `prepare` call on the same batches of evaluation prompts; runs are interleaved
(shuffled order per repeat) and the fastest of --repeats counts.

    .venv/bin/python benchmarks/bench_lookaheadkv.py     # writes benchmarks/results/lookaheadkv.json, prints a table
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from pathlib import Path

import polars as pl
import torch

from paperdag.lm import load_causal_lm
from paperdag.methods.lookaheadkv import LookaheadKV, Setting, attach, prepare

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "lookaheadkv.json"
DATA = ROOT / "data" / "lookaheadkv"
METHODS = ("full", "snapkv", "lookahead", "draft")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA), help="the pipeline's outputs (model/, lookahead/, targets.parquet)")
    ap.add_argument("--budget", type=int, default=16, help="per-head token budget C")
    ap.add_argument("--batch-size", type=int, default=60, help="prompts per prepare call")
    ap.add_argument("--draft-tokens", type=int, default=4, help="draft length of the draft-based method")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved runs per method; the fastest counts")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    data = Path(args.data)
    if not (data / "model").is_dir() or not (data / "lookahead").is_dir():
        raise SystemExit(f"{data} lacks model/ or lookahead/: run `dvc repro lookaheadkv-train_lookahead` first")
    model, _ = load_causal_lm(data / "model", attn_implementation="eager")
    module = LookaheadKV.load(data / "lookahead")
    attach(model, module)
    setting = Setting(draft_tokens=args.draft_tokens, lookahead=module)
    table = pl.read_parquet(data / "targets.parquet").filter(pl.col("set") == "eval")
    batches = []
    for (split,), group in sorted(table.group_by("split"), key=lambda kv: kv[0]):
        prompts = group["prompt_ids"].to_list()
        by_length = [p for p in prompts if len(p) == len(prompts[0])]
        batches.append((split, torch.tensor(by_length[: args.batch_size])))
    best: dict[str, float] = {}
    order = list(METHODS)
    examples = sum(b.shape[0] for _, b in batches)
    for rep in range(args.repeats):
        random.Random(rep).shuffle(order)
        for method in order:
            start = time.perf_counter()
            for _, ids in batches:
                prepare(method, model, ids, args.budget, setting)
            seconds = time.perf_counter() - start
            best[method] = min(best.get(method, float("inf")), seconds)
    ms = {m: 1000 * s / examples for m, s in best.items()}
    overhead = {m: ms[m] - ms["full"] for m in METHODS if m != "full"}
    result = {
        "examples": examples, "prompt_lengths": {s: b.shape[1] for s, b in batches}, "budget": args.budget,
        "lookahead_tokens": module.n_tokens, "draft_tokens": args.draft_tokens, "threads": args.threads,
        "repeats": args.repeats, "machine": platform.platform(),
        "ms_per_example": ms, "overhead_ms_per_example": overhead,
        "overhead_ratio_draft_over_lkv": overhead["draft"] / overhead["lookahead"],
        "ttft_ratio_lkv_over_snapkv": ms["lookahead"] / ms["snapkv"],
        "ttft_ratio_lkv_over_full": ms["lookahead"] / ms["full"],
        "targets": "draft overhead / LKV overhead >= 5; LKV time / SnapKV time <= 1.25",
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'method':<10} {'ms/example':>11} {'overhead ms':>12}")
    for m in METHODS:
        print(f"{m:<10} {ms[m]:>11.3f} {overhead.get(m, 0.0):>12.3f}")
    print(f"draft overhead / LKV overhead = {result['overhead_ratio_draft_over_lkv']:.2f}; "
          f"LKV / SnapKV time = {result['ttft_ratio_lkv_over_snapkv']:.2f}")


if __name__ == "__main__":
    main()
