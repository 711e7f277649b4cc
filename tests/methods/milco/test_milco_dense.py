"""The fair dense baseline's tuning (paperdag.methods.milco.dense): the validation split is by document, and
tune_dense keeps the best (setting, stage-2 steps) on validation and refits that setting's stage-1 model for exactly
those steps. The trainings are replaced by scripted ones here: what is tested is the choice, not the learning."""

from __future__ import annotations

import polars as pl
import pytest

from paperdag.engine import Item
from paperdag.methods.milco import dense
from paperdag.methods.milco.config import TrainDenseParams


def _queries() -> pl.DataFrame:
    """Train cross-lingual queries about documents 0-9 (documents 0-1 twins: one query about both), proper-noun train
    queries about documents 0-4, test queries about documents 20-21."""
    rows = [{"query_id": i, "split": "train", "kind": "crosslingual", "relevant": [i]} for i in range(2, 10)]
    rows.append({"query_id": 10, "split": "train", "kind": "crosslingual", "relevant": [0, 1]})
    rows += [{"query_id": 20 + i, "split": "train", "kind": "propernoun", "relevant": [i]} for i in range(5)]
    rows += [{"query_id": 40 + i, "split": "test", "kind": "crosslingual", "relevant": [20 + i]} for i in range(2)]
    return pl.DataFrame(rows, schema_overrides={"relevant": pl.List(pl.Int64)})


def _params(**changes) -> TrainDenseParams:
    values = dict(encoder="", src_vocab_size=50, en_vocab_size=50, hidden_size=8, teacher_hidden_size=16, num_layers=1, num_heads=1,
                  intermediate_size=8, max_length=8, align_steps=4, align_lrs=[0.001, 0.01, 1.0], align_temperatures=[0.05, 0.1],
                  align_batch=2, distill_steps=10, eval_every=5, distill_lr=0.001, distill_batch=2, temperature=0.05,
                  validation_fraction=0.3, min_train_ndcg10=0.1, item=Item({"replicate": 0}), seed=3)
    return TrainDenseParams(**(values | changes))


def test_validation_is_split_by_document_and_every_query_about_it_leaves_stage_2() -> None:
    """A fraction of the documents the cross-lingual train queries ask about; held out: every train query (either
    kind) about one of them, and only those; never a test query."""
    queries = _queries()
    docs, held = dense.validation_split(queries, 0.3, seed=3)
    assert len(docs) == round(0.3 * 10) and set(docs) <= set(range(10))
    train = queries.filter(pl.col("split") == "train")
    about = {q for q, rel in zip(train["query_id"], train["relevant"].to_list(), strict=True) if set(rel) & set(docs)}
    assert set(held) == about and not set(held) & set(queries.filter(pl.col("split") == "test")["query_id"])
    assert dense.validation_split(queries, 0.3, seed=3) == (docs, held)  # seeded
    assert dense.validation_split(queries, 0.3, seed=4) != (docs, held)


class _Model:
    dim = 8

    def __init__(self) -> None:
        self.setting: tuple[float, float] | None = None
        self.refit_steps: int | None = None


# validation nDCG@10 by setting (align_lr, align_temperature) and stage-2 step; lr 1.0 diverges in stage 1
SCORES = {(0.001, 0.05): {0: 0.10, 5: 0.20, 10: 0.15}, (0.001, 0.1): {0: 0.05, 5: 0.30, 10: 0.30},
          (0.01, 0.05): {0: 0.30, 5: 0.25, 10: 0.20}, (0.01, 0.1): {0: 0.0, 5: 0.1, 10: 0.1}}


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> dict:
    seen: dict = {"stage2_queries": []}

    def align(model, parallel, *, steps, lr, batch, max_length, seed, temperature):
        if lr >= 1.0:
            raise FloatingPointError("milco dense baseline: contrastive alignment: loss is nan at step 2; lower the learning rate")
        model.setting = (lr, temperature)
        return [1.0] * steps

    def distill(model, corpus, queries, groups, *, steps, lr, batch, max_length, seed, every=0, evaluate=None):
        seen["stage2_queries"].append(sorted(queries.filter(pl.col("split") == "train")["query_id"].to_list()))
        if evaluate is None:  # the refit
            model.refit_steps = steps
            return [0.5] * steps, {}
        return [0.5] * steps, dict(SCORES[model.setting])

    monkeypatch.setattr(dense, "new_dense", lambda *a, **k: _Model())
    monkeypatch.setattr(dense, "align_dense", align)
    monkeypatch.setattr(dense, "distill_dense", distill)
    monkeypatch.setattr(dense, "ndcg10", lambda model, queries, corpus, max_length: 0.5)
    return seen


def test_tune_dense_keeps_the_best_setting_and_step_and_refits_its_stage_1_model(scripted: dict) -> None:
    """The best validation score over every (setting, step) wins, ties going to the earlier setting and the fewer
    steps ((0.001, 0.1) reaches 0.30 at step 5 and 10; (0.01, 0.05) at step 0, later in the grid); the returned model
    is that setting's stage-1 model refit for those steps on all the train queries; diverged settings are listed."""
    queries = _queries()
    groups = pl.DataFrame({"query_id": queries.filter(pl.col("split") == "train").sort("query_id")["query_id"]})
    model, stats = dense.tune_dense(_params(), pl.DataFrame(), queries, pl.DataFrame(), groups, tokenizer_dir=None)
    assert stats["chosen"] == {"align_lr": 0.001, "align_temperature": 0.1, "distill_steps": 5, "val_ndcg10": 0.30}
    assert model.setting == (0.001, 0.1) and model.refit_steps == 5
    assert [g["diverged"][:28] for g in stats["grid"] if "diverged" in g] == ["milco dense baseline: contra"] * 2
    all_train = sorted(queries.filter(pl.col("split") == "train")["query_id"].to_list())
    tuned, refit = scripted["stage2_queries"][:-1], scripted["stage2_queries"][-1]
    assert refit == all_train
    assert all(sorted(set(t) | set(stats["held_out_of_stage_2"])) == all_train and not set(t) & set(stats["held_out_of_stage_2"])
               for t in tuned)
    assert set(stats["validation_queries"]) <= set(stats["held_out_of_stage_2"])


def test_tune_dense_at_step_0_refits_nothing_and_every_divergence_is_an_error(scripted: dict) -> None:
    """A best score before any stage-2 step keeps the stage-1 model as it is; a grid that diverged everywhere is an
    error naming the params."""
    queries = _queries()
    groups = pl.DataFrame({"query_id": queries.filter(pl.col("split") == "train").sort("query_id")["query_id"]})
    model, stats = dense.tune_dense(_params(align_lrs=[0.01], align_temperatures=[0.05]), pl.DataFrame(), queries, pl.DataFrame(),
                                    groups, tokenizer_dir=None)
    assert stats["chosen"]["distill_steps"] == 0 and model.refit_steps is None and stats["loss"] is None
    with pytest.raises(ValueError, match=r"every setting of milco\.train_dense\.align_lrs x align_temperatures diverged"):
        dense.tune_dense(_params(align_lrs=[1.0]), pl.DataFrame(), queries, pl.DataFrame(), groups, tokenizer_dir=None)
