"""``--compat sklearn``: scikit-learn 1.9's conventions.

* **Bins** are those of ``sklearn.calibration.calibration_curve``: uniform edges
  ``linspace(0, 1, B + 1)`` or, for equal-count bins, ``numpy.percentile(s, linspace(0, 1,
  B + 1)·100)`` (tied scores stay together, so bins can be empty); a row goes to
  ``searchsorted(edges[1:-1], s)`` (side left: right-closed bins, a score of exactly 0 in the
  first).  scikit-learn has no ECE function: ``ece``/``ace`` weight each bin's
  |fraction of positives − mean predicted value| by its count, ``mce``/``mce_q`` take the
  largest — calibration_curve's own numbers.  Default B = 5 (calibration_curve's ``n_bins``).
* ``brier`` is ``brier_score_loss``: the two-column form, ½·mean(((1 − y) − (1 − s))² +
  (y − s)²), which can differ from mean((y − s)²) in the last bits.
* ``log_loss`` is ``log_loss``: both columns [1 − s, s] clipped to [ε, 1 − ε] with
  ε = 2.22e-16 (float64's machine epsilon), not calcheck's 1e-15.
"""

from __future__ import annotations

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import BinStats
from calcheck.compat._common import assigned, result, weighted
from calcheck.metrics._result import MetricResult

MODE = "sklearn"
REFERENCE = "sklearn.calibration.calibration_curve (scikit-learn 1.9)"


def curve(s: FloatArray, y: IntArray, bins: int, strategy: str) -> BinStats:
    """calibration_curve's bins as a bin table (empty bins included)."""
    if strategy == "quantile":
        edges = np.percentile(s, np.linspace(0, 1, bins + 1) * 100)
    else:
        edges = np.linspace(0.0, 1.0, bins + 1)
    ids = np.searchsorted(edges[1:-1], s)
    return assigned(ids, s, y, bins, edges[:-1], edges[1:], strategy)


def _binned(mid: str, s: FloatArray, y: IntArray, bins: int, strategy: str,
            norm: str) -> MetricResult:
    st = curve(s, y, bins, strategy)
    value = weighted(st) if norm == "l1" else float(st.gap[st.count > 0].max(initial=0.0))
    return result(mid, value, MODE, {"binning": strategy, "bins": bins, "norm": norm,
                                     "reference": REFERENCE}, len(s), bins=st)


def ece(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _binned("ece", s, y, bins, "uniform", "l1")


def mce(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _binned("mce", s, y, bins, "uniform", "max")


def ace(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _binned("ace", s, y, bins, "quantile", "l1")


def mce_q(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _binned("mce_q", s, y, bins, "quantile", "max")


def brier(s: FloatArray, y: IntArray, bins: int = 0,
          weights: FloatArray | None = None) -> MetricResult:
    yf = np.asarray(y, dtype=np.float64)
    d0 = (1.0 - yf) - (1.0 - s)
    d1 = yf - s
    value = float(np.average(d0 * d0 + d1 * d1, weights=weights)) * 0.5
    return result("brier", value, MODE, {"reference": "sklearn.metrics.brier_score_loss"},
                  len(s))


def log_loss(s: FloatArray, y: IntArray, bins: int = 0,
             weights: FloatArray | None = None) -> MetricResult:
    eps = float(np.finfo(np.float64).eps)
    p1 = np.clip(s, eps, 1 - eps)
    p0 = np.clip(1.0 - s, eps, 1 - eps)
    loss = -np.where(np.asarray(y) == 1, np.log(p1), np.log(p0))
    return result("log_loss", float(np.average(loss, weights=weights)), MODE,
                  {"clip": eps, "reference": "sklearn.metrics.log_loss"}, len(s), unit="nats")
