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
    row_bin_ids,
    uniform_bounds,
    uniform_edges,
)
from calcheck.errors import TooFewRows, UsageError
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics._result import MetricResult
from calcheck.pava import default_pava_bc_sizes, pava_bc_bounds

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
        from calcheck.metrics.tce_counted import counted_tce

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
