"""The lookaheadkv protocol around the method: the frozen LM's responses and s_GT targets, LookaheadKV's training
on KL(s_GT || s_LKV), SnapKV's tuning on the validation rows, and every eviction method at every budget through one
code path (prepare -> decode), with each method's cost timed per budget (interleaved, best of k).

Rows are batched by (split, prompt length), so a batch needs no padding and every prompt position is real.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections import defaultdict

import polars as pl
import torch
from rich.progress import track

from paperdag.lm import TinyLMConfig, TrainConfig, fit_pools, generate, train_loop
from paperdag.methods.lookaheadkv.data import METHODS, encode
from paperdag.methods.lookaheadkv.eviction import Setting, decode, prepare
from paperdag.methods.lookaheadkv.lookahead import LookaheadKV, lookahead_loss
from paperdag.methods.lookaheadkv.scores import ground_truth_importance, overlap
from paperdag.timing import best_of_interleaved


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


def train_curriculum(model, tokenizer, lm_rows: pl.DataFrame, curriculum: list, config: TinyLMConfig,
                     validation: pl.DataFrame | None = None) -> tuple[list[float], list[dict]]:
    """The LM's training with a full cache, in phases: phase i trains phase.steps steps of phase.batch_size rows (or
    config.batch_size) at peak rate phase.lr (or config.lr), its own warm-up and decay, drawn by phase.mixture over
    the row kinds, task rows only those whose context has at most phase.contexts tokens. Copy drills first (they form
    the induction heads), then recall drills on short contexts (the lookup), then the splits too, with more and more
    filler. Each batch holds rows of one kind and one context length (a pool per pair, weighted by its share of the
    kind's rows): no padding to the longest context in the phase. A phase with `until_em` is repeated (a fresh seed
    per round) until the full-cache exact match on the `validation` rows reaches it on every split, at most
    phase.max_rounds rounds: train until the task is solved, not for a step count that one seed needs and another
    does not. The loss of every step, and one record per round of such phases (its validation exact match)."""
    history: list[float] = []
    rounds: list[dict] = []
    for phase, p in enumerate(curriculum):
        until = p.until_em
        if until is not None and validation is None:
            raise ValueError(f"lookaheadkv train_lm: curriculum phase {phase} repeats until a validation exact match of {until} % "
                             "and no validation rows were given")
        rows = lm_rows.filter((pl.col("context_tokens") <= p.contexts) | (pl.col("split") == "copy"))
        pools: dict[str, list] = {}
        mixture: dict[str, float] = {}
        for kind, weight in p.mixture.items():
            if weight <= 0:
                continue
            of_kind = rows.filter(pl.col("split") == kind)
            if of_kind.height == 0:
                raise ValueError(f"lookaheadkv train_lm: curriculum phase {phase} draws {kind!r} rows with contexts of at most "
                                 f"{p.contexts} tokens and there are none: raise its `contexts` or add such rows (synthesize."
                                 f"{'copy_examples' if kind == 'copy' else 'train_contexts'})")
            for (length,), group in sorted(of_kind.group_by("context_tokens"), key=lambda kv: kv[0]):
                pools[f"{kind}@{length}"] = [encode(tokenizer, r) for r in group.iter_rows(named=True)]
                mixture[f"{kind}@{length}"] = weight * group.height / of_kind.height
        phase_config = dataclasses.replace(config, batch_size=p.batch_size or config.batch_size, lr=p.lr or config.lr)
        kinds = ", ".join(k for k, w in p.mixture.items() if w > 0)
        for round_ in range(p.max_rounds if until is not None else 1):
            history += fit_pools(model, pools, mixture, phase_config, tokenizer.pad_token_id,
                                 f"lookaheadkv train_lm phase {phase}{f' round {round_}' if until is not None else ''} ({kinds}; "
                                 f"contexts <= {p.contexts})", steps=p.steps, seed=config.seed + phase + 1000 * round_).losses["loss"]
            if until is None:
                break
            longest = max(len(encode(tokenizer, r)[1]) for r in validation.iter_rows(named=True))
            em = full_cache_exact_match(model, tokenizer, validation, longest + 1)
            rounds.append({"phase": phase, "round": round_, "steps": p.steps, "validation_exact_match": em})
            if min(em.values()) >= until:
                break
    return history, rounds


def full_cache_exact_match(model, tokenizer, evaluation: pl.DataFrame, max_new_tokens: int, batch_size: int = 64) -> dict[str, float]:
    """Exact match (percent) of the rows, per split, whose greedy full-cache response is the gold one (can the LM do it?)."""
    responses = greedy_responses(model, tokenizer, evaluation, max_new_tokens, batch_size)
    gold = [encode(tokenizer, r)[1][:-1] for r in evaluation.iter_rows(named=True)]
    hits = defaultdict(list)
    for split, got, want in zip(evaluation["split"], responses, gold, strict=True):
        hits[split].append(got == want)
    return {s: 100 * sum(h) / len(h) for s, h in hits.items()}


def checked_full_cache_exact_match(model, tokenizer, evaluation: pl.DataFrame, threshold: float, where: str) -> dict[str, float]:
    """full_cache_exact_match on the evaluation rows (responses up to the longest gold one), raising unless every
    split reaches `threshold` percent: an LM that cannot do the task makes every eviction comparison meaningless."""
    longest = max(len(encode(tokenizer, r)[1]) for r in evaluation.iter_rows(named=True))
    em = full_cache_exact_match(model, tokenizer, evaluation, longest + 1)
    if min(em.values()) < threshold:
        raise ValueError(f"{where}: the LM did not learn the task, full-cache exact match {em} below train_lm.min_full_cache_em = "
                         f"{threshold} %: train longer or on shorter contexts first (train_lm.curriculum)")
    return em


def targets(lm, tokenizer, table: pl.DataFrame, max_new_tokens: int, batch_size: int) -> tuple[pl.DataFrame, dict[str, torch.Tensor]]:
    """For every row: the frozen model's greedy response (full cache) and s_GT (layers, heads, prompt positions)
    over [prompt; response + eos], keyed by the row's id."""
    encoded = [encode(tokenizer, r) for r in table.iter_rows(named=True)]
    responses = greedy_responses(lm, tokenizer, table, max_new_tokens, batch_size)
    importance: dict[str, torch.Tensor] = {}
    for batch in track(batches(table, [len(p) for p, _ in encoded], batch_size), description="lookaheadkv targets"):
        ids = torch.tensor([encoded[i][0] for i in batch])  # (B, T)
        gt = ground_truth_importance(lm, ids, [responses[i] + [tokenizer.eos_token_id] for i in batch], tokenizer.pad_token_id)
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


def budget_tokens(fractions: list[float], prompt_len: int) -> list[int]:
    """Per-head budgets C as token counts: each fraction of the prompt length T, rounded, at least 1."""
    return sorted({max(1, round(f * prompt_len)) for f in fractions})


def _run(lm, tokenizer, method: str, ids, gt, budget: int, setting: Setting, max_new_tokens: int):
    prepared = prepare(method, lm, ids, budget, setting, oracle_scores=gt)
    return prepared, decode(lm, prepared, max_new_tokens, [tokenizer.eos_token_id])


def tune_snapkv(lm, tokenizer, setting: Setting, table: pl.DataFrame, importance: dict, budgets: list[int], windows: list[int],
                kernels: list[int], max_new_tokens: int, batch_size: int) -> tuple[dict[int, tuple[int, int]], list[dict]]:
    """SnapKV at its best: per budget C, the (window w, kernel) of the sweep (w < C) with the highest exact match
    over the validation rows of every split (ties: the first in sweep order). The choice per budget, every cell."""
    rows = list(table.iter_rows(named=True))
    cells = []
    for batch in batches(table, [len(r["prompt_ids"]) for r in rows], batch_size):
        chunk = [rows[i] for i in batch]
        ids, gt = stack(chunk, importance)
        for budget in budgets:
            for w in windows:
                for k in kernels:
                    if w >= budget or w >= ids.shape[1]:
                        continue
                    tried = dataclasses.replace(setting, window=w, kernel=k)
                    _, tokens = _run(lm, tokenizer, "snapkv", ids, gt, budget, tried, max_new_tokens)
                    cells += [{"budget": budget, "window": w, "kernel": k, "split": r["split"], "correct": got == r["gold_ids"]}
                              for r, got in zip(chunk, tokens, strict=True)]
    grid = pl.DataFrame(cells).group_by("budget", "window", "kernel").agg((pl.col("correct").mean() * 100).alias("exact_match"))
    order = {(w, k): i for i, (w, k) in enumerate((w, k) for w in windows for k in kernels)}
    chosen = {}
    for budget in budgets:
        options = [(-em, order[(w, k)], w, k) for b, w, k, em in grid.iter_rows() if b == budget]
        if not options:
            raise ValueError(f"tune_snapkv: no SnapKV window below the budget C = {budget}; add a smaller window to infer.windows")
        _, _, w, k = min(options)
        chosen[budget] = (w, k)
    return chosen, grid.sort("budget", "window", "kernel").to_dicts()


TIMED = tuple(m for m in METHODS if m != "oracle")  # the oracle reads s_GT: it has no cost of its own


def compare(lm, tokenizer, setting: Setting, table: pl.DataFrame, importance: dict, budgets: list[int],
            snapkv: dict[int, tuple[int, int]], max_new_tokens: int, batch_size: int, repeats: int,
            timing_rows: int) -> tuple[pl.DataFrame, list[dict]]:
    """Every method at every per-head budget on the rows (SnapKV and the draft's SnapKV cache at that budget's tuned
    window and kernel): exact match and the overlap of the kept positions with the oracle's. Where C < T, each
    method's cost (prompt -> evicted cache: prefill, scoring, eviction) is timed on the first `timing_rows` rows of
    each batch, one request at a time (a request's latency, as the paper's time-to-first-token figures are), the
    methods interleaved, the fastest of `repeats` runs."""
    rows = list(table.iter_rows(named=True))
    records, timing = [], []
    jobs = [(batch, budget) for batch in batches(table, [len(r["prompt_ids"]) for r in rows], batch_size) for budget in budgets]
    for batch, budget in track(jobs, description="lookaheadkv infer"):
        chunk = [rows[i] for i in batch]
        ids, gt = stack(chunk, importance)
        tuned = dataclasses.replace(setting, window=snapkv[budget][0], kernel=snapkv[budget][1])
        oracle_keep = prepare("oracle", lm, ids, budget, tuned, oracle_scores=gt).keep
        for method in METHODS:
            prepared, tokens = _run(lm, tokenizer, method, ids, gt, budget, tuned, max_new_tokens)
            agree = (None if prepared.keep is None or oracle_keep is None else
                     torch.stack([overlap(k, o) for k, o in zip(prepared.keep, oracle_keep, strict=True)]).mean((0, 2)).tolist())
            for j, (r, got) in enumerate(zip(chunk, tokens, strict=True)):
                records.append({"row": r["row"], "split": r["split"], "method": method, "budget": budget,
                                "prediction": tokenizer.decode(got).strip(), "correct": got == r["gold_ids"],
                                "overlap_with_oracle": None if agree is None else agree[j]})
        for j in range(min(timing_rows, len(chunk)) if budget < ids.shape[1] else 0):
            one = ids[j : j + 1]
            calls = [lambda m=m, one=one, b=budget, s=tuned: prepare(m, lm, one, b, s) for m in TIMED]
            _, best = best_of_interleaved(calls, repeats)
            timing += [{"split": chunk[j]["split"], "row": chunk[j]["row"], "method": m, "budget": budget, "examples": 1,
                        "prompt_len": ids.shape[1], "seconds": s} for m, s in zip(TIMED, best, strict=True)]
    return pl.DataFrame(records, schema_overrides={"overlap_with_oracle": pl.Float64}), timing


def tuned_comparison(lm, tokenizer, setting: Setting, targets: pl.DataFrame, importance: dict, fractions: list[float],
                     windows: list[int], kernels: list[int], max_new_tokens: int, batch_size: int,
                     repeats: int, timing_rows: int) -> tuple[pl.DataFrame, dict[str, object]]:
    """One replicate's infer: budgets C from their fractions of T, SnapKV's window and kernel tuned per budget on the
    validation rows, then `compare` on the evaluation rows. The predictions and the run's stats (timings, T, the
    budgets, the tuned SnapKV settings and the whole tuning grid)."""
    evaluation, validation = (targets.filter(pl.col("set") == name) for name in ("eval", "validation"))
    lengths = sorted({len(ids) for ids in evaluation["prompt_ids"]})
    budgets = budget_tokens(fractions, lengths[0])
    snapkv, grid = tune_snapkv(lm, tokenizer, setting, validation, importance, budgets, windows, kernels, max_new_tokens, batch_size)
    predictions, timing = compare(lm, tokenizer, setting, evaluation, importance, budgets, snapkv, max_new_tokens, batch_size, repeats,
                                  timing_rows)
    return predictions, {"runs": timing, "prompt_tokens": lengths, "budgets": budgets,
                         "snapkv": {str(b): list(v) for b, v in snapkv.items()}, "snapkv_tuning": grid}
