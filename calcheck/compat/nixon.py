"""``--compat nixon``: the conventions of Nixon et al.'s reference code.

Reproduces ``gce()`` of google/uncertainty-metrics (commit c046458), quirks included:

* even bins: upper edges ``linspace(0, 1, B+1)[1:]``, bin = ``digitize(p, upper)``
  (left-closed), so a probability of exactly 1.0 gets an extra bin of its own, and float edges
  such as 0.30000000000000004 put p = 0.3 in the lower bin;
* adaptive bins, per class on its kept values (n_k of them): ``idx = round(linspace(0, n_k, B,
  endpoint=False))`` (half to even), clipped to n_k − 1; upper edges ``sort(p)[idx][1:]``;
  bin = ``digitize`` again (ties go to the upper bin; bins can be empty);
* per bin: counts + 2.22e-16, conf = Σp/counts, acc = Σlabel/counts, weight = counts/n_k;
  l1 sums |acc − conf|·weight; l2 takes the square root of the class average of Σ w·gap²;
* class-conditional: one-vs-rest per class, err_k summed and divided by K even when a class
  keeps no value; the threshold is strict (p > thr) and applied before binning — 0 for SCE and
  ACE (exact zeros are dropped), 0.01 for TACE;
* top-label (max_prob): argmax ties → lowest index; the threshold applies to the confidence.

Reference
---------
.. [1] Nixon, Dusenberry, Zhang, Jerfel, Tran. Measuring calibration in deep learning. 2019.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.metrics._result import MetricResult

EPS = float(np.finfo(np.float64).eps)      # 2.220446049250313e-16, as the reference
SCHEMES = ("even", "adaptive")


def adaptive_upper_edges(p: FloatArray, bins: int) -> FloatArray:
    """Upper bin edges for about equal counts (the reference's ``get_adaptive_bins``)."""
    if p.size == 0:
        return np.linspace(0.0, 1.0, bins + 1)[:-1]
    idx = np.round(np.linspace(0, p.shape[0], bins, endpoint=False)).astype(np.int64)
    idx = np.minimum(idx, p.shape[0] - 1)
    return np.asarray(np.sort(p)[idx][1:], dtype=np.float64)


def weighted_error(p: FloatArray, y: np.ndarray, upper: FloatArray, norm: str,
                   bins: int) -> float:
    """Σ_b |acc − conf|·(counts/n) (l1) or Σ_b gap²·(counts/n) (l2, before the root)."""
    if p.size == 0:
        return 0.0
    idx = np.digitize(p, upper)
    sums = np.bincount(idx, weights=p, minlength=bins).astype(np.float64)
    counts = np.bincount(idx, minlength=bins) + EPS
    conf = sums / counts
    acc = np.bincount(idx, weights=y, minlength=bins) / counts
    gap = acc - conf
    normed = gap if norm == "l1" else gap * gap
    return float(np.sum(np.abs(normed * (counts / float(p.size)))))


def _upper(p: FloatArray, scheme: str, bins: int) -> FloatArray:
    return adaptive_upper_edges(p, bins) if scheme == "adaptive" else \
        np.linspace(0.0, 1.0, bins + 1)[1:]


def gce(probs: FloatArray, labels: IntArray, *, scheme: str, max_prob: bool,
        class_conditional: bool, norm: str = "l1", bins: int = 15,
        threshold: float = 0.0) -> tuple[float, list[float]]:
    """The general calibration error of the reference code; returns (value, per-class terms)."""
    n, k = probs.shape
    if not class_conditional:
        if max_prob:
            pred = np.argmax(probs, axis=1)
            y = (pred == labels).astype(np.float64)
            p = probs[np.arange(n), pred]
        else:
            y = (labels[:, None] == np.arange(k)[None, :]).astype(np.float64).ravel()
            p = probs.ravel()
        keep = p > threshold
        p, y = p[keep], y[keep]
        err = weighted_error(p, y, _upper(p, scheme, bins), norm, bins)
        return (float(np.sqrt(err)) if norm == "l2" else err), []
    terms = []
    for j in range(k):
        if max_prob:
            sel = np.argmax(probs, axis=1) == j
            p, y = probs[sel, j], (labels[sel] == j).astype(np.float64)
        else:
            p, y = probs[:, j], (labels == j).astype(np.float64)
        keep = p > threshold
        p, y = p[keep], y[keep]
        terms.append(weighted_error(p, y, _upper(p, scheme, bins), norm, bins) / k)
    total = float(np.sum(terms))
    return (float(np.sqrt(total)) if norm == "l2" else total), terms


# the calcheck metric ids that --compat nixon computes with the reference's conventions
NIXON = {
    "ece_top": {"scheme": "even", "max_prob": True, "class_conditional": False},
    "ace_top": {"scheme": "adaptive", "max_prob": True, "class_conditional": False},
    "sce": {"scheme": "even", "max_prob": False, "class_conditional": True},
    "ace_cw": {"scheme": "adaptive", "max_prob": False, "class_conditional": True},
    "tace": {"scheme": "adaptive", "max_prob": False, "class_conditional": True},
}


def nixon_metric(mid: str, probs: FloatArray, labels: IntArray, *, bins: int = 15,
                 tace_threshold: float = 0.01) -> MetricResult:
    """Metric ``mid`` (one of :data:`NIXON`) with the reference code's conventions."""
    cfg = NIXON[mid]
    threshold = tace_threshold if mid == "tace" else 0.0
    value, terms = gce(probs, labels, bins=bins, threshold=threshold, norm="l1",
                       scheme=str(cfg["scheme"]), max_prob=bool(cfg["max_prob"]),
                       class_conditional=bool(cfg["class_conditional"]))
    k = probs.shape[1]
    settings: dict[str, Any] = {"compat": "nixon", "convention": "nixon",
                                "binning": cfg["scheme"], "bins": bins,
                                "threshold": threshold, "threshold_rule": "p > threshold",
                                "reference": "google/uncertainty-metrics gce() @ c046458"}
    extra = {"per_class": [{"class": j, "error": t * k} for j, t in enumerate(terms)]} \
        if terms else {}
    return MetricResult(id=mid, value=value, settings=settings, n_samples=int(probs.shape[0]),
                        extra=extra)


def ece_top(probs: FloatArray, labels: IntArray, bins: int, *,
            tace_threshold: float = 0.01) -> MetricResult:
    return nixon_metric("ece_top", probs, labels, bins=bins)


def ace_top(probs: FloatArray, labels: IntArray, bins: int, *,
            tace_threshold: float = 0.01) -> MetricResult:
    return nixon_metric("ace_top", probs, labels, bins=bins)


def sce(probs: FloatArray, labels: IntArray, bins: int, *,
        tace_threshold: float = 0.01) -> MetricResult:
    return nixon_metric("sce", probs, labels, bins=bins)


def ace_cw(probs: FloatArray, labels: IntArray, bins: int, *,
           tace_threshold: float = 0.01) -> MetricResult:
    return nixon_metric("ace_cw", probs, labels, bins=bins)


def tace(probs: FloatArray, labels: IntArray, bins: int, *,
         tace_threshold: float = 0.01) -> MetricResult:
    return nixon_metric("tace", probs, labels, bins=bins, tace_threshold=tace_threshold)
