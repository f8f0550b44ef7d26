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
CHUNK = 1 << 20             # rows per block of the sums below: no temporary of n rows


def _blocks(n: int) -> range:
    return range(0, n, CHUNK)


def brier(data: Prepared) -> MetricResult:
    """Brier score, mean (s_i − y_i)²."""
    total = 0.0
    for a in _blocks(data.n):
        r = data.scores[a:a + CHUNK] - data.labels[a:a + CHUNK]
        total += float(np.dot(r, r))
    return MetricResult(id="brier", value=total / data.n, n_samples=data.n)


def log_loss(data: Prepared) -> MetricResult:
    """Mean negative log-likelihood with scores clipped to [1e-15, 1 − 1e-15]: log s_i where
    y_i = 1, log1p(−s_i) where y_i = 0.  Each block's two sums are computed on two threads
    (the first and the second half of the blocks: 3·10^7 rows 0.41 → 0.22 s) and added in
    block order, so the total is the same number either way."""
    from calcheck._threads import halves

    starts = _blocks(data.n)
    parts = np.zeros((len(starts), 2))

    def run(first: int, last: int) -> None:
        for j in range(first, last):
            a = starts[j]
            s = np.clip(data.scores[a:a + CHUNK], LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS)
            y = data.labels[a:a + CHUNK].astype(bool)
            parts[j] = np.log(s[y]).sum(), np.log1p(-s[~y]).sum()

    halves(run, len(starts))
    total = 0.0
    for ones, zeros in parts.tolist():
        total += ones + zeros
    return MetricResult(id="log_loss", value=-total / data.n, unit="nats",
                        settings={"clip": LOG_LOSS_EPS}, n_samples=data.n)


def pc(data: Prepared) -> MetricResult:
    r"""Probabilistic count, :math:`1 / \sum_v q_v^2` over distinct score values v (frequency q_v).

    Equals n when every score is distinct and 1 when all scores are equal.  Reported as a count,
    not a fraction.
    """
    s = data.sorted_scores
    n = s.shape[0]
    sq, distinct, open_run = 0.0, 0, 0           # Σq² so far; the run still open at a block end
    for a in _blocks(n):
        b = min(a + CHUNK, n)
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
    value = min(1.0 / sq, float(n))
    return MetricResult(id="pc", value=value, unit="count",
                        settings={"distinct_values": distinct}, n_samples=data.n)


# registry kernels: f(data, options) -> MetricResult


def brier_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return brier(data)


def log_loss_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return log_loss(data)


def pc_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return pc(data)
