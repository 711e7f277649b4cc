"""The ckplug stage functions chained by hand on tiny params (two replicates): declared outputs, table rows per method
and alpha, headline keys and intervals; a real local checkpoint can replace the tiny model (model_path)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from paperdag.engine import Item

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
import stages.ckplug as ckplug  # noqa: E402  (a module that fails to import fails this file, never skips it)

INTERVALS = {"closed_book_recall", "mr_alpha0", "mr_alpha1", "mr_range", "mr_rag", "mr_norag", "mr_cad", "adaptive_acc",
             "rag_acc", "norag_acc", "cad_acc", "decode_cost_ratio"}
PAIRED = {"adaptive_minus_rag", "adaptive_minus_norag"}
REPLICATES = ["0", "1"]


def tiny_params() -> dict[str, dict[str, object]]:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())["ckplug"]
    params["synthesize"].update(known_entities=8, reading_entities=8, fresh_entities=4, test_facts=10, adaptive_items=10,
                                conflict_items=20, consistent_items=10)
    params["train"].update(vocab_size=400, hidden_size=32, num_layers=1, intermediate_size=64, steps=5, batch_size=4)
    return params


def declared(stage: str) -> set[str]:
    spec = yaml.safe_load((ROOT / "pipelines" / "ckplug.yaml").read_text())["stages"][stage]
    return {name for kind in ("outs", "metrics", "plots") for name in spec.get(kind, {})}


@pytest.fixture(scope="module")
def chained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    p = tiny_params()
    synth = ckplug.synthesize(ckplug.SynthesizeParams(**p["synthesize"], seed=1))
    trained, inferred, model_dirs = {}, {}, {}
    for r in REPLICATES:
        trained[r] = ckplug.train(ckplug.TrainParams(**p["train"], item=Item({"replicate": int(r)}), seed=2 + int(r)), synth["train_rows"])
        model_dir = tmp_path_factory.mktemp("ckplug") / f"model{r}"
        trained[r]["model"](model_dir)
        model_dirs[r] = model_dir
        inferred[r] = ckplug.infer(ckplug.InferParams(**p["infer"], item=Item({"replicate": int(r)})), model_dir, synth["counterfactual"],
                                   synth["adaptive"])
    evaluated = ckplug.evaluate(ckplug.EvaluateParams(), {r: t["train_stats"] for r, t in trained.items()},
                                {r: i["predictions"] for r, i in inferred.items()},
                                {r: i["decode_stats"] for r, i in inferred.items()})
    return {"synthesize": synth, "train": trained["0"], "infer": inferred["0"], "evaluate": evaluated,
            "model_dir": model_dirs["0"], "params": p, "trained": trained,
            "inferred": inferred}


def test_stages_return_exactly_the_declared_outputs(chained: dict) -> None:
    """Each stage returns one value per output its pipelines/ckplug.yaml entry declares."""
    for stage in ("synthesize", "train", "infer", "evaluate"):
        assert set(chained[stage]) == declared(stage), stage


def test_synthesized_sets_separate_memorised_and_context_facts(chained: dict) -> None:
    """Counterfactual contexts contradict memory; test facts never appear with a context in training; the adaptive
    set's gold is memory on noisy rows and the context elsewhere; conflict labels are split between the two."""
    synth = chained["synthesize"]
    cf, train, ad = synth["counterfactual"], synth["train_rows"], synth["adaptive"]
    assert (cf["context_answer"] != cf["memory_answer"]).all()
    contextual = {(e, r) for e, r, c in train.select("entity", "relation", "context").iter_rows() if c}
    assert not contextual & set(cf.select("entity", "relation").iter_rows())
    for row in ad.iter_rows(named=True):
        assert row["gold"] == (row["memory_answer"] if row["group"] == "noisy_known" else row["context_answer"])
    conflict = train.filter(train["kind"] == "conflict")
    closed = {(e, r): a for e, r, a in train.filter(train["kind"] == "closed_book").select("entity", "relation", "answer").iter_rows()}
    memory = sum(a == closed[(e, r)] for e, r, a in conflict.select("entity", "relation", "answer").iter_rows())
    assert memory == len(conflict) // 2


def test_metrics_have_headline_intervals_and_a_row_per_method_alpha(chained: dict) -> None:
    """metrics.json is JSON-clean, has no free-form targets, its headline holds an interval over the two replicates
    for every number (paired differences with their mdd), and table rows for every alpha, RAG, no-RAG, CAD and
    adaptive CK-PLUG with ConR, ParR, MR, acc, tokens_per_s as intervals."""
    metrics = chained["evaluate"]["metrics"]
    json.dumps(metrics)
    assert set(metrics) == {"headline", "table", "replicates"}
    h = metrics["headline"]
    assert h["replicates"] == 2
    for key in INTERVALS | PAIRED:
        assert h[key]["n"] == 2 and h[key]["ci95_low"] <= h[key]["mean"] <= h[key]["ci95_high"], key
    for key in PAIRED:
        assert "mdd" in h[key]
    assert 0.0 <= h["mr_monotone"] <= 1.0
    keys = {(r["method"], r["alpha"]) for r in metrics["table"]}
    alphas = chained["params"]["infer"]["alphas"]
    assert keys == {("no-rag", None), ("rag", None), ("cad", None), ("ck-plug-adaptive", None)} | {("ck-plug", a) for a in alphas}
    for row in metrics["table"]:
        assert {"ConR", "ParR", "MR", "acc", "tokens_per_s"} <= set(row)
        assert 0 <= row["MR"]["mean"] <= 100 and row["MR"]["n"] == 2


def test_headline_intervals_are_over_the_per_replicate_values(chained: dict) -> None:
    """Each headline interval's values are the replicates' own numbers, in replicate order; the paired differences
    are per-replicate differences of accuracies on the same items; mr_monotone is the fraction of monotone replicates."""
    m = chained["evaluate"]["metrics"]
    h, per = m["headline"], m["replicates"]
    assert list(per) == REPLICATES
    recall = [chained["trained"][r]["train_stats"]["closed_book_recall"] for r in REPLICATES]
    assert h["closed_book_recall"]["values"] == recall
    assert h["mr_range"]["values"] == [per[r]["mr_alpha1"] - per[r]["mr_alpha0"] for r in REPLICATES]
    assert h["adaptive_minus_rag"]["values"] == [per[r]["adaptive_acc"] - per[r]["rag_acc"] for r in REPLICATES]
    assert h["adaptive_minus_norag"]["values"] == [per[r]["adaptive_acc"] - per[r]["norag_acc"] for r in REPLICATES]
    assert h["mr_monotone"] == sum(per[r]["mr_monotone"] for r in REPLICATES) / 2
    for r in REPLICATES:
        mrs = list(per[r]["mr_by_alpha"].values())
        assert per[r]["mr_monotone"] == (all(b >= a for a, b in zip(mrs, mrs[1:])) and mrs[-1] > mrs[0])


def test_evaluate_rejects_replicates_missing_from_one_input(chained: dict) -> None:
    """A replicate with predictions but no train stats is an error naming both lists."""
    inferred, trained = chained["inferred"], chained["trained"]
    with pytest.raises(ValueError, match="train_stats replicates"):
        ckplug.evaluate(ckplug.EvaluateParams(), {"0": trained["0"]["train_stats"]},
                        {r: i["predictions"] for r, i in inferred.items()}, {r: i["decode_stats"] for r, i in inferred.items()})


def test_model_path_loads_a_local_checkpoint_instead_of_training(chained: dict) -> None:
    """train with model_path set to a saved checkpoint (as a real local HF model would be) uses it with 0 steps:
    same closed-book recall as the model it was saved from."""
    p = chained["params"]["train"] | {"model_path": str(chained["model_dir"]), "steps": 0}
    again = ckplug.train(ckplug.TrainParams(**p, item=Item({"replicate": 0}), seed=2), chained["synthesize"]["train_rows"])
    assert again["train_stats"]["closed_book_recall"] == chained["train"]["train_stats"]["closed_book_recall"]
    assert again["train_stats"]["model"] == str(chained["model_dir"])

