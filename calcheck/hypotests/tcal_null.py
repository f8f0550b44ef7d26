"""The null distribution of T-Cal under label resampling: y*ᵢ ~ Bernoulli(sᵢ), scores kept.

Each trial needs, for every level m and every bin b with N_b ≥ 2 rows (a bin of one row adds
exactly 0), the sums K_b = Σ y* and Z_b = 2·Σ s·y* − K_b; with A_b = Σ s and QA_b = Σ s²,

    n·T_m = Σ_b w_b·((A_b − K_b)² − QA_b + Z_b),   w_b = 1/N_b,

which is Σ_b (S_b² − Q_b)/N_b of docs/tests.md written with the drawn labels.

How a trial is computed
-----------------------
* The scores are sorted once and grouped into *units*: a row, or a run of at least
  ``TIE_GROUP`` equal scores.  Every bin of every level is a run of units (equal scores share
  every bin), and a tied run's K is one Binomial(count, s) draw, exactly the law of its rows'
  Bernoulli sum.
* The prefix sums of K and of zq·K, zq = round((2s − 1)·2^S), are taken once per trial in
  64-bit integers (wrapping); a bin's K and Z are differences at its ends.  Integer differences
  are exact, so Z carries only the rounding of s to a multiple of 2^-S, S = 62 − bit length of
  the largest such bin (below 2^-(S+1) per row; S ≥ 42 at n = 10^6).
* The dyadic levels up to a *dense grid* 2^D take the grid's sums and merge pairs of bins down
  to m = 2 (⌊2^(d−1)·s⌋ = ⌊⌊2^d·s⌋/2⌋ exactly); s = 1 is the extra bin m at every level.  The
  other levels sum only their bins of two rows or more, each distinct run of rows once for all
  the levels lo … hi where it is a bin; a bin of 2 … 6 rows is (2/N)·Σ_(i<j) r_i·r_j,
  r = s − y, from the labels alone.  D minimises the work.
* Every buffer is allocated once per thread, no BLAS runs inside the threads and no ufunc mixes
  dtypes.  Trials run on up to ``MAX_THREADS`` threads; trial j draws from its own generator
  seeded by the j-th of ``rng.integers(0, 2**63, size=trials)``, so a seed gives the same null
  with any number of threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from calcheck._typing import FloatArray, IntArray

TIE_GROUP = 16                   # tied scores with this many rows are drawn as one Binomial
EXTREME = 2.0 ** -20             # scores this close to 0 or 1 are drawn from float64 uniforms
SCALE32 = 2.0 ** 32
MAX_THREADS = 4                  # threads of the simulation (bounded by the CPUs)
MAX_DENSE = 22                   # largest dense grid 2^D
TRIALS_PER_TASK = 8
# relative cost of one grid cell (two gathers, merges and sums over the levels below), of one
# bin summed at its ends (four gathers and the arithmetic) and of one bin of 2 … 6 rows; measured
DENSE_COST, BIN_COST, SMALL_COST = 6.0, 6.5, 1.5
SMALL = 6                        # bins of 2 … SMALL rows are summed from the labels alone

Progress = Callable[[int, int], None]


def runs(ids: np.ndarray) -> IntArray:
    """Start positions of the runs of equal values (sorted), plus the end."""
    n = ids.shape[0]
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    return np.concatenate((starts, [n])).astype(np.int64)


def bin_ids(scores: FloatArray, m: int) -> IntArray:
    """T-Cal bin id ⌊m·s⌋ in float64, no clipping (s = 1 gets its own id m)."""
    return np.floor(scores * float(m)).astype(np.int64)


def level_bounds(ss: FloatArray, m: int) -> IntArray:
    """Runs of the sorted scores ``ss`` in the bins ⌊m·s⌋."""
    return runs(bin_ids(ss, m))


@dataclass
class _Units:
    score: FloatArray            # one score per unit, sorted
    count: IntArray              # rows per unit
    row_start: IntArray          # first sorted row of each unit, plus n

    @staticmethod
    def of(ss: FloatArray) -> _Units:
        ties = runs(ss)                                   # runs of equal scores
        size = np.diff(ties)
        big = size >= TIE_GROUP
        # a unit starts at every row, except inside a big tie run
        inside = np.zeros(ss.shape[0] + 2, dtype=np.int64)
        np.add.at(inside, ties[:-1][big] + 1, 1)
        np.add.at(inside, ties[1:][big], -1)
        starts = np.flatnonzero(np.cumsum(inside)[:-1] == 0)
        return _Units(score=ss[starts[:-1]], count=np.diff(starts), row_start=starts)

    def unit_of_row(self, rows: IntArray) -> IntArray:
        """Unit index of the bin bounds ``rows`` (each a unit start or n)."""
        return np.searchsorted(self.row_start, rows).astype(np.int64)


@dataclass
class _Fine:
    """Bins summed at their ends, each once: a bin that is the same run of units at several
    consecutive levels (usual among the finest levels) serves all of them."""

    start: IntArray              # unit bounds
    end: IntArray
    A: FloatArray                # Σ s over the bin
    w: FloatArray                # 1/N_b
    ws: FloatArray               # w·2^-S
    levels: _Runs                # the bin is a bin of the levels lo … hi (indices of ms)
    c1: FloatArray               # per level: Σ_b QA_b/N_b over its bins of more than SMALL rows


@dataclass
class _Small:
    """Bins of k = 2 … SMALL rows (single-row units u … u + k − 1), most bins of the finest levels:
    (S² − Q)/N = (2/k)·Σ_(i<j) r_i·r_j with r = s − y, from the labels alone."""

    k: int
    grouped: IntArray            # u, in runs of equal levels (levels.perm)
    s: FloatArray                # (k, bins): s_u … s_(u+k−1), in the same order
    levels: _Runs


@dataclass
class _Runs:
    """How per-bin values (bins in position order) add up per level: ``perm`` puts the bins in
    runs of equal levels lo … hi, ``group`` starts each run."""

    perm: IntArray
    group: IntArray
    lo: IntArray
    hi: IntArray

    @staticmethod
    def of(lo: IntArray, hi: IntArray) -> _Runs:
        perm = np.lexsort((np.arange(lo.shape[0]), hi, lo))
        lo, hi = lo[perm], hi[perm]
        group = runs(lo * (hi.max(initial=0) + 2) + hi)[:-1][:lo.shape[0]]
        return _Runs(perm=perm, group=group, lo=lo[group], hi=hi[group])

    def add(self, values: FloatArray, scratch: FloatArray, tot: FloatArray) -> None:
        """tot[ℓ] += Σ values over the bins of level ℓ, as differences (cumsum afterwards)."""
        np.take(values, self.perm, out=scratch, mode="wrap")
        self.add_grouped(scratch, tot)

    def add_grouped(self, values: FloatArray, tot: FloatArray) -> None:
        """:meth:`add` for values already in ``perm`` order."""
        runs = np.add.reduceat(values, self.group)
        tot += np.bincount(self.lo, weights=runs, minlength=tot.shape[0])
        tot -= np.bincount(self.hi + 1, weights=runs, minlength=tot.shape[0])


BIN_SUM_ROWS = 1 << 22           # rows gathered at once by _bin_sums (~0.1 GB of indices)


def _bin_sums(x: FloatArray, starts: IntArray, ends: IntArray,
              chunk: int = BIN_SUM_ROWS) -> FloatArray:
    """Σ x over the rows [start, end) of each bin, summed bin by bin in row order (bins may be
    empty).  The bins of every level together cover the rows once a level, so they are taken
    a chunk of whole bins (about ``chunk`` rows) at a time: each bin's sum is the
    same sequence of additions, in bounded memory (all at once took ~0.8 GB at 10^6 rows)."""
    lens = (ends - starts).astype(np.int64)
    out = np.zeros(lens.shape[0])
    cum = np.cumsum(lens)
    a = 0
    while a < lens.shape[0]:
        done = int(cum[a - 1]) if a else 0
        b = max(int(np.searchsorted(cum, done + chunk, side="right")), a + 1)
        ln = lens[a:b]
        ids = np.repeat(np.arange(b - a), ln)
        rows = np.arange(ids.shape[0]) + np.repeat(starts[a:b] - (np.cumsum(ln) - ln), ln)
        out[a:b] = np.bincount(ids, weights=x[rows], minlength=b - a)
        a = b
    return out


@dataclass
class NullPlan:
    n: int
    ms: list[int]                # the levels, ascending
    units: _Units
    thresholds: np.ndarray       # uint32 round(s·2^32) per unit
    extreme: IntArray            # units drawn from float64 uniforms
    groups: IntArray             # tied runs drawn as one Binomial
    zq: np.ndarray               # int64 round((2s − 1)·2^S): Z = 2L − K in units of 2^-S
    scale: float                 # 2^-S
    D: int                       # the dense grid 2^D; ms[:D] = 2, 4, …, 2^D
    dense_bounds: IntArray       # unit bounds of the grid bins and of s = 1 (2^D + 2 values)
    dense_A: FloatArray          # Σ s per grid bin
    dense_w: list[FloatArray]    # per grid level 2^d, d = D … 1: w and Σ QA/N
    dense_c1: list[float]
    fine: _Fine
    small: list[_Small]          # bins of 2 … SMALL rows


def plan(ss: FloatArray, ms: list[int], bounds: dict[int, IntArray] | None = None, *,
         bin_rows: int = BIN_SUM_ROWS) -> NullPlan:
    """Everything the trials reuse, for the sorted scores ``ss`` and the ascending levels
    ``ms``; ``bounds`` may hold the row runs of some levels already (``level_bounds``);
    ``bin_rows``: the rows the bin sums gather at once (the same plan whatever it is)."""
    n = ss.shape[0]
    if list(ms) != sorted(set(ms)):
        raise ValueError("levels must be distinct and ascending")
    bounds = dict(bounds or {})
    for m in ms:
        if m not in bounds:
            bounds[m] = level_bounds(ss, m)
    units = _Units.of(ss)
    s2 = ss * ss
    rs, re, r0, r1, lo, hi = _distinct_runs(bounds, ms)

    # the dense grid: the work of 2^D cells against the bins it takes off the fine list
    chain = 0
    while chain < min(MAX_DENSE, len(ms)) and ms[chain] == 2 ** (chain + 1):
        chain += 1
    few = r1 - r0 <= SMALL                               # bins of 2 … SMALL rows
    costs = [DENSE_COST * (2 ** d if d else 0) + BIN_COST * int(np.count_nonzero(~few & (hi >= d)))
             + SMALL_COST * int(np.count_nonzero(few & (hi >= d))) for d in range(chain + 1)]
    D = int(np.argmin(costs))
    small = []
    for k in range(2, SMALL + 1):
        sel = np.flatnonzero((hi >= D) & (r1 - r0 == k))
        sel = sel[np.argsort(r0[sel], kind="stable")]
        runs = _Runs.of(np.maximum(lo[sel], D), hi[sel])
        u0 = units.unit_of_row(r0[sel])[runs.perm]
        small.append(_Small(k=k, grouped=u0, levels=runs,
                            s=np.stack([units.score[u0 + i] for i in range(k)]) if u0.size
                            else np.zeros((k, 0))))
    sel = np.flatnonzero((hi >= D) & ~few)
    sel = sel[np.argsort(r0[sel], kind="stable")]
    r0, r1, lo, hi = r0[sel], r1[sel], np.maximum(lo[sel], D), hi[sel]

    big_bins = [int((r1 - r0).max(initial=1))]
    dense_bounds, dA, dw, dc1, biggest = _dense(ss, s2, units, D, bin_rows)
    big_bins.append(biggest)
    S = 62 - max(big_bins).bit_length()
    us = units.score
    Nf = (r1 - r0).astype(np.float64)
    ub = units.unit_of_row(np.concatenate((r0, r1)))
    fine = _Fine(start=ub[:r0.shape[0]], end=ub[r0.shape[0]:], A=_bin_sums(ss, r0, r1, bin_rows),
                 w=1.0 / Nf, ws=2.0 ** -S / Nf, levels=_Runs.of(lo, hi),
                 c1=np.array([_c1(s2, rs[i], re[i], bin_rows) if i >= D else 0.0 for i in range(len(ms))]))
    extreme = np.flatnonzero(((us < EXTREME) | (us > 1.0 - EXTREME)) & (units.count == 1))
    groups = np.flatnonzero(units.count > 1)
    return NullPlan(
        n=n, ms=list(ms), units=units,
        thresholds=np.minimum(np.floor(us * SCALE32 + 0.5), SCALE32 - 1).astype(np.uint32),
        extreme=extreme, groups=groups,
        zq=2 * np.floor(us * 2.0 ** S + 0.5).astype(np.int64) - (1 << S), scale=2.0 ** -S,
        D=D, dense_bounds=dense_bounds, dense_A=dA, dense_w=dw,
        dense_c1=dc1, fine=fine, small=small)


def _distinct_runs(bounds: dict[int, IntArray], ms: list[int]
                   ) -> tuple[list[IntArray], list[IntArray], IntArray, IntArray, IntArray,
                              IntArray]:
    """Every level's bins of two rows or more (their starts and ends per level), and each
    distinct row run once with the levels lo … hi it is a bin of (levels that do not nest
    share nothing)."""
    rs, re, lv = [], [], []
    for i, m in enumerate(ms):
        b = bounds[m]
        keep = np.flatnonzero(np.diff(b) > 1)
        rs.append(b[:-1][keep])
        re.append(b[1:][keep])
        lv.append(np.full(keep.size, i, dtype=np.int64))
    r0, r1, level = _cat(rs), _cat(re), _cat(lv)
    order = np.lexsort((level, r1, r0))
    r0, r1, level = r0[order], r1[order], level[order]
    first = np.flatnonzero(np.concatenate(([True], (r0[1:] != r0[:-1]) | (r1[1:] != r1[:-1]))))
    first = first[:r0.shape[0]]                          # none when there are no such bins
    last = np.concatenate((first[1:], [r0.shape[0]]))[:first.shape[0]] - 1
    lo, hi = level[first], level[last]
    if np.any(hi - lo + 1 != last - first + 1):         # levels that do not nest: no sharing
        first, last, lo, hi = (np.arange(r0.shape[0]),) * 2 + (level, level)
    return rs, re, r0[first], r1[first], lo, hi


def _dense(ss: FloatArray, s2: FloatArray, units: _Units, D: int, bin_rows: int
           ) -> tuple[IntArray, FloatArray, list[FloatArray], list[float], int]:
    """The dense grid of 2^D cells: its unit bounds, each cell's Σs, and per merged level
    its bins' weights 1/N (0 for a bin of fewer than two rows) and Σ_b Σs²/N_b; and its
    largest cell's rows (1 without a grid)."""
    dense_bounds = np.zeros(0, dtype=np.int64)
    dA = np.zeros(0)
    dw: list[FloatArray] = []
    dc1: list[float] = []
    if not D:
        return dense_bounds, dA, dw, dc1, 1
    g = 2 ** D
    n = ss.shape[0]
    rows = np.concatenate((np.searchsorted(ss, np.arange(g + 1) / g, side="left"), [n]))
    dense_bounds = units.unit_of_row(rows)
    N = np.diff(rows).astype(np.float64)
    dA = _bin_sums(ss, rows[:-1], rows[1:], bin_rows)
    qa = _bin_sums(s2, rows[:-1], rows[1:], bin_rows)
    biggest = int(N.max(initial=1))
    for _ in range(D):
        wd = np.where(N > 1, 1.0 / np.maximum(N, 1.0), 0.0)
        dw.append(wd)
        dc1.append(float(np.sum(wd * qa)))
        N, qa = _merge(N), _merge(qa)
    return dense_bounds, dA, dw, dc1, biggest


def _c1(s2: FloatArray, starts: IntArray, ends: IntArray, chunk: int = BIN_SUM_ROWS) -> float:
    """Σ QA/N over a level's bins of more than ``SMALL`` rows (smaller bins: see _Small)."""
    big = np.flatnonzero(ends - starts > SMALL)
    if big.size == 0:
        return 0.0
    return float(np.sum(_bin_sums(s2, starts[big], ends[big], chunk) /
                        (ends[big] - starts[big])))


def _merge(x: FloatArray) -> FloatArray:
    """Grid bins of the next coarser level: pairs merged, the s = 1 bin (last) kept."""
    out = np.empty((x.shape[0] - 1) // 2 + 1, dtype=x.dtype)
    np.add(x[:-1:2], x[1:-1:2], out=out[:-1])
    out[-1] = x[-1]
    return out


def _cat(parts: list[IntArray]) -> IntArray:
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


class _Buffers:
    """One thread's arrays, reused by every trial it runs."""

    def __init__(self, p: NullPlan) -> None:
        u = p.units.score.shape[0]
        self.y = np.empty(u, dtype=bool)
        self.ext = np.empty(p.extreme.shape[0], dtype=bool)
        self.grp = np.empty(p.groups.shape[0], dtype=np.int64)
        self.PK = np.zeros(u + 1, dtype=np.int32 if p.n < 2 ** 31 else np.int64)
        self.PZ = np.zeros(u + 1, dtype=np.int64)
        g = p.dense_bounds.shape[0]
        self.gk = np.empty(g, dtype=self.PK.dtype)
        self.gz = np.empty(g, dtype=np.int64)
        self.dk = np.empty(max(g - 1, 0), dtype=self.PK.dtype)
        self.dz = np.empty(max(g - 1, 0), dtype=np.int64)
        self.grid = [(np.empty(w.shape[0]), np.empty(w.shape[0]), np.empty(w.shape[0]))
                     for w in p.dense_w]                     # S, Z, scratch per grid level
        f = p.fine.start.shape[0]
        self.fk = (np.empty(f, dtype=self.PK.dtype), np.empty(f, dtype=self.PK.dtype))
        self.fz = (np.empty(f, dtype=np.int64), np.empty(f, dtype=np.int64))
        self.fS, self.fZ, self.fC = np.empty(f), np.empty(f), np.empty(f)
        m = max((sm.grouped.shape[0] for sm in p.small), default=0)
        self.ys = np.empty(m, dtype=bool)
        self.rs = [np.empty(m) for _ in range(SMALL + 3)]
        self.scratch = np.empty(f)


def _trial(p: NullPlan, seed: int, b: _Buffers, out: FloatArray) -> None:
    """One draw of T for every level, written into ``out`` (len(ms),)."""
    g = np.random.Generator(np.random.SFC64(seed))
    units = p.units
    if p.extreme.size:                               # first the float64 and Binomial draws …
        np.less(g.random(p.extreme.size), units.score[p.extreme], out=b.ext)
    if p.groups.size:
        b.grp[:] = g.binomial(units.count[p.groups], units.score[p.groups])
    u = units.score.shape[0]
    raw = g.bit_generator.random_raw((u + 1) // 2)   # … then 32-bit uniforms
    # (every ufunc below has one dtype: a cast inside a ufunc costs 3–5× a copyto)
    np.less(np.asarray(raw).view(np.uint32)[:u], p.thresholds, out=b.y)
    b.y[p.extreme] = b.ext
    K, ZQ = b.PK[1:], b.PZ[1:]                   # per unit, then summed in place
    np.copyto(K, b.y)
    np.multiply(p.zq, b.y, out=ZQ)
    if p.groups.size:
        K[p.groups] = b.grp
        ZQ[p.groups] = p.zq[p.groups] * b.grp
    np.cumsum(K, out=K)
    np.cumsum(ZQ, out=ZQ)                        # wraps: differences of bins stay exact
    n = float(p.n)
    if p.D:
        np.take(b.PK, p.dense_bounds, out=b.gk, mode="wrap")
        np.take(b.PZ, p.dense_bounds, out=b.gz, mode="wrap")
        S, Z, _ = b.grid[0]
        np.subtract(b.gk[1:], b.gk[:-1], out=b.dk)
        np.copyto(S, b.dk)
        np.subtract(p.dense_A, S, out=S)                    # S = A − K
        np.subtract(b.gz[1:], b.gz[:-1], out=b.dz)
        np.copyto(Z, b.dz)
        np.multiply(Z, p.scale, out=Z)                      # Z = 2L − K
        for j in range(p.D):                # (no BLAS: its threads would fight ours)
            S, Z, T = b.grid[j]
            if j + 1 < p.D:
                S2, Z2, _ = b.grid[j + 1]
                np.add(S[:-1:2], S[1:-1:2], out=S2[:-1])
                S2[-1] = S[-1]
                np.add(Z[:-1:2], Z[1:-1:2], out=Z2[:-1])
                Z2[-1] = Z[-1]
            w = p.dense_w[j]
            np.multiply(S, S, out=T)
            np.add(T, Z, out=T)
            np.multiply(T, w, out=T)                        # w·(S² + Z)
            out[p.D - 1 - j] = (float(T.sum()) - p.dense_c1[j]) / n
    f = p.fine
    L = len(p.ms)
    if p.D < L:
        tot = np.zeros(L + 1)
        if f.start.size:
            k1, k0, S, Z = b.fk[0], b.fk[1], b.fS, b.fZ
            np.take(b.PK, f.end, out=k1, mode="wrap")
            np.take(b.PK, f.start, out=k0, mode="wrap")
            np.subtract(k1, k0, out=k1)
            np.copyto(S, k1)
            np.subtract(f.A, S, out=S)                      # S = A − K
            np.multiply(S, S, out=S)
            np.multiply(S, f.w, out=S)                      # w·S²
            z1, z0 = b.fz
            np.take(b.PZ, f.end, out=z1, mode="wrap")
            np.take(b.PZ, f.start, out=z0, mode="wrap")
            np.subtract(z1, z0, out=z1)
            np.copyto(Z, z1)
            np.multiply(Z, f.ws, out=Z)                     # w·Z
            np.add(S, Z, out=b.fC)
            f.levels.add(b.fC, b.scratch[:f.start.shape[0]], tot)
        for sm in p.small:
            if sm.grouped.size:
                _small(sm, b, tot)
        out[p.D:] = (np.cumsum(tot)[p.D:L] - f.c1[p.D:]) / n


def _small(sm: _Small, b: _Buffers, tot: FloatArray) -> None:
    """Add the bins of k single-row units: (2/k)·Σ_(i<j) r_i·r_j = (S² − Q)/k, r = s − y."""
    m = sm.grouped.shape[0]
    r = [x[:m] for x in b.rs]
    for i in range(sm.k):
        np.take(b.y[i:], sm.grouped, out=b.ys[:m], mode="wrap")   # y is K for these units
        np.copyto(r[i], b.ys[:m])
        np.subtract(sm.s[i], r[i], out=r[i])
    if sm.k == 2:
        np.multiply(r[0], r[1], out=r[0])
    elif sm.k == 3:                                 # (2/3)·(r0·(r1 + r2) + r1·r2)
        np.add(r[1], r[2], out=r[3])
        np.multiply(r[0], r[3], out=r[0])
        np.multiply(r[1], r[2], out=r[1])
        np.add(r[0], r[1], out=r[0])
        np.multiply(r[0], 2.0 / 3.0, out=r[0])
    else:                                           # (S² − Q)/k
        S, Q, x = r[sm.k], r[sm.k + 1], r[sm.k + 2]
        np.multiply(r[0], r[0], out=Q)
        np.copyto(S, r[0])
        for i in range(1, sm.k):
            np.add(S, r[i], out=S)
            np.multiply(r[i], r[i], out=x)
            np.add(Q, x, out=Q)
        np.multiply(S, S, out=S)
        np.subtract(S, Q, out=S)
        np.multiply(S, 1.0 / sm.k, out=r[0])
    sm.levels.add_grouped(r[0], tot)


def one_trial(p: NullPlan, seed: int) -> tuple[FloatArray, IntArray]:
    """T per level and the drawn successes K per unit of the trial seeded ``seed`` (for checks:
    a unit's rows with K successes, in any order, give the same statistic)."""
    b = _Buffers(p)
    out = np.empty(len(p.ms))
    _trial(p, seed, b, out)
    return out, np.diff(b.PK)


def _threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):                   # pragma: no cover (not Linux)
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_THREADS))


def simulate(p: NullPlan, *, trials: int, rng: np.random.Generator,
             progress: Progress | None = None, threads: int | None = None,
             per_task: int = TRIALS_PER_TASK) -> FloatArray:
    """Null draws of T_m for every level of the plan: an array of shape (len(ms), trials).
    Trial j draws from its own seed, so the draws are the same whatever ``threads`` (default:
    the cores, at most ``MAX_THREADS``) and ``per_task`` (trials a thread takes at a time)."""
    out = np.empty((trials, len(p.ms)))
    seeds = rng.integers(0, 2 ** 63, size=trials)
    local = threading.local()

    def run(a: int) -> int:
        if getattr(local, "b", None) is None:
            local.b = _Buffers(p)
        stop = min(trials, a + per_task)
        for j in range(a, stop):
            _trial(p, int(seeds[j]), local.b, out[j])
        return stop - a

    tasks = list(range(0, trials, per_task))
    workers = min(_threads() if threads is None else threads, len(tasks))
    done = 0
    if workers <= 1:
        for a in tasks:
            done += run(a)
            if progress is not None:
                progress(done, trials)
    else:
        from concurrent.futures import ThreadPoolExecutor

        from calcheck._threads import one_blas_thread

        with one_blas_thread(), ThreadPoolExecutor(max_workers=workers) as pool:
            for t in pool.map(run, tasks):
                done += t
                if progress is not None:
                    progress(done, trials)
    return np.ascontiguousarray(out.T)
