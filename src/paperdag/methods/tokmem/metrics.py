"""Scores: exact match, ROUGE-L (LCS F-measure over whitespace tokens), multiset F1 for tool selection and arguments,
and forgetting (round-1 score right after round 1 minus after the last round); per replicate, then over replicates
(paperdag.stats: t intervals, paired differences on the same replicate seeds and test queries)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import polars as pl


def exact_match(prediction: str, answer: str) -> bool:
    return " ".join(prediction.split()) == " ".join(answer.split())


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (dynamic programme, one row at a time)."""
    row = np.zeros(len(b) + 1, dtype=np.int64)
    for x in a:
        prev_diag = 0
        for j, y in enumerate(b, start=1):
            prev_diag, row[j] = row[j], prev_diag + 1 if x == y else max(row[j], row[j - 1])
    return int(row[-1])


def rouge_l(prediction: str, answer: str) -> float:
    """ROUGE-L F1 = 2 P R / (P + R), P = LCS / |prediction|, R = LCS / |answer|, over whitespace tokens."""
    p, a = prediction.split(), answer.split()
    lcs = lcs_length(p, a)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(p), lcs / len(a)
    return 2 * precision * recall / (precision + recall)


def multiset_f1(predicted: Sequence[Sequence[object]], gold: Sequence[Sequence[object]]) -> float:
    """Micro F1 over examples: true positives are the multiset intersection of predicted and gold items per example."""
    tp = sum(sum((Counter(p) & Counter(g)).values()) for p, g in zip(predicted, gold, strict=True))
    n_pred, n_gold = sum(len(p) for p in predicted), sum(len(g) for g in gold)
    if tp == 0:
        return 0.0
    precision, recall = tp / n_pred, tp / n_gold
    return 2 * precision * recall / (precision + recall)


def forgetting(round1_scores: Sequence[float]) -> float:
    """Score on round-1 procedures right after round 1 minus after the last round (positive = forgotten)."""
    return round1_scores[0] - round1_scores[-1]


METHODS = ("tokmem", "rag", "rag_named", "prompt_tuning", "lora_seq", "lora_replay")  # the method, then its baselines
# rag_named: RAG in the named regime (queries carry the procedure's name), a reference for the retrieval ceiling


def score_table(predictions: pl.DataFrame) -> list[dict]:
    """EM, ROUGE-L and routing accuracy (percent) per (method, round), over every procedure seen so far and over the
    round-1 procedures alone."""
    round1 = set(predictions.filter(pl.col("round") == 1)["procedure"].to_list())
    table = []
    for (method, rnd), group in sorted(predictions.group_by("method", "round"), key=lambda kv: (METHODS.index(kv[0][0]), kv[0][1])):
        em = [exact_match(p, a) for p, a in zip(group["prediction"], group["answer"], strict=True)]
        first = [e for e, p in zip(em, group["procedure"], strict=True) if p in round1]
        routes = group["routed"].to_list()
        table.append({"method": method, "round": rnd, "n_procedures": int(group["n_procedures"][0]), "queries": len(em),
                      "em": 100 * sum(em) / len(em),
                      "rouge_l": 100 * sum(rouge_l(p, a) for p, a in zip(group["prediction"], group["answer"], strict=True)) / len(em),
                      "routing_acc": None if all(r == -1 for r in routes) and method.startswith("lora") else
                      100 * sum(r == p for r, p in zip(routes, group["procedure"], strict=True)) / len(em),
                      "em_round1": 100 * sum(first) / len(first)})
        if "backbone_route" in group.columns and method == "tokmem":  # unmasked first step on a backbone procedure token
            table[-1]["backbone_routes"] = int(group["backbone_route"].fill_null(False).sum())
    return table


def headline(table: list[dict], calls: pl.DataFrame, memory_stats: dict, baseline_stats: dict) -> dict[str, object]:
    """The numbers pipelines/tokmem.yaml's claims read: the last round's scores per method, forgetting of round-1
    procedures, the calls track's tool-selection and argument F1, trainable parameter counts, the claimed
    differences (method - baseline, points)."""
    last = {r["method"]: r for r in table if r["round"] == max(t["round"] for t in table)}
    curve = {m: [r for r in table if r["method"] == m] for m in METHODS}
    tool_f1 = 100 * multiset_f1(calls["pred_tools"].to_list(), calls["tools"].to_list()) if not calls.is_empty() else None
    arg_f1 = 100 * multiset_f1(calls["pred_args"].to_list(), calls["args"].to_list()) if not calls.is_empty() else None
    forgot = {m: forgetting([r["em_round1"] for r in curve[m]]) for m in METHODS}
    return {
        "n_procedures": last["tokmem"]["n_procedures"],
        **{f"em_{m}": last[m]["em"] for m in METHODS},
        **{f"rouge_l_{m}": last[m]["rouge_l"] for m in METHODS},
        "routing_acc_tokmem": last["tokmem"]["routing_acc"],
        "retrieval_acc_paraphrased": last["rag"]["routing_acc"],
        "retrieval_acc_named": last["rag_named"]["routing_acc"],
        "backbone_routes_tokmem": last["tokmem"].get("backbone_routes"),
        "queries": last["tokmem"]["queries"],
        **{f"forgetting_{m}": forgot[m] for m in METHODS},
        "tool_f1_tokmem": tool_f1,
        "arg_f1_tokmem": arg_f1,
        "trainable_tokmem": memory_stats["trainable_tokmem"],
        "trainable_per_procedure_tokmem": memory_stats["trainable_per_procedure"],
        "trainable_tool_lora": memory_stats["trainable_tool_lora"],
        **{f"trainable_{m}": baseline_stats["trainable"][m] for m in METHODS[1:]},
        "backbone_unchanged": memory_stats["backbone_unchanged"],
        # the comparisons the claims test, each as one number (method - baseline, points)
        "em_tokmem_minus_rag": last["tokmem"]["em"] - last["rag"]["em"],
        "forgetting_lora_seq_minus_tokmem": forgot["lora_seq"] - forgot["tokmem"],
        "units": "EM, ROUGE-L, routing accuracy, F1 and forgetting in percent points; trainable = parameter counts",
    }


PAIRED = {"em_tokmem_minus_rag": ("em_tokmem", "em_rag"),  # claimed differences: (method key, baseline key)
          "forgetting_lora_seq_minus_tokmem": ("forgetting_lora_seq", "forgetting_tokmem")}


def replicated_headline(per_replicate: list[dict[str, object]]) -> dict[str, object]:
    """The headline over replicates: every number a t interval over the replicates' headlines
    ({"mean", "ci95_low", "ci95_high", "n", ...}), the claimed differences paired on the same replicates (+ `mdd`,
    the smallest difference the design detects); counts and flags that must agree across replicates kept as is."""
    from paperdag.stats import interval, paired

    out: dict[str, object] = {"replicates": len(per_replicate)}
    for key, value in per_replicate[0].items():
        values = [h[key] for h in per_replicate]
        if key in PAIRED:
            method, baseline = PAIRED[key]
            out[key] = paired([h[method] for h in per_replicate], [h[baseline] for h in per_replicate])
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or any(v is None for v in values):
            out[key] = value if all(v == value for v in values) else values
        elif key.startswith(("trainable", "n_procedures", "queries")):
            out[key] = value if all(v == value for v in values) else values
        else:
            out[key] = interval(values)
    out["backbone_unchanged"] = all(h["backbone_unchanged"] for h in per_replicate)
    return out
