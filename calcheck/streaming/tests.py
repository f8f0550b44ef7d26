"""Tests on a finished :class:`StreamState`: T-Cal (fixed m and adaptive) and Spiegelhalter.

Observed statistics are exact: T-Cal's bins are unions of grid cells (dyadic levels up to 2^G)
or of cells plus the exactly binned rows of the few straddling cells (fixed m), and
Spiegelhalter's sums are kept as they are.

The Monte Carlo null cannot redraw a label per row without holding the rows, so it redraws per
**unit** — a grid cell, or the part of a straddling cell inside one bin (width ≤ 2^-G); for a
fixed m, 16 neighbouring cells of one bin form a unit (width ≤ 2^-12, 16x fewer draws):
K*_u ~ Binomial(N_u, s̄_u) with s̄_u = Σs/N, then S*_u = Σs − K*_u and
Q*_u = Σs² + K*_u (1 − 2 Σs²/Σs) (unbiased for Σ (s − y*)²).  The per-row null draws
Bernoulli(s_i); the unit draw has the same mean and a variance larger by
Σ_u (Σs² − (Σs)²/N) — reported as ``null_variance_excess`` relative to Σ s(1 − s) (≈ 1e-10 on
continuous scores with G = 16).  Draws depend only on the seed and the units, which are the
same for every partitioning, so a run is reproducible on any cluster size.  Adaptive T-Cal tests
the levels m = 2^1 … 2^min(B, G) with Bonferroni over the levels tested; finer levels (bins
narrower than a cell) are reported as omitted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.hypotests._result import TestResult
from calcheck.hypotests.classical import spiegelhalter_from_sums
from calcheck.hypotests.tcal import (
    _check,
    adaptive_ms,
    adaptive_result,
    binned_plugin,
    check_null_size,
    fixed_result,
)
from calcheck.hypotests.unit_tcal import nested_starts
from calcheck.streaming.states import (
    StreamState,
    binned,
    cell_blocks,
    grid_cells,
    units,
)

TRIAL_CHUNK = 50        # fixed, so the draws do not depend on the machine
FIXED_UNIT_SHIFT = 4    # fixed-m null: units of 16 grid cells (2^-12 wide) within a bin


def _coarsen(u: dict[str, Any], shift: int) -> dict[str, Any]:
    """Merge units that share a bin and a block of 2^shift grid cells (16x fewer draws; the
    variance excess this adds is reported with the rest)."""
    bins, inv = cell_blocks(u["bin"], u["cell"], shift)
    out = {"bin": bins}
    for k in ("n", "positives"):
        out[k] = np.bincount(inv, weights=u[k], minlength=bins.shape[0]).astype(np.int64)
    for k in ("sum_score", "sum_sq_resid", "sum_score_sq"):
        out[k] = np.bincount(inv, weights=u[k], minlength=bins.shape[0])
    return out


def _unit_params(u: dict[str, Any]) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    N = u["n"].astype(np.float64)
    A, P = u["sum_score"], np.maximum(u["sum_score_sq"], 0.0)
    p = np.clip(A / N, 0.0, 1.0)
    slope = np.where(A > 0, 1.0 - 2.0 * P / np.where(A > 0, A, 1.0), 0.0)
    excess = float(np.sum(np.maximum(P - A * A / N, 0.0)))
    var = float(np.sum(np.maximum(A - P, 0.0)))
    return p, slope, P, (excess / var if var > 0 else 0.0)


def grid_null(u: dict[str, Any], levels: list[IntArray], *, n: int, trials: int,
              seed: int, resample: str = "labels") -> tuple[FloatArray, float]:
    """Null draws of T_m for every level (``levels[i]``: the bin id of every unit, sorted, each
    level a coarsening of the one before), and the relative null variance excess.

    ``consistency`` first redraws the rows of every unit, C ~ Multinomial(n, N/n) (n scores
    with replacement, counted per unit), then K ~ Binomial(C, s̄); a unit's Σs and Σs² scale
    by C/N.  Units left empty drop out of their bins, as empty bins do in memory."""
    N = u["n"]
    A = u["sum_score"]
    p, slope, P, excess = _unit_params(u)
    share = N / float(N.sum())
    rng = np.random.default_rng(seed)
    out = np.empty((len(levels), trials))
    starts = nested_starts(levels, N.shape[0])
    done = 0
    while done < trials:
        t = min(TRIAL_CHUNK, trials - done)
        if resample == "consistency":
            C = rng.multinomial(int(N.sum()), share, size=t)
            K = rng.binomial(C, p).astype(np.float64)
            scale = C / N
            S = A * scale - K
            Q = P * scale + K * slope
            cnt = C.astype(np.float64)
        else:
            K = rng.binomial(N, p, size=(t, N.shape[0])).astype(np.float64)
            S = A - K
            Q = P + K * slope
            cnt = np.broadcast_to(N.astype(np.float64), K.shape)
        for i, st in enumerate(starts):
            S = np.add.reduceat(S, st, axis=1)
            Q = np.add.reduceat(Q, st, axis=1)
            cnt = np.add.reduceat(cnt, st, axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                term = np.where(cnt > 0, (S * S - Q) / np.maximum(cnt, 1.0), 0.0)
            out[i, done:done + t] = np.sum(term, axis=1) / n
        done += t
    return out, excess


def tcal_fixed_stream(state: StreamState, *, alpha: float = 0.05, trials: int = 1000,
                      seed: int = 0, resample: str = "labels") -> TestResult:
    """T-Cal with the state's fixed m: exact statistic, grid null (module docstring)."""
    _check(trials, alpha, resample)
    assert state.tcal_m is not None
    u = _coarsen(units(state, "tcal"), FIXED_UNIT_SHIFT)
    n = state.n
    b = binned(state, "tcal")
    st = binned_plugin(b["count"], b["sum_score"] - b["positives"], b["sum_sq_resid"], n)
    null, excess = grid_null(u, [u["bin"]], n=n, trials=trials, seed=seed, resample=resample)
    res = fixed_result(st, null[0], m=int(state.tcal_m), alpha=alpha,
                       settings={"m": int(state.tcal_m), "trials": trials, "resample": resample,
                                 "seed": seed,
                                 **_null_settings(state, excess, FIXED_UNIT_SHIFT, resample)})
    return res


def tcal_adaptive_stream(state: StreamState, *, alpha: float = 0.05, trials: int = 1000,
                         seed: int = 0, resample: str = "labels", grid: str = "bounded",
                         correction: str = "minp") -> TestResult:
    """Adaptive T-Cal on the grid: the dyadic levels 2^1 … 2^min(L, G) of ``grid`` (the
    bounded grid's powers of two: its bins must be unions of grid cells), exact statistics,
    grid null, calibrated by ``correction``."""
    _check(trials, alpha, resample)
    n = state.n
    G = state.grid_bits
    B = len(adaptive_ms(n, grid, dyadic=True))
    L = min(B, G)
    check_null_size(L, trials)
    c = grid_cells(state)
    ks = list(range(L, 0, -1))                   # finest first
    levels = [c["cell"] >> (G - k) for k in ks]
    S_cell = c["sum_score"] - c["positives"]
    observed = []
    for ids in levels:
        N = np.bincount(ids, weights=c["n"]).astype(np.int64)
        observed.append(binned_plugin(
            N, np.asarray(np.bincount(ids, weights=S_cell), float),
            np.asarray(np.bincount(ids, weights=c["sum_sq_resid"]), float), n))
    null, excess = grid_null(c, levels, n=n, trials=trials, seed=seed, resample=resample)
    ms = [2 ** k for k in ks][::-1]
    details = {"B_spec": B, "levels_omitted": [2 ** k for k in range(L + 1, B + 1)],
               "grid": grid if grid == "paper" else "bounded (dyadic levels)"}
    return adaptive_result(observed[::-1], null[::-1], ms, alpha=alpha, details=details,
                           correction=correction,
                           settings={"levels": f"2^1..2^{L}", "grid": grid, "trials": trials,
                                     "resample": resample, "seed": seed,
                                     **_null_settings(state, excess, 0, resample)})


def _null_settings(state: StreamState, excess: float, shift: int,
                   resample: str = "labels") -> dict[str, Any]:
    how = "binomial per score unit" if resample == "labels" else \
        "multinomial rows per score unit, then binomial"
    return {"engine_null": how, "grid_cells": 1 << state.grid_bits,
            "null_unit_width": 2.0 ** (shift - state.grid_bits),
            "null_variance_excess": excess}


def spiegelhalter_stream(state: StreamState, *, alpha: float = 0.05) -> TestResult:
    """Spiegelhalter's Z from the state's exact sums."""
    out = state.finalize()
    c = grid_cells(state)
    return spiegelhalter_from_sums(out["spiegelhalter_num"], out["spiegelhalter_den"], n=state.n,
                                   mean_score=float(c["sum_score"].sum() / state.n),
                                   mean_label=state.positives / state.n, alpha=alpha)
