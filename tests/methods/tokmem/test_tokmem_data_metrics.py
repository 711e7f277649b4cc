"""The procedure world and the scores on hand-computed cases."""

from __future__ import annotations

import random

import pytest

from paperdag.methods.tokmem import (
    PARAPHRASES,
    Procedure,
    atomic_examples,
    call_examples,
    calls_table,
    check_budget,
    exact_match,
    forgetting,
    lcs_length,
    make_procedures,
    multiset_f1,
    named_call_text,
    parse_named_calls,
    replicated_headline,
    rouge_l,
)


def test_procedures_apply_their_rule() -> None:
    """Each family on a hand case."""
    x = list("abca")
    assert Procedure(0, "N", "replace", "a", "z", "memory", 1)(x) == list("zbcz")
    assert Procedure(0, "N", "remove", "a", "", "memory", 1)(x) == list("bc")
    assert Procedure(0, "N", "double", "a", "", "memory", 1)(x) == list("aabcaa")
    assert Procedure(0, "N", "prefix", "q", "r", "memory", 1)(x) == list("qrabca")
    assert Procedure(0, "N", "suffix", "q", "r", "memory", 1)(x) == list("abcaqr")
    assert Procedure(0, "Zo", "replace", "a", "z", "memory", 1).description == "Zo means replace every a with z"
    with pytest.raises(ValueError, match="unknown procedure family"):
        Procedure(0, "N", "sort", "", "", "memory", 1)(x)


def test_procedures_are_distinct_and_split_into_rounds() -> None:
    """Distinct names and rules across splits; memory procedures numbered into rounds of round_size."""
    procs = make_procedures({"backbone": 30, "memory": 10, "tool": 4}, {"memory": 4, "tool": 2}, random.Random(0))
    assert len({p.name for p in procs}) == len({(p.family, p.a, p.b) for p in procs}) == 44
    assert [p.round for p in procs if p.split == "memory"] == [1, 1, 1, 1, 2, 2, 2, 2, 3, 3]
    assert procs == make_procedures({"backbone": 30, "memory": 10, "tool": 4}, {"memory": 4, "tool": 2}, random.Random(0))


def test_queries_imply_the_procedure_without_its_name() -> None:
    """Paraphrased queries (the default regime) never contain the procedure's name, nor any procedure's, nor the
    description's rule words; they carry a wording of the rule from the family's paraphrases. The named regime's
    query names it; only the description begins with the name. Test inputs differ from training inputs; calls
    chain 2-3 distinct tools."""
    procs = make_procedures({"memory": 40}, {"memory": 40}, random.Random(1))
    rows = atomic_examples(procs, {"train": 6, "test": 3}, (3, 5), random.Random(2))
    names = {p.name.lower() for p in procs}
    for p in procs:
        mine = [r for r in rows if r["procedure"] == p.id]
        assert all(r["answer"] == " ".join(p(r["args"][0].split())) for r in mine)
        assert all(not names & set(r["query"].lower().replace(":", " ").split()) for r in mine)
        assert all(not {"replace", "delete", "write", "put", "add", "means"} & set(r["query"].split()) for r in mine)
        wordings = {w.format(a=p.a, b=p.b) for w in PARAPHRASES[p.family]}
        assert all(any(w in r["query"] for w in wordings) for r in mine)
        assert all(p.name in r["query_named"] for r in mine) and p.description.startswith(p.name)
        assert not {r["args"][0] for r in mine if r["split"] == "test"} & {r["args"][0] for r in mine if r["split"] == "train"}
    calls = call_examples(procs, 20, "test", (2, 3), random.Random(3))
    assert all(2 <= len(c["tools"]) == len(set(c["tools"])) <= 3 for c in calls)
    for c in calls:  # the calls track in the same two regimes: paraphrased steps name no tool, named steps do
        assert not names & set(c["query"].lower().replace(":", " ").split())
        assert all(any(w.format(a=procs[t].a, b=procs[t].b) in c["query"] for w in PARAPHRASES[procs[t].family]) for t in c["tools"])
        assert all(procs[t].name in c["query_named"] and x in c["query"] for t, x in zip(c["tools"], c["args"], strict=True))


def test_named_calls_round_trip() -> None:
    """The baselines' text format of a call names its tool inside the JSON; parsing a generation recovers every
    well-formed (tool, argument) in order and skips a broken one."""
    written = named_call_text("Bralimo", "c d") + named_call_text("Zo", "a")
    assert written == ' {"tool": "Bralimo", "arg": "c d"} {"tool": "Zo", "arg": "a"}'
    assert parse_named_calls(written) == [("Bralimo", "c d"), ("Zo", "a")]
    assert parse_named_calls('{"tool": "Zo", "arg": "a" {"tool": "Ka", "arg": "b"}') == [("Ka", "b")]


def test_rouge_l_and_exact_match() -> None:
    """LCS of 'a b c d' and 'a c d e' is 3: P = R = 3/4, F = 0.75; no overlap scores 0; EM ignores spacing."""
    assert lcs_length("abcd", "acde") == 3
    assert rouge_l("a b c d", "a c d e") == pytest.approx(0.75)
    assert rouge_l("a b", "a b c d") == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert rouge_l("x", "a b") == 0.0 and rouge_l("", "a") == 0.0
    assert exact_match(" a  b ", "a b") and not exact_match("a b", "a c")


def test_multiset_f1_and_forgetting() -> None:
    """Tool F1 micro-averaged: 3 true positives of 4 predicted and 5 gold: P 0.75, R 0.6, F1 2/3."""
    assert multiset_f1([[1, 2], [3, 9]], [[2, 1, 4], [3, 5]]) == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    assert multiset_f1([[1, 1]], [[1]]) == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert multiset_f1([[]], [[1]]) == 0.0
    assert forgetting([80.0, 70.0, 60.0]) == 20.0


def test_the_headline_over_replicates_has_intervals_and_paired_differences() -> None:
    """Numbers become t intervals over the replicates; the claimed differences are paired on the same replicates
    (mean of the differences, with its detectable difference); counts that agree stay plain."""
    reps = [{"em_tokmem": 50.0 + i, "em_rag": 40.0 + 2 * i, "em_tokmem_minus_rag": 10.0 - i, "forgetting_tokmem": 1.0,
             "forgetting_lora_seq": 20.0 + i, "forgetting_lora_seq_minus_tokmem": 19.0 + i, "trainable_tokmem": 64,
             "backbone_unchanged": True, "units": "points"} for i in range(3)]
    h = replicated_headline(reps)
    assert h["replicates"] == 3 and h["trainable_tokmem"] == 64 and h["backbone_unchanged"] is True
    assert h["em_tokmem"]["mean"] == pytest.approx(51.0) and h["em_tokmem"]["n"] == 3
    assert h["em_tokmem"]["ci95_low"] < 51.0 < h["em_tokmem"]["ci95_high"]
    assert h["em_tokmem_minus_rag"]["values"] == [10.0, 9.0, 8.0] and "mdd" in h["em_tokmem_minus_rag"]
    assert h["forgetting_lora_seq_minus_tokmem"]["mean"] == pytest.approx(20.0)
    assert h["forgetting_tokmem"]["ci95_low"] == h["forgetting_tokmem"]["ci95_high"] == 1.0


def test_calls_table_scores_each_calls_method_on_hand_cases() -> None:
    """Tool and argument F1 micro-averaged over the test calls, exact chains in order, and RAG's retrieval recall
    (gold tools among the retrieved): TokMem right on both calls; fine-tuning one wrong tool of four."""
    import polars as pl

    gold = {"tools": [[1, 2], [3, 4]], "args": [["a", "b"], ["c", "d"]]}
    calls = pl.DataFrame([
        {"method": "tokmem_calls", **{k: v[i] for k, v in gold.items()}, "pred_tools": gold["tools"][i], "pred_args": gold["args"][i],
         "retrieved": None} for i in range(2)] + [
        {"method": "lora_calls", **{k: v[i] for k, v in gold.items()}, "pred_tools": [[1, 9], [3, 4]][i], "pred_args": gold["args"][i],
         "retrieved": None} for i in range(2)] + [
        {"method": "rag_calls", **{k: v[i] for k, v in gold.items()}, "pred_tools": [[], [3]][i], "pred_args": [[], ["c"]][i],
         "retrieved": [[1, 7], [3, 4]][i]} for i in range(2)])
    rows = {r["method"]: r for r in calls_table(calls)}
    assert rows["tokmem_calls"]["tool_f1"] == rows["tokmem_calls"]["chain_em"] == 100.0
    assert rows["lora_calls"]["tool_f1"] == pytest.approx(75.0) and rows["lora_calls"]["arg_f1"] == 100.0
    assert rows["lora_calls"]["chain_em"] == 50.0
    assert rows["rag_calls"]["tool_f1"] == pytest.approx(100 * 2 * 1 * 0.25 / 1.25) and rows["rag_calls"]["retrieval_recall"] == 75.0
    assert "retrieval_recall" not in rows["tokmem_calls"] and "rag_named_calls" not in rows


def test_a_baseline_trained_at_another_budget_is_an_error() -> None:
    """TokMem and its baselines compared at different steps per tool round: evaluate refuses, naming the params."""
    same = {"steps_per_round": 300, "tool_steps_per_round": 100, "batch_size": 32}
    check_budget({"budget": same}, {"budget": dict(same)})
    with pytest.raises(ValueError, match="tool_steps_per_round"):
        check_budget({"budget": same}, {"budget": {**same, "tool_steps_per_round": 300}})
