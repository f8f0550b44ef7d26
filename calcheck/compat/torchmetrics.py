"""``--compat torchmetrics``: ``binary_calibration_error`` and
``multiclass_calibration_error`` of torchmetrics 1.9, reproduced without torch.

* Edges are ``torch.linspace(0, 1, B + 1)`` in the data's dtype, which differs from numpy's
  linspace in the last bits: torch computes the lower half as i·step and the upper half as
  1 − (B − i)·step in one fused multiply-add.
* A row goes to ``bucketize(s, edges, right=True) − 1``: left-closed bins, and a score of
  exactly 1.0 in a bin of its own (B + 1 bins in all).
* Per bin, accuracy and confidence are sums over counts (empty bins 0); ``ece`` (norm l1) is
  Σ |acc − conf|·n_b/n, ``ece_l2`` (l2) √Σ (acc − conf)²·n_b/n, ``mce`` (max) the largest
  |acc − conf| over all B + 1 bins.
* Multiclass input: confidence = max probability, accuracy = 1[argmax = label], and — as the
  library does — both cast to float32, so every sum runs in float32 (values agree with
  torchmetrics to float32 rounding).  Binary scores keep their float64.
* Default B = 15 (the library's ``n_bins``).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import BinStats
from calcheck.compat._common import result, top
from calcheck.metrics._result import MetricResult

MODE = "torchmetrics"


def linspace01(bins: int, dtype: type) -> np.ndarray:
    """``torch.linspace(0, 1, bins + 1, dtype)`` as torch computes it on the CPU."""
    steps = bins + 1
    step = dtype(1) / dtype(steps - 1)
    half = steps // 2
    out: np.ndarray = np.empty(steps, dtype=dtype)
    for i in range(steps):
        if i < half:
            out[i] = dtype(step * dtype(i))
        else:                                   # fused multiply-add: one rounding
            out[i] = dtype(float(1 - Fraction(float(step)) * (steps - 1 - i)))
    return out


def _bins(conf: np.ndarray, acc: np.ndarray, bins: int) -> BinStats:
    dtype = conf.dtype.type
    edges = linspace01(bins, dtype)
    idx = np.searchsorted(edges, conf, side="right") - 1
    nb = bins + 1
    count: np.ndarray
    csum: np.ndarray
    asum: np.ndarray
    if dtype is np.float32:                     # float32 sums, accumulated in row order
        count = np.zeros(nb, np.float32)
        np.add.at(count, idx, np.float32(1))
        csum = np.zeros(nb, np.float32)
        np.add.at(csum, idx, conf)
        asum = np.zeros(nb, np.float32)
        np.add.at(asum, idx, acc.astype(np.float32))
    else:
        count = np.bincount(idx, minlength=nb).astype(np.float64)
        csum = np.bincount(idx, weights=conf, minlength=nb)
        asum = np.bincount(idx, weights=acc.astype(np.float64), minlength=nb)
    lower = np.append(edges[:-1], edges[-1]).astype(np.float64)
    upper = np.append(edges[1:], edges[-1]).astype(np.float64)
    return BinStats(kind="uniform", lower=lower, upper=upper, count=count.astype(np.int64),
                    sum_score=csum.astype(np.float64), sum_label=asum.astype(np.float64),
                    params={"float": np.dtype(dtype).name, "_count": count, "_csum": csum,
                            "_asum": asum})


def _value(st: BinStats, norm: str) -> float:
    count, csum, asum = st.params["_count"], st.params["_csum"], st.params["_asum"]
    dtype = count.dtype.type
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.nan_to_num(csum / count)
        acc = np.nan_to_num(asum / count)
    prop = count / count.sum()
    gap = np.abs(acc - conf)
    if norm == "l1":
        return float(np.sum(gap * prop, dtype=dtype))
    if norm == "max":
        return float(np.max(gap))
    ce = np.sum((acc - conf) ** 2 * prop, dtype=dtype)
    return float(np.sqrt(ce)) if ce > 0 else 0.0


def _metric(mid: str, conf: np.ndarray, acc: np.ndarray, bins: int, norm: str,
            function: str) -> MetricResult:
    st = _bins(conf, acc, bins)
    value = _value(st, norm)
    params = {k: v for k, v in st.params.items() if not k.startswith("_")}
    table = BinStats(kind=st.kind, lower=st.lower, upper=st.upper, count=st.count,
                     sum_score=st.sum_score, sum_label=st.sum_label, params=params)
    return result(mid, value, MODE, {"binning": "uniform", "bins": bins, "norm": norm,
                                     "float": params["float"], "one_bin_at_1": True,
                                     "reference": f"torchmetrics {function}"},
                  int(conf.shape[0]), bins=table)


def ece(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _metric("ece", s, np.asarray(y), bins, "l1", "binary_calibration_error")


def ece_l2(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _metric("ece_l2", s, np.asarray(y), bins, "l2", "binary_calibration_error")


def mce(s: FloatArray, y: IntArray, bins: int) -> MetricResult:
    return _metric("mce", s, np.asarray(y), bins, "max", "binary_calibration_error")


def _top(probs: FloatArray, labels: IntArray) -> tuple[np.ndarray, np.ndarray]:
    conf, correct = top(probs, labels)
    return conf.astype(np.float32), correct.astype(np.float32)


def ece_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _metric("ece_top", *_top(probs, labels), bins, "l1", "multiclass_calibration_error")


def mce_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _metric("mce_top", *_top(probs, labels), bins, "max", "multiclass_calibration_error")


def ece_l2_top(probs: FloatArray, labels: IntArray, bins: int, **_: object) -> MetricResult:
    return _metric("ece_l2", *_top(probs, labels), bins, "l2", "multiclass_calibration_error")
