"""Per-replicate scores of the three arms and the headline over replicates (paired: the same test problems and the
same trained model in every arm of a replicate); how well a retrieval assembles the needed steps."""

from __future__ import annotations

from collections import Counter

import polars as pl

from paperdag.stats import interval, paired


def written_plan(generated: str) -> str | None:
    """The plan a generation without template wrote (task.py's format: its text before "Work:", stripped), None when
    it wrote no "Work:"."""
    plan, sep, _ = generated.partition("Work:")
    return plan.strip() if sep else None


def work_of(generated: str) -> str:
    """The work a generation wrote (stripped): after its "Work:" when it wrote a plan first, else all of it."""
    _, sep, work = generated.partition("Work:")
    return (work if sep else generated).strip()


def retrieval_scores(assembled: list[list[str]], stops: list[str], needed: list[list[str]]) -> dict[str, object]:
    """% of templates exactly the needed steps; % whose first step is the needed first step (start rule right); of
    the rest of those, % a proper prefix of the needed steps (stopped short) and % running past them (stopped late);
    how the traversals stopped (counts)."""
    n = len(needed)
    start = [a[:1] == t[:1] for a, t in zip(assembled, needed, strict=True)]
    short = [len(a) < len(t) and t[: len(a)] == a for a, t in zip(assembled, needed, strict=True)]
    late = [len(a) > len(t) and a[: len(t)] == t for a, t in zip(assembled, needed, strict=True)]
    return {"template_exact": 100.0 * sum(a == t for a, t in zip(assembled, needed, strict=True)) / n,
            "start_accuracy": 100.0 * sum(start) / n, "stopped_short": 100.0 * sum(short) / n, "stopped_late": 100.0 * sum(late) / n,
            "stops": dict(sorted(Counter(stops).items())), "problems": n}


def replicate_scores(predictions: pl.DataFrame) -> dict[str, object]:
    """Accuracy (%), mean output tokens and latency (ms) per arm, overall and per test kind (seen / new window);
    the template hit rate (%) and start accuracy (%) of the two template arms; % of problems on which the model's own
    plan (no template) is the needed steps, and on which RoT's work is no template's token for token; how RoT's
    traversals stopped."""
    from paperdag.methods.rot.protocol import ARMS  # (protocol imports this module)

    out: dict[str, object] = {}
    for arm in ARMS:
        rows = predictions.filter(pl.col("arm") == arm)
        out[f"acc_{arm}"] = 100.0 * rows["correct"].mean()
        out[f"tokens_{arm}"] = float(rows["output_tokens"].mean())
        out[f"latency_ms_{arm}"] = 1000.0 * float(rows["seconds"].mean())
        for kind in ("seen", "new"):
            part = rows.filter(pl.col("kind") == kind)
            out[f"acc_{arm}_{kind}"] = 100.0 * part["correct"].mean() if part.height else None
        if arm != "none":
            hit = rows["template_exact"].cast(pl.Float64).mean()  # None when the rows used no template
            out[f"template_exact_{arm}"] = None if hit is None else 100.0 * hit
            start = rows["start_right"].cast(pl.Float64).mean()
            out[f"start_accuracy_{arm}"] = None if start is None else 100.0 * start
    own = predictions.filter(pl.col("arm") == "none").sort("problem")
    out["plan_right_none"] = 100.0 * own["plan_right"].cast(pl.Float64).mean()  # the model's own plan: the needed steps
    rot = predictions.filter(pl.col("arm") == "rot")
    same = own.join(rot, on="problem", suffix="_rot")
    same_work = [work_of(a) == work_of(b) for a, b in zip(same["generated"], same["generated_rot"], strict=True)]
    out["rot_work_as_none"] = 100.0 * sum(same_work) / same.height  # % of problems: RoT's work is no template's
    out["rot_stops"] = {s: int(n) for s, n in rot.group_by("stop").len().sort("stop").iter_rows()}
    out["problems"] = rot.height
    return out


def headline(per_replicate: list[dict[str, object]]) -> dict[str, object]:
    """Means with 95 % t intervals over replicates; the claims' paired differences (RoT - baseline, with the minimum
    detectable difference), the token reduction 100 (1 - T_rot / T_none) and the latency ratio L_rot / L_none."""
    def col(key: str) -> list[float]:
        return [float(r[key]) for r in per_replicate]

    h: dict[str, object] = {}
    for key in per_replicate[0]:
        if key not in {"rot_stops", "problems"} and all(r[key] is not None for r in per_replicate):
            h[key] = interval(col(key))
    h["acc_rot_minus_none"] = paired(col("acc_rot"), col("acc_none"))
    h["acc_rot_minus_static"] = paired(col("acc_rot"), col("acc_static"))
    h["token_reduction_rot_vs_none_pct"] = interval([100.0 * (1 - r["tokens_rot"] / r["tokens_none"]) for r in per_replicate])
    h["token_reduction_static_vs_none_pct"] = interval([100.0 * (1 - r["tokens_static"] / r["tokens_none"]) for r in per_replicate])
    h["latency_ratio_rot_over_none"] = interval([r["latency_ms_rot"] / r["latency_ms_none"] for r in per_replicate])
    h["latency_ratio_rot_over_static"] = interval([r["latency_ms_rot"] / r["latency_ms_static"] for r in per_replicate])
    h["replicates"] = len(per_replicate)
    h["test_problems"] = int(per_replicate[0]["problems"])
    return h
