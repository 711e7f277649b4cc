"""The ckplug stage functions chained by hand on tiny params: declared outputs, table rows per method and alpha,
headline keys; a real local checkpoint can replace the tiny model (model_path)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
ckplug = pytest.importorskip("stages.ckplug")

HEADLINE = {"closed_book_recall", "mr_alpha0", "mr_alpha1", "mr_baseline_rag", "mr_monotone", "adaptive_acc", "rag_acc",
            "norag_acc", "decode_cost_ratio"}


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
    trained = ckplug.train(ckplug.TrainParams(**p["train"], seed=2), synth["train_rows"])
    model_dir = tmp_path_factory.mktemp("ckplug") / "model"
    trained["model"](model_dir)
    inferred = ckplug.infer(ckplug.InferParams(**p["infer"]), model_dir, synth["counterfactual"], synth["adaptive"])
    evaluated = ckplug.evaluate(ckplug.EvaluateParams(**p["evaluate"]), trained["train_stats"], inferred["predictions"],
                                inferred["decode_stats"])
    return {"synthesize": synth, "train": trained, "infer": inferred, "evaluate": evaluated, "model_dir": model_dir, "params": p}


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


def test_metrics_have_headline_targets_and_a_row_per_method_alpha(chained: dict) -> None:
    """metrics.json is JSON-clean, has the headline keys, the targets, and table rows for every alpha, RAG, no-RAG,
    CAD and adaptive CK-PLUG with ConR, ParR, MR, acc, tokens_per_s."""
    metrics = chained["evaluate"]["metrics"]
    json.dumps(metrics)
    assert HEADLINE <= set(metrics["headline"])
    assert {"mr_range", "mr_monotone", "adaptive_beats_rag", "adaptive_beats_norag"} <= set(metrics["targets"])
    keys = {(r["method"], r["alpha"]) for r in metrics["table"]}
    alphas = chained["params"]["infer"]["alphas"]
    assert keys == {("no-rag", None), ("rag", None), ("cad", None), ("ck-plug-adaptive", None)} | {("ck-plug", a) for a in alphas}
    for row in metrics["table"]:
        assert {"ConR", "ParR", "MR", "acc", "tokens_per_s"} <= set(row)
        assert 0 <= row["MR"] <= 100


def test_model_path_loads_a_local_checkpoint_instead_of_training(chained: dict) -> None:
    """train with model_path set to a saved checkpoint (as a real local HF model would be) uses it with 0 steps:
    same closed-book recall as the model it was saved from."""
    p = chained["params"]["train"] | {"model_path": str(chained["model_dir"]), "steps": 0}
    again = ckplug.train(ckplug.TrainParams(**p, seed=2), chained["synthesize"]["train_rows"])
    assert again["train_stats"]["closed_book_recall"] == chained["train"]["train_stats"]["closed_book_recall"]
    assert again["train_stats"]["model"] == str(chained["model_dir"])


def test_unknown_mixture_kind_is_rejected(chained: dict) -> None:
    """A mixture key that is not a training kind names the params key at fault."""
    p = chained["params"]["train"] | {"mixture": {"closed_book": 1.0, "quiz": 0.5}}
    with pytest.raises(ValueError, match="ckplug.train.mixture"):
        ckplug.train(ckplug.TrainParams(**p, seed=2), chained["synthesize"]["train_rows"])
