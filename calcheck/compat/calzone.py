"""``--compat calzone``: the metrics of DIDSR's calzone 0.1 (``calzone.metrics``).

* **Bins** (``reliability_diagram``): right-closed intervals (a, b] — equal-width edges
  ``linspace(0, 1, B + 1)`` for ECE-H/MCE-H (``ece``/``mce``), ``numpy.quantile`` of the
  scores at ``linspace(0, 1, B + 1)`` for ECE-C/MCE-C (``ace``/``mce_q``).  A score equal to
  the first edge falls in no bin: with equal widths every exact 0, with equal counts every row
  at the minimum score.  calcheck reports how many rows no bin holds.
* ECE = Σ_b n_b·|acc_b − conf_b| / Σ_b n_b over the binned rows; MCE = the largest
  |acc_b − conf_b| over all bins, an empty bin counting 0.  Default B = 10 (``num_bins``).
* Binary input is calzone's two-column ``y_proba`` = [1 − s, s] with ``class_to_calculate=1``;
  multiclass input gives its "topclass" numbers (max probability against 1[argmax = label]):
  ``ece_top``, ``mce_top``, ``ace_top``, ``mce_q``.
* ``ici`` is the "Loess ICI": statsmodels' ``lowess`` (local *linear*, frac 0.5,
  delta 0.001, no robustness iterations) of y on the unclipped scores, and the mean
  |fit − s| over the rows (calcheck's own ``ici`` is a local quadratic LOESS with span 0.75).
* **Tests**: ``spiegelhalter`` is ``spiegelhalter_z_test`` (two-sided, p = 2·(1 − Φ(|Z|)));
  ``cox`` is ``cox_regression_analysis``: logistic regression of y on logit(s) with s
  clipped to [1e-7, 1 − 1e-7], the slope and intercept with their 95 % Wald intervals and the
  Cox ICI (mean |σ(a + b·logit s) − s| on the clipped scores); calzone gives no p-value, so the
  p-value is calcheck's likelihood-ratio test of (a, b) = (0, 1) on that same fit.  ``hl`` is
  HL-C (``hosmer_lemeshow_test`` on the equal-count bins): per-bin observed and predicted
  rates clipped to [1e-7, 1 − 1e-7], empty bins removed, df = bins − 2, p = 1 − χ²cdf.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import BinStats
from calcheck.compat._common import assigned, result, top, weighted
from calcheck.hypotests._result import TestResult
from calcheck.hypotests.classical import spiegelhalter_direction
from calcheck.metrics._result import MetricResult

MODE = "calzone"
CLIP = 1e-7


def diagram(s: FloatArray, y: np.ndarray, bins: int, equal_count: bool) -> tuple[BinStats, int]:
    """calzone's bins (a, b] and the number of rows that fall in none."""
    grid = np.linspace(0, 1, bins + 1)
    edges = np.quantile(s, grid) if equal_count else grid
    ids = np.searchsorted(edges, s, side="left") - 1      # (edges[i], edges[i+1]] → i
    keep = (ids >= 0) & (ids < bins)
    st = assigned(np.where(keep, ids, 0), s, y, bins, edges[:-1], edges[1:],
                  "quantile" if equal_count else "uniform", keep=keep)
    return st, int(s.shape[0] - keep.sum())


def _metric(mid: str, s: FloatArray, y: np.ndarray, bins: int, equal_count: bool,
            norm: str, name: str) -> MetricResult:
    s = np.asarray(s, dtype=np.float64)
    st, dropped = diagram(s, y, bins, equal_count)
    value = weighted(st) if norm == "l1" else float(st.gap.max(initial=0.0))
    return result(mid, value, MODE, {"binning": "quantile" if equal_count else "uniform",
                                     "bins": bins, "norm": norm, "closed": "right",
                                     "reference": f"calzone {name}"},
                  int(s.shape[0]), bins=st, extra={"rows_in_no_bin": dropped})


def ece(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _metric("ece", s, np.asarray(y), bins, False, "l1", "ECE-H")


def mce(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _metric("mce", s, np.asarray(y), bins, False, "max", "MCE-H")


def ace(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _metric("ace", s, np.asarray(y), bins, True, "l1", "ECE-C")


def mce_q(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _metric("mce_q", s, np.asarray(y), bins, True, "max", "MCE-C")


def ici(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    """calzone's "Loess ICI": statsmodels' lowess (local linear, frac 0.5, delta 0.001, no
    robustness iterations) of y on the unclipped scores; the mean |fit − s| over the rows."""
    from calcheck.compat.lowess import lowess

    xs, fit = lowess(np.asarray(y, dtype=np.float64), np.asarray(s, dtype=np.float64),
                     frac=0.5, delta=0.001)
    return result("ici", float(np.mean(np.abs(xs - fit))), MODE,
                  {"smoother": "statsmodels lowess, degree 1", "frac": 0.5, "delta": 0.001,
                   "iterations": 0, "reference": "calzone.metrics.lowess_regression_analysis"},
                  int(xs.shape[0]))


def ece_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _metric("ece_top", *top(probs, labels), bins, False, "l1", "ECE-H topclass")


def mce_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _metric("mce_top", *top(probs, labels), bins, False, "max", "MCE-H topclass")


def ace_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _metric("ace_top", *top(probs, labels), bins, True, "l1", "ECE-C topclass")


def mce_q_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _metric("mce_q", *top(probs, labels), bins, True, "max", "MCE-C topclass")


# -- tests ------------------------------------------------------------------------------------


def spiegelhalter(s: FloatArray, y: IntArray, alpha: float,
                  bins: int = 10) -> dict[str, TestResult]:
    from scipy.stats import norm

    yf = np.asarray(y, dtype=np.float64)
    z = float(np.sum((yf - s) * (1 - 2 * s)) / np.sqrt(np.sum((1 - 2 * s) ** 2 * s * (1 - s))))
    p = float(2 * (1 - norm.cdf(abs(z))))
    ms, my = float(np.mean(s)), float(np.mean(yf))
    direction = spiegelhalter_direction(z)
    return {"spiegelhalter": TestResult(
        id="spiegelhalter", statistic=z, pvalue=p, reject=p <= alpha, alpha=alpha,
        details={"mean_score": ms, "mean_label": my, "direction": direction},
        settings={"compat": MODE, "alternative": "two-sided: p = 2(1 - Phi(|Z|))",
                  "reference": "calzone.metrics.spiegelhalter_z_test"})}


def cox(s: FloatArray, y: IntArray, alpha: float, bins: int = 10) -> dict[str, TestResult]:
    from scipy.stats import norm

    from calcheck.hypotests.classical import cox_result, logistic_sums, newton_logistic

    p = np.clip(np.asarray(s, dtype=np.float64), CLIP, 1 - CLIP)
    order = np.lexsort((y, p))
    x = np.log(p / (1 - p))[order]
    yf = np.asarray(y, dtype=np.float64)[order]
    a, b, ll_fit = newton_logistic(lambda beta: logistic_sums(x, yf, beta))
    sums = logistic_sums(x, yf, np.array([a, b]))
    cov = np.linalg.inv(np.array([[sums[3], sums[4]], [sums[4], sums[5]]]))
    z = float(norm.ppf(0.975))
    se_a, se_b = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1])
    ll_null = float(logistic_sums(x, yf, np.array([0.0, 1.0]))[0])
    ici = float(np.mean(np.abs(1 / (1 + np.exp(-(b * np.log(p / (1 - p)) + a))) - p)))
    res = cox_result(a, b, ll_fit, ll_null, alpha=alpha, settings={
        "clip": CLIP, "compat": MODE, "intervals": "95% Wald (statsmodels conf_int)",
        "pvalue": "calcheck's likelihood-ratio test of (0, 1); calzone reports none",
        "reference": "calzone.metrics.cox_regression_analysis"})
    details: dict[str, Any] = {**res.details,
                               "intercept_ci": [a - z * se_a, a + z * se_a],
                               "slope_ci": [b - z * se_b, b + z * se_b], "ici": ici}
    return {"cox": TestResult(id="cox", statistic=res.statistic, pvalue=res.pvalue,
                              reject=res.reject, alpha=alpha, details=details,
                              settings=res.settings)}


def hosmer_lemeshow(s: FloatArray, y: IntArray, alpha: float,
                    bins: int = 10) -> dict[str, TestResult]:
    from scipy.stats import chi2

    st, dropped = diagram(np.asarray(s, dtype=np.float64), np.asarray(y), bins, True)
    keep = st.count > 0
    n_b = st.count[keep].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.clip(st.sum_label[keep] / n_b, CLIP, 1 - CLIP)
        conf = np.clip(st.sum_score[keep] / n_b, CLIP, 1 - CLIP)
    observed, expected = rel * n_b, conf * n_b
    stat = float(np.sum((observed - expected) ** 2 / (expected * (1 - expected / n_b))))
    df = int(keep.sum()) - 2
    p = float(1 - chi2.cdf(stat, df))
    return {"hosmer_lemeshow": TestResult(
        id="hosmer_lemeshow", statistic=stat, pvalue=p, reject=bool(p <= alpha), alpha=alpha,
        details={"df": df, "groups": int(keep.sum()), "rows_in_no_bin": dropped,
                 "table": [{"n": int(c), "observed": float(o), "expected": float(e)}
                           for c, o, e in zip(n_b, observed, expected)]},
        settings={"compat": MODE, "groups": bins, "grouping": "calzone equal-count (a, b]",
                  "clip": CLIP, "reference": "calzone.metrics.hosmer_lemeshow_test (HL-C)"})}
