"""The lookaheadkv evaluation: per replicate, exact match and oracle overlap per split, method and budget, and each
method's eviction cost per budget (C < T only) from the same infer run; over replicates, the paired differences
LookaheadKV - tuned SnapKV and the cost ratios with 95 % intervals (paperdag.stats): the headline the claims read."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable

import polars as pl

from paperdag import stats
from paperdag.methods.lookaheadkv.data import METHODS, SPLITS


def exact_match_table(predictions: pl.DataFrame) -> pl.DataFrame:
    """Exact match (percent), mean overlap with the oracle's kept set and count per (split, method, budget)."""
    return (predictions.group_by("split", "method", "budget")
            .agg((pl.col("correct").mean() * 100).alias("exact_match"), pl.col("overlap_with_oracle").mean(), pl.len().alias("n"))
            .sort("split", "method", "budget"))


def exact_match_grid(table: pl.DataFrame) -> tuple[dict[tuple[str, str, int], float], list[int], list[str]]:
    """exact_match_table as (split, method, budget) -> exact match, with the budgets and the splits it holds."""
    em = {(s, m, b): v for s, m, b, v in table.select("split", "method", "budget", "exact_match").iter_rows()}
    return em, sorted({b for _, _, b in em}), [s for s in SPLITS if any(k[0] == s for k in em)]


def cost(runs: list[dict]) -> dict[int, dict[str, float]]:
    """Milliseconds per example to the evicted cache, per budget and method (each batch's best-of-k time; budgets
    with C < T only: infer times nothing else)."""
    seconds: dict[tuple[int, str], float] = defaultdict(float)
    examples: dict[tuple[int, str], int] = defaultdict(int)
    for r in runs:
        seconds[(r["budget"], r["method"])] += r["seconds"]
        examples[(r["budget"], r["method"])] += r["examples"]
    out: dict[int, dict[str, float]] = defaultdict(dict)
    for (b, m), n in sorted(examples.items()):
        out[b][m] = 1000 * seconds[(b, m)] / n
    return dict(out)


def overhead(ms: dict[str, float], method: str) -> float:
    """A method's eviction overhead (ms per example): its time to the evicted cache minus the plain full-cache prefill
    timed beside it (the spec's "prefill overhead vs plain prefill"; what the paper's cost claims compare)."""
    return ms[method] - ms["full"]


def _ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator; None where the denominator is at or below 0 (that overhead lost in the timing noise):
    the ratio is then unmeasurable, and a claim reading it is missing, never held by accident."""
    return numerator / denominator if denominator > 0 else None


def _worst(values: list[float | None], pick: Callable[[list[float]], float]) -> float | None:
    """The least favourable of the per-budget values (max or min); None if any budget's is unmeasurable or none is timed."""
    return None if not values or any(v is None for v in values) else pick(values)  # type: ignore[arg-type]


def replicate_numbers(predictions: pl.DataFrame, runs: list[dict], small_budgets: int) -> dict[str, object]:
    """One replicate's numbers: exact match per split / method / budget, LookaheadKV - SnapKV per split (mean over
    the small budgets), overlaps with the oracle, cost per budget and the two cost ratios (worst budget)."""
    table = exact_match_table(predictions)
    em, budgets, splits = exact_match_grid(table)
    small = budgets[:small_budgets]
    ov = {(s, m, b): v for s, m, b, v in table.select("split", "method", "budget", "overlap_with_oracle").iter_rows()}
    ms = cost(runs)
    timed = [b for b in budgets if b in ms]

    def gain(split: str) -> float:
        return sum(em[(split, "lookahead", b)] - em[(split, "snapkv", b)] for b in small) / len(small)

    def mean_overlap(method: str) -> float | None:
        values = [ov[(s, method, b)] for s in splits for b in budgets if ov.get((s, method, b)) is not None]
        return sum(values) / len(values) if values else None

    return {
        "exact_match": {s: {m: {str(b): em[(s, m, b)] for b in budgets} for m in METHODS} for s in splits},
        "full_cache_exact_match": {s: em[(s, "full", budgets[0])] for s in splits},
        "small_budgets": small,
        "lkv_minus_snapkv": {s: gain(s) for s in splits},
        "lkv_small": {s: sum(em[(s, "lookahead", b)] for b in small) / len(small) for s in splits},
        "snapkv_small": {s: sum(em[(s, "snapkv", b)] for b in small) / len(small) for s in splits},
        "overlap_with_oracle": {m: mean_overlap(m) for m in METHODS if m not in ("full", "oracle")},
        "eviction_ms_per_example": {str(b): ms[b] for b in timed},
        "overhead_ms_per_example": {str(b): {m: overhead(ms[b], m) for m in ms[b] if m != "full"} for b in timed},
        "ratio_lkv_over_snapkv": _worst([_ratio(overhead(ms[b], "lookahead"), overhead(ms[b], "snapkv")) for b in timed], max),
        "ratio_draft_over_lkv": _worst([_ratio(overhead(ms[b], "draft"), overhead(ms[b], "lookahead")) for b in timed], min),
        "lkv_overhead_share_of_prefill": _worst([_ratio(overhead(ms[b], "lookahead"), ms[b]["full"]) for b in timed], max),
        "total_ratio_lkv_over_snapkv": _worst([_ratio(ms[b]["lookahead"], ms[b]["snapkv"]) for b in timed], max),
        "total_ratio_draft_over_lkv": _worst([_ratio(ms[b]["draft"], ms[b]["lookahead"]) for b in timed], min),
    }


def _mode(values: list) -> object:
    return Counter(values).most_common(1)[0][0]


def _interval(values: list[float | None]) -> dict | None:
    """A t interval over replicates; None if any replicate's value is unmeasurable (never an interval over the rest)."""
    return None if not values or any(v is None for v in values) else stats.interval(values)  # type: ignore[arg-type]


def headline(per: dict[str, dict], full_cache: dict[str, dict[str, float]], prompt_tokens: list[int],
             snapkv: dict[str, dict[str, list[int]]]) -> dict[str, object]:
    """The numbers pipelines/lookaheadkv.yaml's claims read, over the replicates (same evaluation rows in each):
    paired intervals of LookaheadKV - SnapKV, t intervals of the cost ratios, the LM's worst full-cache exact match.
    per: replicate key -> replicate_numbers; full_cache: replicate -> split -> train_lm's full-cache exact match;
    snapkv: replicate -> budget -> the tuned [window, kernel]."""
    keys = list(per)
    first = per[keys[0]]
    splits = list(first["lkv_minus_snapkv"])

    def paired(split: str) -> dict:
        return stats.paired([per[k]["lkv_small"][split] for k in keys], [per[k]["snapkv_small"][split] for k in keys])

    ratio_names = ("ratio_lkv_over_snapkv", "ratio_draft_over_lkv", "lkv_overhead_share_of_prefill",
                   "total_ratio_lkv_over_snapkv", "total_ratio_draft_over_lkv")
    ratios = {name: [per[k][name] for k in keys] for name in ratio_names}
    budgets = list(snapkv[keys[0]])
    tuned = {b: _mode([tuple(snapkv[k][b]) for k in keys]) for b in budgets}
    mean_em = {s: {m: {b: sum(per[k]["exact_match"][s][m][b] for k in keys) / len(keys) for b in first["exact_match"][s][m]}
                   for m in METHODS} for s in splits}
    return {
        "lkv_minus_snapkv_question_before": paired("question_before"),
        "lkv_minus_snapkv_question_after": paired("question_after"),
        **{name: _interval(ratios[name]) for name in ratio_names},
        "full_cache_em_min": min(v for k in keys for v in [*full_cache[k].values(), *per[k]["full_cache_exact_match"].values()]),
        "prompt_tokens_mean": sum(prompt_tokens) / len(prompt_tokens),
        "snapkv_window": {b: tuned[b][0] for b in budgets},  # per budget C: the window the tuning chose (mode over replicates)
        "snapkv_kernel": {b: tuned[b][1] for b in budgets},
        "replicates": len(keys),
        "small_budgets": first["small_budgets"],
        "exact_match_mean": mean_em,
        "overlap_with_oracle_mean": {m: sum(per[k]["overlap_with_oracle"][m] or 0.0 for k in keys) / len(keys)
                                     for m in first["overlap_with_oracle"]},
        "units": "exact_match in percent; lkv_minus_snapkv: LookaheadKV - tuned SnapKV exact match, mean over the small budgets, "
                 "paired over replicates; ratio_lkv_over_snapkv: LookaheadKV's / SnapKV's time to the evicted cache at the worst "
                 "budget with C < T, ratio_draft_over_lkv: the draft method's / LookaheadKV's at the least favourable one; overheads are "
                 "times to the evicted cache minus the plain full-cache prefill timed beside them; total_ratio_*: the same ratios of "
                 "the whole times (prefill included); lkv_overhead_share_of_prefill: LookaheadKV's overhead / the prefill, worst budget",
    }


def over_replicates(train_stats: dict, lookahead_stats: dict, predictions: dict, eviction_stats: dict,
                    small_budgets: int) -> dict[str, object]:
    """metrics.json from the gathered replicates (each a dict keyed by the matrix's Item, in its order): per
    replicate its numbers, the LM's stats, the lookahead's held-out KL and the tuned SnapKV; the headline over them."""
    keys = list(predictions)
    for name, gathered in (("train_stats", train_stats), ("lookahead_stats", lookahead_stats), ("eviction_stats", eviction_stats)):
        if list(gathered) != keys:
            raise ValueError(f"evaluate: {name} replicates {list(gathered)} differ from predictions' {keys}")
    per = {}
    for k in keys:
        per[str(k)] = {**replicate_numbers(predictions[k], eviction_stats[k]["runs"], small_budgets),
                       "lookahead_kl_held_out": {w: lookahead_stats[k][f"kl_held_out_{w}"] for w in ("before", "after")},
                       "snapkv_tuned": eviction_stats[k]["snapkv"]}
    head = headline(per, {str(k): train_stats[k]["full_cache_exact_match"] for k in keys},
                    [t for k in keys for t in eviction_stats[k]["prompt_tokens"]], {str(k): eviction_stats[k]["snapkv"] for k in keys})
    return {"headline": head, "replicates": per, "lm": {str(k): {n: v for n, v in train_stats[k].items() if n != "loss"} for k in keys}}
