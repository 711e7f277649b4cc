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
CALL_METHODS = ("tokmem_calls", "rag_calls", "rag_named_calls", "rag_bound_calls", "lora_calls")  # the calls track:
# TokMem, its baselines (lora_calls: sequential LoRA fine-tuning, the paper's "fine-tuning"; rag_bound_calls: RAG's
# retrieval read by a perfect reader, an upper bound); headline keys drop the "_calls": tool_f1_lora


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


def calls_table(calls: pl.DataFrame) -> list[dict]:
    """Per calls-track method: tool-selection F1 (multiset of the predicted vs gold tools per test call, micro
    averaged), argument F1 (the same over arguments), exact chains (every (tool, argument) in order), percent; for
    RAG, the share of gold tools among the retrieved descriptions."""
    rows = []
    for method in CALL_METHODS:
        group = calls.filter(pl.col("method") == method) if "method" in calls.columns else calls.clear()
        if group.is_empty():
            continue
        tools, args = group["tools"].to_list(), group["args"].to_list()
        pred_tools, pred_args = group["pred_tools"].to_list(), group["pred_args"].to_list()
        row = {"method": method, "calls": group.height, "tool_f1": 100 * multiset_f1(pred_tools, tools),
               "arg_f1": 100 * multiset_f1(pred_args, args),
               "chain_em": 100 * sum(pt == t and pa == a for pt, pa, t, a in zip(pred_tools, pred_args, tools, args, strict=True))
               / group.height}
        if "retrieved" in group.columns and group["retrieved"].null_count() < group.height:
            found = sum(len(set(t) & set(r)) for t, r in zip(tools, group["retrieved"].to_list(), strict=True))
            row["retrieval_recall"] = 100 * found / sum(map(len, tools))
        rows.append(row)
    return rows


def check_budget(memory_stats: dict, baseline_stats: dict) -> None:
    """TokMem and its baselines must have trained at the same budget (steps per round, per tool round, batch size)."""
    mine, theirs = memory_stats.get("budget"), baseline_stats.get("budget")
    if mine != theirs:
        raise ValueError(f"tokmem evaluate: TokMem trained at {mine}, its baselines at {theirs}; set params.yaml's "
                         "tokmem.baselines steps_per_round / tool_steps_per_round / batch_size to tokmem.train_memory's")


def headline(table: list[dict], calls: pl.DataFrame, memory_stats: dict, baseline_stats: dict) -> dict[str, object]:
    """The numbers pipelines/tokmem.yaml's claims read: the last round's scores per method, forgetting of round-1
    procedures, the calls track's tool-selection and argument F1 per method, trainable parameter counts, the claimed
    differences (method - baseline, points). TokMem and its baselines must share a budget (check_budget)."""
    check_budget(memory_stats, baseline_stats)
    last = {r["method"]: r for r in table if r["round"] == max(t["round"] for t in table)}
    curve = {m: [r for r in table if r["method"] == m] for m in METHODS}
    scored = {r["method"].removesuffix("_calls"): r for r in calls_table(calls)}
    called = [m.removesuffix("_calls") for m in CALL_METHODS]
    forgot = {m: forgetting([r["em_round1"] for r in curve[m]]) for m in METHODS}

    def minus(key: str, method: str, baseline: str) -> float | None:
        return scored[method][key] - scored[baseline][key] if method in scored and baseline in scored else None

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
        **{f"tool_f1_{m}": scored[m]["tool_f1"] if m in scored else None for m in called},
        **{f"arg_f1_{m}": scored[m]["arg_f1"] if m in scored else None for m in called},
        "retrieval_recall_calls": scored["rag"].get("retrieval_recall") if "rag" in scored else None,
        "trainable_tokmem": memory_stats["trainable_tokmem"],
        "trainable_per_procedure_tokmem": memory_stats["trainable_per_procedure"],
        "trainable_tool_lora": memory_stats["trainable_tool_lora"],
        **{f"trainable_{m}": baseline_stats["trainable"][m] for m in METHODS[1:]},
        "trainable_lora_calls": baseline_stats["trainable"].get("lora_calls"),
        "backbone_unchanged": memory_stats["backbone_unchanged"],
        # the comparisons the claims test, each as one number (method - baseline, points)
        "em_tokmem_minus_rag": last["tokmem"]["em"] - last["rag"]["em"],
        "forgetting_lora_seq_minus_tokmem": forgot["lora_seq"] - forgot["tokmem"],
        "tool_f1_tokmem_minus_lora": minus("tool_f1", "tokmem", "lora"),
        "tool_f1_tokmem_minus_rag": minus("tool_f1", "tokmem", "rag"),
        "tool_f1_tokmem_minus_rag_bound": minus("tool_f1", "tokmem", "rag_bound"),
        "units": "EM, ROUGE-L, routing accuracy, F1 and forgetting in percent points; trainable = parameter counts",
    }


PAIRED = {"em_tokmem_minus_rag": ("em_tokmem", "em_rag"),  # claimed differences: (method key, baseline key)
          "forgetting_lora_seq_minus_tokmem": ("forgetting_lora_seq", "forgetting_tokmem"),
          "tool_f1_tokmem_minus_lora": ("tool_f1_tokmem", "tool_f1_lora"),
          "tool_f1_tokmem_minus_rag": ("tool_f1_tokmem", "tool_f1_rag"),
          "tool_f1_tokmem_minus_rag_bound": ("tool_f1_tokmem", "tool_f1_rag_bound")}


def replicated_headline(per_replicate: list[dict[str, object]]) -> dict[str, object]:
    """The headline over replicates: every number a t interval over the replicates' headlines
    ({"mean", "ci95_low", "ci95_high", "n", ...}), the claimed differences paired on the same replicates (+ `mdd`,
    the smallest difference the design detects); counts and flags that must agree across replicates kept as is."""
    from paperdag.stats import interval, paired

    out: dict[str, object] = {"replicates": len(per_replicate)}
    for key, value in per_replicate[0].items():
        values = [h[key] for h in per_replicate]
        if key in PAIRED and all(h.get(k) is not None for h in per_replicate for k in PAIRED[key]):
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
