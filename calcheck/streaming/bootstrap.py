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

from calcheck._typing import FloatArray, IntArray
from calcheck.streaming.states import StreamState, cell_blocks, label_units
from calcheck.uncertainty import (
    ConfidenceInterval,
    NormReplicates,
    check_ci_options,
    estimand_of,
    percentile_interval,
)

CI_METRICS = ("ece", "ece_l2", "brier", "log_loss", "ace", "ece_debiased", "ece_l2_debiased")
# the norm-bootstrap metrics (calcheck.uncertainty): their bin vector and norm
NORM = {"ece": ("uniform", "l1"), "ece_debiased": ("uniform", "l1"), "ece_l2": ("uniform", "l2"),
        "ece_l2_debiased": ("uniform", "l2"), "ace": ("quantile", "l1")}
UNIT_SHIFT = 4           # units of 2^4 grid cells within one bin (2^-12 wide)
REP_CHUNK = 50           # fixed, so the draws do not depend on the machine
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


def _quantile_replicates(W: FloatArray, u: dict[str, Any], mean_score: FloatArray,
                         block_starts: IntArray, n_star: FloatArray,
                         bins: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """ACE and MCE(Q) of each replicate (a row of unit weights ``W``): the replicate's rows, in
    score order, are cut at ranks ⌊j·n*/B⌋ as in memory; a cut that falls inside a block of
    2^-12 takes the block's share of positives and Σ score pro rata (its rows are taken as
    exchangeable, as everywhere in this bootstrap)."""
    t = W.shape[0]
    count = np.add.reduceat(W, block_starts, axis=1)                       # (t, blocks)
    pos = np.add.reduceat(W * u["label"], block_starts, axis=1)
    ssum = np.add.reduceat(W * mean_score, block_starts, axis=1)
    nb = count.shape[1]
    zero = np.zeros((t, 1))
    cum = {k: np.concatenate([zero, np.cumsum(v, axis=1)], axis=1)
           for k, v in (("n", count), ("pos", pos), ("s", ssum))}
    ranks = np.floor(np.linspace(0.0, 1.0, bins + 1)[None, :] * n_star[:, None])  # (t, B+1)
    # the block holding each cut: the first whose cumulative count reaches the rank (one
    # searchsorted over all replicates: row r's cumulative counts shifted by r·(max n* + 1))
    shift = (np.arange(t) * (float(n_star.max()) + 1.0))[:, None]
    flat = (cum["n"][:, 1:] + shift).ravel()
    k = np.searchsorted(flat, (ranks + shift).ravel(), side="left").reshape(t, -1)
    k = np.minimum(k - (np.arange(t) * nb)[:, None], nb - 1)
    rows = np.arange(t)[:, None]
    width = count[rows, k]
    frac = np.divide(ranks - cum["n"][rows, k], width, out=np.zeros_like(ranks),
                     where=width > 0)
    at_pos = cum["pos"][rows, k] + frac * pos[rows, k]
    at_s = cum["s"][rows, k] + frac * ssum[rows, k]
    signed = np.diff(at_pos - at_s, axis=1)                  # Σ (y − s) per bin
    n_b, gap = np.diff(ranks, axis=1), np.abs(signed)
    ace = gap.sum(axis=1) / n_star
    with np.errstate(invalid="ignore", divide="ignore"):
        mce_q = np.where(n_b > 0, gap / np.maximum(n_b, 1.0), 0.0).max(axis=1)
    return ace, mce_q, signed / n_star[:, None]


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
    kinds = {NORM[m][0] for m in ids if m in NORM}
    norms: dict[str, NormReplicates] = {}
    n = float(state.n)
    if "uniform" in kinds:
        resid = u["label"] - mean["sum_score"]
        norms["uniform"] = NormReplicates(np.add.reduceat(N * resid, starts) / n,
                                          np.add.reduceat(N, starts) / n, reps)
    if "quantile" in kinds:
        one = N[None, :]
        _, _, m_q = _quantile_replicates(one, u, mean["sum_score"], block_starts,
                                         np.array([n]), state.bins)
        norms["quantile"] = NormReplicates(m_q[0], np.full(state.bins, 1.0 / state.bins), reps)
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
            _, _, m_q = _quantile_replicates(W, u, mean["sum_score"], block_starts, n_star,
                                             state.bins)
            norms["quantile"].add(sl, m_q)
        if "brier" in ids:
            values["brier"][sl] = (W @ mean["sum_sq"]) / n_star
        if "log_loss" in ids:
            values["log_loss"][sl] = -(W @ mean["sum_ll"]) / n_star
        done += t
    cis = {m: norms[NORM[m][0]].interval(NORM[m][1], level=level, seed=seed,
                                         resampling=RESAMPLING) if m in NORM else
           percentile_interval(values[m], level=level, seed=seed, resampling=RESAMPLING,
                               estimand=estimand_of(m))
           for m in ids}
    settings = {"reps": reps, "level": level, "seed": seed,
                "method": "norm bootstrap (binned errors), percentile bootstrap (Brier, log loss)",
                "resampling": RESAMPLING, "units": int(lam.shape[0]),
                "unit_width": 2.0 ** (UNIT_SHIFT - state.grid_bits),
                "variance_deficit": deficit / total if total > 0 else 0.0}
    return cis, settings
