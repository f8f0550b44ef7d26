"""The exact two-sided binomial test, vectorized, equal to ``scipy.stats.binomtest``.

``scipy.stats.binomtest(k, n, p).pvalue`` ("minlike": the sum of the pmf over the outcomes no
more likely than k, with a relative tolerance 1e-7) is a Python call per test.  Here the same
arithmetic runs on arrays: the same ``binom.pmf/cdf/sf`` calls and the same binary search for
the outcome on the other side of the mode, step for step, so the p-values are identical.

For TCE, where every prediction of a bin is tested against the bin's (k, N), most rows are far
from the rejection boundary.  :func:`reject_sorted` decides them by chunks with exact monotone
bounds and computes the exact p-value only for rows in chunks the bounds cannot decide.

Every p-value is written as ``cdf(t_lo; p) + sf(t_hi − 1; p)``: the lower tail ends at t_lo and
the upper tail starts at t_hi.  For p·n < k, t_hi = k and t_lo is the counterpart found by the
search; for p·n > k, t_lo = k and t_hi the counterpart.  Both counterparts are non-decreasing
in p (the likelihood ratio pmf(x; p)/pmf(k; p) is monotone in p), and cdf(j; p) decreases and
sf(j; p) increases with p, so on a chunk [p1, p2] on one side of k/N::

    cdf(t_lo(p1); p2) + sf(t_hi(p2) − 1; p1)  <=  p-value(p)  <=  cdf(t_lo(p2); p1) + sf(t_hi(p1) − 1; p2)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import binom

from calcheck._typing import FloatArray, IntArray

RERR = 1 + 1e-7          # scipy's relative tolerance for "as likely as k"
SAFETY = 1e-9            # relative margin before trusting a bound over an exact p-value


def _search(a: Callable[[FloatArray, IntArray], FloatArray], d: FloatArray, lo: FloatArray,
            hi: FloatArray) -> FloatArray:
    """Vectorized ``scipy.stats._binomtest._binary_search_for_binom_tst``, step for step."""
    lo = lo.astype(np.float64).copy()
    hi = hi.astype(np.float64).copy()
    res = np.zeros(lo.shape[0])
    done = np.zeros(lo.shape[0], dtype=bool)
    active = np.flatnonzero(lo < hi)
    while active.size:
        mid = lo[active] + np.floor((hi[active] - lo[active]) / 2)
        midval = a(mid, active)
        dd = d[active]
        less, greater = midval < dd, midval > dd
        equal = ~less & ~greater
        lo[active[less]] = mid[less] + 1
        hi[active[greater]] = mid[greater] - 1
        res[active[equal]] = mid[equal]
        done[active[equal]] = True
        active = active[~equal]
        active = active[lo[active] < hi[active]]
    rest = np.flatnonzero(~done)
    if rest.size:
        val = a(lo[rest], rest)
        res[rest] = np.where(val <= d[rest], lo[rest], lo[rest] - 1)
    return res


def tail_ends(k: ArrayLike, n: ArrayLike, p: ArrayLike) -> tuple[FloatArray, FloatArray, np.ndarray]:
    """(t_lo, t_hi, central) of the two-sided test: p-value = cdf(t_lo) + sf(t_hi − 1).

    ``central`` marks k == p·n exactly, where scipy returns 1 without a search.
    """
    k, n, p = np.broadcast_arrays(np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64),
                                  np.asarray(p, dtype=np.float64))
    k, n, p = k.ravel(), n.ravel(), p.ravel()
    pn = p * n
    central = k == pn
    below = k < pn                    # k in the lower tail: search above the mode
    above = ~central & ~below         # k in the upper tail: search below the mode
    d = binom.pmf(k, n, p) * RERR
    t_lo = k.copy()
    t_hi = k.copy()
    i = np.flatnonzero(below)
    if i.size:
        ni, pi = n[i], p[i]
        ix = _search(lambda x, j: -binom.pmf(x, ni[j], pi[j]), -d[i], np.ceil(pi * ni), ni)
        tie = (d[i] == binom.pmf(ix, ni, pi)).astype(np.float64)
        y = ni - ix + tie
        t_hi[i] = ni - y + 1          # pval = cdf(k) + sf(n − y)
    i = np.flatnonzero(above)
    if i.size:
        ni, pi = n[i], p[i]
        ix = _search(lambda x, j: binom.pmf(x, ni[j], pi[j]), d[i], np.zeros(i.size),
                     np.floor(pi * ni))
        t_lo[i] = ix                  # pval = cdf(ix) + sf(k − 1)
    return t_lo, t_hi, central


def _pvalue_from_ends(t_lo: FloatArray, t_hi: FloatArray, n: FloatArray, p: FloatArray,
                      p_lo: FloatArray | None = None, p_hi: FloatArray | None = None) -> FloatArray:
    """cdf(t_lo; p_lo) + sf(t_hi − 1; p_hi), clipped at 1 (p_lo = p_hi = p for an exact value)."""
    a = binom.cdf(t_lo, n, p if p_lo is None else p_lo)
    b = binom.sf(t_hi - 1, n, p if p_hi is None else p_hi)
    return np.minimum(1.0, a + b)


def binomtest_pvalue(k: ArrayLike, n: ArrayLike, p: ArrayLike) -> FloatArray:
    """Two-sided exact binomial p-values, elementwise equal to ``binomtest(k, n, p).pvalue``.

    Parameters
    ----------
    k, n : array_like of int
        Successes and trials (0 <= k <= n, n >= 1); broadcast against ``p``.
    p : array_like of float
        Hypothesized success probabilities in [0, 1].

    Returns
    -------
    ndarray of float64
        The p-values, flattened to 1-D in broadcast order.
    """
    k_, n_, p_ = (np.ravel(a) for a in np.broadcast_arrays(np.asarray(k, dtype=np.float64),
                                                           np.asarray(n, dtype=np.float64),
                                                           np.asarray(p, dtype=np.float64)))
    t_lo, t_hi, central = tail_ends(k_, n_, p_)
    out = np.ones(k_.shape[0])
    nc = np.flatnonzero(~central)
    if nc.size:
        out[nc] = _pvalue_from_ends(t_lo[nc], t_hi[nc], n_[nc], p_[nc])
    return out


def _chunks(keys: IntArray, size: int) -> IntArray:
    """Starts of the runs of equal ``keys``, each run cut into pieces of at most ``size`` rows."""
    m = keys.shape[0]
    seg = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    seg_len = np.diff(np.concatenate((seg, [m])))
    pieces = (seg_len + size - 1) // size
    first = np.repeat(seg, pieces)
    offset = (np.arange(pieces.sum()) - np.repeat(np.cumsum(pieces) - pieces, pieces)) * size
    return (first + offset).astype(np.int64)


def reject_sorted(scores: FloatArray, k: IntArray, n: IntArray, bin_of_row: IntArray,
                  alpha: float, *, chunk: int | None = None) -> np.ndarray:
    """Whether ``binomtest(k_b, N_b, p=s_i).pvalue <= alpha`` for every row i, exactly.

    Rows must be sorted by score within each bin (true for positional bins over the stably
    sorted scores).  Decides chunks of rows with the monotone bounds of the module docstring
    and computes exact p-values only where the bounds straddle ``alpha``.
    """
    m = scores.shape[0]
    if m == 0:
        return np.zeros(0, dtype=bool)
    kr = k[bin_of_row].astype(np.float64)
    nr = n[bin_of_row].astype(np.float64)
    side = np.sign(scores * nr - kr).astype(np.int64)        # -1: p·n < k, 0: central, +1
    size = chunk or int(np.clip(m // 2000, 32, 4096))
    starts = _chunks(bin_of_row * 3 + side + 1, size)
    ends = np.concatenate((starts[1:], [m]))
    reject = np.zeros(m, dtype=bool)
    cside = side[starts]
    use = np.flatnonzero(cside != 0)                          # central rows: p-value 1
    if use.size == 0:
        return reject
    st, en = starts[use], ends[use]
    p1, p2 = scores[st], scores[en - 1]
    kc, nc = kr[st], nr[st]
    lo1, hi1, _ = tail_ends(kc, nc, p1)
    lo2, hi2, _ = tail_ends(kc, nc, p2)
    upper = _pvalue_from_ends(lo2, hi1, nc, p1, p_lo=p1, p_hi=p2)
    lower = _pvalue_from_ends(lo1, hi2, nc, p1, p_lo=p2, p_hi=p1)
    all_reject = upper <= alpha * (1 - SAFETY)
    none_reject = lower > alpha * (1 + SAFETY)
    for a, b in zip(st[all_reject], en[all_reject]):
        reject[a:b] = True
    undecided = ~all_reject & ~none_reject
    if undecided.any():
        rows = np.concatenate([np.arange(a, b) for a, b in zip(st[undecided], en[undecided])])
        reject[rows] = binomtest_pvalue(kr[rows], nr[rows], scores[rows]) <= alpha
    return reject
