"""``--compat pycaleva``: ``CalibrationEvaluator`` of pycaleva 0.8 (in-sample,
``outsample=False``).

* **Groups** ("deciles of risk", ``group_data``): the rows sorted by score (numpy's default
  quicksort, as pandas' ``sort_values``), then ``pandas.qcut(score, G)``: edges are
  ``numpy.quantile`` of the scores at ``linspace(0, 1, G + 1)`` — each level not exactly
  g/G nudged up by one ulp, as pandas does — and the groups are right-closed with the minimum
  in the first, so tied scores stay together.  When two edges coincide, qcut fails and
  pycaleva groups the *ranks* instead (``rank(method="first")``): equal-size groups by position
  in that sorted order, tie groups split.
* ``hl`` (``hosmerlemeshow``): C = Σ_g (O_g − E_g)² / (n_g·p̄_g·(1 − p̄_g)) over the
  non-empty groups, df = G − 2 (in-sample), p = 1 − χ²cdf(C, df).
* ``spiegelhalter`` (``z_test``): two-sided, p = 2·Φ(−|Z|).
* ``ace`` / ``mce_q`` (the ``ace`` / ``mce`` properties): Σ_g |p̄_g − ȳ_g| / G and the largest
  |p̄_g − ȳ_g| over those groups — an unweighted mean, not calcheck's row-weighted ACE.
* ``brier``: Σ (y − s)² / n.
* pycaleva refuses data with at most one event or at most one non-event, and G outside
  [2, n): so does this mode.  Default G = 10 (``n_groups``).
"""

from __future__ import annotations

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import BinStats
from calcheck.compat._common import assigned, result
from calcheck.errors import InputError
from calcheck.hypotests._result import TestResult
from calcheck.hypotests.classical import spiegelhalter_direction
from calcheck.metrics._result import MetricResult

MODE = "pycaleva"
GROUPS = 10


def _check(s: FloatArray, y: np.ndarray, groups: int) -> None:
    events = int(np.sum(y))
    if events <= 1 or events >= s.shape[0] - 1:
        raise InputError(f"--compat pycaleva: pycaleva itself refuses this input ({events} "
                         f"events in {s.shape[0]} rows: it needs at least 2 events and 2 "
                         "non-events)")
    if not 2 <= groups < s.shape[0]:
        raise InputError(f"--compat pycaleva: pycaleva needs 2 <= groups < n, got {groups} "
                         f"groups for {s.shape[0]} rows")


def levels(groups: int) -> FloatArray:
    """qcut's quantile levels: linspace(0, 1, G + 1), nudged up where G·q ≠ g."""
    q = np.linspace(0, 1, groups + 1)
    return np.where(groups * q != np.arange(groups + 1), np.nextafter(q, 1), q)


def qcut_ids(x: FloatArray, groups: int) -> IntArray | None:
    """``pandas.qcut(x, groups)`` codes, or None where its edges are not unique."""
    edges = np.quantile(x, levels(groups))
    if np.unique(edges).shape[0] < edges.shape[0]:
        return None
    ids = np.searchsorted(edges, x, side="left")
    ids[x == edges[0]] = 1
    return np.asarray(ids - 1, dtype=np.int64)


def deciles(s: FloatArray, y: np.ndarray, groups: int) -> tuple[BinStats, str]:
    """pycaleva's groups as a bin table, and how they were formed."""
    _check(s, y, groups)
    order = np.argsort(s)
    ss, ys = s[order], y[order]
    ids = qcut_ids(ss, groups)
    how = "qcut of the scores"
    if ids is None:
        ids = qcut_ids(np.arange(1, ss.shape[0] + 1, dtype=np.float64), groups)
        how = "qcut of the ranks (tied edges)"
        assert ids is not None
    count = np.bincount(ids, minlength=groups)
    bounds = np.concatenate([[0], np.cumsum(count)])
    lower = np.where(count > 0, ss[np.minimum(bounds[:-1], ss.shape[0] - 1)], np.nan)
    upper = np.where(count > 0, ss[np.maximum(bounds[1:] - 1, 0)], np.nan)
    return assigned(ids, ss, ys, groups, lower, upper, "quantile"), how


def _group_error(mid: str, s: FloatArray, y: IntArray, groups: int, how_: str) -> MetricResult:
    st, how = deciles(np.asarray(s, dtype=np.float64), np.asarray(y), groups)
    gap = st.gap[st.count > 0]
    value = float(np.sum(gap)) / groups if how_ == "mean" else float(np.max(gap))
    return result(mid, value, MODE, {"binning": "quantile", "groups": groups, "grouping": how,
                                     "average": "unweighted over groups" if how_ == "mean"
                                     else "max", "reference": "pycaleva CalibrationEvaluator."
                                     + ("ace" if how_ == "mean" else "mce")},
                  len(s), bins=st)


def ace(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _group_error("ace", s, y, bins, "mean")


def mce_q(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _group_error("mce_q", s, y, bins, "max")


def brier(s: FloatArray, y: IntArray, bins: int = 0) -> MetricResult:
    yf = np.asarray(y, dtype=np.float64)
    return result("brier", float(np.square(yf - s).sum() / s.shape[0]), MODE,
                  {"reference": "pycaleva.metrics.brier"}, len(s))


# -- tests ------------------------------------------------------------------------------------


def hosmer_lemeshow(s: FloatArray, y: IntArray, alpha: float,
                    groups: int = GROUPS) -> dict[str, TestResult]:
    from scipy.stats import chi2

    st, how = deciles(np.asarray(s, dtype=np.float64), np.asarray(y), groups)
    keep = st.count > 0
    n_g = st.count[keep].astype(np.float64)
    obs, exp = st.sum_label[keep], st.sum_score[keep]
    mean = exp / n_g
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = (obs - exp) ** 2 / (n_g * mean * (1 - mean))
    stat = float(np.nansum(terms))
    df = groups - 2
    p = float(1 - chi2.cdf(stat, df))
    return {"hosmer_lemeshow": TestResult(
        id="hosmer_lemeshow", statistic=stat, pvalue=p, reject=bool(p <= alpha), alpha=alpha,
        details={"df": df, "groups": int(keep.sum()),
                 "table": [{"n": int(c), "observed": float(o), "expected": float(e)}
                           for c, o, e in zip(n_g, obs, exp)]},
        settings={"compat": MODE, "groups": groups, "grouping": how, "sample": "in-sample",
                  "reference": "pycaleva CalibrationEvaluator.hosmerlemeshow"})}


def spiegelhalter(s: FloatArray, y: IntArray, alpha: float,
                  groups: int = GROUPS) -> dict[str, TestResult]:
    from scipy.stats import norm

    yf = np.asarray(y, dtype=np.float64)
    _check(s, yf, groups)            # the evaluator groups the rows first
    z = float(((yf - s) * (1 - 2 * s)).sum() / np.sqrt(((1 - 2 * s) ** 2 * s * (1 - s)).sum()))
    p = float(2 * norm.cdf(-abs(z)))
    ms, my = float(np.mean(s)), float(np.mean(yf))
    direction = spiegelhalter_direction(z)
    return {"spiegelhalter": TestResult(
        id="spiegelhalter", statistic=z, pvalue=p, reject=p <= alpha, alpha=alpha,
        details={"mean_score": ms, "mean_label": my, "direction": direction},
        settings={"compat": MODE, "alternative": "two-sided: p = 2 Phi(-|Z|)",
                  "reference": "pycaleva CalibrationEvaluator.z_test"})}
