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

**Weighted and aggregated rows** (docs/weights.md): the statistic is SKCE_w of
:mod:`calcheck.metrics.skce` and the null draws the labels as the other weighted tests do —
counts: a row of count k draws its class counts from Multinomial(k, p) (binary: Binomial(k, s));
sampling weights: one label per row with the weight held fixed, or for binary class weights
(``--weight-null labels``) a label from the kept rows' rate q(s) taking its class's weight.
Multiclass sampling weights are held fixed (class weights of K > 2 classes are not detected).

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
from calcheck.weights import NullDraws, Weights

FLOP_BUDGET = 6e10        # n²·K·trials of the null simulation
BATCH_BYTES = 64_000_000  # one batch of drawn residuals


def test_rows(k: int, trials: int) -> int:
    """Rows the test uses at most for K classes and R trials."""
    return max(200, min(_k.MAX_ROWS, int(math.sqrt(FLOP_BUDGET / (max(k, 1) * trials)))))


def skce_test(probs: Any, labels: Any, *, alpha: float = 0.05, trials: int = 1000,
              rng: Any = 0, bandwidth: float | None = None,
              weights: Weights | None = None) -> TestResult:
    """SKCE test of calibration of binary scores (1-D) or class probabilities (2-D)
    (``weights``: row counts or sampling weights, module docstring)."""
    P0 = np.asarray(probs, dtype=np.float64)
    k = 1 if P0.ndim == 1 else P0.shape[1]
    seed = rng if isinstance(rng, (int, np.integer)) else 0
    max_rows = test_rows(k, trials)
    kd = _k.kernel_data(P0, labels, max_rows=max_rows, seed=int(seed), weights=weights)
    nu = _k.median_bandwidth(kd.P, kd.w, kd.frequency) if bandwidth is None else \
        _k.check_bandwidth(bandwidth)
    if nu <= 0:
        nu = 1.0
    n = kd.P.shape[0]
    kmat = _k.kernel_matrix(kd.P, nu)
    gen = np.random.default_rng(rng)
    if kd.w is None:
        observed = float(np.sum((kmat @ kd.R) * kd.R)) / (n * (n - 1))
        null = _null(kmat, kd, trials, gen)
    else:
        assert weights is not None
        observed, null, how = _weighted(kmat, kd, weights, trials, gen)
    tol = 1e-12 * max(1.0, abs(observed))
    p = float((1 + np.count_nonzero(null >= observed - tol)) / (trials + 1))
    settings = {"trials": trials, "resample": "labels from the predictions (consistency)",
                "seed": seed if isinstance(rng, (int, np.integer, type(None))) else "generator",
                "bandwidth": nu, "bandwidth_rule": "median pairwise distance"
                if bandwidth is None else "given", "rows_used": n, "rows": kd.rows,
                "subsample": kd.subsample}
    if kd.w is not None:
        settings.update(rows_used=kd.used, weights=how)
    if kd.subsample:
        settings["subsample_rule"] = (f"uniform without replacement, {kd.used} of {kd.rows} "
                                      f"{'expanded ' if kd.w is not None and kd.frequency else ''}"
                                      f"rows (the test's cost n²·K·trials is bounded), seed {seed}")
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



def _weighted(kmat: np.ndarray, kd: _k.KernelData, weights: Weights, trials: int,
              gen: np.random.Generator) -> tuple[float, np.ndarray, str]:
    """SKCE_w of the rows and of ``trials`` null draws (module docstring), and the null's
    description.  ``kmat`` has a zero diagonal: the pairs (i, i) of distinct copies of a count
    row add ‖u_i‖² less the copies' own ‖r‖²."""
    assert kd.w is not None
    w, freq = kd.w, kd.frequency
    binary = kd.R.shape[1] == 1
    rows = Weights(w, weights.kind, weights.column, weights.null if binary else "fixed")

    def stat(U: np.ndarray, own: np.ndarray, total: np.ndarray, sq: np.ndarray) -> np.ndarray:
        """U: (n, t, cols) weighted residual sums; own: Σ of the copies' v·‖r‖² per trial."""
        t = U.shape[1]
        flat = U.reshape(U.shape[0], -1)
        pairs = ((kmat @ flat) * flat).sum(axis=0).reshape(t, -1).sum(axis=1)
        if freq:
            pairs += np.einsum("itc,itc->t", U, U) - own
        return np.asarray(pairs / (total * total - sq), dtype=np.float64)

    def residuals(Y: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(U, own) of label masses Y (n, t, cols): Σ over a row's copies of r, and of v·‖r‖²
        (counts: each copy once; weights: w² for the one label)."""
        P = kd.P if not binary else kd.P[:, 1:2]
        scale = np.sqrt(2.0) if binary else 1.0
        U = scale * (Y - W[:, :, None] * P[:, None, :])
        if binary:        # ‖r‖² = 2(y − s)² for each copy of label y
            sv = P[:, 0][:, None]
            per = 2.0 * (Y[:, :, 0] * (1 - sv) ** 2 + (W - Y[:, :, 0]) * sv * sv)
        else:             # Σ_c Y_c ‖e_c − p‖²
            norm = 1.0 - 2.0 * P + np.einsum("ik,ik->i", P, P)[:, None]
            per = np.einsum("itc,ic->it", Y, norm)
        own = per if freq else per * W     # weights: Y = w·onehot, so w·per = w²‖r‖²
        return U, own.sum(axis=0)

    cols = 1 if binary else kd.R.shape[1]
    if binary:                            # the label mass of the positive class
        onehot = kd.labels[:, None].astype(np.float64)
    else:
        onehot = np.zeros((kd.P.shape[0], cols))
        onehot[np.arange(kd.P.shape[0]), kd.labels] = 1.0
    Y0 = (onehot * w[:, None])[:, None, :]
    U, own = residuals(Y0, w[:, None])
    observed = float(stat(U, own, np.array([w.sum()]), np.array([rows.variance_mass().sum()]))[0])
    out = np.empty(trials)
    batch = max(1, min(trials, BATCH_BYTES // (8 * kd.P.shape[0] * cols * 3)))
    draws = NullDraws.of(rows, kd.P[:, 1], kd.labels) if binary else None
    done = 0
    while done < trials:
        t = min(batch, trials - done)
        if draws is not None:
            y_mass, ws = draws(t, gen)                             # (t, n) each
            Y, W = y_mass.T[:, :, None], np.ascontiguousarray(ws.T)
        elif freq:
            counts = np.round(w).astype(np.int64)
            drawn = gen.multinomial(counts[:, None], kd.P[:, None, :], size=(kd.P.shape[0], t))
            Y, W = drawn.astype(np.float64), np.repeat(w[:, None], t, axis=1)
        else:
            cum = np.cumsum(kd.P, axis=1)
            u = gen.random((kd.P.shape[0], t))
            c = np.minimum((cum[:, :, None] < (u * cum[:, -1:])[:, None, :]).sum(axis=1),
                           cols - 1)
            Y = np.zeros((kd.P.shape[0], t, cols))
            Y[np.arange(kd.P.shape[0])[:, None], np.arange(t)[None, :], c] = w[:, None]
            W = np.repeat(w[:, None], t, axis=1)
        U, own = residuals(Y, W)
        sq = (W if freq else W * W).sum(axis=0)
        out[done:done + t] = stat(U, own, W.sum(axis=0), sq)
        done += t
    how = ("counts: class counts redrawn as Multinomial(k, p)" if freq else
           "weights held fixed: labels redrawn from the predictions" if draws is None or
           draws.classes is None else
           "class weights: labels redrawn at the kept rows' rate, each with its class's weight")
    return observed, out, how
