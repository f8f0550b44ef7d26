"""The exact two-sided binomial test, vectorized, equal to ``scipy.stats.binomtest``.

``scipy.stats.binomtest(k, n, p).pvalue`` ("minlike": the sum of the pmf over the outcomes no
more likely than k, with a relative tolerance 1e-7) is a Python call per test.  Here the same
arithmetic runs on arrays: the same ``binom.pmf/cdf/sf`` calls (:mod:`._binom_dist`: scipy's
own wrappers and ufuncs, without the start-up of ``scipy.stats``) and the same binary search for
the outcome on the other side of the mode, step for step, so the p-values are identical.

For TCE, where every prediction of a bin is tested against the bin's (k, N), most rows are far
from the rejection boundary.  :func:`rejections_sorted` decides them by chunks with exact monotone
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

from calcheck._binom_dist import BINOM as binom
from calcheck._typing import FloatArray, IntArray

P_FLOOR = 1e-300          # probabilities in (0, 1e-300) are tested as 1e-300 (see _normal)
RERR = 1 + 1e-7          # scipy's relative tolerance for "as likely as k"
SAFETY = 1e-9            # relative margin before trusting a bound over an exact p-value


def _normal(p: FloatArray) -> FloatArray:
    """Probabilities in (0, 1e-300) raised to 1e-300, for a call that overflowed: scipy's Boost
    beta functions overflow for some (k, n) below about 1e-304 (subnormal scores from 1e-309
    up).  The test's outcome cannot differ: the p-value is 1 when k = 0 and at most
    (n·p)^k < 1e-289 otherwise (n < 1e11).  Calls that do not overflow keep the exact p."""
    sub = (p > 0) & (p < P_FLOOR)
    return np.where(sub, P_FLOOR, p) if sub.any() else p


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
    try:
        return _tail_ends(k.ravel(), n.ravel(), p.ravel())
    except OverflowError:
        return _tail_ends(k.ravel(), n.ravel(), _normal(p.ravel()))


def _tail_ends(k: FloatArray, n: FloatArray, p: FloatArray
               ) -> tuple[FloatArray, FloatArray, np.ndarray]:
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
        ix = _search(lambda x, j: -binom.pmf_inside(x, ni[j], pi[j]), -d[i], np.ceil(pi * ni),
                     ni)
        tie = (d[i] == binom.pmf(ix, ni, pi)).astype(np.float64)
        y = ni - ix + tie
        t_hi[i] = ni - y + 1          # pval = cdf(k) + sf(n − y)
    i = np.flatnonzero(above)
    if i.size:
        ni, pi = n[i], p[i]
        ix = _search(lambda x, j: binom.pmf_inside(x, ni[j], pi[j]), d[i], np.zeros(i.size),
                     np.floor(pi * ni))
        t_lo[i] = ix                  # pval = cdf(ix) + sf(k − 1)
    return t_lo, t_hi, central


def _pvalue_from_ends(t_lo: FloatArray, t_hi: FloatArray, n: FloatArray, p: FloatArray,
                      p_lo: FloatArray | None = None, p_hi: FloatArray | None = None) -> FloatArray:
    """cdf(t_lo; p_lo) + sf(t_hi − 1; p_hi), clipped at 1 (p_lo = p_hi = p for an exact value)."""
    lo = np.asarray(p if p_lo is None else p_lo)
    hi = np.asarray(p if p_hi is None else p_hi)
    try:
        return _tails(t_lo, t_hi, n, lo, hi)
    except OverflowError:
        return _tails(t_lo, t_hi, n, _normal(lo), _normal(hi))


def _tails(t_lo: FloatArray, t_hi: FloatArray, n: FloatArray, lo: FloatArray,
           hi: FloatArray) -> FloatArray:
    """cdf(t_lo; lo) + sf(t_hi − 1; hi), clipped at 1 (OverflowError as scipy raises it)."""
    a, b = binom.cdf(t_lo, n, lo), binom.sf(t_hi - 1, n, hi)
    return np.asarray(np.minimum(1.0, a + b), dtype=np.float64)


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
    _check_binom(k_, n_, p_)
    return pvalues(k_, n_, p_)


def pvalues(k_: FloatArray, n_: FloatArray, p_: FloatArray) -> FloatArray:
    """:func:`binomtest_pvalue` of valid 1-D float arrays, unchecked (the engines' path)."""
    t_lo, t_hi, central = tail_ends(k_, n_, p_)
    out = np.ones(k_.shape[0])
    nc = np.flatnonzero(~central)
    if nc.size:
        out[nc] = _pvalue_from_ends(t_lo[nc], t_hi[nc], n_[nc], p_[nc])
    return out


def flat(k: ArrayLike, n: ArrayLike, p: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
    a, b, c = np.broadcast_arrays(np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64),
                                  np.asarray(p, dtype=np.float64))
    return np.ravel(a), np.ravel(b), np.ravel(c)


def _check_binom(k: FloatArray, n: FloatArray, p: FloatArray) -> None:
    """0 <= k <= n, n >= 1, both integers, 0 <= p <= 1 (as scipy's binomtest asks): anything
    else is a UsageError naming the first offending entry."""
    from calcheck.errors import UsageError

    checks = (
        (~np.isfinite(k) | (k != np.floor(k)) | (k < 0), "k must be an integer >= 0"),
        (~np.isfinite(n) | (n != np.floor(n)) | (n < 1), "n must be an integer >= 1"),
        (k > n, "k must be at most n"),
        (~(p >= 0) | ~(p <= 1), "p must be in [0, 1]"),
    )
    for bad, what in checks:
        if bad.any():
            i = int(np.argmax(bad))
            raise UsageError(f"binomtest_pvalue: {what}; got k={k[i]:g}, n={n[i]:g}, p={p[i]:g} "
                             f"(entry {i})")


def _first_true(pred: Callable[[IntArray, IntArray], np.ndarray], lo: IntArray,
                hi: IntArray) -> IntArray:
    """For each segment j, the first position in [lo_j, hi_j) where ``pred(j, pos)`` holds.

    ``pred`` must be monotone (false … false true … true) within each segment; hi_j if never.
    """
    lo, hi = lo.copy(), hi.copy()
    while True:
        open_ = np.flatnonzero(lo < hi)
        if open_.size == 0:
            return lo
        mid = (lo[open_] + hi[open_]) // 2
        ok = pred(open_, mid)
        lo[open_] = np.where(ok, lo[open_], mid + 1)
        hi[open_] = np.where(ok, mid, hi[open_])


def _pieces(start: IntArray, end: IntArray, size: int) -> tuple[IntArray, IntArray, IntArray]:
    """Cut segments [start, end) into pieces of at most ``size`` rows: (piece starts, ends, owner)."""
    length = end - start
    count = np.where(length > 0, (length + size - 1) // size, 0)
    owner = np.repeat(np.arange(start.shape[0]), count)
    within = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    p_start = start[owner] + within * size
    p_end = np.minimum(p_start + size, end[owner])
    return p_start.astype(np.int64), p_end.astype(np.int64), owner.astype(np.int64)


def _chunk_bounds(scores: FloatArray, st: IntArray, en: IntArray, k: FloatArray,
                  n: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Exact lower and upper bounds of the p-values of the rows of each chunk."""
    return interval_bounds(k, n, scores[st], scores[en - 1])


def interval_bounds(k: FloatArray, n: FloatArray, p1: FloatArray,
                    p2: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Lower and upper bounds of ``binomtest(k, n, p).pvalue`` over p in [p1, p2], an interval
    on one side of k/n (p·n < k throughout, or p·n > k throughout).

    The two ends' searches run as one call on both ends side by side, and the two bounds'
    tails as one: elementwise the same arithmetic in half the calls (the halving of
    :func:`decided_pieces` calls this on a few intervals at a time, where a call costs
    numpy's per-call overhead).  Where a joint call overflows, each half is redone as its own
    call, which raises its own probabilities (:func:`_normal`): the same values as apart."""
    k, n, p1, p2 = (np.ravel(a) for a in np.broadcast_arrays(
        *(np.asarray(x, dtype=np.float64) for x in (k, n, p1, p2))))
    m = k.shape[0]
    kk, nn, pp = np.concatenate((k, k)), np.concatenate((n, n)), np.concatenate((p1, p2))
    try:
        t_lo, t_hi, _ = _tail_ends(kk, nn, pp)
    except OverflowError:
        (lo1, hi1, _), (lo2, hi2, _) = tail_ends(k, n, p1), tail_ends(k, n, p2)
        t_lo, t_hi = np.concatenate((lo1, lo2)), np.concatenate((hi1, hi2))
    # the upper bound cdf(t_lo(p2); p1) + sf(t_hi(p1) − 1; p2), then the lower one
    # cdf(t_lo(p1); p2) + sf(t_hi(p2) − 1; p1)
    ends_lo = np.concatenate((t_lo[m:], t_lo[:m]))
    ends_hi = np.concatenate((t_hi[:m], t_hi[m:]))
    p_hi = np.concatenate((p2, p1))
    try:
        bound = _tails(ends_lo, ends_hi, nn, pp, p_hi)
    except OverflowError:
        bound = np.concatenate([_pvalue_from_ends(ends_lo[h], ends_hi[h], nn[h], pp[h],
                                                  p_lo=pp[h], p_hi=p_hi[h])
                                for h in (slice(0, m), slice(m, None))])
    return bound[m:], bound[:m]


def side_ends(k: FloatArray, n: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The largest float p with p·n < k and the smallest with p·n > k (the float predicates
    of :func:`tail_ends`, monotone in p): the last float below k/n's side boundary and the
    first above it."""
    below = k / n
    above = below.copy()
    for _ in range(4):                    # k/n is within an ulp or two of both
        below = np.where(below * n >= k, np.nextafter(below, -np.inf), below)
        above = np.where(above * n <= k, np.nextafter(above, np.inf), above)
    for _ in range(4):
        up = np.nextafter(below, np.inf)
        below = np.where(up * n < k, up, below)
        down = np.nextafter(above, -np.inf)
        above = np.where(down * n > k, down, above)
    if np.any(below * n >= k) or np.any(above * n <= k):
        raise RuntimeError("side_ends: the sides of k/n were not found")
    return below, above


def decided_pieces(k: FloatArray, n: FloatArray, lo: FloatArray, hi: FloatArray, alpha: float,
                   min_width: FloatArray, *, levels: int = 64
                   ) -> tuple[IntArray, FloatArray, FloatArray, np.ndarray]:
    """Cover score intervals [lo_i, hi_i], each on one side of k_i/n_i, by pieces on which
    :func:`interval_bounds` decides ``binomtest(k_i, n_i, p).pvalue <= alpha`` for every p:
    an undecided interval is halved at its midpoint until decided or no wider than
    ``min_width_i`` (what is left is not covered).  Returns the decided pieces as (owner i,
    lower end, upper end, rejected), disjoint, in order of owner then score.

    A prediction in a piece gets the decision its own test gives — the bounds of an interval
    hold at each point of it, the premise of :func:`rejections_sorted`'s chunks."""
    owner = np.arange(k.shape[0])
    a, b = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    out: list[tuple[IntArray, FloatArray, FloatArray, np.ndarray]] = []
    for _ in range(levels):
        if owner.shape[0] == 0:
            break
        lower, upper = interval_bounds(k[owner], n[owner], a, b)
        yes, no = upper <= alpha * (1 - SAFETY), lower > alpha * (1 + SAFETY)
        done = yes | no
        out.append((owner[done], a[done], b[done], yes[done]))
        split = ~done & (b - a > min_width[owner])
        owner, a, b = owner[split], a[split], b[split]
        mid = a + (b - a) * 0.5
        mid = np.where(mid < b, mid, a)                 # (two adjacent floats)
        owner = np.concatenate((owner, owner))
        a, b = np.concatenate((a, np.nextafter(mid, np.inf))), np.concatenate((mid, b))
    if not out:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool)
    o, pa, pb, rej = (np.concatenate(x) for x in zip(*out))
    order = np.lexsort((pa, o))
    return o[order].astype(np.int64), pa[order], pb[order], rej[order]


def decided_by_pieces(k: FloatArray, n: FloatArray, lo: FloatArray, hi: FloatArray,
                      alpha: float, depth: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """(rejected for sure, accepted for sure) of score intervals [lo_i, hi_i] (lo_i < hi_i),
    each on one side of k_i/n_i, that :func:`interval_bounds` over the whole interval leaves
    open: :func:`decided_pieces` down to 2^-``depth`` of each interval, which decides it when
    its pieces cover it end to end and agree.  The bounds over a whole interval are loose where
    the other tail's first value as likely as k changes within it (one value's probability,
    ~10^-3 with tens of expected failures); its halves are decided on each side of the test's
    threshold — so only the intervals holding a threshold stay open, as for exact tests.  An
    interval whose ends' own tests differ holds one, and is left open without halving."""
    m = k.shape[0]
    yes, no = np.zeros(m, dtype=bool), np.zeros(m, dtype=bool)
    if m == 0:
        return yes, no
    ends = pvalues(np.concatenate((k, k)), np.concatenate((n, n)),
                   np.concatenate((lo, hi))) <= alpha
    same = np.flatnonzero(ends[:m] == ends[m:])
    if same.shape[0] == 0:
        return yes, no
    o, a, b, rej = decided_pieces(k[same], n[same], lo[same], hi[same], alpha,
                                  (hi[same] - lo[same]) * 2.0 ** -depth, levels=depth + 1)
    if o.shape[0] == 0:
        return yes, no
    o = same[o]
    # pieces are disjoint and in (owner, score) order: a cover starts at lo, ends at hi and
    # each piece starts at the float after the previous one's end
    first = np.ones(o.shape[0], dtype=bool)
    first[1:] = o[1:] != o[:-1]
    last = np.append(first[1:], True)
    broken = np.zeros(o.shape[0], dtype=bool)
    broken[first] = a[first] != lo[o[first]]
    broken[last] |= b[last] != hi[o[last]]
    inner = np.flatnonzero(~first)
    broken[inner] |= a[inner] != np.nextafter(b[inner - 1], np.inf)
    some = np.bincount(o, minlength=m) > 0
    gaps = np.bincount(o, weights=broken, minlength=m) > 0
    hits = np.bincount(o, weights=rej, minlength=m)
    whole = some & ~gaps
    pieces = np.bincount(o, minlength=m)
    yes[whole & (hits == pieces)] = True
    no[whole & (hits == 0)] = True
    return yes, no


def rejections_sorted(scores: FloatArray, bounds: IntArray, k: IntArray, alpha: float, *,
                      chunk: int | None = None, refine: int = 64,
                      return_mask: bool = False,
                      sizes: np.ndarray | None = None) -> tuple[IntArray, np.ndarray | None]:
    """Per bin, how many rows have ``binomtest(k_b, N_b, p=s_i).pvalue <= alpha``, exactly.

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Scores sorted ascending within each bin (positional bins over the sorted scores).
    bounds : ndarray of shape (B + 1,)
        Bin cut positions; bin b holds rows ``bounds[b]:bounds[b+1]`` with ``k[b]`` positives.
    alpha : float
        Rejection when the p-value is <= alpha.
    chunk, refine : int
        Rows per chunk of the first bound pass (default: n/2000 within [32, 4096]) and of the
        second pass over the chunks the first could not decide.
    return_mask : bool
        Also return the row-level rejection mask.
    sizes : ndarray of shape (B,), optional
        Each bin's N_b when its rows stand for more predictions than they are (aggregated
        rows: a row per distinct prediction, :mod:`calcheck.weights`); default the rows.

    Returns
    -------
    counts : ndarray of shape (B,), int64
    mask : ndarray of shape (n,) of bool, or None
    """
    m = scores.shape[0]
    n_bins = bounds.shape[0] - 1
    counts = np.zeros(n_bins, dtype=np.int64)
    mask = np.zeros(m, dtype=bool) if return_mask else None
    if m == 0:
        return counts, mask
    start, end = bounds[:-1].astype(np.int64), bounds[1:].astype(np.int64)
    kf = k.astype(np.float64)
    nf = (end - start).astype(np.float64) if sizes is None else \
        np.asarray(sizes, dtype=np.float64)
    # side boundaries per bin, with scipy's own float predicates: p·n < k, then p·n <= k
    a = _first_true(lambda b, i: scores[i] * nf[b] >= kf[b], start, end)
    c = _first_true(lambda b, i: scores[i] * nf[b] > kf[b], a, end)
    seg_start = np.concatenate((start, c))              # [start, a): p·n < k ; [c, end): p·n > k
    seg_end = np.concatenate((a, end))
    seg_bin = np.concatenate((np.arange(n_bins), np.arange(n_bins)))
    size = chunk or int(np.clip(m // 2000, 32, 4096))

    def decide(st: IntArray, en: IntArray, b: IntArray) -> tuple[np.ndarray, np.ndarray]:
        lower, upper = _chunk_bounds(scores, st, en, kf[b], nf[b])
        return upper <= alpha * (1 - SAFETY), lower > alpha * (1 + SAFETY)

    def take(st: IntArray, en: IntArray, b: IntArray, sel: np.ndarray) -> None:
        np.add.at(counts, b[sel], en[sel] - st[sel])
        if mask is not None:
            for x, y in zip(st[sel], en[sel]):
                mask[x:y] = True

    ps, pe, owner = _pieces(seg_start, seg_end, size)
    pb = seg_bin[owner]
    yes, no = decide(ps, pe, pb)
    take(ps, pe, pb, yes)
    und = ~yes & ~no
    if und.any() and refine < size:
        qs, qe, qo = _pieces(ps[und], pe[und], refine)
        qb = pb[und][qo]
        yes, no = decide(qs, qe, qb)
        take(qs, qe, qb, yes)
        und = ~yes & ~no
        ps, pe, pb = qs, qe, qb
    if und.any():
        rows = np.concatenate([np.arange(x, y) for x, y in zip(ps[und], pe[und])])
        rb = np.repeat(pb[und], (pe - ps)[und])
        rej = pvalues(*flat(kf[rb], nf[rb], scores[rows])) <= alpha
        np.add.at(counts, rb[rej], 1)
        if mask is not None:
            mask[rows[rej]] = True
    return counts, mask
