"""Benchmark TokMem's inference against RAG's, in one process: queries/s of each on the same test queries, and the
ratio. TokMem decodes from the query alone (the model emits the memory token, then the response); RAG first embeds
the query with MiniLM, searches the description index, and decodes from query + description (a longer prompt).

Both decode with max_new_tokens fixed and eos ignored, so they make the same number of steps (TokMem's first step
is its memory token); runs are interleaved and the fastest of --repeats counts.

    .venv/bin/python benchmarks/bench_tokmem.py     # writes benchmarks/results/tokmem.json, prints a table
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

import polars as pl
import torch
from safetensors.torch import load_file

from paperdag.lm import generate, load_causal_lm
from paperdag.methods.tokmem import MemoryBank, described_prompt, query_prompt
from paperdag.retrieval import AnnIndex, encode, load_encoder

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "tokmem"
RESULTS = Path(__file__).parent / "results" / "tokmem.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA), help="the pipeline's data/tokmem directory (backbone, memory, tables)")
    ap.add_argument("--queries", type=int, default=200, help="test queries per run")
    ap.add_argument("--batch-size", type=int, default=100, help="queries decoded together")
    ap.add_argument("--new-tokens", type=int, default=10, help="decoding steps per query (eos ignored)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved runs per method; the fastest counts")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    data = Path(args.data)
    if not (data / "memory/0.safetensors").exists():
        sys.exit(f"{data}/memory/0.safetensors is missing: run `dvc repro tokmem-train_memory@0` (or paperdag run tokmem) first")
    backbone, tokenizer = load_causal_lm(data / "backbone")
    procedures = pl.read_parquet(data / "procedures.parquet").filter(pl.col("split") == "memory").sort("id")
    examples = pl.read_parquet(data / "examples.parquet")
    tests = examples.filter((pl.col("track") == "atomic") & (pl.col("split") == "test") & pl.col("procedure").is_in(procedures["id"].to_list()))
    queries = tests["query"].to_list()
    queries = [queries[i % len(queries)] for i in random.Random(0).sample(range(max(len(queries), args.queries)), args.queries)]
    bank = MemoryBank(backbone)
    bank.add(procedures.height, 1.0, seed=0)
    with torch.no_grad():
        bank.new.copy_(load_file(data / "memory/0.safetensors")["rows"])
    tokmem_model = bank.materialise()
    encoder = load_encoder()
    descriptions = procedures["description"].to_list()
    index = AnnIndex.build(encode(encoder, descriptions, progress=False), kind="flat", metric="ip")

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def decode(model, prompts: list[list[int]]) -> int:
        new = 0
        for lo in range(0, len(prompts), args.batch_size):
            new += generate(model, [prompts[lo : lo + args.batch_size]], tokenizer.pad_token_id, [], max_new_tokens=args.new_tokens).new_tokens
        return new

    def tokmem() -> tuple[int, int]:
        prompts = [ids(query_prompt(q)) for q in queries]
        return decode(tokmem_model, prompts), sum(map(len, prompts))

    def rag() -> tuple[int, int]:
        _, hits = index.search(encode(encoder, queries, progress=False), 1)
        prompts = [ids(described_prompt(q, descriptions[h])) for q, h in zip(queries, hits[:, 0], strict=True)]
        return decode(backbone, prompts), sum(map(len, prompts))

    methods = {"tokmem": tokmem, "rag (MiniLM + description)": rag}
    best: dict[str, dict] = {}
    order = list(methods)
    for rep in range(args.repeats):
        random.Random(rep).shuffle(order)
        for name in order:
            start = time.perf_counter()
            new, prompt_tokens = methods[name]()
            seconds = time.perf_counter() - start
            if name not in best or seconds < best[name]["seconds"]:
                best[name] = {"seconds": seconds, "queries_per_s": len(queries) / seconds, "new_tokens": new,
                              "mean_prompt_tokens": prompt_tokens / len(queries)}
    ratio = best["rag (MiniLM + description)"]["seconds"] / best["tokmem"]["seconds"]
    result = {"model": str(data / "backbone"), "queries": len(queries), "new_tokens_per_query": args.new_tokens,
              "threads": args.threads, "repeats": args.repeats, "machine": platform.platform(), "methods": best,
              "speedup_tokmem_vs_rag": ratio,
              "note": "wall time per query, retrieval included for RAG; TokMem routes by emitting its memory token"}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'method':<28} {'queries/s':>10} {'prompt tok':>10}")
    for name, row in best.items():
        print(f"{name:<28} {row['queries_per_s']:>10.1f} {row['mean_prompt_tokens']:>10.1f}")
    print(f"TokMem speed-up over RAG: {ratio:.2f}x")


if __name__ == "__main__":
    main()
