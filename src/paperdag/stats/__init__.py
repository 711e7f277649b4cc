"""Shared statistics for replicate-based claims: t intervals, paired differences, minimum detectable differences,
bootstrap intervals. numpy + scipy only; knows no method and no engine.

Every function returns plain Python values (floats, ints, lists, None), ready for a metrics JSON:

    {"mean", "std", "ci95_low", "ci95_high", "n", "values"}     (+ "mdd" for `paired`)

`std` is always the sample standard deviation (ddof = 1) of the values the interval is about (the replicates, or
the per-pair differences); with a single value it, and the interval ends, are None. Nothing is rounded.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["bootstrap", "interval", "mdd", "paired"]


def _array(values: Sequence[float] | np.ndarray, what: str = "values") -> np.ndarray:
    a = np.asarray(values, dtype=float).ravel()
    if a.size == 0:
        raise ValueError(f"{what}: need at least one value, got none")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: every value must be finite, got {a.tolist()}")
    return a


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def _result(a: np.ndarray, mean: float, low: float | None, high: float | None) -> dict[str, object]:
    n = int(a.size)
    std = float(np.std(a, ddof=1)) if n > 1 else None
    return {"mean": float(mean), "std": std, "ci95_low": None if low is None else float(low),
            "ci95_high": None if high is None else float(high), "n": n, "values": [float(v) for v in a]}


def interval(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> dict[str, object]:
    """Student-t interval of the mean over replicates: mean +- t_{(1 + confidence) / 2, n - 1} * std / sqrt(n).

    With n == 1, std and the interval ends are None (one run says nothing about its spread)."""
    _check_confidence(confidence)
    a = _array(values)
    mean = float(np.mean(a))
    if a.size < 2:
        return _result(a, mean, None, None)
    from scipy import stats as _st  # scipy.stats costs ~1 s to import: only where an interval is computed

    half = float(_st.t.ppf((1.0 + confidence) / 2.0, a.size - 1)) * float(np.std(a, ddof=1)) / math.sqrt(a.size)
    return _result(a, mean, mean - half, mean + half)


def mdd(std: float | None, n: int, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Minimum detectable difference of a paired (one-sample) t design with n pairs whose differences have sample
    std `std`, two-sided level `alpha`, power `power`: (t_{1 - alpha/2, n-1} + t_{power, n-1}) * std / sqrt(n).

    None when n < 2 or std is None (no spread estimate)."""
    if std is None or n < 2:
        return None
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must lie strictly between 0 and 1, got alpha={alpha}, power={power}")
    if not math.isfinite(std) or std < 0:
        raise ValueError(f"std must be a finite non-negative number, got {std}")
    df = n - 1
    from scipy import stats as _st

    return float((_st.t.ppf(1.0 - alpha / 2.0, df) + _st.t.ppf(power, df)) * std / math.sqrt(n))


def paired(method: Sequence[float] | np.ndarray, baseline: Sequence[float] | np.ndarray,
           confidence: float = 0.95) -> dict[str, object]:
    """The interval of the per-pair differences method - baseline (aligned: same replicate seeds / same items),
    plus `mdd`, the smallest difference this paired design detects at alpha 0.05 (two-sided) and power 0.8."""
    m, b = _array(method, "method"), _array(baseline, "baseline")
    if m.size != b.size:
        raise ValueError(f"paired: method has {m.size} values but baseline has {b.size}; pairs must be aligned")
    out = interval(m - b, confidence)
    out["mdd"] = mdd(out["std"], out["n"])
    return out


def bootstrap(values: Sequence[float] | np.ndarray, statistic: Callable[..., float] = np.mean, confidence: float = 0.95,
              n_resamples: int = 2000, seed: int = 0) -> dict[str, object]:
    """A bootstrap interval of `statistic` (scipy.stats.bootstrap, BCa; percentile where BCa is degenerate, e.g.
    all values equal), for statistics that are not a mean. `mean` holds the statistic of the values themselves.

    With n == 1, std and the interval ends are None."""
    _check_confidence(confidence)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    a = _array(values)
    point = float(statistic(a))
    if a.size < 2:
        return _result(a, point, None, None)
    from scipy import stats as _st

    ends: tuple[float, float] | None = None
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DegenerateDataWarning, RuntimeWarning: handled by the fallback below
            try:
                res = _st.bootstrap((a,), statistic, confidence_level=confidence, n_resamples=n_resamples,
                                    method=method, rng=np.random.default_rng(seed))
            except ValueError:  # too few distinct values for this method
                continue
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            ends = (low, high)
            break
    if ends is None:  # every resample gives the same statistic (e.g. constant values): a zero-width interval
        ends = (point, point)
    return _result(a, point, *ends)
