"""T-Cal: a test of calibration built on the debiased plug-in estimator of the squared ℓ2-ECE.

Lee, Huang, Hassani, Dobriban, *T-Cal: An optimal test for the calibration of predictive
models* (formulas restated in docs/tests.md).  For m bins with id ⌊m·s⌋ (no clipping: s = 1 gets id
m), residuals r = s − y, S_b = Σ r, Q_b = Σ r², N_b rows:

* DPE  T_m = (1/n) Σ_b (S_b² − Q_b) / N_b   (eq. 6; squared, may be negative; singletons add 0)
* biased plug-in (1/n) Σ_b S_b² / N_b (eq. 5) and ℓ1 plug-in (1/n) Σ_b |S_b|.

The null distribution is simulated (paper §3.1): ``labels`` redraws y* ~ Bernoulli(s) with the
scores kept (exact type-I control by exchangeability); ``consistency`` (the authors') redraws n
scores with replacement and then labels.  Per level p = (1 + #{T* ≥ T − tol}) / (1 + R).
Adaptive T-Cal tests the dyadic levels m = 2^1 … 2^B, B = int(2·log2(n / √ln n)), and rejects
when some level has p ≤ α/B (Bonferroni); its p-value is min(1, B · min p).

How the simulation is made fast
-------------------------------
Under ``labels`` resampling a bin needs only K = Σ y* and L = Σ s·y*, since S = A − K and
Q = Σ s² − 2L + K with A = Σ s.  The scores are sorted once; at every dyadic level a bin is a run
of the sorted rows, and a bin at level b is the union of (at most) two bins of level b + 1
(multiplying by a power of two is exact in floating point).  So the sums of one *base* level are
taken over the rows, coarser levels are merged from finer ones bin by bin, and finer levels,
where most bins are singletons that contribute exactly 0, sum only the rows of their
non-singleton bins.  The base level is chosen to minimise that work.  Trials run in chunks that
bound the memory, and one set of draws serves every level (each level's marginal null is
unchanged).

References
----------
.. [1] Lee, Huang, Hassani, Dobriban. T-Cal: An optimal test for the calibration of predictive
       models. Journal of Machine Learning Research 24(335), 2023.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import stable_argsort
from calcheck.errors import UsageError
from calcheck.hypotests._result import TestResult

RESAMPLING = ("labels", "consistency")
TIE_TOL = 1e-12
MAX_THREADS = 4                 # threads of the null simulation (bounded by the CPUs)
CHUNK_BYTES = 96_000_000         # memory budget of one chunk of simulated trials (measured best)

Progress = Callable[[int, int], None]


def n_levels(n: int) -> int:
    """Number of dyadic levels of adaptive T-Cal: B = int(2·log2(n / √ln n)), at least 1."""
    if n < 3:
        return 1
    return max(1, int(2 * math.log2(n / math.sqrt(math.log(n)))))


def bin_ids(scores: FloatArray, m: int) -> IntArray:
    """T-Cal bin id ⌊m·s⌋ in float64, no clipping (s = 1 gets its own id m)."""
    return np.floor(scores * float(m)).astype(np.int64)


def _runs(ids: IntArray) -> IntArray:
    """Start positions of the runs of equal ids (ids sorted), plus the end."""
    n = ids.shape[0]
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    return np.concatenate((starts, [n])).astype(np.int64)


@dataclass(frozen=True)
class PluginStats:
    """The three plug-in statistics of one binning."""

    dpe: float
    plugin_l2_biased: float
    plugin_l1: float


def plugin_from_bounds(r_sorted: FloatArray, bounds: IntArray) -> PluginStats:
    """DPE, biased squared ℓ2 plug-in and ℓ1 plug-in of positional bins over sorted residuals."""
    n = r_sorted.shape[0]
    starts = bounds[:-1]
    cnt = np.diff(bounds).astype(np.float64)
    S = np.add.reduceat(r_sorted, starts)
    Q = np.add.reduceat(r_sorted * r_sorted, starts)
    return PluginStats(dpe=float(np.sum((S * S - Q) / cnt) / n),       # eq. (6)
                       plugin_l2_biased=float(np.sum(S * S / cnt) / n),  # eq. (5)
                       plugin_l1=float(np.sum(np.abs(S)) / n))


def dpe(scores: ArrayLike, labels: ArrayLike, m: int) -> PluginStats:
    """DPE and the plug-in statistics with m bins of id ⌊m·s⌋ (docs/tests.md)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    order = stable_argsort(s)
    ss = s[order]
    return plugin_from_bounds(ss - y[order], _runs(bin_ids(ss, m)))


# ---------------------------------------------------------------------------------------------
# the level structure of one data set


@dataclass
class _Level:
    m: int
    bounds: IntArray                  # runs of the sorted rows
    parent: IntArray | None = None    # for merged levels: starts of merged groups in the finer level
    rows: IntArray | None = None      # for fine levels: sorted positions of non-singleton bins
    local: IntArray | None = None     # starts of those bins within ``rows``
    counts: FloatArray | None = None  # N_b of the bins the simulation sums over


def _plan(ss: FloatArray, ms: list[int]) -> tuple[list[_Level], int]:
    """Bins of every level and the base level (index) that minimises simulation work."""
    n = ss.shape[0]
    levels = [_Level(m=m, bounds=_runs(bin_ids(ss, m))) for m in ms]
    nb = np.array([lv.bounds.shape[0] - 1 for lv in levels])
    nonsingle = []
    for lv in levels:
        c = np.diff(lv.bounds)
        nonsingle.append(int(c[c > 1].sum()))
    # cost(base j) = n (rows at the base) + Σ_{i<j} bins(i+1) (merges) + Σ_{i>j} rows in
    # non-singleton bins of level i (direct sums); levels are in increasing m
    costs = []
    for j in range(len(levels)):
        costs.append(n + int(nb[1:j + 1].sum()) + sum(nonsingle[j + 1:]))
    base = int(np.argmin(costs))
    for i, lv in enumerate(levels):
        c = np.diff(lv.bounds)
        if i < base:
            finer = levels[i + 1].bounds[:-1]
            # a finer bin's parent is the coarse bin containing its first row
            lv.parent = np.searchsorted(finer, lv.bounds[:-1]).astype(np.int64)
            lv.counts = c.astype(np.float64)
        elif i > base:
            keep = np.flatnonzero(c > 1)
            lens = c[keep]
            lv.rows = (np.repeat(lv.bounds[:-1][keep], lens)
                       + np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens))
            lv.local = (np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64)
                        if lens.size else np.zeros(0, dtype=np.int64))
            lv.counts = lens.astype(np.float64)
        else:
            lv.counts = c.astype(np.float64)
    return levels, base


def _sums(x: FloatArray, starts: IntArray) -> FloatArray:
    """Row-wise segment sums of a (trials, k) array."""
    if starts.shape[0] == 0:
        return np.zeros((x.shape[0], 0))
    return np.add.reduceat(x, starts, axis=1)


def _indicator(groups: IntArray, cols: IntArray, n_groups: int, n_cols: int) -> Any:
    """Sparse 0/1 matrix (n_groups × n_cols) with a one at (groups[j], cols[j])."""
    from scipy.sparse import csr_matrix

    return csr_matrix((np.ones(cols.shape[0]), (groups, cols)), shape=(n_groups, n_cols))


def _with_scores(ind: Any, ss: FloatArray) -> Any:
    """The indicator stacked over itself with each one replaced by the row's score: one
    product with the drawn labels gives K = Σ y* (top half) and L = Σ s·y* (bottom half)."""
    from scipy.sparse import csr_matrix, vstack

    weighted = csr_matrix((ss[ind.indices], ind.indices, ind.indptr), shape=ind.shape)
    return vstack([ind, weighted], format="csr")


@dataclass
class _LevelSim:
    """What the simulation needs of one level: how to get K, L per bin, and the DPE weights.

    With S = A − K and Q = QA − 2L + K (labels resampling),
    n·T = Σ_b (S² − Q)/N = c0 + Σ_b (K² − (2A + 1)·K + 2L)/N,  c0 = Σ_b (A² − QA)/N.
    """

    matrix: Any               # sparse: sorted rows → [K; L] of the bins (base, fine levels),
                              # or finer bins → bins (coarse levels, applied to [K | L])
    c0: float
    w_kk: FloatArray          # 1/N
    w_k: FloatArray           # −(2A + 1)/N
    w_l: FloatArray           # 2/N

    def dpe(self, K: FloatArray, L: FloatArray, n: int) -> FloatArray:
        """T per trial from the per-bin sums K, L of shape (bins, trials)."""
        return (self.c0 + self.w_kk @ (K * K) + self.w_k @ K + self.w_l @ L) / n


def _level_sims(ss: FloatArray, levels: list[_Level], base: int) -> list[_LevelSim]:
    n = ss.shape[0]
    s2 = ss * ss
    sims = []
    for i, lv in enumerate(levels):
        if i > base:                                    # non-singleton bins, summed over rows
            assert lv.rows is not None and lv.local is not None
            lens = np.diff(np.concatenate((lv.local, [lv.rows.shape[0]]))).astype(np.int64)
            matrix = _indicator(np.repeat(np.arange(lens.shape[0]), lens), lv.rows,
                                lens.shape[0], n)
        elif i == base:                                 # every bin, summed over rows
            c = np.diff(lv.bounds)
            matrix = _indicator(np.repeat(np.arange(c.shape[0]), c), np.arange(n),
                                c.shape[0], n)
        else:                                           # merged from the finer level's bins
            assert lv.parent is not None
            n_finer = levels[i + 1].bounds.shape[0] - 1
            c = np.diff(np.concatenate((lv.parent, [n_finer])))
            matrix = _indicator(np.repeat(np.arange(c.shape[0]), c), np.arange(n_finer),
                                c.shape[0], n_finer)
        if i > base:
            A, QA = matrix @ ss, matrix @ s2
        else:
            st = lv.bounds[:-1]
            A, QA = np.add.reduceat(ss, st), np.add.reduceat(s2, st)
        if i >= base:
            matrix = _with_scores(matrix, ss)
        N = np.asarray(lv.counts, dtype=np.float64)
        sims.append(_LevelSim(matrix=matrix,
                              c0=float(np.sum((A * A - QA) / N)) if N.size else 0.0,
                              w_kk=1.0 / N, w_k=-(2.0 * A + 1.0) / N, w_l=2.0 / N))
    return sims


EXTREME = 2.0 ** -20        # scores this close to 0 or 1 are drawn from float64 uniforms
SCALE = 2.0 ** 32


def label_thresholds(ss: FloatArray) -> tuple[np.ndarray, IntArray]:
    """What :func:`draw_labels` compares with: round(s·2³²) per row (as an (n, 1) uint32
    column) and the rows drawn from float64 uniforms instead."""
    thr = np.minimum(np.floor(ss * SCALE + 0.5), SCALE - 1).astype(np.uint32)[:, None]
    return thr, np.flatnonzero((ss < EXTREME) | (ss > 1.0 - EXTREME))


def draw_labels(seed: int, ss: FloatArray, trials: int, out: FloatArray | None = None,
                thresholds: tuple[np.ndarray, IntArray] | None = None) -> FloatArray:
    """y* ~ Bernoulli(s) for every (sorted) score and trial, as an (n, trials) float64 array of
    0/1, from its own generator ``numpy.random.default_rng(seed)``.

    A row's label is 1[u < round(s·2³²)] for a 32-bit uniform integer u (the bit generator's
    raw output, two per 64-bit word), so its probability is s to within 2⁻³³; rows with s below
    2⁻²⁰ or above 1 − 2⁻²⁰ compare a float64 uniform with s instead, so that tiny probabilities
    keep their relative accuracy (s = 0 and s = 1 are exact either way).
    """
    n = ss.shape[0]
    g = np.random.default_rng(seed)
    raw = g.bit_generator.random_raw((n * trials + 1) // 2)
    u = np.asarray(raw).view(np.uint32)[:n * trials].reshape(n, trials)
    thr, extreme = thresholds if thresholds is not None else label_thresholds(ss)
    y = np.empty((n, trials)) if out is None else out
    np.less(u, thr, out=y)
    if extreme.size:
        y[extreme] = g.random((extreme.size, trials)) < ss[extreme, None]
    return y


def _threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):                   # pragma: no cover (not Linux)
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_THREADS))


def simulate_null(scores: FloatArray, ms: list[int], *, trials: int, resample: str,
                  rng: np.random.Generator, progress: Progress | None = None) -> FloatArray:
    """Null draws of T_m for every m in ``ms``: an array of shape (len(ms), trials).

    Trials run in chunks whose size depends on n only; chunk j draws its labels from its own
    generator, seeded by the j-th of ``rng.integers(0, 2**63, size=chunks)``
    (:func:`draw_labels`), so a seed gives the same null on any machine and with any number
    of threads.  Chunks run on up to ``MAX_THREADS`` threads (numpy and scipy's sparse
    products release the GIL).
    """
    if resample not in RESAMPLING:
        raise UsageError(f"unknown --resample {resample!r}; use one of {', '.join(RESAMPLING)}")
    order = stable_argsort(scores)
    ss = scores[order]
    n = ss.shape[0]
    if resample == "consistency":
        return _simulate_consistency(ss, ms, trials=trials, rng=rng, progress=progress)
    levels, base = _plan(ss, ms)
    sims = _level_sims(ss, levels, base)
    out = np.empty((len(ms), trials))
    chunk = max(1, min(trials, CHUNK_BYTES // (12 * max(n, 1))))
    starts = list(range(0, trials, chunk))
    seeds = rng.integers(0, 2 ** 63, size=len(starts))
    thresholds = label_thresholds(ss)
    local = threading.local()

    def run(j: int) -> int:
        a = starts[j]
        t: int = min(chunk, trials - a)
        if getattr(local, "t", None) != t:             # a buffer reused across a thread's chunks
            local.t, local.Y = t, np.empty((n, t))
        Y = local.Y
        draw_labels(int(seeds[j]), ss, t, out=Y, thresholds=thresholds)

        def split(sim: _LevelSim) -> tuple[FloatArray, FloatArray]:
            kl = sim.matrix @ Y                         # [K; L], one pass over the labels
            half = kl.shape[0] // 2
            return kl[:half], kl[half:]

        K, L = split(sims[base])
        out[base, a:a + t] = sims[base].dpe(K, L, n)
        kl = np.hstack((K, L))
        for i in range(base - 1, -1, -1):      # coarser levels: merge the finer level's bins
            kl = sims[i].matrix @ kl
            out[i, a:a + t] = sims[i].dpe(kl[:, :t], kl[:, t:], n)
        for i in range(base + 1, len(levels)):  # finer levels: non-singleton bins only
            out[i, a:a + t] = sims[i].dpe(*split(sims[i]), n)
        return t

    workers = min(_threads(), len(starts))
    done = 0
    if workers == 1:
        for j in range(len(starts)):
            done += run(j)
            if progress is not None:
                progress(done, trials)
        return out
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for t in pool.map(run, range(len(starts))):
            done += t
            if progress is not None:
                progress(done, trials)
    return out


def _simulate_consistency(ss: FloatArray, ms: list[int], *, trials: int,
                          rng: np.random.Generator, progress: Progress | None) -> FloatArray:
    """Consistency resampling (the authors' code): n scores with replacement, then labels.

    With multinomial counts c_i and K_i ~ Binomial(c_i, s_i): S_b = Σ(c_i s_i − K_i),
    Q_b = Σ(c_i s_i² − 2 s_i K_i + K_i), N_b = Σ c_i; bins with N_b = 0 drop out.
    """
    n = ss.shape[0]
    bounds = [_runs(bin_ids(ss, m)) for m in ms]
    s2 = ss * ss
    out = np.empty((len(ms), trials))
    chunk = max(1, min(trials, CHUNK_BYTES // (48 * max(n, 1))))
    done = 0
    while done < trials:
        t = min(chunk, trials - done)
        idx = rng.integers(0, n, size=(t, n))
        c = np.zeros((t, n))
        np.add.at(c, (np.repeat(np.arange(t), n), idx.ravel()), 1.0)
        Kr = rng.binomial(c.astype(np.int64), ss).astype(np.float64)
        cs, cs2, sK = c * ss, c * s2, Kr * ss
        for i, b in enumerate(bounds):
            st = b[:-1]
            N = _sums(c, st)
            S = _sums(cs, st) - _sums(Kr, st)
            Q = _sums(cs2, st) - 2.0 * _sums(sK, st) + _sums(Kr, st)
            with np.errstate(invalid="ignore", divide="ignore"):
                term = np.where(N > 0, (S * S - Q) / np.maximum(N, 1.0), 0.0)
            out[i, done:done + t] = term.sum(axis=1) / n
        done += t
        if progress is not None:
            progress(done, trials)
    return out


def mc_pvalue(observed: float, null: FloatArray) -> float:
    """(1 + #{T* ≥ T − 1e-12·max(1, |T|)}) / (1 + R): ties count as ties."""
    tol = TIE_TOL * max(1.0, abs(observed))
    return float((1 + np.count_nonzero(null >= observed - tol)) / (1 + null.shape[0]))


# ---------------------------------------------------------------------------------------------
# the tests


def _check(trials: int, alpha: float, resample: str) -> None:
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise UsageError(f"--trials must be an integer >= 1, got {trials!r}")
    if not 0.0 < alpha < 1.0:
        raise UsageError(f"--alpha must be in the open interval (0, 1), got {alpha!r}")
    if resample not in RESAMPLING:
        raise UsageError(f"unknown --resample {resample!r}; use one of {', '.join(RESAMPLING)}")


def tcal_fixed(scores: FloatArray, labels: IntArray, *, m: int, alpha: float = 0.05,
               trials: int = 1000, resample: str = "labels", rng: Any = 0,
               progress: Progress | None = None) -> TestResult:
    """T-Cal with m bins: reject when the Monte Carlo p-value of T_m is <= alpha."""
    _check(trials, alpha, resample)
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise UsageError(f"--bins must be an integer >= 1, got {m!r}")
    gen = np.random.default_rng(rng)
    st = dpe(scores, labels, m)
    null = simulate_null(scores, [int(m)], trials=trials, resample=resample, rng=gen,
                         progress=progress)[0]
    return fixed_result(st, null, m=int(m), alpha=alpha,
                        settings={"m": int(m), "trials": trials, "resample": resample,
                                  "seed": _seed_of(rng)})


def _seed_of(rng: Any) -> Any:
    return rng if isinstance(rng, (int, type(None))) else "generator"


def fixed_result(st: PluginStats, null: FloatArray, *, m: int, alpha: float,
                 settings: dict[str, Any]) -> TestResult:
    """The ``tcal`` result of an observed statistic and its null draws."""
    p = mc_pvalue(st.dpe, null)
    return TestResult(
        id="tcal", statistic=st.dpe, pvalue=p, reject=p <= alpha, alpha=alpha,
        details={"m": m, "debiased_l2_ece": math.sqrt(max(st.dpe, 0.0)),
                 "plugin_l1": st.plugin_l1, "plugin_l2_biased": st.plugin_l2_biased,
                 "critical_value": float(np.quantile(null, 1 - alpha)),
                 "min_attainable_pvalue": 1 / (null.shape[0] + 1)},
        settings=settings)


def adaptive_result(observed: list[PluginStats], null: FloatArray, ms: list[int], *,
                    alpha: float, details: dict[str, Any],
                    settings: dict[str, Any]) -> TestResult:
    """The ``tcal_adaptive`` result: Bonferroni over the levels ``ms`` (one row of ``null``
    per level)."""
    B = len(ms)
    level_alpha = alpha / B
    levels = []
    for i, m in enumerate(ms):
        p = mc_pvalue(observed[i].dpe, null[i])
        levels.append({"m": m, "dpe": observed[i].dpe,
                       "debiased_l2_ece": math.sqrt(max(observed[i].dpe, 0.0)),
                       "critical_value": float(np.quantile(null[i], 1 - level_alpha)),
                       "pvalue": p, "reject": p <= level_alpha})
    pmin = min(lv["pvalue"] for lv in levels)
    reject = any(lv["reject"] for lv in levels)
    return TestResult(
        id="tcal_adaptive", statistic=pmin, pvalue=min(1.0, B * pmin), reject=reject, alpha=alpha,
        details={"statistic_name": "smallest level p-value", "B": B, "level_alpha": level_alpha,
                 **details, "min_attainable_pvalue": min(1.0, B / (null.shape[1] + 1)),
                 "rejecting_levels": [lv["m"] for lv in levels if lv["reject"]],
                 "levels": levels},
        settings=settings)


def tcal_adaptive(scores: FloatArray, labels: IntArray, *, alpha: float = 0.05,
                  trials: int = 1000, resample: str = "labels", rng: Any = 0,
                  progress: Progress | None = None) -> TestResult:
    """Adaptive T-Cal over the dyadic levels m = 2^1 … 2^B with Bonferroni level α/B."""
    _check(trials, alpha, resample)
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    n = s.shape[0]
    B = n_levels(n)
    ms = [2 ** b for b in range(1, B + 1)]
    gen = np.random.default_rng(rng)
    order = stable_argsort(s)
    ss, rs = s[order], s[order] - y[order]
    observed = [plugin_from_bounds(rs, _runs(bin_ids(ss, m))) for m in ms]
    null = simulate_null(s, ms, trials=trials, resample=resample, rng=gen, progress=progress)
    return adaptive_result(observed, null, ms, alpha=alpha, details={},
                           settings={"levels": f"2^1..2^{B}", "trials": trials,
                                     "resample": resample, "seed": _seed_of(rng)})
