"""The squared kernel calibration error (SKCE) of Widmann, Lindsten & Zachariah (2019).

With p_i the predicted probability vector of row i (binary: (1 − s, s)), e_y the one-hot
label and r_i = e_{y_i} − p_i, the unbiased estimator is

    SKCE_uq = (n choose 2)⁻¹ Σ_{i<j} κ(p_i, p_j) ⟨r_i, r_j⟩,   κ(p, q) = exp(−‖p − q‖₂ / ν),

a U-statistic whose expectation is the squared kernel calibration error (0 exactly when the
model is calibrated, for the matrix-valued kernel κ·I).  It looks at every class, not only the
top label: a model whose top label is calibrated but whose other classes are swapped has a
positive SKCE.  ν is the median of ‖p_i − p_j‖₂ over all pairs i < j unless given.  The value
may be negative (an unbiased estimate of 0).

Cost is quadratic in n: up to :data:`MAX_ROWS` rows every pair is used; above, a seeded
uniform subsample of :data:`MAX_ROWS` rows (without replacement) is used, and the result says
so (``settings["subsample"]``).

**Weighted and aggregated rows** (docs/weights.md).  With u_i = w_i·r_i and v_i the row's
variance mass (k_i for a count, w_i² for a weight),

    SKCE_w = (Σ_{i,j} κ(p_i, p_j) ⟨u_i, u_j⟩ − Σ_i v_i ‖r_i‖²) / (W² − Σ_i v_i),   κ(p, p) = 1.

For counts this is SKCE_uq of the expanded rows (the pairs of a row's own copies, κ = 1,
included, its copies' self-pairs removed); for weights the pair-weighted ratio
Σ_{i≠j} w_i w_j h_ij / Σ_{i≠j} w_i w_j, invariant to the weights' scale (importance weights:
consistent for the weighted population's SKCE).  ν is the median distance over the expanded
rows' pairs (counts: linear percentile, a row's own pairs at distance 0) or the pair-weighted
inverted-CDF median (weights).  Above :data:`MAX_ROWS` expanded rows a count subsample draws
:data:`MAX_ROWS` of the expanded rows without replacement (multivariate hypergeometric: the
expanded file's subsample, in distribution); above :data:`MAX_ROWS` weighted rows, rows are
drawn uniformly and keep their weights.

References
----------
.. [1] Widmann, Lindsten, Zachariah. Calibration tests in multi-class classification: A
       unifying framework. NeurIPS 2019 (eq. 5: the unbiased quadratic estimator; §5 the
       tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.errors import UsageError

MAX_ROWS = 5000           # all pairs up to this n; a seeded subsample of this size above
BLOCK = 512               # rows per block of the pairwise computations


@dataclass(frozen=True)
class KernelData:
    """Rows of an SKCE computation: probabilities ``P`` (n, K), residual columns ``R`` with
    ⟨r_i, r_j⟩ = R_i·R_j (binary input: one column √2·(y − s)), class of each row."""

    P: FloatArray
    R: FloatArray
    labels: IntArray
    rows: int                 # rows of the input (expanded rows for counts)
    subsample: bool
    w: FloatArray | None = None      # each row's count or weight (None: unweighted)
    frequency: bool = True           # counts (False: sampling weights)

    @property
    def used(self) -> int:
        """Rows used (expanded rows for counts)."""
        return self.P.shape[0] if self.w is None or not self.frequency else \
            round(float(self.w.sum()))

    @property
    def variance_mass(self) -> FloatArray:
        assert self.w is not None
        return self.w if self.frequency else self.w * self.w


def kernel_data(probs: Any, labels: Any, *, max_rows: int | None = MAX_ROWS,
                seed: int = 0, weights: Any = None) -> KernelData:
    """The rows of an SKCE computation from binary scores (1-D) or class probabilities (2-D)
    and labels (0/1, or class indices 0 … K − 1); a seeded subsample above ``max_rows``
    (``weights``: :class:`calcheck.weights.Weights` of the rows; module docstring)."""
    P = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels).astype(np.int64)
    n = y.shape[0]
    if P.shape[0] != n:
        raise UsageError(f"probabilities have {P.shape[0]} rows and labels {n}")
    w = None if weights is None else np.asarray(weights.values, dtype=np.float64)
    freq = weights is None or weights.frequency
    if w is not None:
        P, y, w = P[w > 0], y[w > 0], w[w > 0]
    rows = n if w is None else round(float(w.sum())) if freq else y.shape[0]
    if rows < 2:
        raise UsageError("SKCE needs at least 2 rows")
    # a canonical row order (label, then the probabilities, then the weight): the subsample,
    # the sums and the null draws do not depend on the order of the rows in a file
    keys = [P] if P.ndim == 1 else [P[:, j] for j in range(P.shape[1] - 1, -1, -1)]
    canon = np.lexsort([*([] if w is None else [w]), *keys, y])
    P, y = P[canon], y[canon]
    w = None if w is None else w[canon]
    sub = max_rows is not None and rows > max_rows
    if sub and w is not None and freq:     # max_rows of the expanded rows, in distribution
        assert max_rows is not None
        drawn = np.random.default_rng(seed).multivariate_hypergeometric(
            np.round(w).astype(np.int64), max_rows).astype(np.float64)
        P, y, w = P[drawn > 0], y[drawn > 0], drawn[drawn > 0]
    elif sub:
        keep = np.sort(np.random.default_rng(seed).choice(y.shape[0], size=max_rows,
                                                          replace=False))
        P, y = P[keep], y[keep]
        w = None if w is None else w[keep]
    if P.ndim == 1:
        s = P
        R = (np.sqrt(2.0) * (y - s))[:, None]
        P = np.column_stack((1.0 - s, s))
    else:
        if y.min() < 0 or y.max() >= P.shape[1]:
            raise UsageError("labels must be class indices 0 … K − 1")
        R = -P.copy()
        R[np.arange(y.shape[0]), y] += 1.0
    return KernelData(P, R, y, rows, sub, w, freq)


def _distances(P: FloatArray, rows: slice) -> FloatArray:
    """‖p_i − p_j‖₂ for the rows i in ``rows`` and every j (differences, not the Gram trick:
    exact for near-equal vectors)."""
    block = P[rows]
    if P.shape[1] <= 32:
        d = np.zeros((block.shape[0], P.shape[0]))
        for k in range(P.shape[1]):
            diff = block[:, k:k + 1] - P[None, :, k]
            d += diff * diff
        return np.asarray(np.sqrt(d), dtype=np.float64)
    sq = np.einsum("ij,ij->i", P, P)
    d2 = sq[rows, None] + sq[None, :] - 2.0 * (block @ P.T)
    return np.asarray(np.sqrt(np.maximum(d2, 0.0)), dtype=np.float64)


def median_bandwidth(P: FloatArray, w: FloatArray | None = None, frequency: bool = True) -> float:
    """The median of ‖p_i − p_j‖₂ over all pairs i < j (``w``: the rows' counts or weights,
    pairs weighted w_i·w_j; module docstring)."""
    n = P.shape[0]
    parts, pair_w = [], []
    for a in range(0, n, BLOCK):
        b = min(n, a + BLOCK)
        d = _distances(P, slice(a, b))
        upper = np.arange(n)[None, :] > np.arange(a, b)[:, None]
        parts.append(d[upper])
        if w is not None:
            pair_w.append((w[a:b, None] * w[None, :])[upper])
    if w is None:
        return float(np.median(np.concatenate(parts)))
    from calcheck.metrics.vece import mass_percentiles

    d, pw = np.concatenate(parts), np.concatenate(pair_w)
    if frequency:                       # a row's own copies: k(k − 1)/2 pairs at distance 0
        d, pw = np.r_[0.0, d], np.r_[float(np.sum(w * (w - 1.0)) / 2.0), pw]
    order = np.argsort(d, kind="stable")
    d, pw = d[order], pw[order]
    keep = pw > 0
    return float(mass_percentiles(d[keep], pw[keep], np.array([50.0]), frequency)[0])


def kernel_matrix(P: FloatArray, nu: float) -> FloatArray:
    """κ(p_i, p_j) = exp(−‖p_i − p_j‖/ν) with a zero diagonal (the U-statistic has no i = j)."""
    n = P.shape[0]
    out = np.empty((n, n))
    for a in range(0, n, BLOCK):
        b = min(n, a + BLOCK)
        np.exp(-_distances(P, slice(a, b)) / nu, out=out[a:b])
    np.fill_diagonal(out, 0.0)
    return out


def check_bandwidth(nu: float) -> float:
    if not np.isfinite(nu) or nu <= 0:
        raise UsageError(f"the SKCE bandwidth must be a positive number, got {nu!r}")
    return float(nu)


def statistic(kd: KernelData, nu: float) -> float:
    """SKCE_uq of the rows at bandwidth ν, by blocks of rows (memory O(BLOCK·n)); of weighted
    rows SKCE_w (module docstring)."""
    n = kd.P.shape[0]
    if kd.w is not None:
        U = kd.R * kd.w[:, None]
        total = 0.0
        for a in range(0, n, BLOCK):
            b = min(n, a + BLOCK)
            total += float(np.sum((np.exp(-_distances(kd.P, slice(a, b)) / nu) @ U) * U[a:b]))
        v = kd.variance_mass
        own = float(np.dot(v, np.einsum("ij,ij->i", kd.R, kd.R)))
        return (total - own) / (float(kd.w.sum()) ** 2 - float(v.sum()))
    total = 0.0
    for a in range(0, n, BLOCK):
        b = min(n, a + BLOCK)
        k = np.exp(-_distances(kd.P, slice(a, b)) / nu)
        k[np.arange(b - a), np.arange(a, b)] = 0.0
        total += float(np.sum((k @ kd.R) * kd.R[a:b]))
    return float(total / (n * (n - 1)))


@dataclass(frozen=True)
class SKCE:
    value: float
    bandwidth: float
    rows_used: int
    rows: int
    subsample: bool

    def settings(self, seed: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "estimator": "unbiased quadratic (all pairs)", "kernel": "exp(-||p - q||_2 / nu)",
            "bandwidth": self.bandwidth, "rows_used": self.rows_used,
            "subsample": self.subsample}
        if self.subsample:
            out["subsample_rule"] = (f"uniform without replacement, {self.rows_used} of "
                                     f"{self.rows} rows (above {MAX_ROWS}), seed {seed}")
        return out


def skce(probs: Any, labels: Any, *, bandwidth: float | None = None, seed: int = 0,
         max_rows: int | None = MAX_ROWS, weights: Any = None) -> SKCE:
    """SKCE_uq (module docstring) and the settings that made it."""
    kd = kernel_data(probs, labels, max_rows=max_rows, seed=seed, weights=weights)
    nu = median_bandwidth(kd.P, kd.w, kd.frequency) if bandwidth is None else \
        check_bandwidth(bandwidth)
    if nu <= 0:              # every prediction equal: the kernel is constant
        nu = 1.0
    return SKCE(statistic(kd, nu), nu, kd.used, kd.rows, kd.subsample)


def skce_metric(data: Any, options: Any) -> Any:
    """The registry kernel: binary :class:`Prepared` or ``MulticlassPrepared``."""
    from calcheck.metrics._result import MetricResult

    if getattr(data, "probs", None) is not None:
        probs, labels = data.probs, data.labels
    else:
        probs, labels = data.scores, data.labels
    seed = int(getattr(options, "seed", 0) or 0)
    w = getattr(data, "weights", None)
    res = skce(probs, labels, bandwidth=getattr(options, "skce_bandwidth", None), seed=seed,
               weights=w)
    n = int(np.asarray(labels).shape[0]) if w is None or not w.frequency else round(w.total)
    return MetricResult(id="skce", value=res.value, settings=res.settings(seed), n_samples=n)
