"""Bootstrap intervals of the grid metrics (ECE, ECE-l2, MCE, Brier, log loss, ACE, MCE(Q)) on
the streaming engines: a **Poisson bootstrap per score unit**, drawn from a finished
:class:`StreamState`.

The Poisson bootstrap gives every row a weight w_i ~ Poisson(1) per replicate (the standard
scalable stand-in for resampling n rows with replacement: the same first two moments, n*
random).  The sum of the weights of the N rows of a group is exactly Poisson(N), so a group's
weighted count needs one draw, not N.  The groups are **units**: the rows of one label in one
block of 16 grid cells (2^-12 wide) inside one ECE bin — a bin edge never cuts a unit, so
every replicate's bin counts are exact Poisson-bootstrap counts.  Inside a unit the rows are
taken as exchangeable: a replicate's Σ w·s, Σ w·(s − y)² and Σ w·log-likelihood are
W × the unit's mean.  Their means are exact; the variance of Σ w·s lacks the within-unit part,
Σ_u (Σs² − (Σs)²/N), reported relative to Σ s² as ``variance_deficit`` (≈ 1e-8 on
continuous scores: scores in a unit differ by less than 2^-12).

Draws depend only on the seed and the units (sorted by bin, block and label), which are the
same for every partitioning, batch size and cluster size: **a run is reproducible anywhere**.
ACE and MCE(Q) re-cut their equal-mass bins per replicate, at the replicate's ranks
⌊j·n*/B⌋ over the units in score order; a cut inside a unit block splits it pro rata (its rows
taken as exchangeable, as above).  PAVA and PAVA-BC bins (TCE), PDE's per-row deviations and
the classwise metrics need the rows per replicate: the streaming engines give no interval for
those and say so.

References
----------
.. [1] Oza, Russell. Online bagging and boosting. AISTATS 2001 (Poisson(1) resampling weights).
.. [2] Hanley, MacGibbon. Creating non-parametric bootstrap samples using Poisson frequencies.
       Computer Methods and Programs in Biomedicine 83(1), 2006.
.. [3] Efron, Tibshirani. An Introduction to the Bootstrap. Chapman & Hall, 1993.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calcheck.streaming.states import StreamState, cell_blocks, label_units
from calcheck.uncertainty import (
    NORM_BINNING,
    REP_CHUNK,
    ConfidenceInterval,
    NormReplicates,
    check_ci_options,
    estimand_of,
    percentile_interval,
    unit_quantile_norm,
    unit_quantile_replicates,
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
    mean = {c: u[c] / N for c in ("sum_score", "sum_sq", "sum_ll") if c in u}
    starts = np.flatnonzero(np.concatenate(([True], u["bin"][1:] != u["bin"][:-1])))
    block_starts = np.flatnonzero(np.concatenate(([True], u["block"][1:] != u["block"][:-1])))
    # within-unit variance of the scores, which the draws leave out (module docstring)
    total = float(np.sum(u["sum_score_sq"]))
    deficit = float(np.sum(np.maximum(u["sum_score_sq"] - u["sum_score"] ** 2 / N, 0.0)))
    rng = np.random.default_rng(seed)
    values = {m: np.empty(reps) for m in ids}
    kinds = {NORM_BINNING[m][0] for m in ids if m in NORM_BINNING}
    norms: dict[str, NormReplicates] = {}
    n = float(state.n)
    if "uniform" in kinds:
        resid = u["label"] - mean["sum_score"]
        norms["uniform"] = NormReplicates(np.add.reduceat(N * resid, starts) / n,
                                          np.add.reduceat(N, starts) / n, reps)
    if "quantile" in kinds:
        norms["quantile"] = unit_quantile_norm(N, u, mean["sum_score"], block_starts, n,
                                               state.bins, reps)
    done = 0
    while done < reps:
        t = min(REP_CHUNK, reps - done)
        W = rng.poisson(lam, size=(t, lam.shape[0])).astype(np.float64)
        n_star = W.sum(axis=1)
        sl = slice(done, done + t)
        if "uniform" in kinds:
            signed = np.add.reduceat(W * (u["label"] - mean["sum_score"]), starts, axis=1)
            norms["uniform"].add(sl, signed / n_star[:, None])
        if "quantile" in kinds:
            _, _, m_q = unit_quantile_replicates(W, u, mean["sum_score"], block_starts,
                                                 n_star, state.bins)
            norms["quantile"].add(sl, m_q)
        if "brier" in ids:
            values["brier"][sl] = (W @ mean["sum_sq"]) / n_star
        if "log_loss" in ids:
            values["log_loss"][sl] = -(W @ mean["sum_ll"]) / n_star
        done += t
    cis = {m: norms[NORM_BINNING[m][0]].interval(NORM_BINNING[m][1], level=level, seed=seed,
                                         resampling=RESAMPLING) if m in NORM_BINNING else
           percentile_interval(values[m], level=level, seed=seed, resampling=RESAMPLING,
                               estimand=estimand_of(m))
           for m in ids}
    settings = {"reps": reps, "level": level, "seed": seed,
                "method": "norm bootstrap (binned errors), percentile bootstrap (Brier, log loss)",
                "resampling": RESAMPLING, "units": int(lam.shape[0]),
                "unit_width": 2.0 ** (UNIT_SHIFT - state.grid_bits),
                "variance_deficit": deficit / total if total > 0 else 0.0}
    return cis, settings
