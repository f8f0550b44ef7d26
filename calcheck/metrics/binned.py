"""Binned calibration errors of a binary classifier: ECE, ECE-l2, MCE, ACE, MCE(Q), PDE.

References
----------
.. [1] Naeini, Cooper, Hauskrecht. Obtaining well calibrated probabilities using Bayesian
       binning. AAAI 2015 (ECE, MCE).
.. [2] Matsubara, Tax, Mudd, Guy. TCE: A test-based approach to measuring calibration error.
       UAI 2023, §2–3 and Table 5 (the binary conventions used here: ACE and MCE(Q) on 10
       equal-mass bins split by index).
.. [3] Torabian, Urner. Calibration through the lens of interpretability (PDE).
.. [4] Roelofs, Cain, Shlens, Mozer. Mitigating bias in calibration error estimation.
       AISTATS 2022 (ECE-sweep).
"""

from __future__ import annotations

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import (
    BinStats,
    positional_stats,
    quantile_bounds,
    quantile_stats,
    quantile_stats_select,
    shared_cumsum,
    tie_bounds,
    uniform_stats,
)
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics._result import MetricResult
from calcheck.weights import mass_cuts, weighted_uniform_stats


def uniform_bins(data: Prepared, n_bins: int) -> BinStats:
    """Uniform bins by row assignment + bincount, computed once per number of bins (ECE,
    ECE-L2 and MCE share them).

    Always the same summation path, so a value never depends on which other metrics ran.
    """
    if n_bins not in data.uniform:
        data.uniform[n_bins] = uniform_stats(data.scores, data.labels, n_bins, binary=True) \
            if data.weights is None else \
            weighted_uniform_stats(data.scores, data.labels, data.weights, n_bins)
    return data.uniform[n_bins]


def quantile_bins(data: Prepared, n_bins: int) -> BinStats:
    """Equal-mass bins: cuts at ⌊j·n/B⌋ of the sorted scores, a tie group cut by one shared
    pro rata (or, with ``ties="order"``, split in row order).  Weighted rows: cuts on the mass
    axis (:mod:`calcheck.weights`)."""
    if data.weights is not None:
        cache_w = data.__dict__.setdefault("_quantile_stats", {})
        if n_bins not in cache_w:
            cuts = mass_cuts(data.mass, n_bins, data.weights.frequency)
            cache_w[n_bins] = data.axis.stats(cuts, params={"bins": n_bins},
                                              effective=not data.weights.frequency)
        return cache_w[n_bins]  # type: ignore[no-any-return]
    if data.ties != "share":
        return quantile_stats(data.sorted_scores, data.sorted_labels, n_bins, ties=data.ties)
    # by selection, whichever other metrics sorted the rows, so a value never depends on them
    cache = data.__dict__.setdefault("_quantile_stats", {})
    if n_bins not in cache:
        cache[n_bins] = quantile_stats_select(    # the cut values from another metric's sort
            data.scores, data.labels, n_bins,
            sorted_scores=data.sorted_scores if data.sort_made else None)
    return cache[n_bins]  # type: ignore[no-any-return]


def ece_from_stats(stats: BinStats, p: int = 1) -> float:
    r"""Weighted :math:`\ell_p` calibration error of a bin table.

    .. math:: \mathrm{ECE}_1 = \sum_b \frac{N_b}{n} |\hat P_b - \bar Q_b|, \qquad
              \mathrm{ECE}_2 = \Big(\sum_b \frac{N_b}{n} (\hat P_b - \bar Q_b)^2\Big)^{1/2}
    """
    w, g = stats.weight, stats.gap
    if p == 1:
        return float(np.sum(w * g))
    return float(np.sqrt(np.sum(w * g * g)))


def mce_from_stats(stats: BinStats) -> float:
    """Largest per-bin gap |P̂_b − Q̄_b|; empty bins count as 0."""
    return float(stats.gap.max()) if stats.n_bins else 0.0


def _settings(binning: str, n_bins: int, **extra: object) -> dict[str, object]:
    return {"binning": binning, "bins": n_bins, **extra}


def ece(data: Prepared, *, bins: int = 10, p: int = 1) -> MetricResult:
    """Expected calibration error on ``bins`` equal-width bins (docs/metrics.md)."""
    return binned_result("ece" if p == 1 else "ece_l2", uniform_bins(data, bins), bins,
                         data.n_samples)


def mce(data: Prepared, *, bins: int = 10) -> MetricResult:
    """Maximum calibration error on ``bins`` equal-width bins."""
    return binned_result("mce", uniform_bins(data, bins), bins, data.n_samples)


def ace(data: Prepared, *, bins: int = 10) -> MetricResult:
    """Adaptive calibration error: ECE on ``bins`` equal-mass bins split by index."""
    return binned_result("ace", quantile_bins(data, bins), bins, data.n_samples, ties=data.ties)


def mce_q(data: Prepared, *, bins: int = 10) -> MetricResult:
    """MCE(Q): maximum calibration error on equal-mass bins."""
    return binned_result("mce_q", quantile_bins(data, bins), bins, data.n_samples,
                         ties=data.ties)


_BINNED = {"ece": ("uniform", "l1"), "ece_l2": ("uniform", "l2"), "mce": ("uniform", "max"),
           "ace": ("quantile", "l1"), "mce_q": ("quantile", "max")}


def binned_result(mid: str, stats: BinStats, bins: int, n_samples: int, *,
                  ties: str = "share") -> MetricResult:
    """ECE, ECE-l2 or MCE of an equal-width bin table, ACE or MCE(Q) of an equal-mass one
    (``stats``: of the rows in memory, or of a stream's weighted passes)."""
    binning, norm = _BINNED[mid]
    value = mce_from_stats(stats) if norm == "max" else ece_from_stats(stats, 2 if norm == "l2"
                                                                       else 1)
    extra = {"ties": ties} if binning == "quantile" else {}
    return MetricResult(id=mid, value=value,
                        settings=_settings(binning, bins, norm=norm, **extra),
                        n_samples=n_samples, bins=stats)


def pde(data: Prepared, *, bins: int = 10) -> MetricResult:
    r"""Probability deviation error (Torabian & Urner), on equal-mass bins.

    .. math:: \mathrm{PDE} = \sum_b \frac{N_b}{n}\, \frac{1}{N_b}\sum_{i\in b} |s_i - \hat P_b|
              = \frac1n \sum_i |s_i - \hat P_{b(i)}|
    """
    stats = quantile_bins(data, bins)
    phat = np.nan_to_num(stats.mean_label)
    if data.weights is not None:
        per_bin = weighted_deviation_sums(data, mass_cuts(data.mass, bins,
                                                         data.weights.frequency), phat)
    else:
        per_bin = abs_deviation_sums(data.sorted_scores, quantile_bounds(data.n, bins), phat,
                                     stats.nonempty)
    return pde_result(stats, per_bin, bins, data.mass, data.n_samples, data.ties)


def pde_result(stats: BinStats, per_bin: FloatArray, bins: int, mass: float, n_samples: int,
               ties: str) -> MetricResult:
    """PDE from its equal-mass bins and each bin's Σ w|s − P̂_b|."""
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_dev = np.where(stats.nonempty, per_bin / np.maximum(stats.count, 1e-300), np.nan)
    return MetricResult(id="pde", value=float(per_bin.sum() / mass),
                        settings=_settings("quantile", bins, ties=ties),
                        n_samples=n_samples, bins=stats,
                        bin_extra={"mean_abs_deviation": mean_dev})


def weighted_deviation_sums(data: Prepared, cuts: FloatArray, phat: FloatArray) -> FloatArray:
    """Σ w_i |s_i − P̂_b| of each equal-mass bin b of weighted rows: every unit of the mass
    axis (a tie group, or a row) adds the mass it has inside the bin times |its score − P̂_b|
    (a unit shared between two bins adds to each its share)."""
    ax = data.axis
    M = ax.M
    out = np.zeros(cuts.shape[0] - 1)
    for b in range(out.shape[0]):
        lo = int(np.searchsorted(M, cuts[b], side="right")) - 1
        hi = int(np.searchsorted(M, cuts[b + 1], side="left"))
        lo, hi = max(lo, 0), min(hi, M.shape[0] - 1)
        if hi <= lo:
            continue
        over = np.clip(np.minimum(M[lo + 1:hi + 1], cuts[b + 1]) - np.maximum(M[lo:hi], cuts[b]),
                       0.0, None)
        out[b] = float(np.dot(over, np.abs(ax.scores[lo:hi] - phat[b])))
    return out


DEV_CHUNK = 1 << 20         # rows per block of PDE's deviations (no temporary of n rows)


def abs_deviation_sums(s: FloatArray, bounds: IntArray, phat: FloatArray,
                       nonempty: np.ndarray, chunk: int = DEV_CHUNK) -> FloatArray:
    """Σ|s_i − P̂_b| over the rows [bounds[b], bounds[b+1]) of each non-empty bin b of the sorted
    scores ``s``, ``chunk`` rows at a time (no temporary of n rows)."""
    per_bin = np.zeros(phat.shape[0])
    for j in np.flatnonzero(nonempty):
        for a in range(int(bounds[j]), int(bounds[j + 1]), chunk):
            block = s[a:min(a + chunk, int(bounds[j + 1]))]
            per_bin[j] += float(np.abs(block - phat[j]).sum())
    return per_bin


SWEEP_MAX_BINS = 10_000


def sweep_bins(data: Prepared, max_bins: int = SWEEP_MAX_BINS) -> tuple[int, bool]:
    """The largest b for which the label means of b equal-mass bins are non-decreasing, the
    sweep b = 1, 2, … stopping before the first b where they are not; and whether the sweep
    reached ``max_bins`` (or n) first.  Bins are the ACE bins (ties shared or in row order)."""
    n = data.n
    if data.weights is not None:
        return _weighted_sweep_bins(data, max_bins)
    s, y = data.sorted_scores, data.sorted_labels
    cum_y = np.concatenate(([0.0], np.cumsum(y, dtype=np.float64)))
    ties = tie_bounds(s) if data.ties == "share" else None
    last = min(n, max_bins)
    for b in range(2, last + 1):
        bounds = quantile_bounds(n, b)
        lab = shared_cumsum(y, ties, bounds) if ties is not None else cum_y[bounds]
        mean = np.diff(lab) / np.diff(bounds)
        if np.any(np.diff(mean) < -1e-12):
            return b - 1, False
    return last, True


def _weighted_sweep_bins(data: Prepared, max_bins: int) -> tuple[int, bool]:
    """:func:`sweep_bins` of weighted rows: b equal-mass bins on the mass axis (up to the
    rows of positive weight, or the expanded rows of counts)."""
    assert data.weights is not None
    ax, w = data.axis, data.weights
    top = data.n_samples if w.frequency else int(np.count_nonzero(w.values))
    last = min(top, max_bins)
    for b in range(2, last + 1):
        cuts = mass_cuts(data.mass, b, w.frequency)
        mass = np.diff(cuts)
        mean = np.diff(ax.at(ax.Y, cuts)) / np.where(mass > 0, mass, 1.0)
        if np.any(np.diff(mean[mass > 0]) < -1e-12):
            return b - 1, False
    return last, True


def ece_sweep(data: Prepared) -> MetricResult:
    """ECE-sweep: the l1 ECE on the largest number of equal-mass bins whose label means are
    monotone in the score (Roelofs et al.)."""
    b, capped = sweep_bins(data)
    if data.weights is not None:
        stats = data.axis.stats(mass_cuts(data.mass, b, data.weights.frequency),
                                params={"bins": b})
    else:
        stats = positional_stats(data.sorted_scores, data.sorted_labels,
                                 quantile_bounds(data.n, b), kind="quantile",
                                 params={"bins": b}, ties=data.ties)
    settings = _settings("quantile", b, norm="l1", ties=data.ties, sweep="monotone label means")
    if capped:
        settings["sweep_stopped"] = (f"at {b} bins ({'n' if b == data.n_samples else 'the cap'}): "
                                     "still monotone")
    return MetricResult(id="ece_sweep", value=ece_from_stats(stats, 1), settings=settings,
                        n_samples=data.n_samples, bins=stats, extra={"sweep_bins": b})


# ---------------------------------------------------------------------------------------------
# registry kernels: f(data, options) -> MetricResult


def ece_sweep_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return ece_sweep(data)



def ece_l1(data: Prepared, o: MetricOptions) -> MetricResult:
    return ece(data, bins=o.bins, p=1)


def ece_l2(data: Prepared, o: MetricOptions) -> MetricResult:
    return ece(data, bins=o.bins, p=2)


def mce_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return mce(data, bins=o.bins)


def ace_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return ace(data, bins=o.bins)


def mce_q_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return mce_q(data, bins=o.bins)


def pde_metric(data: Prepared, o: MetricOptions) -> MetricResult:
    return pde(data, bins=o.bins)
