r"""Kolmogorov–Smirnov and Kuiper tests of calibration on the walk of cumulative differences.

Under calibration the walk C_k of :mod:`calcheck.metrics.cumulative`, divided by
σ̂ = √(Σ s_i(1 − s_i))/n, tends to a standard Brownian motion B on [0, 1].  The ``ks`` test
compares ECCE-MAD/σ̂ with the law of max|B_t|, the ``kuiper`` test ECCE-R/σ̂ with the law of the
range max B_t − min B_t.  The p-values are computed as upper-tail series — no 1 − cdf, so they
stay accurate down to 1e-300:

.. math::

   P(\max_t |B_t| \ge x) = 4 \sum_{k \ge 1} (-1)^{k-1} \bar\Phi((2k-1)x), \qquad
   P(\max_t B_t - \min_t B_t \ge x) = 8 \sum_{k \ge 1} (-1)^{k-1} k\, \bar\Phi(kx),

with Φ̄ the standard normal upper tail (the second is Feller's law of the range, 1951).  Below
x = 1 these alternating series converge slowly, and the p-value is near 1: there it is 1 − F(x)
with the rapidly converging theta series of F.

References
----------
.. [1] Arrieta-Ibarra, Gujral, Tannen, Tygert, Xu. Metrics of calibration for probabilistic
   predictions. JMLR 23(351), 2022.
.. [2] Feller. The asymptotic distribution of the range of sums of independent random
   variables. Ann. Math. Statist. 22, 1951.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.hypotests._result import TestResult

_SWITCH = 1.0


def _upper_normal(z: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr

    return np.asarray(ndtr(-z))


def max_abs_sf(x: float) -> float:
    """P(max_{0≤t≤1} |B_t| ≥ x) for a standard Brownian motion B."""
    if not x > 0:
        return 1.0
    if x < _SWITCH:
        k = np.arange(0, 60)
        h = 2 * k + 1
        cdf = 4 / math.pi * np.sum((-1.0) ** k / h * np.exp(-(h * math.pi) ** 2 / (8 * x * x)))
        return float(min(1.0, max(0.0, 1.0 - cdf)))
    k = np.arange(1, int(40 / x) + 3)
    return float(4 * np.sum((-1.0) ** (k - 1) * _upper_normal((2 * k - 1) * x)))


def range_sf(x: float) -> float:
    """P(max_t B_t − min_t B_t ≥ x) on [0, 1] (Feller's law of the range)."""
    if not x > 0:
        return 1.0
    if x < _SWITCH:
        h = np.arange(0, 60) + 0.5
        cdf = np.sum((8 / x ** 2 + 2 / (h * math.pi) ** 2)
                     * np.exp(-2 * (h * math.pi) ** 2 / (x * x)))
        return float(min(1.0, max(0.0, 1.0 - cdf)))
    k = np.arange(1, int(40 / x) + 3)
    return float(8 * np.sum((-1.0) ** (k - 1) * k * _upper_normal(k * x)))


def range_sf_array(x: FloatArray) -> FloatArray:
    """:func:`range_sf` of every element (the same two series, vectorized)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.ones_like(x)
    small = (x > 0) & (x < _SWITCH)
    if small.any():
        xs = x[small][:, None]
        h = (np.arange(0, 60) + 0.5)[None, :]
        cdf = np.sum((8 / xs ** 2 + 2 / (h * math.pi) ** 2)
                     * np.exp(-2 * (h * math.pi) ** 2 / (xs * xs)), axis=1)
        out[small] = np.clip(1.0 - cdf, 0.0, 1.0)
    large = x >= _SWITCH
    if large.any():
        xl = x[large][:, None]
        k = np.arange(1, int(40 / _SWITCH) + 3)[None, :]
        out[large] = 8 * np.sum((-1.0) ** (k - 1) * k * _upper_normal(k * xl), axis=1)
    return out


def log10_sf(test_id: str, x: float) -> float:
    """log10 of the p-value from the leading term — meaningful where the p-value itself
    underflows (x above ~38)."""
    from scipy.special import log_ndtr

    lead = math.log(4.0) + float(log_ndtr(-x)) if test_id == "ks" else \
        math.log(8.0) + float(log_ndtr(-x))
    return lead / math.log(10.0)


# with at most this many distinct scores the walk is too short for the Brownian limit (at 11
# values KS's size was 0.033 and Kuiper's 0.022 at α = 0.05; at 101 values 0.041): its null is
# simulated instead (docs/tests.md)
SIMULATE_MAX_GROUPS = 1000
# each test's statistic, named in its report (weighted rows too: a count's is the expanded file's)
STATISTIC_NAMES = {"ks": "ECCE-MAD / sigma: max |walk| against max |Brownian motion|",
                   "kuiper": "ECCE-R / sigma: range of the walk against the range of "
                             "Brownian motion"}


NULLS = ("auto", "brownian", "simulated")


def walk_test(test_id: str, scores: FloatArray, labels: IntArray, *, alpha: float = 0.05,
              ties: str = "share", trials: int = 1000, seed: int = 0,
              null: str = "auto") -> TestResult:
    """The ``ks`` or ``kuiper`` test of the predictions: against the Brownian-motion limit,
    or — when the scores take at most :data:`SIMULATE_MAX_GROUPS` distinct values — against
    ``trials`` walks of labels redrawn from the scores (seeded by ``seed``; the exact null of
    the statistic, :mod:`calcheck.hypotests.simulate`).  ``null`` forces one or the other
    (``"brownian"``: the asymptotic series, as MAPIE computes it)."""
    from calcheck.metrics._data import Prepared
    from calcheck.metrics.cumulative import walk

    prep = Prepared(scores, labels, validate=False, ties=ties)
    w = walk(prep)
    raw = w.mad if test_id == "ks" else w.range
    if w.sigma > 0:
        x = raw / w.sigma
    else:                                     # every score is 0 or 1: no variance
        x = 0.0 if raw == 0 else math.inf
    details: dict[str, Any] = {
        "ecce": raw, "sigma": w.sigma,
        "statistic_name": STATISTIC_NAMES[test_id]}
    settings: dict[str, Any]
    from calcheck.hypotests import simulate

    start, score, size = simulate.units(prep.sorted_scores)
    simulated = null == "simulated" or (null == "auto" and start.shape[0] <= SIMULATE_MAX_GROUPS)
    if simulated and w.sigma > 0:
        n = prep.sorted_scores.shape[0]
        drawn = np.concatenate([simulate.walk_extremes(d, score, size, n)[0 if test_id == "ks"
                                                                          else 1]
                                for d in simulate.chunks(score, size, trials, seed)])
        p = simulate.mc_pvalue(raw, drawn)
        details.update({"pvalue_method": "monte carlo", "distinct_values": int(start.shape[0]),
                        "min_attainable_pvalue": 1 / (trials + 1)})
        settings = {"null": "labels redrawn from the scores (y ~ Bernoulli(s)), per distinct "
                            "score", "trials": trials, "seed": seed,
                    "pvalue": f"Monte Carlo: at most {SIMULATE_MAX_GROUPS} distinct scores, "
                              "too few steps for the Brownian limit"}
    else:
        p = max_abs_sf(x) if test_id == "ks" else range_sf(x)
        details["pvalue_method"] = "brownian motion"
        settings = {"null": "standard Brownian motion on [0, 1]", "pvalue": "upper-tail series"}
        if p < 1e-300 and math.isfinite(x):
            details["log10_pvalue"] = log10_sf(test_id, x)
    return TestResult(id=test_id, statistic=x, pvalue=p, reject=p <= alpha, alpha=alpha,
                      details=details, settings=settings)


def ks(scores: FloatArray, labels: IntArray, *, alpha: float = 0.05,
       ties: str = "share", trials: int = 1000, seed: int = 0) -> TestResult:
    """Kolmogorov–Smirnov test of calibration (ECCE-MAD / σ̂)."""
    return walk_test("ks", scores, labels, alpha=alpha, ties=ties, trials=trials, seed=seed)


def kuiper(scores: FloatArray, labels: IntArray, *, alpha: float = 0.05,
           ties: str = "share", trials: int = 1000, seed: int = 0) -> TestResult:
    """Kuiper test of calibration (ECCE-R / σ̂)."""
    return walk_test("kuiper", scores, labels, alpha=alpha, ties=ties, trials=trials,
                     seed=seed)
