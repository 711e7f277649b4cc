"""The lookaheadkv protocol around the method: the frozen LM's responses and s_GT targets, LookaheadKV's training
on KL(s_GT || s_LKV), and every eviction method at every budget through one code path (prepare -> decode).

Rows are batched by (split, prompt length), so a batch needs no padding and every prompt position is real.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict

import polars as pl
import torch
from rich.progress import track

from paperdag.lm import TinyLMConfig, TrainConfig, fit_pools, generate, train_loop
from paperdag.methods.lookaheadkv.data import KINDS, METHODS, encode
from paperdag.methods.lookaheadkv.eviction import Setting, decode, prepare
from paperdag.methods.lookaheadkv.lookahead import LookaheadKV, lookahead_loss
from paperdag.methods.lookaheadkv.scores import ground_truth_importance, overlap


def batches(table: pl.DataFrame, lengths: list[int], batch_size: int) -> list[list[int]]:
    """Row positions of `table` grouped by (split, prompt length) into batches: a batch needs no padding."""
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, (split, n) in enumerate(zip(table["split"], lengths, strict=True)):
        groups[(split, n)].append(i)
    return [idx[lo : lo + batch_size] for _, idx in sorted(groups.items()) for lo in range(0, len(idx), batch_size)]


def greedy_responses(model, tokenizer, table: pl.DataFrame, max_new_tokens: int, batch_size: int) -> list[list[int]]:
    """The model's greedy response ids (full cache, without eos) for every row of `table`, in row order."""
    prompts = [encode(tokenizer, r)[0] for r in table.iter_rows(named=True)]
    out: list[list[int]] = [[] for _ in prompts]
    for batch in batches(table, [len(p) for p in prompts], batch_size):
        gen = generate(model, [[prompts[i] for i in batch]], tokenizer.pad_token_id, tokenizer.eos_token_id,
                       max_new_tokens=max_new_tokens)
        for i, tokens in zip(batch, gen.tokens, strict=True):
            out[i] = tokens
    return out


def train_curriculum(model, tokenizer, lm_rows: pl.DataFrame, curriculum: list[int], mixture: dict[str, float],
                     config: TinyLMConfig) -> list[float]:
    """The LM's training with a full cache, in phases of growing context: phase i trains config.steps // phases
    steps (seed config.seed + i) on the rows of at most curriculum[i] pairs. Short contexts first: the lookup is
    learnt there, then scaled. The loss of every step."""
    shortest = lm_rows["pairs"].min()
    if min(curriculum) < shortest:  # it depends on the synthesized rows, so it is checked on them
        raise ValueError(f"lookaheadkv train_lm: curriculum {curriculum}: each phase's largest context must be at least the "
                         f"shortest LM context ({shortest} pairs, synthesize.min_train_pairs)")
    history: list[float] = []
    for phase, largest in enumerate(curriculum):
        steps = config.steps // len(curriculum)
        if steps == 0:
            continue
        rows = lm_rows.filter(pl.col("pairs") <= largest)
        pools = {kind: [encode(tokenizer, r) for r in rows.filter(pl.col("split") == kind).iter_rows(named=True)] for kind in KINDS}
        history += fit_pools(model, pools, mixture, config, tokenizer.pad_token_id, f"lookaheadkv train_lm (contexts <= {largest} pairs)",
                             steps=steps, seed=config.seed + phase).losses["loss"]
    return history


def full_cache_exact_match(model, tokenizer, evaluation: pl.DataFrame) -> dict[str, float]:
    """Share of the evaluation rows, per split, whose greedy full-cache response is the gold one (can the LM do it?)."""
    responses = greedy_responses(model, tokenizer, evaluation, 8, 64)
    gold = [encode(tokenizer, r)[1][:-1] for r in evaluation.iter_rows(named=True)]
    hits = defaultdict(list)
    for split, got, want in zip(evaluation["split"], responses, gold, strict=True):
        hits[split].append(got == want)
    return {s: sum(h) / len(h) for s, h in hits.items()}


def targets(lm, tokenizer, table: pl.DataFrame, max_new_tokens: int, batch_size: int) -> tuple[pl.DataFrame, dict[str, torch.Tensor]]:
    """For every row: the frozen model's greedy response (full cache) and s_GT (layers, heads, prompt positions)
    over [prompt; response + eos], keyed by the row's id."""
    encoded = [encode(tokenizer, r) for r in table.iter_rows(named=True)]
    responses = greedy_responses(lm, tokenizer, table, max_new_tokens, batch_size)
    importance: dict[str, torch.Tensor] = {}
    base = getattr(lm, lm.base_model_prefix)
    for batch in track(batches(table, [len(p) for p, _ in encoded], batch_size), description="lookaheadkv targets"):
        ids = torch.tensor([encoded[i][0] for i in batch])  # (B, T)
        gt = ground_truth_importance(base, ids, [responses[i] + [tokenizer.eos_token_id] for i in batch], tokenizer.pad_token_id)
        for j, i in enumerate(batch):
            importance[str(table["row"][i])] = gt[j].contiguous()
    out = table.select("row", "set", "split", "query").with_columns(
        pl.Series("prompt_ids", [p for p, _ in encoded], dtype=pl.List(pl.Int64)),
        pl.Series("gold_ids", [g[:-1] for _, g in encoded], dtype=pl.List(pl.Int64)),
        pl.Series("response_ids", responses, dtype=pl.List(pl.Int64)))
    return out.with_columns((pl.col("response_ids") == pl.col("gold_ids")).alias("full_cache_correct")), importance


def stack(rows: list[dict], importance: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompt ids (B, T) and their s_GT (B, L, H, T) for rows of one prompt length."""
    ids = torch.tensor([r["prompt_ids"] for r in rows])  # (B, T)
    gt = torch.stack([torch.as_tensor(importance[str(r["row"])]) for r in rows])  # (B, L, H, T)
    return ids, gt


def fit_lookahead(lm, module: LookaheadKV, rows: list[dict], held_out: list[dict], importance: dict, config: TrainConfig,
                  batch_size: int) -> dict[str, object]:
    """Minimise KL(s_GT || s_LKV) over layers and heads, the LM frozen: each step a batch of one prompt length, the
    length drawn in proportion to its rows (seeded by config.seed). The held-out KL before and after, the loss."""
    if not rows:
        raise ValueError("train_lookahead: targets.parquet has no lookahead-training rows (synthesize.lookahead_examples)")
    buckets: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        buckets[len(r["prompt_ids"])].append(r)
    lengths, sizes = list(buckets), [len(b) for b in buckets.values()]
    draw = random.Random(config.seed)

    def loss_at_step(step: int) -> torch.Tensor:
        bucket = buckets[draw.choices(lengths, weights=sizes)[0]]
        return lookahead_loss(lm, module, *stack(draw.choices(bucket, k=batch_size), importance))

    before = held_out_kl(lm, module, held_out, importance)
    start = time.perf_counter()
    history = train_loop(module.parameters(), loss_at_step, config, description="lookaheadkv train_lookahead")
    return {"kl_held_out_before": before, "kl_held_out_after": held_out_kl(lm, module, held_out, importance),
            "trainable_parameters": sum(p.numel() for p in module.parameters()), "training_rows": len(rows),
            "steps": config.steps, "loss": history, "train_seconds": time.perf_counter() - start}


def held_out_kl(lm, module: LookaheadKV, rows: list[dict], importance: dict, batch_size: int = 32) -> float:
    """Mean KL(s_GT || s_LKV) over layers, heads and rows (batched by prompt length)."""
    total, count = 0.0, 0
    by_length: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        by_length[len(r["prompt_ids"])].append(r)
    with torch.no_grad():
        for group in by_length.values():
            for lo in range(0, len(group), batch_size):
                chunk = group[lo : lo + batch_size]
                total += float(lookahead_loss(lm, module, *stack(chunk, importance))) * len(chunk)
                count += len(chunk)
    return total / max(1, count)


def compare(lm, tokenizer, setting: Setting, table: pl.DataFrame, importance: dict, budgets: list[int], max_new_tokens: int,
            batch_size: int) -> tuple[pl.DataFrame, list[dict]]:
    """Every method at every per-head budget on the rows: exact match, overlap of the kept positions with the
    oracle's, and the wall time of building each evicted cache (prefill + scoring + eviction), all in one run."""
    rows = list(table.iter_rows(named=True))
    records, timing = [], []
    jobs = [(batch, budget) for batch in batches(table, [len(r["prompt_ids"]) for r in rows], batch_size) for budget in budgets]
    for batch, budget in track(jobs, description="lookaheadkv infer"):
        chunk = [rows[i] for i in batch]
        ids, gt = stack(chunk, importance)
        oracle_keep = prepare("oracle", lm, ids, budget, setting, oracle_scores=gt).keep
        for method in METHODS:
            start = time.perf_counter()
            prepared = prepare(method, lm, ids, budget, setting, oracle_scores=gt)
            seconds = time.perf_counter() - start
            tokens = decode(lm, prepared, max_new_tokens, [tokenizer.eos_token_id])
            timing.append({"split": chunk[0]["split"], "method": method, "budget": budget, "examples": len(chunk),
                           "prompt_len": ids.shape[1], "seconds": seconds})
            agree = (None if prepared.keep is None or oracle_keep is None else
                     torch.stack([overlap(k, o) for k, o in zip(prepared.keep, oracle_keep, strict=True)]).mean((0, 2)).tolist())
            for j, (r, got) in enumerate(zip(chunk, tokens, strict=True)):
                records.append({"row": r["row"], "split": r["split"], "method": method, "budget": budget,
                                "prediction": tokenizer.decode(got).strip(), "correct": got == r["gold_ids"],
                                "overlap_with_oracle": None if agree is None else agree[j]})
    return pl.DataFrame(records, schema_overrides={"overlap_with_oracle": pl.Float64}), timing
