"""Unbinned scores of a binary classifier: Brier score, log loss, probabilistic count.

References
----------
.. [1] Brier. Verification of forecasts expressed in terms of probability. 1950.
.. [2] Torabian, Urner. Calibration through the lens of interpretability (probabilistic count).
"""

from __future__ import annotations

import numpy as np

from calcheck._typing import FloatArray
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics._result import MetricResult

LOG_LOSS_EPS = 1e-15
CHUNK = 1 << 20             # rows per block of the sums below: no temporary of n rows


def squared_error_sum(scores: FloatArray, labels: np.ndarray, chunk: int = CHUNK) -> float:
    """Σ (s_i − y_i)², ``chunk`` rows at a time."""
    total = 0.0
    for a in range(0, scores.shape[0], chunk):
        r = scores[a:a + chunk] - labels[a:a + chunk]
        total += float(np.dot(r, r))
    return total


def log_likelihood_sum(scores: FloatArray, labels: np.ndarray, chunk: int = CHUNK) -> float:
    """Σ log-likelihood with scores clipped to [1e-15, 1 − 1e-15], ``chunk`` rows at a time.
    Each block's two sums are computed on two threads (the first and the second half of the
    blocks: 3·10^7 rows 0.41 → 0.22 s) and added in block order, so the total is the same
    number either way."""
    from calcheck._threads import halves

    starts = range(0, scores.shape[0], chunk)
    parts = np.zeros((len(starts), 2))

    def run(first: int, last: int) -> None:
        for j in range(first, last):
            a = starts[j]
            s = np.clip(scores[a:a + chunk], LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS)
            y = labels[a:a + chunk].astype(bool)
            parts[j] = np.log(s[y]).sum(), np.log1p(-s[~y]).sum()

    halves(run, len(starts))
    total = 0.0
    for ones, zeros in parts.tolist():
        total += ones + zeros
    return total


def brier(data: Prepared) -> MetricResult:
    """Brier score, mean (s_i − y_i)² (weighted: Σ w_i (s_i − y_i)² / Σ w_i)."""
    if data.weights is not None:
        r = data.scores - data.labels
        value = float(np.dot(data.weights.values, r * r)) / data.mass
    else:
        value = squared_error_sum(data.scores, data.labels) / data.n
    return MetricResult(id="brier", value=value, n_samples=data.n_samples)


def log_loss(data: Prepared) -> MetricResult:
    """Mean negative log-likelihood with scores clipped to [1e-15, 1 − 1e-15]: log s_i where
    y_i = 1, log1p(−s_i) where y_i = 0 (:func:`log_likelihood_sum`)."""
    if data.weights is not None:
        s = np.clip(data.scores, LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS)
        ll = np.where(data.labels > 0, np.log(s), np.log1p(-s))
        total = float(np.dot(data.weights.values, ll))
    else:
        total = log_likelihood_sum(data.scores, data.labels)
    return MetricResult(id="log_loss", value=-total / data.mass, unit="nats",
                        settings={"clip": LOG_LOSS_EPS}, n_samples=data.n_samples)


def pc(data: Prepared) -> MetricResult:
    r"""Probabilistic count, :math:`1 / \sum_v q_v^2` over distinct score values v (frequency q_v).

    Equals n when every score is distinct and 1 when all scores are equal.  Reported as a count,
    not a fraction.
    """
    if data.weights is not None:            # q_v: the value's share of the mass
        from calcheck.binning import tie_bounds

        q = np.add.reduceat(data.sorted_weights, tie_bounds(data.sorted_scores)[:-1])
        q = q[q > 0] / data.mass
        value, distinct = min(1.0 / float(np.dot(q, q)), float(data.n_samples)), int(q.shape[0])
    else:
        value, distinct = probabilistic_count(data.sorted_scores)
    return MetricResult(id="pc", value=value, unit="count",
                        settings={"distinct_values": distinct}, n_samples=data.n_samples)


def probabilistic_count(s: FloatArray, chunk: int = CHUNK) -> tuple[float, int]:
    """(1 / Σ q_v², the number of distinct values) of the sorted scores ``s``, ``chunk`` rows
    at a time (no temporary of n rows)."""
    n = s.shape[0]
    sq, distinct, open_run = 0.0, 0, 0           # Σq² so far; the run still open at a block end
    for a in range(0, n, chunk):
        b = min(a + chunk, n)
        new = s[a + 1:b] != s[a:b - 1]
        starts = np.flatnonzero(new) + a + 1
        if a == 0 or s[a] != s[a - 1]:              # row a opens a run
            if open_run:
                sq += (open_run / n) ** 2
            open_run = 0
            distinct += 1
        if starts.shape[0]:
            q = np.diff(np.concatenate(([a], starts))) / n
            q[0] += open_run / n
            sq += float(np.dot(q, q))
            open_run = b - int(starts[-1])
            distinct += int(starts.shape[0])
        else:
            open_run += b - a
    sq += (open_run / n) ** 2
    # 1/Σq² ≤ n exactly; rounding in Σq² must not push it above (20,000.00000000016)
    return min(1.0 / sq, float(n)), distinct


# registry kernels: f(data, options) -> MetricResult


def brier_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return brier(data)


def log_loss_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return log_loss(data)


def pc_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return pc(data)
