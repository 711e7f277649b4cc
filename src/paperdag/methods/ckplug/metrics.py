"""The paper's knowledge-reliance metrics on counterfactual contexts, and accuracy on the adaptive mixed set.

A prediction hits an answer when the normalised answer occurs in the normalised prediction (word-bounded).
ConR = share recalling the context's (counterfactual) answer, ParR = share recalling the memorised answer,
MR = ParR / (ParR + ConR): 0 = always the context, 100 = always memory; neither = share recalling neither answer (MR
does not see it: a decoder that answers junk can still move MR).
"""

from __future__ import annotations

import polars as pl

from paperdag.lm.factworld import contains_answer
from paperdag.stats import interval, paired


def recall(predictions: list[str], answers: list[str]) -> float:
    """Percent of predictions containing their answer."""
    if not predictions:
        return float("nan")
    return 100.0 * sum(contains_answer(p, a) for p, a in zip(predictions, answers, strict=True)) / len(predictions)


def memory_ratio(par_r: float, con_r: float) -> float:
    """MR = ParR / (ParR + ConR) in percent (50 when neither answer is ever produced: no preference shown)."""
    return 100.0 * par_r / (par_r + con_r) if par_r + con_r > 0 else 50.0


def _noise_key(noise: float) -> str:
    return f"{noise:g}"


def memory_recall_table(predictions: pl.DataFrame, runs: list[dict]) -> list[dict]:
    """One row per (method, alpha): ConR, ParR, MR on the counterfactual set (and on its items the model recalls
    closed-book: no-RAG's answer holds the memorised value), acc per noise level and per group of the adaptive set
    (None where the method did not decode it), tokens/s over its runs."""
    cf_all = predictions.filter((pl.col("set") == "counterfactual") & (pl.col("method") == "no-rag"))
    recalled = {i for i, p, a in cf_all.select("item", "prediction", "memory_answer").iter_rows() if contains_answer(p, a)}
    rows = []
    keys = predictions.select("method", "alpha").unique(maintain_order=True).iter_rows()
    for method, alpha in keys:
        mine = predictions.filter((pl.col("method") == method) & (pl.col("alpha").eq_missing(alpha)))
        cf = mine.filter(pl.col("set") == "counterfactual")
        ad = mine.filter(pl.col("set") == "adaptive")
        con_r = recall(cf["prediction"].to_list(), cf["context_answer"].to_list())
        par_r = recall(cf["prediction"].to_list(), cf["memory_answer"].to_list())
        neither = (100.0 * sum(not contains_answer(p, c) and not contains_answer(p, m)
                               for p, c, m in cf.select("prediction", "context_answer", "memory_answer").iter_rows()) / cf.height
                   if cf.height else float("nan"))
        known = cf.filter(pl.col("item").is_in(sorted(recalled)))
        con_k = recall(known["prediction"].to_list(), known["context_answer"].to_list())
        par_k = recall(known["prediction"].to_list(), known["memory_answer"].to_list())
        by_noise = {
            _noise_key(noise): {
                "acc": recall(level["prediction"].to_list(), level["gold"].to_list()),
                "by_group": {g: recall(part["prediction"].to_list(), part["gold"].to_list())
                             for (g,), part in sorted(level.group_by("group"), key=lambda kv: kv[0])},
            }
            for (noise,), level in sorted(ad.group_by("noise"), key=lambda kv: kv[0])
        }
        timed = [r for r in runs if r["method"] == method and r["alpha"] == alpha]
        tokens, seconds = sum(r["new_tokens"] for r in timed), sum(r["seconds"] for r in timed)
        rows.append({
            "method": method,
            "alpha": alpha,
            "ConR": con_r,
            "ParR": par_r,
            "MR": memory_ratio(par_r, con_r),
            "neither": neither,
            "MR_recalled": memory_ratio(par_k, con_k) if known.height else None,
            "recalled_items": known.height,
            "acc_by_noise": by_noise or None,
            "tokens_per_s": tokens / seconds if seconds else None,
        })
    return rows


def mr_sweep(table: list[dict], method: str = "ck-plug", column: str = "MR") -> tuple[list[float], list[float]]:
    """A CK-PLUG sweep's (alphas, MRs) from a memory_recall_table, by increasing alpha; it must span alpha 0 to 1."""
    ck = sorted((r for r in table if r["method"] == method), key=lambda r: r["alpha"])
    alphas = [r["alpha"] for r in ck]
    if len(ck) < 2 or alphas[0] != 0.0 or alphas[-1] != 1.0:
        raise ValueError(f"predictions: the {method} sweep must span alpha 0.0 to 1.0 (the ends of the MR range); got {alphas}")
    return alphas, [50.0 if r[column] is None else r[column] for r in ck]


def is_monotone(mrs: list[float]) -> bool:
    """MR rises with alpha: non-decreasing at every step of the sweep and MR(1) > MR(0) (a flat sweep controls
    nothing, so it does not count as monotone)."""
    return all(b >= a for a, b in zip(mrs, mrs[1:])) and mrs[-1] > mrs[0]


def seconds_per_token(runs: list[dict], method: str) -> float:
    """Decoding seconds per generated token of one method over all its runs (every alpha, both sets)."""
    mine = [r for r in runs if r["method"] == method]
    tokens = sum(r["new_tokens"] for r in mine)
    if not mine or tokens == 0:
        raise ValueError(f"decode_stats: no generated tokens recorded for method '{method}'")
    return sum(r["seconds"] for r in mine) / tokens


ADAPTIVE = "ck-plug-adaptive"
BASELINES = {"rag": "rag", "norag": "no-rag"}  # headline name -> method; CAD (best beta) and CK-PLUG (best fixed alpha) per level
TUNED = ("cad", "fixed_alpha")  # baselines at their best setting per noise level, chosen on that level's test items


def _accuracy(by: dict, method: str, alpha: float | None = None) -> dict[str, float]:
    """noise level -> a method's accuracy on that level of the adaptive set."""
    levels = by[(method, alpha)]["acc_by_noise"]
    if not levels:
        raise ValueError(f"predictions: {method}{'' if alpha is None else f' at alpha {alpha:g}'} did not decode the adaptive set; rerun ckplug:infer")
    return {k: v["acc"] for k, v in levels.items()}


def _best(accuracies: dict[str, dict[str, float]], levels) -> tuple[dict[str, float], dict[str, str]]:
    """Per noise level, the best of several settings' accuracies, and which setting (the first on a tie)."""
    best = {k: max(accuracies, key=lambda s: accuracies[s][k]) for k in levels}
    return {k: accuracies[best[k]][k] for k in levels}, best


def replicate_numbers(closed_book_recall: float, predictions: pl.DataFrame, runs: list[dict]) -> dict[str, object]:
    """One replicate's numbers: closed-book recall, the MR sweep (all counterfactual items, and those the model
    recalls closed-book), adaptive accuracy per noise level against RAG, no-RAG and CAD at its best beta on that
    level, the same with the entropies over the other choice, the decoding cost."""
    table = memory_recall_table(predictions, runs)
    by = {(r["method"], r["alpha"]): r for r in table}
    alphas, mrs = mr_sweep(table)
    _, mrs_recalled = mr_sweep(table, column="MR_recalled")
    other = next(r["method"] for r in table if r["method"].startswith("ck-plug [") and r["alpha"] is not None)
    _, mrs_other = mr_sweep(table, method=other)
    cads = [r["method"] for r in table if r["method"].startswith("cad ") and r["alpha"] is None]
    adaptive = _accuracy(by, ADAPTIVE)
    adaptive_other = _accuracy(by, f"{ADAPTIVE}{other[len('ck-plug'):]}")
    acc = {name: _accuracy(by, m) for name, m in BASELINES.items()}
    cad_acc = {c: _accuracy(by, c) for c in cads}
    acc["cad"], best_cad = _best(cad_acc, adaptive)  # CAD at its best beta per level (tuned on the test items)
    fixed = {f"{a:g}": _accuracy(by, "ck-plug", a) for a in alphas}
    acc["fixed_alpha"], best_alpha = _best(fixed, adaptive)  # CK-PLUG at its best fixed alpha per level (likewise)
    out: dict[str, object] = {
        "closed_book_recall": closed_book_recall,
        "mr_alpha0": mrs[0],
        "mr_alpha1": mrs[-1],
        "mr_range": mrs[-1] - mrs[0],
        "mr_by_alpha": {f"{a:g}": m for a, m in zip(alphas, mrs, strict=True)},
        "conr_by_alpha": {f"{a:g}": by[("ck-plug", a)]["ConR"] for a in alphas},
        "neither_by_alpha": {f"{a:g}": by[("ck-plug", a)]["neither"] for a in alphas},
        "conr_rag": by[("rag", None)]["ConR"],
        "neither_rag": by[("rag", None)]["neither"],
        "conr_alpha0_minus_rag": by[("ck-plug", 0.0)]["ConR"] - by[("rag", None)]["ConR"],
        "mr_monotone": is_monotone(mrs),
        "mr_range_recalled": mrs_recalled[-1] - mrs_recalled[0],
        "mr_by_alpha_recalled": {f"{a:g}": m for a, m in zip(alphas, mrs_recalled, strict=True)},
        "recalled_items": by[("rag", None)]["recalled_items"],
        "mr_range_other_entropy": mrs_other[-1] - mrs_other[0],
        "mr_monotone_other_entropy": is_monotone(mrs_other),
        "mr_rag": by[("rag", None)]["MR"],
        "mr_norag": by[("no-rag", None)]["MR"],
        "mr_adaptive": by[(ADAPTIVE, None)]["MR"],
        "mr_cad": {c.split("=")[1]: by[(c, None)]["MR"] for c in cads},
        "adaptive_acc_by_noise": adaptive,
        "adaptive_acc_other_entropy_by_noise": adaptive_other,
        **{f"{name}_acc_by_noise": levels for name, levels in acc.items()},
        "cad_best_beta_by_noise": {k: c.split("=")[1] for k, c in best_cad.items()},
        "fixed_best_alpha_by_noise": best_alpha,
        "decode_cost_ratio": seconds_per_token(runs, "ck-plug") / seconds_per_token(runs, "rag"),
    }
    for name, levels in acc.items():
        diffs = {k: adaptive[k] - levels[k] for k in adaptive}
        out[f"adaptive_minus_{name}_by_noise"] = diffs
        out[f"adaptive_minus_{name}"] = min(diffs.values())  # the worst noise level: > 0 iff ahead at every level
        out[f"adaptive_other_entropy_minus_{name}"] = min(adaptive_other[k] - levels[k] for k in adaptive)
    out["table"] = table
    return out


def _over(values: list[dict[str, float]], paired_with_zero: bool = False) -> dict[str, dict]:
    """key -> interval over replicates of per-replicate dicts with the same keys."""
    return {k: (paired([v[k] for v in values], [0.0] * len(values)) if paired_with_zero else interval([v[k] for v in values]))
            for k in values[0]}


def interval_table(per: dict[str, dict]) -> list[dict]:
    """One row per (method, alpha): each column as an interval over replicates (adaptive accuracy per noise level)."""
    first = next(iter(per.values()))["table"]
    rows = []
    for i, row in enumerate(first):
        reps = [p["table"][i] for p in per.values()]
        if any((r["method"], r["alpha"]) != (row["method"], row["alpha"]) for r in reps):
            raise ValueError("predictions: replicates decoded different (method, alpha) lists; rerun ckplug:infer")
        out = {"method": row["method"], "alpha": row["alpha"]}
        out.update({c: interval([r[c] for r in reps]) for c in ("ConR", "ParR", "MR", "neither")})
        mr_known = [r["MR_recalled"] for r in reps]
        out["MR_recalled"] = interval(mr_known) if None not in mr_known else None
        out["acc_by_noise"] = ({k: interval([r["acc_by_noise"][k]["acc"] for r in reps]) for k in row["acc_by_noise"]}
                               if row["acc_by_noise"] else None)
        times = [r["tokens_per_s"] for r in reps]
        out["tokens_per_s"] = interval(times) if None not in times else None
        rows.append(out)
    return rows


def headline(per: dict[str, dict]) -> dict[str, object]:
    """The numbers the claims read, over replicates: 95 % t intervals, paired differences on the same items (the
    adaptive comparisons: the per-replicate minimum over noise levels of adaptive - baseline)."""
    col = {name: [p[name] for p in per.values()] for name in next(iter(per.values())) if name != "table"}
    scalar = ("closed_book_recall", "mr_alpha0", "mr_alpha1", "mr_range", "mr_range_recalled", "recalled_items",
              "mr_range_other_entropy", "mr_rag", "mr_norag", "mr_adaptive", "decode_cost_ratio")
    out: dict[str, object] = {"replicates": len(per)}
    out.update({k: interval(col[k]) for k in scalar})
    out["mr_monotone"] = sum(col["mr_monotone"]) / len(per)
    out["mr_monotone_other_entropy"] = sum(col["mr_monotone_other_entropy"]) / len(per)
    out["mr_by_alpha"] = _over(col["mr_by_alpha"])
    out["mr_by_alpha_recalled"] = _over(col["mr_by_alpha_recalled"])
    out["mr_cad"] = _over(col["mr_cad"])
    out["conr_alpha0_minus_rag"] = paired(col["conr_alpha0_minus_rag"], [0.0] * len(per))
    out["conr_by_alpha"] = _over(col["conr_by_alpha"])
    out["neither_by_alpha"] = _over(col["neither_by_alpha"])
    out["neither_rag"] = interval(col["neither_rag"])
    for name in (*BASELINES, *TUNED):
        out[f"adaptive_minus_{name}"] = paired(col[f"adaptive_minus_{name}"], [0.0] * len(per))
        out[f"adaptive_minus_{name}_by_noise"] = _over(col[f"adaptive_minus_{name}_by_noise"], paired_with_zero=True)
        out[f"adaptive_other_entropy_minus_{name}"] = paired(col[f"adaptive_other_entropy_minus_{name}"], [0.0] * len(per))
        out[f"{name}_acc_by_noise"] = _over(col[f"{name}_acc_by_noise"])
    out["adaptive_acc_by_noise"] = _over(col["adaptive_acc_by_noise"])
    out["adaptive_acc_other_entropy_by_noise"] = _over(col["adaptive_acc_other_entropy_by_noise"])
    out["cad_best_beta_by_noise"] = col["cad_best_beta_by_noise"]
    out["fixed_best_alpha_by_noise"] = col["fixed_best_alpha_by_noise"]
    out["notes"] = {
        "units": "ConR, ParR, MR, acc in percent; closed_book_recall a fraction; intervals: 95 % Student-t over "
                 "replicates (paperdag.stats), paired = per-replicate differences on the same items",
        "mr_monotone": "fraction of replicates whose MR is non-decreasing in alpha and MR(1) > MR(0)",
        "mr_range": "MR(alpha = 1) - MR(alpha = 0), points; _recalled: on the counterfactual items whose memorised "
                    "value no-RAG answers (the facts the model recalls closed-book)",
        "adaptive_minus_X": "per replicate the minimum over the noise levels of adaptive CK-PLUG's accuracy minus X's "
                            "(> 0 iff ahead at every level); cad: CAD at the beta best on that level's test items "
                            "(tuned on the test set: an advantage to the baseline); fixed_alpha: CK-PLUG at the fixed "
                            "alpha best on that level's test items (likewise)",
        "conr_alpha0_minus_rag": "ConR of CK-PLUG at alpha = 0 minus plain RAG's, paired: does alpha = 0 follow the "
                                 "context more than RAG? (MR alone hides answers that are neither: neither_by_alpha)",
        "other_entropy": "the same numbers with CK-PLUG's entropies taken over the other choice (infer.entropy_over)",
        "decode_cost_ratio": "CK-PLUG (all alphas, both sets) seconds per generated token / plain RAG decoding's, "
                             "same infer run",
    }
    return out


def arm_headline(arms: dict[str, dict[str, dict]], adaptive_sizes: dict, requested: int) -> dict[str, object]:
    """The headline of the first training arm (its keys are what the claims read), each further arm's headline
    under its name, and the adaptive set's delivered size beside the size requested (every element decoded the same
    set)."""
    sizes = set(adaptive_sizes.values())
    if len(sizes) != 1:
        raise ValueError(f"predictions: elements decoded adaptive sets of different sizes {sorted(sizes)}; rerun ckplug:infer")
    first, *rest = arms
    out = headline(arms[first])
    out.update({"training": first, "adaptive_set_size": sizes.pop(), "adaptive_set_requested": requested})
    out.update({arm: headline(arms[arm]) for arm in rest})
    return out
