"""The Python API: calibration metrics on arrays.

>>> import numpy as np, calcheck
>>> s = np.array([0.1, 0.4, 0.35, 0.8]); y = np.array([0, 0, 1, 1])
>>> round(calcheck.ece(s, y, bins=2).value, 4)
0.0875
"""

from __future__ import annotations

from typing import Any

from numpy.typing import ArrayLike

from calcheck.metrics import (
    MetricOptions,
    MetricResult,
    Prepared,
    binned,
    compute_metrics,
    scoring,
)
from calcheck.validation import check_bins, check_p


def ece(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10, p: int = 1) -> MetricResult:
    """Expected calibration error on ``bins`` equal-width bins (``p=2``: the l2 version).

    Parameters
    ----------
    scores : array_like of shape (n,)
        Predicted probabilities of the positive class, in [0, 1].
    labels : array_like of shape (n,)
        0/1 outcomes.
    bins : int, default 10
        Number of equal-width bins, ``numpy.linspace(0, 1, bins + 1)`` (SPEC §2).
    p : {1, 2}
        Norm: 1 → Σ_b (N_b/n)|P̂_b − Q̄_b|; 2 → the square root of the weighted squares.

    Returns
    -------
    MetricResult
        ``.value`` (a fraction), ``.bins`` (the bin table), ``.to_dict()``.
    """
    return binned.ece(Prepared(scores, labels), bins=check_bins(bins), p=check_p(p))


def mce(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10) -> MetricResult:
    """Maximum calibration error on ``bins`` equal-width bins."""
    return binned.mce(Prepared(scores, labels), bins=check_bins(bins))


def ace(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10) -> MetricResult:
    """Adaptive calibration error on ``bins`` equal-mass bins (split by index)."""
    return binned.ace(Prepared(scores, labels), bins=check_bins(bins))


def mce_q(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10) -> MetricResult:
    """MCE(Q): maximum calibration error on ``bins`` equal-mass bins."""
    return binned.mce_q(Prepared(scores, labels), bins=check_bins(bins))


def pde(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10) -> MetricResult:
    """Probability deviation error on ``bins`` equal-mass bins."""
    return binned.pde(Prepared(scores, labels), bins=check_bins(bins))


def brier(scores: ArrayLike, labels: ArrayLike) -> MetricResult:
    """Brier score."""
    return scoring.brier(Prepared(scores, labels))


def log_loss(scores: ArrayLike, labels: ArrayLike) -> MetricResult:
    """Log loss (natural log), scores clipped to [1e-15, 1 − 1e-15]."""
    return scoring.log_loss(Prepared(scores, labels))


def pc(scores: ArrayLike, labels: ArrayLike) -> MetricResult:
    """Probabilistic count of the scores (labels are validated but not used)."""
    return scoring.pc(Prepared(scores, labels))


def evaluate(scores: ArrayLike, labels: ArrayLike, ids: list[str] | None = None,
            **options: Any) -> dict[str, MetricResult]:
    """Several metrics at once, sharing one sort; ``options`` as :class:`MetricOptions`."""
    from calcheck.metrics import resolve_metric_ids

    return compute_metrics(Prepared(scores, labels), resolve_metric_ids(ids),
                           MetricOptions(**options))
