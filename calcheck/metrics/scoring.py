"""Unbinned scores of a binary classifier: Brier score, log loss, probabilistic count.

References
----------
.. [1] Brier. Verification of forecasts expressed in terms of probability. 1950.
.. [2] Torabian, Urner. Calibration through the lens of interpretability (probabilistic count).
"""

from __future__ import annotations

import numpy as np

from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics._result import MetricResult

LOG_LOSS_EPS = 1e-15


def brier(data: Prepared) -> MetricResult:
    """Brier score, mean (s_i − y_i)²."""
    r = data.scores - data.labels
    return MetricResult(id="brier", value=float(np.dot(r, r) / data.n), n_samples=data.n)


def log_loss(data: Prepared) -> MetricResult:
    """Mean negative log-likelihood with scores clipped to [1e-15, 1 − 1e-15]."""
    s = np.clip(data.scores, LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS)
    y = data.labels.astype(bool)
    ll = np.where(y, np.log(s), np.log1p(-s))
    return MetricResult(id="log_loss", value=float(-ll.sum() / data.n), unit="nats",
                        settings={"clip": LOG_LOSS_EPS}, n_samples=data.n)


def pc(data: Prepared) -> MetricResult:
    r"""Probabilistic count, :math:`1 / \sum_v q_v^2` over distinct score values v (frequency q_v).

    Equals n when every score is distinct and 1 when all scores are equal.  Reported as a count,
    not a fraction.
    """
    s = data.sorted_scores
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    counts = np.diff(np.concatenate((starts, [s.shape[0]]))).astype(np.float64)
    q = counts / s.shape[0]
    # 1/Σq² ≤ n exactly; rounding in Σq² must not push it above (20,000.00000000016)
    value = min(float(1.0 / np.dot(q, q)), float(s.shape[0]))
    return MetricResult(id="pc", value=value, unit="count",
                        settings={"distinct_values": int(starts.shape[0])}, n_samples=data.n)


# registry kernels: f(data, options) -> MetricResult


def brier_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return brier(data)


def log_loss_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return log_loss(data)


def pc_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return pc(data)
