"""Test-based calibration error (TCE) and the test-based reliability table.

TCE is the percentage of predictions that deviate significantly from the empirical
probability of their bin: in each bin b (k_b positives of N_b rows), every prediction s_i is
tested with the two-sided exact binomial test of H0: P(Y = 1) = s_i against (k_b, N_b), and
rejected when the p-value is <= α.  TCE = 100 · #rejections / n  (Definition 2, eq. 7 of [1]).

Variants by binning (docs/metrics.md): ``tce`` PAVA-BC with n_min = ⌊n/20⌋, n_max = ⌊n/5⌋ (default),
``tce_q`` 10 equal-mass bins, ``tce_v`` PAVA, ``tce_u`` 10 equal-width bins.

References
----------
.. [1] Matsubara, Tax, Mudd, Guy. TCE: A test-based approach to measuring calibration error.
       UAI 2023.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import (
    count_value,
    positional_stats,
    quantile_bounds,
    range_positions,
    row_bin_ids,
    uniform_bounds,
    uniform_edges,
)
from calcheck.errors import TooFewRows, UsageError
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics._result import MetricResult
from calcheck.pava import default_pava_bc_sizes, pava_bc_bounds, pava_bc_run_weights
from calcheck.weights import MassAxis, mass_cuts

TCE_MIN_ROWS = 20
BINNINGS = {"pava-bc": "tce", "quantile": "tce_q", "pava": "tce_v", "uniform": "tce_u"}
TESTS = ("binomial", "t")


def check_pava_bc_rows(n: int, n_min: int | None, n_max: int | None) -> None:
    """PAVA-BC with its default bin sizes needs ``TCE_MIN_ROWS`` rows (docs/metrics.md)."""
    if n_min is None and n_max is None and n < TCE_MIN_ROWS:
        raise TooFewRows(f"TCE with PAVA-BC bins needs at least {TCE_MIN_ROWS} rows (got {n}); "
                         "set --tce-nmin/--tce-nmax to compute it anyway, or choose other "
                         "metrics with --metrics")


def tce_bounds(data: Prepared, binning: str, bins: int, n_min: int | None,
               n_max: int | None) -> tuple[IntArray, dict[str, Any]]:
    """Cut positions of TCE's bins over the sorted rows, and the settings that made them."""
    n = data.n
    pooled = data.sorted_scores if data.ties == "share" else None    # tie groups pooled
    if binning == "pava-bc":
        check_pava_bc_rows(n, n_min, n_max)
        d_min, d_max = default_pava_bc_sizes(n)
        lo = d_min if n_min is None else n_min
        hi = d_max if n_max is None else n_max
        if lo < 0 or hi < lo:
            raise UsageError(f"TCE bin sizes need 0 <= n_min <= n_max, got n_min={lo}, n_max={hi}")
        return pava_bc_bounds(data.sorted_labels, lo, hi, sorted_scores=pooled), \
            {"n_min": lo, "n_max": hi}
    if binning == "pava":
        return pava_bc_bounds(data.sorted_labels, 0, n + 1, sorted_scores=pooled), {}
    if binning == "quantile":
        return quantile_bounds(n, bins), {"bins": bins}
    if binning == "uniform":
        return uniform_bounds(data.sorted_scores, bins), {"bins": bins}
    raise UsageError(f"unknown TCE binning {binning!r}; use one of {', '.join(BINNINGS)}")


def t_test_reject(scores: FloatArray, phat: FloatArray, n: FloatArray, alpha: float) -> np.ndarray:
    """One-sample t-test of the bin's labels against each prediction (docs/metrics.md, ``--test t``).

    t = √N·|P̂ − s| / √(P̂(1 − P̂)), p = 2·t.sf(t, N − 1); a pure bin (P̂ ∈ {0, 1}) rejects
    exactly the predictions that differ from P̂.
    """
    pure = (phat == 0.0) | (phat == 1.0)
    out = scores != phat
    mixed = np.flatnonzero(~pure)
    if mixed.size:
        ph, nn = phat[mixed], n[mixed]
        tstat = np.sqrt(nn) * np.abs(ph - scores[mixed]) / np.sqrt(ph * (1.0 - ph))
        from scipy.stats import t as student_t  # scipy loads only when TCE runs

        out[mixed] = 2.0 * student_t.sf(tstat, nn - 1) <= alpha
    return np.asarray(out, dtype=bool)


def binomial_rejections(sorted_scores: FloatArray, bounds: IntArray, positives: np.ndarray,
                        alpha: float) -> FloatArray:
    """Per bin, the predictions rejected by the exact binomial test against the bin's
    (k_b, N_b).  A bin that shares a tie group has a fractional k_b = ⌊k⌋ + f (the expected
    positives of its share); its predictions count (1 − f)·1[p(⌊k⌋) ≤ α] + f·1[p(⌈k⌉) ≤ α] —
    the rejection expected when the share's positives are drawn at random."""
    from calcheck.binomial import rejections_sorted  # scipy, on first use

    k = np.asarray(positives, dtype=np.float64)
    lo = np.floor(k + 1e-9)
    frac = np.clip(k - lo, 0.0, 1.0)
    frac[frac < 1e-9] = 0.0
    r_lo, _ = rejections_sorted(sorted_scores, bounds, lo.astype(np.int64), alpha)
    if not frac.any():
        return r_lo.astype(np.float64)
    r_hi, _ = rejections_sorted(sorted_scores, bounds, (lo + (frac > 0)).astype(np.int64), alpha)
    return np.asarray((1.0 - frac) * r_lo + frac * r_hi, dtype=np.float64)


def _segment_quantiles(sorted_scores: FloatArray, bounds: IntArray,
                       qs: tuple[float, ...]) -> list[FloatArray]:
    """Per-bin quantiles (numpy's linear rule) of scores already sorted within each bin."""
    counts = np.diff(bounds)
    out = []
    for q in qs:
        pos = bounds[:-1] + (counts - 1) * q
        lo = np.floor(pos).astype(np.int64)
        frac = pos - lo
        hi = np.minimum(lo + 1, bounds[1:] - 1)
        valid = counts > 0
        lo_c, hi_c = np.where(valid, lo, 0), np.where(valid, hi, 0)
        val = sorted_scores[lo_c] + frac * (sorted_scores[hi_c] - sorted_scores[lo_c])
        out.append(np.where(valid, val, np.nan))
    return out


def tce(data: Prepared, *, binning: str = "pava-bc", bins: int = 10, alpha: float = 0.05,
        test: str = "binomial", n_min: int | None = None, n_max: int | None = None) -> MetricResult:
    """TCE in percent, with the test-based reliability table as its bin table.

    Parameters
    ----------
    data : Prepared
        Validated scores and labels.
    binning : {"pava-bc", "quantile", "pava", "uniform"}
        Bins: PAVA-BC (``tce``), equal-mass (``tce_q``), PAVA (``tce_v``), equal-width (``tce_u``).
    bins : int
        Bin count of the equal-mass and equal-width binnings.
    alpha : float
        Significance level; a prediction is rejected when its p-value is <= alpha.
    test : {"binomial", "t"}
        The exact two-sided binomial test (default) or the one-sample t-test.
    n_min, n_max : int, optional
        PAVA-BC bin-size constraints (default ⌊n/20⌋ and ⌊n/5⌋).
    """
    if test not in TESTS:
        raise UsageError(f"unknown --test {test!r}; use one of {', '.join(TESTS)}")
    if data.weights is not None:                 # aggregated rows: the expanded file's TCE
        return counted_tce(data, binning=binning, bins=bins, alpha=alpha, test=test,
                           n_min=n_min, n_max=n_max)
    bounds, extra_settings = tce_bounds(data, binning, bins, n_min, n_max)
    s, y = data.sorted_scores, data.sorted_labels
    edges = None
    if binning == "uniform":
        e = uniform_edges(bins)
        edges = (e[:-1].copy(), e[1:].copy())
    stats = positional_stats(s, y, bounds, kind=binning, params=extra_settings, edges=edges,
                             ties=data.ties)
    if test == "binomial":
        per_bin = binomial_rejections(s, bounds, stats.sum_label, alpha)
    else:
        rows_bin = row_bin_ids(bounds)
        phat = np.nan_to_num(stats.mean_label)
        rejected = t_test_reject(s, phat[rows_bin], stats.count[rows_bin].astype(np.float64),
                                 alpha)
        per_bin = np.asarray(np.bincount(rows_bin, weights=rejected, minlength=stats.n_bins),
                             dtype=np.float64).round()
    n_rej = float(per_bin.sum())
    q1, med, q3 = _segment_quantiles(s, bounds, (0.25, 0.5, 0.75))
    counts = stats.count
    nonempty = counts > 0
    first = np.where(nonempty, bounds[:-1], 0)
    last = np.where(nonempty, bounds[1:] - 1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(nonempty, 100.0 * per_bin / np.maximum(counts, 1), np.nan)
    mid = BINNINGS.get(binning, "tce")
    settings: dict[str, Any] = {"binning": binning, **extra_settings, "alpha": alpha,
                                "test": test, "n_bins": stats.n_bins, "ties": data.ties}
    return MetricResult(
        id=mid, value=100.0 * n_rej / data.n, unit="percent", settings=settings,
        n_samples=data.n, bins=stats,
        bin_extra={
            "min_score": np.where(nonempty, s[first], np.nan),
            "q1_score": q1, "median_score": med, "q3_score": q3,
            "max_score": np.where(nonempty, s[last], np.nan),
            "rejected": [count_value(x) for x in per_bin], "rejected_pct": pct,
        },
    )


# ---------------------------------------------------------------------------------------------
# TCE of aggregated rows (``--count``): every number that of the expanded file, at the cost of
# its rows.
#
# A row with count k is k identical predictions.  In the expanded file sorted by score those
# predictions are consecutive, so the file lies on the mass axis (:mod:`calcheck.weights`):
# unit u (a tie group with shared ties, else a row) holds the expanded positions
# [M_u, M_{u+1}).  TCE's bins are cut positions on that axis:
#
# * equal-mass: ⌊j·N/B⌋; equal-width: the first unit whose score reaches each edge;
# * PAVA and PAVA-BC: the paper's scan over the expanded rows given as runs of equal per-row
#   values (:func:`calcheck.pava.pava_bc_run_weights`) — with shared ties a tie group's rows all
#   take its mean label, so a unit is a run of its mass; with ``ties="order"`` a row's k copies
#   are a run of its label — with n_min and n_max in expanded rows.
#
# Each bin then holds pieces of units (a unit cut by a bound is in two bins, with its share of
# the mass in each).  A prediction's exact binomial test depends only on its score and the bin's
# (k_b, N_b), so the bin's rejected predictions are Σ over its pieces of the piece's mass times
# the test's verdict for the piece's score (:func:`calcheck.binomial.rejections_sorted` with the
# bins' expanded sizes), a fractional k_b mixed as for tie groups.  The per-bin score quantiles
# are those of the expanded rows (numpy's linear rule).


def counted_cuts(data: Prepared, binning: str, bins: int, n_min: int | None,
                 n_max: int | None) -> tuple[FloatArray, dict[str, Any]]:
    """TCE's bin cuts in expanded positions, and the settings that made them."""

    ax = data.axis
    n = round(data.mass)
    if binning == "quantile":
        return mass_cuts(float(n), bins, True), {"bins": bins}
    if binning == "uniform":
        at = np.searchsorted(ax.scores, uniform_edges(bins)[1:-1], side="left")
        return np.concatenate(([0.0], ax.M[at], [float(n)])), {"bins": bins}
    if binning not in ("pava-bc", "pava"):
        raise UsageError(f"unknown TCE binning {binning!r}; use one of {', '.join(BINNINGS)}")
    mass = np.diff(ax.M)
    keep = mass > 0
    values = np.diff(ax.Y)[keep] / mass[keep]        # a unit's per-row value: its mean label
    lengths = np.round(mass[keep]).astype(np.int64)
    first = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    values, lengths = values[first], np.add.reduceat(lengths, first)
    if binning == "pava":
        lo, hi, settings = 0, n + 1, {}
    else:
        check_pava_bc_rows(n, n_min, n_max)
        d_min, d_max = default_pava_bc_sizes(n)
        lo = d_min if n_min is None else n_min
        hi = d_max if n_max is None else n_max
        if lo < 0 or hi < lo:
            raise UsageError(f"TCE bin sizes need 0 <= n_min <= n_max, got n_min={lo}, "
                             f"n_max={hi}")
        settings = {"n_min": lo, "n_max": hi}
    w = pava_bc_run_weights(values, lengths, lo, hi)
    return np.concatenate(([0.0], np.cumsum(w, dtype=np.float64))), settings


def bin_pieces(ax: MassAxis, cuts: FloatArray) -> tuple[IntArray, FloatArray, IntArray]:
    """The pieces of units in each bin: (unit index, mass inside the bin, bin) of every piece
    with positive mass, bin by bin in score order."""
    M = ax.M
    u = M.shape[0] - 1
    jl = np.clip(np.searchsorted(M, cuts[:-1], side="right") - 1, 0, max(u - 1, 0))
    jh = np.clip(np.searchsorted(M, cuts[1:], side="left") - 1, 0, max(u - 1, 0))
    width = np.maximum(jh - jl + 1, 0)
    unit = range_positions(jl, width)
    owner = np.repeat(np.arange(cuts.shape[0] - 1), width)
    over = np.minimum(M[unit + 1], cuts[owner + 1]) - np.maximum(M[unit], cuts[owner])
    ok = over > 0
    return unit[ok], over[ok], owner[ok]


def counted_rejections(scores: FloatArray, mass: FloatArray, owner: IntArray, sizes: FloatArray,
                       positives: FloatArray, alpha: float, test: str) -> FloatArray:
    """Rejected predictions per bin: each piece's mass where its score's test rejects against
    the bin's (k_b, N_b); a fractional k_b = ⌊k⌋ + f mixes (1 − f)·rej(⌊k⌋) + f·rej(⌈k⌉)."""
    nb = sizes.shape[0]
    if test == "t":
        phat = np.divide(positives, sizes, out=np.zeros_like(sizes), where=sizes > 0)
        rej = t_test_reject(scores, phat[owner], sizes[owner], alpha)
        return np.asarray(np.bincount(owner, weights=mass * rej, minlength=nb), dtype=np.float64)
    from calcheck.binomial import rejections_sorted

    bounds = np.concatenate(([0], np.cumsum(np.bincount(owner, minlength=nb)))).astype(np.int64)
    k = np.asarray(positives, dtype=np.float64)
    lo = np.floor(k + 1e-9)
    frac = np.clip(k - lo, 0.0, 1.0)
    frac[frac < 1e-9] = 0.0

    def rejected(kk: FloatArray) -> FloatArray:
        _, mask = rejections_sorted(scores, bounds, kk.astype(np.int64), alpha,
                                    return_mask=True, sizes=sizes)
        assert mask is not None
        return np.asarray(np.bincount(owner, weights=mass * mask, minlength=nb),
                          dtype=np.float64)

    r_lo = rejected(lo)
    if not frac.any():
        return r_lo
    return np.asarray((1.0 - frac) * r_lo + frac * rejected(lo + (frac > 0)), dtype=np.float64)


def expanded_quantiles(scores: FloatArray, mass: FloatArray, cuts: FloatArray,
                       qs: tuple[float, ...]) -> list[FloatArray]:
    """Per-bin quantiles (numpy's linear rule) of the expanded rows of the pieces (scores in
    order, masses whole numbers), the bins starting at expanded positions ``cuts``."""
    C = np.cumsum(mass)
    sizes = np.diff(cuts)
    valid = sizes > 0

    def value(pos: FloatArray) -> FloatArray:
        j = np.clip(np.searchsorted(C, pos, side="right"), 0, max(scores.shape[0] - 1, 0))
        return np.asarray(scores[j] if scores.shape[0] else np.zeros_like(pos), dtype=np.float64)

    out = []
    for q in qs:
        pos = (sizes - 1) * q
        lo = np.floor(pos)
        hi = np.minimum(lo + 1, np.maximum(sizes - 1, 0))
        v_lo, v_hi = value(cuts[:-1] + lo), value(cuts[:-1] + hi)
        out.append(np.where(valid, v_lo + (pos - lo) * (v_hi - v_lo), np.nan))
    return out


def counted_tce(data: Prepared, *, binning: str, bins: int, alpha: float, test: str,
                n_min: int | None, n_max: int | None) -> MetricResult:
    """:func:`tce` of aggregated rows (the section's comment)."""
    if data.weights is None or not data.weights.frequency:
        raise UsageError("TCE takes counts of identical rows (--count), not sampling weights")
    cuts, extra = counted_cuts(data, binning, bins, n_min, n_max)
    ax = data.axis
    edges = None
    if binning == "uniform":
        e = uniform_edges(bins)
        edges = (e[:-1].copy(), e[1:].copy())
    stats = ax.stats(cuts, kind=binning, params=extra)
    if edges is not None:
        from dataclasses import replace

        stats = replace(stats, lower=edges[0], upper=edges[1])
    unit, over, owner = bin_pieces(ax, cuts)
    ps = ax.scores[unit]
    sizes = np.diff(cuts)
    per_bin = counted_rejections(ps, over, owner, sizes, stats.sum_label, alpha, test)
    if test == "t":
        per_bin = per_bin.round()
    q1, med, q3 = expanded_quantiles(ps, over, cuts, (0.25, 0.5, 0.75))
    nonempty = sizes > 0
    firsts = np.searchsorted(owner, np.arange(sizes.shape[0]), side="left")
    lasts = np.searchsorted(owner, np.arange(sizes.shape[0]), side="right") - 1
    top = max(ps.shape[0] - 1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(nonempty, 100.0 * per_bin / np.maximum(sizes, 1), np.nan)
    n = data.mass
    return MetricResult(
        id=BINNINGS.get(binning, "tce"), value=100.0 * float(per_bin.sum()) / n, unit="percent",
        settings={"binning": binning, **extra, "alpha": alpha, "test": test,
                  "n_bins": stats.n_bins, "ties": data.ties},
        n_samples=data.n_samples, bins=stats,
        bin_extra={
            "min_score": np.where(nonempty, ps[np.clip(firsts, 0, top)], np.nan),
            "q1_score": q1, "median_score": med, "q3_score": q3,
            "max_score": np.where(nonempty, ps[np.clip(lasts, 0, top)], np.nan),
            "rejected": [count_value(x) for x in per_bin], "rejected_pct": pct,
        },
    )


# registry kernels: f(data, options) -> MetricResult


def _with(binning: str, data: Prepared, o: MetricOptions) -> MetricResult:
    return tce(data, binning=binning, bins=o.bins, alpha=o.alpha, test=o.test, n_min=o.tce_nmin,
               n_max=o.tce_nmax)


def tce_pava_bc(data: Prepared, o: MetricOptions) -> MetricResult:
    return _with("pava-bc", data, o)


def tce_quantile(data: Prepared, o: MetricOptions) -> MetricResult:
    return _with("quantile", data, o)


def tce_pava(data: Prepared, o: MetricOptions) -> MetricResult:
    return _with("pava", data, o)


def tce_uniform(data: Prepared, o: MetricOptions) -> MetricResult:
    return _with("uniform", data, o)
