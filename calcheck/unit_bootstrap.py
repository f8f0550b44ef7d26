"""The Poisson bootstrap per score unit: intervals of the binned errors, Brier and log loss
from rows pooled into units, without the rows.

A unit is a group of rows of one label whose scores lie in one narrow block inside one ECE bin
(the streaming engines' grid units, :mod:`calcheck.streaming.bootstrap`; ``compare``'s joint
units of both models, :mod:`calcheck.paired`).  A replicate gives every row a Poisson(1) weight;
the weights of a unit's N rows sum to one Poisson(N) draw, so a replicate is one draw per unit
(:func:`poisson_draws`), and its metrics follow from the units' sums, the rows of a unit taken
as exchangeable (:class:`UnitReplicates`).  Equal-width bins are exact; equal-mass bins are
re-cut per replicate at its ranks, a cut inside a block of units shared pro rata
(:func:`unit_quantile_replicates`).  Draws come ``REP_CHUNK`` replicates at a time from one
seeded generator, so they do not depend on the machine.

References
----------
.. [1] Oza, Russell. Online bagging and boosting. AISTATS 2001 (Poisson(1) resampling weights).
.. [2] Hanley, MacGibbon. Creating non-parametric bootstrap samples using Poisson frequencies.
       Computer Methods and Programs in Biomedicine 83(1), 2006.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.uncertainty import NormReplicates

# the norm-bootstrap metrics of the streaming engines' unit bootstraps (one model, and
# ``compare``'s paired units): their binning and norm
NORM_BINNING = {"ece": ("uniform", "l1"), "ece_debiased": ("uniform", "l1"),
                "ece_l2": ("uniform", "l2"), "ece_l2_debiased": ("uniform", "l2"),
                "ace": ("quantile", "l1")}
REP_CHUNK = 50           # replicates drawn at a time: fixed, so draws do not depend on the machine


def unit_quantile_replicates(W: FloatArray, u: dict[str, Any], mean_score: FloatArray,
                             block_starts: IntArray, n_star: FloatArray, bins: int,
                             whole: bool = True) -> tuple[FloatArray, FloatArray, FloatArray]:
    """ACE and MCE(Q) of each replicate of a Poisson bootstrap over score units (a row of unit
    weights ``W``; units ``u`` sorted by score, ``block_starts`` the first unit of each block
    of units, ``u["label"]`` each unit's label): the replicate's rows, in score order, are
    cut at ranks ⌊j·n*/B⌋ as in memory (``whole``; else at the masses j·n*/B, ``W`` and
    ``n*`` sampling weights' masses); a cut that falls inside a block of units takes the
    block's share of positives and Σ score pro rata (its rows are taken as exchangeable).
    The streaming engines' bootstrap (:mod:`calcheck.streaming.bootstrap`) and ``compare``'s
    paired units (:mod:`calcheck.paired`) draw their replicates through it."""
    t = W.shape[0]
    count = np.add.reduceat(W, block_starts, axis=1)                       # (t, blocks)
    pos = np.add.reduceat(W * u["label"], block_starts, axis=1)
    ssum = np.add.reduceat(W * mean_score, block_starts, axis=1)
    nb = count.shape[1]
    zero = np.zeros((t, 1))
    cum = {k: np.concatenate([zero, np.cumsum(v, axis=1)], axis=1)
           for k, v in (("n", count), ("pos", pos), ("s", ssum))}
    ranks = np.linspace(0.0, 1.0, bins + 1)[None, :] * n_star[:, None]             # (t, B+1)
    if whole:
        ranks = np.floor(ranks)
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


def unit_quantile_norm(N: FloatArray, u: dict[str, Any], mean_score: FloatArray,
                       block_starts: IntArray, n: float, bins: int, reps: int,
                       whole: bool = True) -> NormReplicates:
    """The norm bootstrap's replicates of the equal-mass bins of score units (``N`` rows a
    unit, ``n`` in all), started at the data: every unit weighted by its own rows
    (:func:`unit_quantile_replicates`)."""
    _, _, m_q = unit_quantile_replicates(N[None, :], u, mean_score, block_starts,
                                         np.array([n]), bins, whole)
    return NormReplicates(m_q[0], np.full(bins, 1.0 / bins), reps)


def poisson_draws(lam: IntArray | FloatArray, reps: int, seed: int,
                  scale: FloatArray | None = None
                  ) -> Iterator[tuple[slice, FloatArray, FloatArray]]:
    """The replicates of a Poisson bootstrap over units of ``lam`` rows, ``REP_CHUNK`` at a
    time: (their slice of the replicates, the units' weights W (t × units), each replicate's
    rows n*).  Sampling-weighted units (:func:`weighted_units`) draw Poisson(λ) on their
    effective sizes λ, each draw times ``scale`` (a mass)."""
    rng = np.random.default_rng(seed)
    done = 0
    while done < reps:
        t = min(REP_CHUNK, reps - done)
        W = rng.poisson(lam, size=(t, lam.shape[0])).astype(np.float64)
        if scale is not None:
            W *= scale
        yield slice(done, done + t), W, W.sum(axis=1)
        done += t


def weighted_units(mass: FloatArray, mass_sq: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(λ, scale) of units of sampling-weighted rows, Σw and Σw² each: a replicate gives each
    row a Poisson(1) multiplier c, so a unit's mass Σ c·w has mean Σw and variance Σw²; its
    draw is scale·K, K ~ Poisson(λ), λ = (Σw)²/Σw² (the unit's effective rows) and
    scale = Σw²/Σw — the same two moments, and exactly Σ c·w's law when the unit's weights
    are equal (class weights: every unit holds one label)."""
    lam = mass * mass / mass_sq
    return lam, mass_sq / mass


class UnitReplicates:
    """One model's replicates of the unit-bootstrap metrics ``ids`` (of :data:`NORM_BINNING`,
    ``brier``, ``log_loss``) over its units ``v``, sorted by bin, block and label: ``count``,
    ``label``, ``mean_score`` (and ``mean_sq``, ``mean_ll`` for Brier and log loss), with
    ``bin_starts`` and ``block_starts`` the first unit of each occupied bin and of each block.
    The equal-width bin vectors hold the occupied bins, or all ``bins`` with ``at`` the bin of
    each occupied one.  ``n``: the rows."""

    def __init__(self, v: dict[str, Any], ids: list[str], *, n: float, bins: int, reps: int,
                 at: IntArray | None = None, whole: bool = True) -> None:
        self.v, self.bins, self.at, self.whole = v, bins, at, whole
        kinds = {NORM_BINNING[m][0] for m in ids if m in NORM_BINNING}
        N = v["count"]
        self.norms: dict[str, NormReplicates] = {}
        if "uniform" in kinds:
            self.norms["uniform"] = NormReplicates(
                self._per_bin(N * (v["label"] - v["mean_score"])) / n, self._per_bin(N) / n, reps)
        if "quantile" in kinds:
            self.norms["quantile"] = unit_quantile_norm(N, v, v["mean_score"], v["block_starts"],
                                                        n, bins, reps, whole)
        self.values: dict[str, FloatArray] = {m: np.empty(reps) for m in ("brier", "log_loss")
                                              if m in ids}

    def _per_bin(self, x: FloatArray) -> FloatArray:
        """Sums of ``x`` (last axis: units) per equal-width bin."""
        s = np.add.reduceat(x, self.v["bin_starts"], axis=-1)
        if self.at is None:
            return s
        out = np.zeros((*x.shape[:-1], self.bins))
        out[..., self.at] = s
        return out

    def add(self, sl: slice, W: FloatArray, n_star: FloatArray) -> None:
        """The replicates ``sl``: the units' weights ``W`` and the replicates' rows ``n_star``."""
        v = self.v
        if "uniform" in self.norms:
            signed = self._per_bin(W * (v["label"] - v["mean_score"]))
            self.norms["uniform"].add(sl, signed / n_star[:, None])
        if "quantile" in self.norms:
            m_q = unit_quantile_replicates(W, v, v["mean_score"], v["block_starts"], n_star,
                                           self.bins, self.whole)[2]
            self.norms["quantile"].add(sl, m_q)
        if "brier" in self.values:
            self.values["brier"][sl] = (W @ v["mean_sq"]) / n_star
        if "log_loss" in self.values:
            self.values["log_loss"][sl] = -(W @ v["mean_ll"]) / n_star
