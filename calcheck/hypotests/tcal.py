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


def n_levels(n: int) -> int:
    """Number of dyadic levels of adaptive T-Cal: B = int(2·log2(n / √ln n)), at least 1."""
    if n < 3:
        return 1
    return max(1, int(2 * math.log2(n / math.sqrt(math.log(n)))))


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
    bounds, observed = dyadic_levels(ss, rs, B)
    null = simulate_null(ss, ms, trials=trials, resample=resample, rng=gen, progress=progress,
                         bounds=bounds, is_sorted=True)
    return adaptive_result(observed, null, ms, alpha=alpha, details={},
                           settings={"levels": f"2^1..2^{B}", "trials": trials,
                                     "resample": resample, "seed": _seed_of(rng)})
