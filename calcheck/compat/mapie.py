"""``--compat mapie``: the calibration metrics and tests of MAPIE 1.6 (``mapie.metrics``).

* **Bins** (``expected_calibration_error``): ``num_bins`` edges — ``linspace(0, 1, B)`` for
  ``split_strategy="uniform"`` (``ece``), ``numpy.percentile(s, linspace(0, 1, B)·100)`` for
  ``"quantile"`` (``ace``) — and a row goes to ``digitize(s, edges, right=True)``: bin 0 holds
  only the scores ≤ the first edge (s = 0, or the minimum), bins 1 … B − 1 are the B − 1
  right-closed intervals between edges.  ECE = Σ_b n_b·|acc_b − conf_b| / Σ_b n_b.
  Default B = 50 (the library's ``num_bins``).
* **Multiclass**: ``ece``/``ace`` are the confidence ECE (max probability against 1[argmax =
  label], MAPIE's ``y_true`` being the correctness); ``ece_top``/``ace_top`` are
  ``top_label_ece`` (Gupta & Ramdas): one ECE per *predicted* class on its rows — is the
  label that class? — averaged over the predicted classes; ``sce``/``ace_cw`` are
  ``classwise=True``: one-vs-rest ECE per class, averaged over all K classes.
* **Tests**: ``spiegelhalter`` is ``spiegelhalter_p_value`` — one-sided, p = 1 − Φ(Z);
  ``ks``/``kuiper`` are ``kolmogorov_smirnov_p_value``/``kuiper_p_value``: the scores are
  jittered as s·(1 + 10⁻⁸·ε), ε standard normal from ``RandomState(1)`` in row order, the rows
  sorted by the jittered score (numpy's default quicksort), C_k = Σ_{i≤k}(y_i − s̃_i)/n; the
  statistic max|C| (KS) or max C − min C (Kuiper) over σ = √(Σ s(1 − s))/n of the unjittered
  scores; p = 1 − F(statistic) with MAPIE's truncated series for F (which stops at 10⁻⁸, so
  its p-values bottom out near 10⁻⁸ and can come out slightly negative).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import BinStats
from calcheck.compat._common import assigned, result, top, weighted
from calcheck.hypotests._result import TestResult
from calcheck.hypotests.classical import spiegelhalter_direction
from calcheck.metrics._result import MetricResult

MODE = "mapie"
EPSILON = 1e-8                 # MAPIE's machine-precision constant in its cdf series
JITTER = 1e-8


def calc_bins(s: FloatArray, y: np.ndarray, bins: int, strategy: str) -> BinStats:
    """``_calc_bins``: B edges, ``digitize(right=True)``, rows past the last edge in no bin."""
    if strategy == "quantile":
        edges = np.percentile(s, np.linspace(0, 1, bins) * 100)
    else:
        edges = np.linspace(0.0, 1.0, bins)
    ids = np.digitize(s, edges, right=True)
    lower = np.concatenate([[edges[0]], edges[:-1]])
    return assigned(ids, s, y, bins, lower, edges, strategy, keep=ids < bins)


def _ece(s: FloatArray, y: np.ndarray, bins: int, strategy: str) -> tuple[float, BinStats]:
    st = calc_bins(np.asarray(s, dtype=np.float64), y, bins, strategy)
    return weighted(st), st


def _settings(strategy: str, bins: int, function: str) -> dict[str, Any]:
    return {"binning": strategy, "bins": bins, "edges": bins,
            "reference": f"mapie.metrics.calibration.{function} (MAPIE 1.6)"}


def ece(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    value, st = _ece(s, np.asarray(y), bins, "uniform")
    return result("ece", value, MODE, _settings("uniform", bins, "expected_calibration_error"),
                  len(s), bins=st)


def ace(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    value, st = _ece(s, np.asarray(y), bins, "quantile")
    return result("ace", value, MODE, _settings("quantile", bins, "expected_calibration_error"),
                  len(s), bins=st)


def _confidence(mid: str, probs: FloatArray, labels: IntArray, bins: int,
                strategy: str) -> MetricResult:
    conf, correct = top(probs, labels)
    value, st = _ece(conf, correct, bins, strategy)
    return result(mid, value, MODE, {**_settings(strategy, bins, "expected_calibration_error"),
                                     "view": "confidence"}, len(conf), bins=st)


def ece_confidence(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _confidence("ece", probs, labels, bins, "uniform")


def ace_confidence(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _confidence("ace", probs, labels, bins, "quantile")


def _top_label(mid: str, probs: FloatArray, labels: IntArray, bins: int,
               strategy: str) -> MetricResult:
    pred = np.argmax(probs, axis=1)
    conf = probs[np.arange(probs.shape[0]), pred]
    per: list[dict[str, Any]] = []
    for c in np.unique(pred):
        rows = pred == c
        value, _ = _ece(conf[rows], (labels[rows] == c).astype(np.int64), bins, strategy)
        per.append({"class": int(c), "n": int(rows.sum()), "error": value})
    total = 0.0
    for p in per:                            # summed in class order, as the library does
        total += p["error"]
    return result(mid, total / len(per), MODE,
                  {**_settings(strategy, bins, "top_label_ece"), "view": "top-label",
                   "average": "over predicted classes"}, int(probs.shape[0]),
                  extra={"per_class": per})


def ece_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _top_label("ece_top", probs, labels, bins, "uniform")


def ace_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _top_label("ace_top", probs, labels, bins, "quantile")


def _classwise(mid: str, probs: FloatArray, labels: IntArray, bins: int,
               strategy: str) -> MetricResult:
    k = probs.shape[1]
    per = []
    total = 0.0
    for c in range(k):
        value, _ = _ece(probs[:, c], (labels == c).astype(np.int64), bins, strategy)
        per.append({"class": c, "error": value})
        total += value
    return result(mid, total / k, MODE,
                  {**_settings(strategy, bins, "expected_calibration_error"),
                   "classwise": True}, int(probs.shape[0]), extra={"per_class": per})


def sce(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _classwise("sce", probs, labels, bins, "uniform")


def ace_cw(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _classwise("ace_cw", probs, labels, bins, "quantile")


# -- tests ------------------------------------------------------------------------------------


def spiegelhalter(s: FloatArray, y: IntArray, alpha: float,
                  bins: int = 0) -> dict[str, TestResult]:
    from scipy.stats import norm

    yf = np.asarray(y, dtype=np.float64)
    z = float(np.sum((yf - s) * (1 - 2 * s)) / np.sqrt(np.sum((1 - 2 * s) ** 2 * s * (1 - s))))
    p = float(1 - norm.cdf(z))
    ms, my = float(np.mean(s)), float(np.mean(yf))
    direction = spiegelhalter_direction(z)
    return {"spiegelhalter": TestResult(
        id="spiegelhalter", statistic=z, pvalue=p, reject=p <= alpha, alpha=alpha,
        details={"mean_score": ms, "mean_label": my, "direction": direction},
        settings={"compat": MODE, "alternative": "one-sided: p = 1 - Phi(Z)",
                  "reference": "mapie.metrics.calibration.spiegelhalter_p_value"})}


def cumulative_differences(s: FloatArray, y: IntArray) -> FloatArray:
    """MAPIE's jittered walk: C_k = Σ_{i≤k} (y_i − s̃_i)/n in the order of s̃."""
    rng = np.random.RandomState(1)
    jittered = s * (1 + JITTER * rng.normal(size=s.shape[0]))
    order = np.argsort(jittered)
    return np.asarray(np.cumsum(np.asarray(y)[order] - jittered[order]) / s.shape[0])


def length_scale(s: FloatArray) -> float:
    return float(np.sqrt(np.sum(s * (1 - s))) / s.shape[0])


def ks_cdf(x: float) -> float:
    """MAPIE's ``kolmogorov_smirnov_cdf``: P(max|B_t| ≤ x), its series truncated at ε = 1e-8."""
    kmax = int(np.ceil(0.5 + x * np.sqrt(2) / np.pi * np.sqrt(np.log(4 / (np.pi * EPSILON)))))
    c = 0.0
    for k in range(kmax):
        h = k + 1 / 2
        c += (-1) ** k / h * np.exp(-(h ** 2) * np.pi ** 2 / (2 * x ** 2))
    return float(c * (2 / np.pi))


def kuiper_cdf(x: float) -> float:
    """MAPIE's ``kuiper_cdf``: P(range of B_t ≤ x), its series truncated at ε = 1e-8."""
    kmax = int(np.ceil(0.5 + x / (np.pi * np.sqrt(2)) * np.sqrt(
        np.log(4 / (np.sqrt(2 * np.pi) * EPSILON) * (1 / x + x / np.pi ** 2)))))
    c = 0.0
    for k in range(kmax):
        h = k + 1 / 2
        c += (8 / x ** 2 + 2 / h ** 2 / np.pi ** 2) * np.exp(-2 * h ** 2 * np.pi ** 2 / x ** 2)
    return float(c)


def _walk_test(test_id: str, s: FloatArray, y: IntArray, alpha: float) -> TestResult:
    walk = cumulative_differences(s, y)
    sigma = length_scale(s)
    if test_id == "ks":
        raw = float(np.max(np.abs(walk)))
        cdf, fn = ks_cdf, "kolmogorov_smirnov_p_value"
    else:
        raw = float(np.max(walk) - np.min(walk))
        cdf, fn = kuiper_cdf, "kuiper_p_value"
    stat = raw / sigma
    p = float(1 - cdf(stat))
    return TestResult(id=test_id, statistic=stat, pvalue=p, reject=p <= alpha, alpha=alpha,
                      details={"ecce": raw, "sigma": sigma},
                      settings={"compat": MODE, "jitter": JITTER, "jitter_seed": 1,
                                "series_epsilon": EPSILON,
                                "reference": f"mapie.metrics.calibration.{fn}"})


def ks(s: FloatArray, y: IntArray, alpha: float, bins: int = 0) -> dict[str, TestResult]:
    return {"ks": _walk_test("ks", s, y, alpha)}


def kuiper(s: FloatArray, y: IntArray, alpha: float, bins: int = 0) -> dict[str, TestResult]:
    return {"kuiper": _walk_test("kuiper", s, y, alpha)}
