"""T-Cal: a test of calibration built on the debiased plug-in estimator of the squared ℓ2-ECE.

Lee, Huang, Hassani, Dobriban, *T-Cal: An optimal test for the calibration of predictive
models* (formulas restated in docs/tests.md).  For m bins with id ⌊m·s⌋ (no clipping: s = 1 gets id
m), residuals r = s − y, S_b = Σ r, Q_b = Σ r², N_b rows:

* DPE  T_m = (1/n) Σ_b (S_b² − Q_b) / N_b   (eq. 6; squared, may be negative; singletons add 0)
* biased plug-in (1/n) Σ_b S_b² / N_b (eq. 5) and ℓ1 plug-in (1/n) Σ_b |S_b|.

The null distribution is simulated (paper §3.1): ``labels`` redraws y* ~ Bernoulli(s) with the
scores kept (exact type-I control by exchangeability); ``consistency`` (the authors') redraws n
scores with replacement and then labels.  Per level p = (1 + #{T* ≥ T − tol}) / (1 + R).

Adaptive T-Cal tests several bin counts (levels) m and is calibrated jointly (docs/tests.md):

* grid ``bounded`` (default): m = round(2^(k/3)) (three levels per doubling) from 2 up to
  n^(2/3), the paper's optimal bin count n^(2/(4s+1)) for every smoothness s ≥ 1/2;
  ``paper``: m = 2^1 … 2^B, B = int(2·log2(n / √ln n)) (m up to about n²/ln n).
* correction ``minp`` (default): the observed statistics and the R null draws are R + 1
  exchangeable columns; each column gets, per level, its rank p-value among the R + 1, and its
  smallest level p-value (ties broken by the largest standardised statistic) is referred to the
  same smallest p-value of every column: p = #{columns at least as extreme} / (R + 1), exact
  under the label-resampling null.  ``bonferroni`` (the paper's rule): reject when some level
  has p ≤ α/L, p-value min(1, L · min p).

How the simulation is made fast: :mod:`calcheck.hypotests.tcal_null` (per-bin sums from integer
prefix sums, a dense dyadic grid merged pairwise, tied runs drawn as one Binomial, threads).

References
----------
.. [1] Lee, Huang, Hassani, Dobriban. T-Cal: An optimal test for the calibration of predictive
       models. Journal of Machine Learning Research 24(335), 2023.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import stable_argsort
from calcheck.errors import UsageError
from calcheck.hypotests import tcal_null
from calcheck.hypotests._result import TestResult
from calcheck.hypotests.tcal_null import Progress, bin_ids, level_bounds, runs

RESAMPLING = ("labels", "consistency")
TIE_TOL = 1e-12
CHUNK_BYTES = 96_000_000         # memory budget of one chunk of consistency trials


GRIDS = ("bounded", "paper")
CORRECTIONS = ("minp", "bonferroni")
SMOOTHNESS_MIN = 0.5             # the bounded grid covers Hölder smoothness s >= this


def n_levels(n: int, grid: str = "paper") -> int:
    """Number of levels of adaptive T-Cal (:func:`adaptive_ms`)."""
    return len(adaptive_ms(n, grid))


def paper_B(n: int) -> int:
    """The paper's finest dyadic level: B = int(2·log2(n / √ln n)), at least 1."""
    if n < 3:
        return 1
    return max(1, int(2 * math.log2(n / math.sqrt(math.log(n)))))


def max_bins(n: int) -> float:
    """The bounded grid's largest bin count: n^(2/(4s+1)) at s = 1/2, the paper's optimal m
    for every Hölder smoothness s ≥ 1/2."""
    return float(float(n) ** (2.0 / (4.0 * SMOOTHNESS_MIN + 1.0)))


def adaptive_ms(n: int, grid: str = "bounded", *, dyadic: bool = False) -> list[int]:
    """The bin counts m of adaptive T-Cal, ascending.

    ``paper``: m = 2^1 … 2^B.  ``bounded``: m = round(2^(k/3)), k = 3, 4, … (three levels per
    doubling; distinct values) up to :func:`max_bins` and at most 2^B — bins that align with
    more alternatives than the dyadic ones at little cost to the joint calibration, and no
    level with far more bins than the data can inform.  ``dyadic`` keeps the powers of two of
    the bounded grid's range (the streaming engines' bins are unions of dyadic grid cells).
    """
    if grid not in GRIDS:
        raise UsageError(f"unknown adaptive grid {grid!r}; use one of {', '.join(GRIDS)}")
    B = paper_B(n)
    if grid == "paper":
        return [2 ** b for b in range(1, B + 1)]
    top = max(2.0, min(max_bins(n), 2.0 ** B))
    if dyadic:
        L = max(1, min(B, math.ceil(math.log2(top) - 1e-9)))
        return [2 ** b for b in range(1, L + 1)]
    ms: list[int] = []
    k = 3
    while 2.0 ** (k / 3.0) <= top * (1 + 1e-12):
        m = round(2.0 ** (k / 3.0))
        if not ms or m != ms[-1]:
            ms.append(m)
        k += 1
    return ms


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
    return _plugin(S, Q, cnt, n)                    # eqs. (6), (5) and the ℓ1 plug-in


def binned_plugin(count: IntArray, S: FloatArray, Q: FloatArray, n: int) -> PluginStats:
    """The plug-ins from per-bin row counts, S = Σr and Q = Σr² (empty bins left out)."""
    occ = count > 0
    return _plugin(S[occ], Q[occ], count[occ].astype(np.float64), n)


def _plugin(S: FloatArray, Q: FloatArray, cnt: FloatArray, n: int) -> PluginStats:
    return PluginStats(dpe=float(np.sum((S * S - Q) / cnt) / n),
                       plugin_l2_biased=float(np.sum(S * S / cnt) / n),
                       plugin_l1=float(np.sum(np.abs(S)) / n))


def _merge_pairs(x: FloatArray, keep: IntArray) -> FloatArray:
    """Sums over the groups starting at ``keep`` of one or two consecutive values of x."""
    out = x[keep]
    two = np.flatnonzero(np.diff(np.append(keep, x.shape[0])) == 2)
    out[two] += x[keep[two] + 1]
    return out


def dyadic_levels(ss: FloatArray, rs: FloatArray,
                  B: int) -> tuple[dict[int, IntArray], list[PluginStats]]:
    """Row runs and plug-in statistics of the levels m = 2^1 … 2^B of the sorted scores ``ss``
    (residuals ``rs``), each level from the next finer one: ⌊2^(b−1)·s⌋ = ⌊⌊2^b·s⌋/2⌋ exactly,
    so a bin is a union of finer bins and its sums are sums of theirs."""
    n = ss.shape[0]
    if B > 62:                                          # ⌊2^B·s⌋ would not fit 64 bits
        ms = [2 ** b for b in range(1, B + 1)]
        bounds = {m: level_bounds(ss, m) for m in ms}
        return bounds, [plugin_from_bounds(rs, bounds[m]) for m in ms]
    ids = bin_ids(ss, 2 ** B)
    b = runs(ids)
    starts = b[:-1]
    S, Q = np.add.reduceat(rs, starts), np.add.reduceat(rs * rs, starts)
    idv = ids[starts]
    bounds = {2 ** B: b}
    stats = [_plugin(S, Q, np.diff(b).astype(np.float64), n)]
    for level in range(B - 1, 0, -1):
        idv = idv >> 1
        keep = np.flatnonzero(np.concatenate(([True], idv[1:] != idv[:-1])))
        S, Q = _merge_pairs(S, keep), _merge_pairs(Q, keep)
        starts, idv = starts[keep], idv[keep]
        b = np.concatenate((starts, [n]))
        bounds[2 ** level] = b
        stats.append(_plugin(S, Q, np.diff(b).astype(np.float64), n))
    return bounds, stats[::-1]


def dpe(scores: ArrayLike, labels: ArrayLike, m: int) -> PluginStats:
    """DPE and the plug-in statistics with m bins of id ⌊m·s⌋ (docs/tests.md)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    order = stable_argsort(s)
    ss = s[order]
    return plugin_from_bounds(ss - y[order], level_bounds(ss, m))


def simulate_null(scores: FloatArray, ms: list[int], *, trials: int, resample: str,
                  rng: np.random.Generator, progress: Progress | None = None,
                  bounds: dict[int, IntArray] | None = None,
                  is_sorted: bool = False) -> FloatArray:
    """Null draws of T_m for every m in ``ms`` (ascending): an array of shape (len(ms), trials).

    ``labels`` resampling is simulated by :mod:`calcheck.hypotests.tcal_null` (exact sums,
    seeded per trial, threads); ``bounds`` may hold the row runs of the sorted scores per level
    and ``is_sorted`` says the scores are sorted already.
    """
    if resample not in RESAMPLING:
        raise UsageError(f"unknown --resample {resample!r}; use one of {', '.join(RESAMPLING)}")
    ss = scores if is_sorted else scores[stable_argsort(scores)]
    if resample == "consistency":
        return _simulate_consistency(ss, ms, trials=trials, rng=rng, progress=progress)
    return tcal_null.simulate(tcal_null.plan(ss, ms, bounds), trials=trials, rng=rng,
                              progress=progress)


def _sums(x: FloatArray, starts: IntArray) -> FloatArray:
    """Row-wise segment sums of a (trials, k) array."""
    if starts.shape[0] == 0:
        return np.zeros((x.shape[0], 0))
    return np.add.reduceat(x, starts, axis=1)


def _simulate_consistency(ss: FloatArray, ms: list[int], *, trials: int,
                          rng: np.random.Generator, progress: Progress | None) -> FloatArray:
    """Consistency resampling (the authors' code): n scores with replacement, then labels.

    With multinomial counts c_i and K_i ~ Binomial(c_i, s_i): S_b = Σ(c_i s_i − K_i),
    Q_b = Σ(c_i s_i² − 2 s_i K_i + K_i), N_b = Σ c_i; bins with N_b = 0 drop out.
    """
    n = ss.shape[0]
    bounds = [level_bounds(ss, m) for m in ms]
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


NULL_BUDGET = 2 << 30            # bytes of the simulated null (levels × trials float64)


def check_null_size(levels: int, trials: int) -> None:
    """Refuse, before simulating, a null that would not fit :data:`NULL_BUDGET`."""
    need = 8 * levels * trials
    if need > NULL_BUDGET:
        raise UsageError(f"--trials {trials:,} over {levels} level(s) needs "
                         f"~{need / 2 ** 30:.1f} GB for the simulated null; at most "
                         f"{NULL_BUDGET // (8 * levels):,} trials fit in "
                         f"{NULL_BUDGET >> 30} GB (fewer --trials, or --bins for one level)")


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
    check_null_size(1, trials)
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
                    alpha: float, details: dict[str, Any], settings: dict[str, Any],
                    correction: str = "minp") -> TestResult:
    """The ``tcal_adaptive`` result over the levels ``ms`` (one row of ``null`` per level):
    min-P calibrated from the same null draws (default) or Bonferroni (module docstring)."""
    if correction not in CORRECTIONS:
        raise UsageError(f"unknown adaptive correction {correction!r}; use one of "
                         f"{', '.join(CORRECTIONS)}")
    L = len(ms)
    R = null.shape[1]
    obs = np.array([o.dpe for o in observed])
    level_p = [mc_pvalue(obs[i], null[i]) for i in range(L)]
    pmin = min(level_p)
    if correction == "bonferroni":
        level_alpha = alpha / L
        pvalue, floor = min(1.0, L * pmin), min(1.0, L / (R + 1))
        reject = pmin <= level_alpha
    else:
        pvalue, level_alpha = minp_pvalue(obs, null, alpha)
        floor = 1 / (R + 1)
        reject = pvalue <= alpha
    levels = []
    for i, m in enumerate(ms):
        levels.append({"m": m, "dpe": observed[i].dpe,
                       "debiased_l2_ece": math.sqrt(max(observed[i].dpe, 0.0)),
                       "critical_value": float(np.quantile(null[i], 1 - level_alpha)),
                       "pvalue": level_p[i], "reject": level_p[i] <= level_alpha})
    rule = ("min-P: the smallest level p-value referred to its own null distribution"
            if correction == "minp" else "Bonferroni: reject when some level has p <= alpha/L")
    return TestResult(
        id="tcal_adaptive", statistic=pmin, pvalue=pvalue, reject=bool(reject), alpha=alpha,
        details={"statistic_name": "smallest level p-value", "B": L, "level_alpha": level_alpha,
                 "correction": correction, "rule": rule,
                 **details, "min_attainable_pvalue": floor,
                 "rejecting_levels": [lv["m"] for lv in levels if lv["reject"]],
                 "levels": levels},
        settings={"correction": correction, **settings})


def minp_pvalue(observed: FloatArray, null: FloatArray, alpha: float) -> tuple[float, float]:
    """Min-P p-value of the observed level statistics (shape (L,)) against null draws (L, R),
    and the critical level p-value (reject a level when its p-value is at most it).

    The observed column and the R null columns are exchangeable under the null.  Per level, a
    column's p-value is #{columns with T ≥ its T − tol}/(R + 1); a column's key is its smallest
    level p-value, ties broken by its largest standardised statistic (T − mean)/sd among the
    levels attaining it; p = #{columns with a key at least as extreme as the observed}/(R + 1).
    """
    L, R = null.shape
    cols = np.concatenate((observed[:, None], null), axis=1)            # (L, R + 1)
    srt = np.sort(cols, axis=1)
    tol = TIE_TOL * np.maximum(1.0, np.abs(cols))
    p = np.empty_like(cols)
    for i in range(L):
        p[i] = (R + 1 - np.searchsorted(srt[i], cols[i] - tol[i], side="left")) / (R + 1)
    sd = cols.std(axis=1, keepdims=True)
    z = (cols - cols.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1.0)
    key = p.min(axis=0)
    zmax = np.where(p <= key[None, :] * (1 + 1e-12), z, -np.inf).max(axis=0)
    k0, z0 = key[0], zmax[0]
    more = (key < k0 * (1 - 1e-12)) | ((key <= k0 * (1 + 1e-12)) & (zmax >= z0 - 1e-9))
    pvalue = float(np.count_nonzero(more) / (R + 1))
    # the critical level p-value: the largest c with #{columns with key ≤ c}/(R + 1) ≤ α
    ks = np.sort(key)
    allowed = math.floor(alpha * (R + 1) + 1e-9)
    ok = np.searchsorted(ks, ks, side="right") <= allowed
    crit = float(ks[ok].max()) if np.any(ok) else 0.0
    return pvalue, crit


def tcal_adaptive(scores: FloatArray, labels: IntArray, *, alpha: float = 0.05,
                  trials: int = 1000, resample: str = "labels", rng: Any = 0,
                  progress: Progress | None = None, grid: str = "bounded",
                  correction: str = "minp") -> TestResult:
    """Adaptive T-Cal over the levels of ``grid`` (:func:`adaptive_ms`), calibrated by
    ``correction`` (module docstring)."""
    _check(trials, alpha, resample)
    if correction not in CORRECTIONS:
        raise UsageError(f"unknown adaptive correction {correction!r}; use one of "
                         f"{', '.join(CORRECTIONS)}")
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    n = s.shape[0]
    ms = adaptive_ms(n, grid)
    check_null_size(len(ms), trials)
    gen = np.random.default_rng(rng)
    order = stable_argsort(s)
    ss, rs = s[order], s[order] - y[order]
    if grid == "paper":
        bounds, observed = dyadic_levels(ss, rs, len(ms))
    else:
        bounds = {m: level_bounds(ss, m) for m in ms}
        observed = [plugin_from_bounds(rs, bounds[m]) for m in ms]
    null = simulate_null(ss, ms, trials=trials, resample=resample, rng=gen, progress=progress,
                         bounds=bounds, is_sorted=True)
    levels = f"2^1..2^{len(ms)}" if grid == "paper" else \
        f"round(2^(k/3)) from 2 to {ms[-1]} ({len(ms)} levels)"
    return adaptive_result(observed, null, ms, alpha=alpha, correction=correction,
                           details={"grid": grid, "B_paper": paper_B(n),
                                    "max_bins": ms[-1]},
                           settings={"levels": levels, "grid": grid, "trials": trials,
                                     "resample": resample, "seed": _seed_of(rng)})
