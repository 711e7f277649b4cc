"""paperdag.stats against hand-computed values: t intervals from table quantiles, a paired difference with a known
answer, the minimum detectable difference, bootstrap intervals on known distributions, and the errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from paperdag.stats import bootstrap, interval, mdd, paired

# Student-t quantiles from a printed table (not from scipy): t_{0.975, df} and t_{0.8, df}
T975 = {2: 4.302652730, 4: 2.776445105}
T80 = {2: 1.060660172, 4: 0.940964577}
KEYS = {"mean", "std", "ci95_low", "ci95_high", "n", "values"}


def test_interval_of_one_to_five_is_the_hand_computed_t_interval() -> None:
    """[1..5]: mean 3, sample std sqrt(2.5), half-width t_{.975,4} * sqrt(2.5) / sqrt(5) = 1.96324."""
    r = interval([1, 2, 3, 4, 5])
    assert set(r) == KEYS
    half = T975[4] * math.sqrt(2.5) / math.sqrt(5)
    assert r["mean"] == 3.0 and r["n"] == 5
    assert r["std"] == pytest.approx(math.sqrt(2.5), rel=1e-12)
    assert r["ci95_low"] == pytest.approx(3.0 - half, rel=1e-9) and r["ci95_high"] == pytest.approx(3.0 + half, rel=1e-9)
    assert r["ci95_low"] == pytest.approx(1.036757, abs=1e-6)
    assert r["values"] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_interval_confidence_changes_the_width_not_the_mean() -> None:
    """A 50 % interval of three values uses t_{0.75, 2} = 0.816497 (table)."""
    r = interval([2.0, 4.0, 9.0], confidence=0.5)
    std = float(np.std([2.0, 4.0, 9.0], ddof=1))
    assert r["mean"] == 5.0
    assert r["ci95_high"] - r["mean"] == pytest.approx(0.816496581 * std / math.sqrt(3), rel=1e-8)


def test_interval_of_one_value_has_no_spread_and_constant_values_a_zero_width_interval() -> None:
    one = interval([0.7])
    assert one == {"mean": 0.7, "std": None, "ci95_low": None, "ci95_high": None, "n": 1, "values": [0.7]}
    flat = interval([2.5, 2.5, 2.5])
    assert (flat["std"], flat["ci95_low"], flat["ci95_high"]) == (0.0, 2.5, 2.5)


def test_interval_accepts_bools_and_numpy_and_returns_plain_python_floats() -> None:
    """Bools count as 1 / 0; every float is a Python float, so the dict is JSON-serialisable as is."""
    r = interval(np.array([True, False, True, True]))
    assert r["mean"] == 0.75
    for key in ("mean", "std", "ci95_low", "ci95_high"):
        assert type(r[key]) is float
    assert type(r["n"]) is int and all(type(v) is float for v in r["values"])
    assert json.loads(json.dumps(r)) == r


def test_paired_difference_has_the_known_answer_and_mdd() -> None:
    """method [3, 5, 7] vs baseline [1, 2, 4]: differences [2, 3, 3], mean 8/3, std 1/sqrt(3), half-width
    t_{.975,2} / 3 = 1.434218; mdd = (t_{.975,2} + t_{.8,2}) / 3 = 1.787771."""
    r = paired([3, 5, 7], [1, 2, 4])
    assert set(r) == KEYS | {"mdd"}
    assert r["values"] == [2.0, 3.0, 3.0]
    assert r["mean"] == pytest.approx(8 / 3, rel=1e-12)
    assert r["std"] == pytest.approx(1 / math.sqrt(3), rel=1e-12)
    assert r["ci95_low"] == pytest.approx(8 / 3 - T975[2] / 3, rel=1e-9)
    assert r["ci95_high"] == pytest.approx(4.100884, abs=1e-6)
    assert r["mdd"] == pytest.approx((T975[2] + T80[2]) / 3, rel=1e-9)
    assert r["mdd"] == pytest.approx(1.787771, abs=1e-6)


def test_paired_is_not_the_difference_of_two_independent_intervals() -> None:
    """A constant shift between method and baseline is detected exactly by the paired design (zero-width interval
    around the shift), although each arm alone is wildly spread."""
    base = [10.0, 50.0, 90.0]
    r = paired([b + 1.0 for b in base], base)
    assert (r["mean"], r["ci95_low"], r["ci95_high"], r["mdd"]) == (1.0, 1.0, 1.0, 0.0)
    assert interval(base)["ci95_low"] < 0 < 1 < interval(base)["ci95_high"]


def test_paired_length_mismatch_names_both_lengths_and_one_pair_has_no_mdd() -> None:
    with pytest.raises(ValueError, match=r"3 .*2|2 .*3"):
        paired([1, 2, 3], [1, 2])
    assert paired([2.0], [1.0])["mdd"] is None


def test_mdd_matches_the_formula_and_shrinks_with_n() -> None:
    assert mdd(2.0, 5) == pytest.approx((T975[4] + T80[4]) * 2.0 / math.sqrt(5), rel=1e-9)
    assert mdd(2.0, 5) > mdd(2.0, 50) > 0
    assert mdd(1.0, 5, power=0.9) > mdd(1.0, 5, power=0.8)
    assert mdd(None, 5) is None and mdd(1.0, 1) is None
    assert type(mdd(1.0, 3)) is float


def test_bootstrap_mean_of_a_normal_sample_matches_the_t_interval() -> None:
    """400 draws of N(10, 2^2): the bootstrap interval of the mean is ~2 * 1.96 * 2 / 20 = 0.39 wide and agrees with
    the t interval to within a few hundredths."""
    x = np.random.default_rng(7).normal(10.0, 2.0, 400)
    b, t = bootstrap(x), interval(x)
    assert set(b) == KEYS
    assert b["ci95_high"] - b["ci95_low"] == pytest.approx(0.392, rel=0.15)
    assert abs(b["ci95_low"] - t["ci95_low"]) < 0.05 and abs(b["ci95_high"] - t["ci95_high"]) < 0.05
    assert b["mean"] == pytest.approx(t["mean"], rel=1e-12) and b["n"] == 400


def test_bootstrap_covers_the_true_mean_about_95_percent_of_the_time() -> None:
    """Over 200 samples of 40 draws of N(10, 2^2), the 95 % bootstrap interval covers 10 in 88-99 % of them (a
    90 % interval: clearly less often)."""
    rng = np.random.default_rng(0)
    samples = [rng.normal(10.0, 2.0, 40) for _ in range(200)]
    cover = [bootstrap(x, n_resamples=500, seed=i) for i, x in enumerate(samples)]
    rate = np.mean([r["ci95_low"] < 10.0 < r["ci95_high"] for r in cover])
    rate90 = np.mean([(r := bootstrap(x, confidence=0.9, n_resamples=500, seed=i))["ci95_low"] < 10.0 < r["ci95_high"]
                      for i, x in enumerate(samples)])
    assert 0.88 <= rate <= 0.99
    assert rate90 < rate


def test_bootstrap_median_of_an_exponential_sample_covers_log_two() -> None:
    """The median of Exp(1) is ln 2; a statistic that is not a mean, seeded: the same seed gives the same interval."""
    x = np.random.default_rng(3).exponential(1.0, 500)
    b = bootstrap(x, statistic=np.median, seed=11)
    assert b["ci95_low"] < math.log(2) < b["ci95_high"]
    assert b["mean"] == float(np.median(x))
    assert bootstrap(x, statistic=np.median, seed=11) == b
    assert bootstrap(x, statistic=np.median, seed=12)["ci95_low"] != b["ci95_low"]


def test_bootstrap_degenerate_and_single_values() -> None:
    """Constant values (BCa is undefined) fall back to a zero-width interval at the value; one value has no interval."""
    flat = bootstrap([4.0, 4.0, 4.0, 4.0])
    assert (flat["mean"], flat["ci95_low"], flat["ci95_high"], flat["std"]) == (4.0, 4.0, 4.0, 0.0)
    one = bootstrap([4.0])
    assert (one["std"], one["ci95_low"], one["ci95_high"], one["n"]) == (None, None, None, 1)
    json.dumps(bootstrap([1.0, 2.0, 2.0, 5.0]))


@pytest.mark.parametrize("call", [lambda: interval([]), lambda: interval([1.0, float("nan")]), lambda: paired([], []),
                                  lambda: interval([1.0, 2.0], confidence=1.0), lambda: bootstrap([]),
                                  lambda: bootstrap([1.0, 2.0], n_resamples=0), lambda: mdd(-1.0, 3),
                                  lambda: mdd(1.0, 3, alpha=0.0)])
def test_invalid_inputs_raise_value_error(call) -> None:
    with pytest.raises(ValueError):
        call()


def test_importing_the_statistics_block_does_not_import_scipy() -> None:
    """A stage module that imports paperdag.stats (ckplug's) does not pay scipy.stats's ~1 s import until it computes
    an interval."""
    import subprocess
    import sys

    code = "import sys, paperdag.stats; print('scipy.stats' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
