"""What the compat modules share: bin tables from a row → bin assignment, and the result."""

from __future__ import annotations

from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import BinStats
from calcheck.data import top_label_view
from calcheck.metrics._result import MetricResult


def assigned(ids: IntArray, scores: np.ndarray, labels: np.ndarray, nbins: int,
             lower: FloatArray, upper: FloatArray, kind: str, *,
             keep: np.ndarray | None = None) -> BinStats:
    """The bin table of rows assigned to bins ``ids`` (rows outside ``keep`` in no bin)."""
    if keep is not None:
        ids, scores, labels = ids[keep], scores[keep], labels[keep]
    count = np.bincount(ids, minlength=nbins).astype(np.int64)[:nbins]
    ssum = np.bincount(ids, weights=np.asarray(scores, np.float64), minlength=nbins)[:nbins]
    pos = np.bincount(ids, weights=np.asarray(labels, np.float64), minlength=nbins)[:nbins]
    return BinStats(kind=kind, lower=np.asarray(lower, np.float64).copy(),
                    upper=np.asarray(upper, np.float64).copy(), count=count,
                    sum_score=np.asarray(ssum, np.float64), sum_label=np.asarray(pos, np.float64))


def gaps(stats: BinStats) -> FloatArray:
    """|mean label − mean score| per bin, 0 for an empty bin."""
    return stats.gap


def weighted(stats: BinStats) -> float:
    """Σ_b (n_b / Σn) |acc_b − conf_b| over the binned rows."""
    n = stats.count.sum()
    return float(np.sum(stats.count * stats.gap) / n) if n else 0.0


def result(mid: str, value: float, mode: str, settings: dict[str, Any], n: int, *,
           bins: BinStats | None = None, unit: str = "fraction",
           extra: dict[str, Any] | None = None) -> MetricResult:
    return MetricResult(id=mid, value=float(value), unit=unit,
                        settings={"compat": mode, **settings}, n_samples=n, bins=bins,
                        extra=dict(extra or {}))


def top(probs: FloatArray, labels: IntArray) -> tuple[FloatArray, IntArray]:
    """The top-label view (confidence, correct): argmax ties to the lowest index."""
    return top_label_view(probs, labels)
