"""Bootstrap intervals of the grid metrics (ECE, ECE-l2, MCE, Brier, log loss, ACE, MCE(Q)) on
the streaming engines: the Poisson bootstrap per score unit (:mod:`calcheck.unit_bootstrap`)
over the units of a finished :class:`StreamState`.

The units are the rows of one label in one block of 16 grid cells (2^-12 wide) inside one ECE
bin — a bin edge never cuts a unit, so every replicate's bin counts are exact Poisson-bootstrap
counts.  A replicate's Σ w·s, Σ w·(s − y)² and Σ w·log-likelihood are W × the unit's mean: their
means are exact; the variance of Σ w·s lacks the within-unit part, Σ_u (Σs² − (Σs)²/N),
reported relative to Σ s² as ``variance_deficit`` (≈ 1e-8 on continuous scores: scores in a
unit differ by less than 2^-12).  The units (sorted by bin, block and label) are the same for
every partitioning, batch size and cluster size, so **a run is reproducible anywhere**.  PAVA
and PAVA-BC bins (TCE), PDE's per-row deviations and the classwise metrics need the rows per
replicate: the streaming engines give no interval for those and say so.  Weighted and counted
rows streamed through the weighted passes take the same bootstrap on their first pass's units
(:func:`weighted_bootstrap`).

Reference: Efron, Tibshirani. An Introduction to the Bootstrap. Chapman & Hall, 1993.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calcheck._typing import FloatArray
from calcheck.binning import run_starts
from calcheck.streaming.states import StreamState, cell_blocks, label_units
from calcheck.uncertainty import (
    ConfidenceInterval,
    check_ci_options,
    estimand_of,
    percentile_interval,
)
from calcheck.unit_bootstrap import (
    NORM_BINNING,
    UnitReplicates,
    poisson_draws,
    weighted_units,
)

CI_METRICS = ("ece", "ece_l2", "brier", "log_loss", "ace", "ece_debiased", "ece_l2_debiased")
UNIT_SHIFT = 4           # units of 2^4 grid cells within one bin (2^-12 wide)
RESAMPLING = "Poisson bootstrap per score unit (2^-12 wide, within one bin) and label"


def bootstrap_units(state: StreamState, shift: int = UNIT_SHIFT) -> dict[str, Any]:
    """Units of the ECE binning: one row per (bin, block of 2^shift cells, label) with rows,
    sorted by bin then block (so by score): ``bin``, ``label``, ``block`` (the (bin, block)
    index), ``count``, ``sum_score``, ``sum_sq``, ``sum_score_sq``, ``sum_ll``."""
    u = label_units(state, "ece")
    bins, inv = cell_blocks(u["bin"], u["cell"], shift)
    size = bins.shape[0]
    cols = [c for c in ("count", "sum_score", "sum_sq", "sum_score_sq", "sum_ll") if c in u]
    per = {c: np.stack([np.bincount(inv, weights=u[c][:, y], minlength=size)
                        for y in (0, 1)], axis=1) for c in cols}
    nz = per["count"].ravel() > 0                 # (unit, label) row-major: sorted by bin
    out = {"bin": np.repeat(bins, 2)[nz], "label": np.tile([0.0, 1.0], size)[nz],
           "block": np.repeat(np.arange(size), 2)[nz]}
    for c in cols:
        out[c] = per[c].ravel()[nz]
    out["count"] = np.rint(out["count"]).astype(np.int64)
    return out


def grid_bootstrap(state: StreamState, ids: list[str], *, reps: int = 1000, level: float = 0.95,
                   seed: int = 0) -> tuple[dict[str, ConfidenceInterval], dict[str, Any]]:
    """Intervals of the grid metrics among ``ids`` and the settings that describe them."""
    check_ci_options(reps, level)
    ids = [m for m in ids if m in CI_METRICS]
    if "log_loss" in ids and state.cell_ll is None:
        raise ValueError("the state was built without ci=True: no per-cell log-likelihood")
    u = bootstrap_units(state)
    lam = u["count"]
    N = lam.astype(np.float64)
    view = {"count": N, "label": u["label"], "mean_score": u["sum_score"] / N,
            "mean_sq": u["sum_sq"] / N, "mean_ll": u["sum_ll"] / N if "sum_ll" in u else None,
            "bin_starts": run_starts(u["bin"])[0], "block_starts": run_starts(u["block"])[0]}
    rep = UnitReplicates(view, ids, n=float(state.n), bins=state.bins, reps=reps)
    for sl, W, n_star in poisson_draws(lam, reps, seed):
        rep.add(sl, W, n_star)
    return _intervals(rep, ids, level, seed, RESAMPLING), {
        "reps": reps, "level": level, "seed": seed, "method": METHOD,
        "resampling": RESAMPLING, "units": int(lam.shape[0]),
        "unit_width": 2.0 ** (UNIT_SHIFT - state.grid_bits),
        "variance_deficit": _deficit(u["sum_score_sq"], u["sum_score"], N)}


def weighted_bootstrap(units: dict[str, Any], ids: list[str], *, bins: int, bits: int,
                       frequency: bool, reps: int = 1000, level: float = 0.95, seed: int = 0
                       ) -> tuple[dict[str, ConfidenceInterval], dict[str, Any]]:
    """Intervals of the weighted passes' metrics among ``ids`` from their first pass's units
    (:meth:`calcheck.streaming.weighted.FirstState.unit_table`, blocks 2^-``bits`` wide):
    counts draw each unit's Poisson(Σk) — the expanded rows' Poisson bootstrap — sampling
    weights its mass as scale·Poisson(effective rows)
    (:func:`calcheck.unit_bootstrap.weighted_units`), and the equal-mass bins are re-cut at
    the replicate's masses j·W*/B."""
    check_ci_options(reps, level)
    ids = [m for m in ids if m in CI_METRICS]
    mass = units["mass"]
    view = {"count": mass, "label": units["label"], "mean_score": units["score"] / mass,
            "mean_sq": units["squared_error"] / mass,
            "mean_ll": units["log_likelihood"] / mass,
            "bin_starts": run_starts(units["bin"])[0],
            "block_starts": run_starts(units["block"])[0]}
    lam, scale = (mass, None) if frequency else weighted_units(mass, units["mass_sq"])
    rep = UnitReplicates(view, ids, n=float(mass.sum()), bins=bins, reps=reps,
                         whole=frequency)
    for sl, W, n_star in poisson_draws(lam, reps, seed, scale):
        rep.add(sl, W, n_star)
    resampling = (f"Poisson bootstrap per score unit (2^-{bits} wide, within one bin) and "
                  "label, " + ("of the expanded rows" if frequency else
                               "each unit's mass scale·Poisson(its effective rows)"))
    return _intervals(rep, ids, level, seed, resampling), {
        "reps": reps, "level": level, "seed": seed, "method": METHOD,
        "resampling": resampling, "units": int(mass.shape[0]), "unit_width": 2.0 ** -bits,
        "variance_deficit": _deficit(units["score_sq"], units["score"], mass)}


METHOD = "norm bootstrap (binned errors), percentile bootstrap (Brier, log loss)"


def _intervals(rep: UnitReplicates, ids: list[str], level: float, seed: int,
               resampling: str) -> dict[str, ConfidenceInterval]:
    return {m: rep.norms[NORM_BINNING[m][0]].interval(NORM_BINNING[m][1], level=level,
                                                      seed=seed, resampling=resampling)
            if m in NORM_BINNING else
            percentile_interval(rep.values[m], level=level, seed=seed, resampling=resampling,
                                estimand=estimand_of(m))
            for m in ids}


def _deficit(score_sq: FloatArray, score: FloatArray, mass: FloatArray) -> float:
    """The within-unit variance of the scores the draws leave out (module docstring), relative
    to Σ w·s²."""
    total = float(np.sum(score_sq))
    deficit = float(np.sum(np.maximum(score_sq - score ** 2 / mass, 0.0)))
    return deficit / total if total > 0 else 0.0
