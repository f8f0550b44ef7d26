"""The SKCE calibration test (Widmann, Lindsten & Zachariah, NeurIPS 2019, §5).

Statistic: the unbiased SKCE_uq of :mod:`calcheck.metrics.skce` (every class, not only the top
label).  Null distribution: *consistency resampling* with the predictions kept — under the null
hypothesis of calibration y_i ~ Categorical(p_i) independently, so R label vectors are drawn
from the predictions and the statistic recomputed on each (the kernel matrix does not depend
on the labels and is computed once).  p = (1 + #{T* ≥ T − tol}) / (1 + R): exact under the
null given the predictions, like T-Cal's label resampling.

Cost is n²·K per trial (one matrix product per batch of trials); the test runs on all rows up
to ``max_rows`` = min(:data:`~calcheck.metrics.skce.MAX_ROWS`, √(budget / (K·R))) rows and on a
seeded subsample above, reported in ``settings``.

References
----------
.. [1] Widmann, Lindsten, Zachariah. Calibration tests in multi-class classification: A
       unifying framework. NeurIPS 2019.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calcheck.hypotests._result import TestResult
from calcheck.metrics import skce as _k

FLOP_BUDGET = 6e10        # n²·K·trials of the null simulation
BATCH_BYTES = 64_000_000  # one batch of drawn residuals


def test_rows(k: int, trials: int) -> int:
    """Rows the test uses at most for K classes and R trials."""
    return max(200, min(_k.MAX_ROWS, int(math.sqrt(FLOP_BUDGET / (max(k, 1) * trials)))))


def skce_test(probs: Any, labels: Any, *, alpha: float = 0.05, trials: int = 1000,
              rng: Any = 0, bandwidth: float | None = None) -> TestResult:
    """SKCE test of calibration of binary scores (1-D) or class probabilities (2-D)."""
    P0 = np.asarray(probs, dtype=np.float64)
    k = 1 if P0.ndim == 1 else P0.shape[1]
    seed = rng if isinstance(rng, (int, np.integer)) else 0
    max_rows = test_rows(k, trials)
    kd = _k.kernel_data(P0, labels, max_rows=max_rows, seed=int(seed))
    nu = _k.median_bandwidth(kd.P) if bandwidth is None else _k.check_bandwidth(bandwidth)
    if nu <= 0:
        nu = 1.0
    n = kd.P.shape[0]
    kmat = _k.kernel_matrix(kd.P, nu)
    observed = float(np.sum((kmat @ kd.R) * kd.R)) / (n * (n - 1))
    gen = np.random.default_rng(rng)
    null = _null(kmat, kd, trials, gen)
    tol = 1e-12 * max(1.0, abs(observed))
    p = float((1 + np.count_nonzero(null >= observed - tol)) / (trials + 1))
    settings = {"trials": trials, "resample": "labels from the predictions (consistency)",
                "seed": seed if isinstance(rng, (int, np.integer, type(None))) else "generator",
                "bandwidth": nu, "bandwidth_rule": "median pairwise distance"
                if bandwidth is None else "given", "rows_used": n, "rows": kd.rows,
                "subsample": kd.subsample}
    if kd.subsample:
        settings["subsample_rule"] = (f"uniform without replacement, {n} of {kd.rows} rows "
                                      f"(the test's cost n²·K·trials is bounded), seed {seed}")
    return TestResult(
        id="skce", statistic=observed, pvalue=p, reject=p <= alpha, alpha=alpha,
        details={"statistic_name": "unbiased SKCE (all classes)", "skce": observed,
                 "critical_value": float(np.quantile(null, 1 - alpha)),
                 "min_attainable_pvalue": 1 / (trials + 1)},
        settings=settings)


def _null(kmat: np.ndarray, kd: _k.KernelData, trials: int,
          gen: np.random.Generator) -> np.ndarray:
    """SKCE_uq of ``trials`` label vectors drawn from the predictions."""
    n = kd.P.shape[0]
    binary = kd.R.shape[1] == 1
    cols = kd.R.shape[1]
    batch = max(1, min(trials, BATCH_BYTES // (8 * n * cols)))
    out = np.empty(trials)
    cum = None if binary else np.cumsum(kd.P, axis=1)
    done = 0
    while done < trials:
        t = min(batch, trials - done)
        u = gen.random((n, t))
        if binary:
            s = kd.P[:, 1:2]
            R = np.sqrt(2.0) * ((u < s).astype(np.float64) - s)             # (n, t)
        else:
            assert cum is not None
            # class of each draw: the number of cumulative probabilities below u·(row total)
            y = np.minimum((cum[:, :, None] < (u * cum[:, -1:])[:, None, :]).sum(axis=1),
                           cols - 1)                                         # (n, t)
            R = np.repeat(-kd.P[:, :, None], t, axis=2)                      # (n, K, t)
            R[np.repeat(np.arange(n), t), y.ravel(), np.tile(np.arange(t), n)] += 1.0
            R = R.reshape(n, cols * t)                    # column k·t + j: class k, trial j
        prod = ((kmat @ R) * R).sum(axis=0)
        if not binary:
            prod = prod.reshape(cols, t).sum(axis=0)
        out[done:done + t] = prod / (n * (n - 1))
        done += t
    return out

