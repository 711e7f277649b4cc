"""ConR / ParR / MR and the adaptive-set accuracy from prediction tables."""

from __future__ import annotations

import polars as pl
import pytest

from paperdag.methods.ckplug import is_monotone, memory_ratio, memory_recall_table, mr_sweep, recall, seconds_per_token


def test_recall_normalises_and_requires_word_boundaries() -> None:
    """'The Cat.' contains 'cat'; 'Catalan' does not contain 'cat'."""
    assert recall(["The Cat.", "Catalan", "a dog"], ["cat", "cat", "cat"]) == pytest.approx(100 / 3)


def test_memory_ratio_is_par_share_and_50_without_either() -> None:
    """MR = ParR / (ParR + ConR) in percent; 50 when neither answer is produced."""
    assert memory_ratio(30.0, 10.0) == 75.0
    assert memory_ratio(0.0, 0.0) == 50.0


def test_table_has_one_row_per_method_and_alpha() -> None:
    """Two CK-PLUG alphas, RAG and no-RAG: ConR / ParR / MR from the counterfactual rows (and on the items no-RAG
    recalls), acc per noise level and group from the adaptive rows."""
    rows = []
    methods = (("no-rag", None, ["red", "grey"]), ("rag", None, ["blue", "red"]), ("ck-plug", 0.0, ["blue", "tennis"]),
               ("ck-plug", 1.0, ["red", "red"]))
    for method, alpha, preds in methods:
        rows += [{"set": "counterfactual", "item": i, "method": method, "alpha": alpha, "prediction": p, "context_answer": "blue",
                  "memory_answer": "red", "gold": None, "group": "counterfactual", "noise": None} for i, p in enumerate(preds)]
        rows.append({"set": "adaptive", "item": 0, "method": method, "alpha": alpha, "prediction": preds[0], "context_answer": "blue",
                     "memory_answer": "red", "gold": "red", "group": "noisy_known", "noise": 0.5})
    table = memory_recall_table(pl.DataFrame(rows), [])
    by = {(r["method"], r["alpha"]): r for r in table}
    assert (by[("rag", None)]["ConR"], by[("rag", None)]["ParR"], by[("rag", None)]["MR"]) == (50.0, 50.0, 50.0)
    assert by[("rag", None)]["MR_recalled"] == 0.0 and by[("rag", None)]["recalled_items"] == 1  # item 0: no-RAG says red
    assert by[("ck-plug", 0.0)]["MR"] == 0.0 and by[("ck-plug", 1.0)]["MR"] == 100.0
    # MR does not see an answer that is neither the context's nor memory's ("tennis"): `neither` does
    assert by[("ck-plug", 0.0)]["ConR"] == 50.0 and by[("ck-plug", 0.0)]["neither"] == 50.0
    assert by[("rag", None)]["neither"] == 0.0 and by[("no-rag", None)]["neither"] == 50.0
    assert by[("ck-plug", 1.0)]["acc_by_noise"] == {"0.5": {"acc": 100.0, "by_group": {"noisy_known": 100.0}}}
    assert by[("ck-plug", 0.0)]["acc_by_noise"]["0.5"]["acc"] == 0.0


def test_monotone_needs_every_step_non_decreasing_and_a_rise() -> None:
    """A dip anywhere breaks monotonicity; a flat sweep (no control) is not monotone; ties on the way are fine."""
    assert is_monotone([5.0, 20.0, 20.0, 60.0])
    assert not is_monotone([5.0, 30.0, 29.0, 60.0])
    assert not is_monotone([40.0, 40.0, 40.0])
    assert not is_monotone([60.0, 5.0])


def test_mr_sweep_orders_by_alpha_and_needs_both_ends() -> None:
    table = [{"method": "ck-plug", "alpha": 1.0, "MR": 90.0}, {"method": "rag", "alpha": None, "MR": 30.0},
             {"method": "ck-plug", "alpha": 0.0, "MR": 10.0}]
    assert mr_sweep(table) == ([0.0, 1.0], [10.0, 90.0])
    with pytest.raises(ValueError, match="must span alpha 0.0 to 1.0"):  # params.yaml's alphas are checked at load
        mr_sweep(table[:2])


def test_seconds_per_token_pools_every_run_of_the_method() -> None:
    runs = [{"method": "ck-plug", "seconds": 2.0, "new_tokens": 10}, {"method": "ck-plug", "seconds": 4.0, "new_tokens": 20},
            {"method": "rag", "seconds": 1.0, "new_tokens": 10}]
    assert seconds_per_token(runs, "ck-plug") == 0.2 and seconds_per_token(runs, "rag") == 0.1
    with pytest.raises(ValueError, match="cad"):
        seconds_per_token(runs, "cad")
