"""``--compat netcal``: ``netcal.metrics.ECE`` and ``MCE`` of netcal 1.4.

* Scores (the confidence, for multiclass input: max probability with 1[argmax = label]) are
  clipped to [ε, 1 − ε], ε = float64's machine epsilon, "to get all samples into the binning
  scheme".
* ``equal_intervals=True`` (``ece``, ``mce``; top-label ``ece_top``, ``mce_top``): edges
  ``linspace(0, 1, B + 1)``; ``equal_intervals=False`` (``ace``, ``mce_q``; ``ace_top``):
  ``numpy.quantile`` of the clipped scores at ``linspace(0, 1, B + 1)`` with the first and last
  edge set to 0 and 1.  Bins are left-closed (scipy's ``binned_statistic_dd``).
* ECE = Σ |acc − conf|·n_b/n; MCE = the largest |acc − conf| (empty bins 0).
* Where tied scores make two equal-count edges equal, netcal itself fails ("The smallest edge
  difference is numerically 0."): calcheck says so (exit 2) rather than invent a number.
* Default B = 10 (the library's ``bins``).
"""

from __future__ import annotations

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.compat._common import assigned, result, top, weighted
from calcheck.errors import InputError
from calcheck.metrics._result import MetricResult

MODE = "netcal"


def _metric(mid: str, conf: FloatArray, acc: np.ndarray, bins: int, equal: bool,
            norm: str) -> MetricResult:
    eps = float(np.finfo(np.float64).eps)
    x = np.clip(np.asarray(conf, dtype=np.float64), eps, 1.0 - eps)
    edges = np.linspace(0.0, 1.0, bins + 1)
    if not equal:
        edges = np.quantile(x, edges)
        edges[0], edges[-1] = 0.0, 1.0
        if np.diff(edges).min() == 0:
            raise InputError(f"--compat netcal: netcal itself fails on this input (tied "
                             f"scores make two of its {bins} equal-count edges equal: 'The "
                             "smallest edge difference is numerically 0.'); use fewer bins or "
                             "calcheck's own ace")
    ids = np.clip(np.digitize(x, edges) - 1, 0, bins - 1)
    st = assigned(ids, x, acc, bins, edges[:-1], edges[1:],
                  "uniform" if equal else "quantile")
    value = weighted(st) if norm == "l1" else float(st.gap.max(initial=0.0))
    return result(mid, value, MODE, {"binning": "uniform" if equal else "quantile",
                                     "bins": bins, "norm": norm, "clip": eps,
                                     "equal_intervals": equal,
                                     "reference": f"netcal.metrics.{'ECE' if norm == 'l1' else 'MCE'}"},
                  int(x.shape[0]), bins=st)


def ece(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _metric("ece", s, np.asarray(y), bins, True, "l1")


def mce(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _metric("mce", s, np.asarray(y), bins, True, "max")


def ace(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _metric("ace", s, np.asarray(y), bins, False, "l1")


def mce_q(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _metric("mce_q", s, np.asarray(y), bins, False, "max")


def ece_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _metric("ece_top", *top(probs, labels), bins, True, "l1")


def mce_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _metric("mce_top", *top(probs, labels), bins, True, "max")


def ace_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _metric("ace_top", *top(probs, labels), bins, False, "l1")


def mce_q_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _metric("mce_q", *top(probs, labels), bins, False, "max")
