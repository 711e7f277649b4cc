"""Benchmark CK-PLUG decoding against plain decoding, in one process: tokens/s of each, and the cost ratio
(ckplug.md: one extra forward pass per token, expect ~2x, not more). CAD (also two views) for comparison.

Every method decodes the same counterfactual prompts with max_new_tokens fixed and eos ignored, so each makes the
same number of steps; runs are interleaved and the fastest of --repeats counts.

    .venv/bin/python benchmarks/bench_ckplug.py     # writes benchmarks/results/ckplug.json, prints a table
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from pathlib import Path

import torch

from paperdag.lm import generate, load_causal_lm, plain, tiny_causal_lm, tiny_llama_config, train_byte_bpe
from paperdag.methods.ckplug import WorldSizes, build, cad_rule, ckplug_rule, context_prompt, parametric_prompt

RESULTS = Path(__file__).parent / "results" / "ckplug.json"
MODEL = Path(__file__).resolve().parents[1] / "data" / "ckplug" / "model" / "conflict_rows-0"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(MODEL), help="a save_pretrained directory (default: the pipeline's trained model); "
                    "missing -> a random tiny Llama of the default sizes")
    ap.add_argument("--examples", type=int, default=200, help="counterfactual prompts decoded per run")
    ap.add_argument("--batch-size", type=int, default=100, help="examples decoded together")
    ap.add_argument("--new-tokens", type=int, default=6, help="decoding steps per example (eos ignored)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved runs per method; the fastest counts")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    _, _, train_rows, counterfactual, _ = build(WorldSizes(100, 200, 50, args.examples, 10, (0.5,), 0, 3000, 600), seed=0)
    if Path(args.model).is_dir():
        model, tokenizer = load_causal_lm(args.model)
        source = args.model
    else:
        texts = [f"{context_prompt(c, q)} {a}" for c, q, a in train_rows.select("context", "question", "answer").iter_rows()]
        tokenizer = train_byte_bpe(texts, 2000, add_bos=True)
        torch.manual_seed(0)
        model = tiny_causal_lm(tiny_llama_config(len(tokenizer), 128, 2, 4, 2, 512)).eval()
        source = "random tiny Llama (128 wide, 2 layers)"
    ctx = [tokenizer(context_prompt(c, q))["input_ids"] for c, q in zip(counterfactual["context"], counterfactual["question"])]
    par = [tokenizer(parametric_prompt(q))["input_ids"] for q in counterfactual["question"]]
    methods = {
        "plain (RAG)": ([ctx], plain),
        "ck-plug alpha=0.5": ([ctx, par], ckplug_rule(0.5, entropy_over="head")),
        "ck-plug adaptive": ([ctx, par], ckplug_rule(None, entropy_over="head")),
        "ck-plug adaptive (vocab entropy)": ([ctx, par], ckplug_rule(None, entropy_over="vocab")),
        "cad": ([ctx, par], cad_rule(0.5)),
    }
    best: dict[str, dict] = {}
    order = list(methods)
    for rep in range(args.repeats):
        random.Random(rep).shuffle(order)
        for name in order:
            views, rule = methods[name]
            seconds, tokens, passes = 0.0, 0, 0
            start = time.perf_counter()
            for lo in range(0, len(ctx), args.batch_size):
                out = generate(model, [v[lo : lo + args.batch_size] for v in views], tokenizer.pad_token_id, [], rule=rule,
                               max_new_tokens=args.new_tokens)
                tokens, passes = tokens + out.new_tokens, passes + out.forward_passes
            seconds = time.perf_counter() - start
            if name not in best or seconds < best[name]["seconds"]:
                best[name] = {"seconds": seconds, "new_tokens": tokens, "forward_passes": passes, "tokens_per_s": tokens / seconds}
    base = best["plain (RAG)"]["seconds"] / best["plain (RAG)"]["new_tokens"]
    for row in best.values():
        row["cost_ratio_vs_plain"] = (row["seconds"] / row["new_tokens"]) / base
    result = {"model": source, "examples": len(ctx), "new_tokens_per_example": args.new_tokens, "threads": args.threads,
              "repeats": args.repeats, "machine": platform.platform(), "methods": best,
              "target": "ck-plug cost ratio ~2 (one extra forward pass per token), not more"}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'method':<32} {'tokens/s':>10} {'passes':>7} {'cost ratio':>10}")
    for name, row in best.items():
        print(f"{name:<32} {row['tokens_per_s']:>10.0f} {row['forward_passes']:>7} {row['cost_ratio_vs_plain']:>10.2f}")


if __name__ == "__main__":
    main()
