"""The ckplug stage functions chained by hand on tiny params (two replicates): declared outputs, table rows per method
and alpha, headline keys and intervals; a real local checkpoint can replace the tiny model (model_path)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from paperdag.engine import Item

import stages.ckplug as ckplug  # a module that fails to import fails this file, never skips it

ROOT = Path(__file__).resolve().parents[3]

INTERVALS = {"closed_book_recall", "mr_alpha0", "mr_alpha1", "mr_range", "mr_range_recalled", "mr_range_other_entropy", "mr_rag",
             "mr_norag", "mr_adaptive", "decode_cost_ratio"}
PAIRED = {"adaptive_minus_rag", "adaptive_minus_norag", "adaptive_minus_cad"}
REPLICATES = ["0", "1"]
ARMS = ["conflict_rows", "training_free"]
ELEMENTS = [Item({"training": a, "replicate": int(r)}) for a in ARMS for r in REPLICATES]


def tiny_params() -> dict[str, dict[str, object]]:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())["ckplug"]
    params["synthesize"].update(known_entities=8, reading_entities=8, fresh_entities=4, test_facts=10, adaptive_items=6,
                                conflict_items=20, consistent_items=10)
    params["train"].update(vocab_size=400, hidden_size=32, num_layers=1, intermediate_size=64, steps=5, curriculum_steps=2, batch_size=4)
    params["infer"].update(cad_betas=[0.5, 1.0], alphas=[0.0, 0.5, 1.0])
    return params


def declared(stage: str) -> set[str]:
    spec = yaml.safe_load((ROOT / "pipelines" / "ckplug.yaml").read_text())["stages"][stage]
    return {name for kind in ("outs", "metrics", "plots") for name in spec.get(kind, {})}


@pytest.fixture(scope="module")
def chained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    p = tiny_params()
    synth = ckplug.synthesize(ckplug.SynthesizeParams(**p["synthesize"], seed=1))
    trained, inferred, model_dirs = {}, {}, {}
    for k in ELEMENTS:
        trained[k] = ckplug.train(ckplug.TrainParams(**p["train"], item=k, seed=2 + int(k.replicate)), synth["train_rows"])
        model_dir = tmp_path_factory.mktemp("ckplug") / f"model{k}"
        trained[k]["model"](model_dir)
        model_dirs[k] = model_dir
        inferred[k] = ckplug.infer(ckplug.InferParams(**p["infer"], item=k), model_dir, synth["counterfactual"], synth["adaptive"])
    evaluated = ckplug.evaluate(evaluate_params(p), {k: t["train_stats"] for k, t in trained.items()},
                                {k: i["predictions"] for k, i in inferred.items()}, {k: i["decode_stats"] for k, i in inferred.items()})
    first = ELEMENTS[0]
    return {"synthesize": synth, "train": trained[first], "infer": inferred[first], "evaluate": evaluated,
            "model_dir": model_dirs[first], "params": p, "trained": trained, "inferred": inferred}


def evaluate_params(p: dict) -> ckplug.EvaluateParams:
    return ckplug.EvaluateParams(adaptive_items=p["synthesize"]["adaptive_items"], adaptive_noise=p["synthesize"]["adaptive_noise"])


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
    assert not contextual & set(ad.filter(ad["group"] != "correct_fresh").select("entity", "relation").iter_rows())
    for row in ad.iter_rows(named=True):
        assert row["gold"] == (row["memory_answer"] if row["group"] == "noisy_known" else row["context_answer"])
    conflict = train.filter(train["kind"] == "conflict")
    closed = {(e, r): a for e, r, a in train.filter(train["kind"] == "closed_book").select("entity", "relation", "answer").iter_rows()}
    memory = sum(a == closed[(e, r)] for e, r, a in conflict.select("entity", "relation", "answer").iter_rows())
    assert memory == len(conflict) // 2


def test_metrics_have_headline_intervals_and_a_row_per_method_alpha(chained: dict) -> None:
    """metrics.json is JSON-clean, its headline (the first arm's) holds an interval over the two replicates for every
    number (paired differences with their mdd), the training_free arm's beside it, the adaptive set's delivered and
    requested sizes, and table rows for every alpha (both entropy choices), RAG, no-RAG, CAD at each beta and adaptive
    CK-PLUG."""
    metrics = chained["evaluate"]["metrics"]
    json.dumps(metrics)
    assert set(metrics) == {"headline", "table", "replicates"}
    h = metrics["headline"]
    assert h["replicates"] == 2 and h["training"] == "conflict_rows"
    p = chained["params"]["synthesize"]
    assert h["adaptive_set_size"] == h["adaptive_set_requested"] == p["adaptive_items"] * len(p["adaptive_noise"])
    for head in (h, h["training_free"]):
        for key in INTERVALS | PAIRED:
            assert head[key]["n"] == 2 and head[key]["ci95_low"] <= head[key]["mean"] <= head[key]["ci95_high"], key
        for key in PAIRED:
            assert "mdd" in head[key] and set(head[f"{key}_by_noise"]) == {f"{n:g}" for n in p["adaptive_noise"]}
        assert 0.0 <= head["mr_monotone"] <= 1.0
    alphas, betas = chained["params"]["infer"]["alphas"], chained["params"]["infer"]["cad_betas"]
    for arm in ARMS:
        keys = {(r["method"], r["alpha"]) for r in metrics["table"][arm]}
        assert keys == ({("no-rag", None), ("rag", None), ("ck-plug-adaptive", None), ("ck-plug-adaptive [vocab entropy]", None)}
                        | {(f"cad beta={b:g}", None) for b in betas} | {("ck-plug", a) for a in alphas}
                        | {("ck-plug [vocab entropy]", a) for a in alphas})
        for row in metrics["table"][arm]:
            assert {"ConR", "ParR", "MR", "MR_recalled", "acc_by_noise", "tokens_per_s"} <= set(row)
            assert 0 <= row["MR"]["mean"] <= 100 and row["MR"]["n"] == 2


def test_headline_intervals_are_over_the_per_replicate_values(chained: dict) -> None:
    """Each headline interval's values are the replicates' own numbers, in replicate order; the paired differences
    are per-replicate minima over noise levels of accuracy differences on the same items; CAD's is its best beta
    per level; mr_monotone is the fraction of monotone replicates."""
    m = chained["evaluate"]["metrics"]
    h, per = m["headline"], m["replicates"]["conflict_rows"]
    assert list(m["replicates"]) == ARMS and list(per) == REPLICATES
    recall = [chained["trained"][Item({"training": "conflict_rows", "replicate": int(r)})]["train_stats"]["closed_book_recall"]
              for r in REPLICATES]
    assert h["closed_book_recall"]["values"] == recall
    assert h["mr_range"]["values"] == [per[r]["mr_alpha1"] - per[r]["mr_alpha0"] for r in REPLICATES]
    for name in ("rag", "norag", "cad"):
        want = [min(per[r]["adaptive_acc_by_noise"][k] - per[r][f"{name}_acc_by_noise"][k] for k in per[r]["adaptive_acc_by_noise"])
                for r in REPLICATES]
        assert h[f"adaptive_minus_{name}"]["values"] == want
    for r in REPLICATES:
        cads = {row["method"]: row for row in per[r]["table"] if row["method"].startswith("cad ")}
        for k, acc in per[r]["cad_acc_by_noise"].items():
            assert acc == max(row["acc_by_noise"][k]["acc"] for row in cads.values())
    assert h["mr_monotone"] == sum(per[r]["mr_monotone"] for r in REPLICATES) / 2
    for r in REPLICATES:
        mrs = list(per[r]["mr_by_alpha"].values())
        assert per[r]["mr_monotone"] == (all(b >= a for a, b in zip(mrs, mrs[1:])) and mrs[-1] > mrs[0])


def test_training_free_arm_trains_without_conflict_rows(chained: dict) -> None:
    """The two arms differ only in the conflict rows: training_arm drops them and the conflict mixture weight; an
    unknown arm is an error."""
    from paperdag.methods.ckplug import training_arm

    rows, mixture = chained["synthesize"]["train_rows"], chained["params"]["train"]["mixture"]
    kept, mix = training_arm(rows, mixture, "training_free")
    assert "conflict" not in set(kept["kind"]) and "conflict" not in mix
    assert kept.height == rows.filter(rows["kind"] != "conflict").height
    assert training_arm(rows, mixture, "conflict_rows")[0].equals(rows)
    with pytest.raises(ValueError, match="training arm"):
        training_arm(rows, mixture, "other")


def test_evaluate_rejects_replicates_missing_from_one_input(chained: dict) -> None:
    """An element with predictions but no train stats is an error naming both lists."""
    inferred, trained = chained["inferred"], chained["trained"]
    with pytest.raises(ValueError, match="train_stats elements"):
        ckplug.evaluate(evaluate_params(chained["params"]), {ELEMENTS[0]: trained[ELEMENTS[0]]["train_stats"]},
                        {k: i["predictions"] for k, i in inferred.items()}, {k: i["decode_stats"] for k, i in inferred.items()})


def test_model_path_loads_a_local_checkpoint_instead_of_training(chained: dict) -> None:
    """train with model_path set to a saved checkpoint (as a real local HF model would be) uses it with 0 steps:
    same closed-book recall as the model it was saved from."""
    p = chained["params"]["train"] | {"model_path": str(chained["model_dir"]), "steps": 0, "curriculum_steps": 0}
    again = ckplug.train(ckplug.TrainParams(**p, item=ELEMENTS[0], seed=2), chained["synthesize"]["train_rows"])
    assert again["train_stats"]["closed_book_recall"] == chained["train"]["train_stats"]["closed_book_recall"]
    assert again["train_stats"]["model"] == str(chained["model_dir"])
