r"""The audit's statistics per segment, and p-values adjusted over every segment searched.

For segment k (its rows i ∈ k; s scores, y labels; v_i = s_i(1 − s_i)):

* calibration in the large: z_k = Σ(y_i − s_i) / √(Σ v_i), against N(0, 1);
* shape: the walk of the residual sums over the score cells in increasing score,
  W_k(c) = Σ_{c' ≤ c} Σ_{i ∈ k, c'} (y_i − s_i), and its range
  V_k = max(0, max_c W_k) − min(0, min_c W_k), standardized by √(Σ v_i) — Kuiper's statistic
  (the ECCE-R of Arrieta-Ibarra et al. 2022) on the segment's rows, at the resolution of the
  score cells, against the range of a Brownian motion (Feller 1951);
* the segment's evidence p_k = min(p_z, p_V) of the two reference p-values.

**The adjustment.**  Both p-values of every segment are recomputed on ``trials`` samples of
labels drawn under calibration, jointly for all segments (each (atom, score cell)'s positives
from Binomial(rows, mean score) — the segments' sums are sums of these cells, so the overlaps of
the segments are kept).  Per segment, ``pvalue`` = (1 + #{draws with p*_k ≤ p_k}) / (1 + trials)
and ``pvalue_adjusted`` = (1 + #{draws with min_j p*_j ≤ p_k}) / (1 + trials): the max-type
(Westfall–Young min-p) adjustment, which holds the family-wise error at α over every segment
searched however they overlap.  A cell's binomial has variance m·s̄(1 − s̄) ≥ Σ s_i(1 − s_i)
(equality when its scores are equal), so the null draws are at least as dispersed as the exact
ones: the p-values err on the conservative side, by little when the cells are narrow.

References
----------
.. [1] Westfall, Young. Resampling-based multiple testing. Wiley, 1993.
.. [2] Guy, Haimovich, Linder, Okati, Perini, Tax, Tygert. Measuring multi-calibration.
   arXiv:2506.11251, 2025.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.hypotests.cumulative import range_sf_array

DRAWS_PER_BATCH = 64          # null draws simulated together (memory ~ batch × cells)


@dataclass(frozen=True)
class SegmentSums:
    """Per segment: rows, Σs, Σy, Σv, the residual sums per score cell (segments × cells) and
    the ECE bins' (rows, Σs, Σy) (segments × bins)."""

    rows: FloatArray
    s: FloatArray
    y: FloatArray
    v: FloatArray
    residual: FloatArray
    ece_rows: FloatArray
    ece_s: FloatArray
    ece_y: FloatArray

    @property
    def ece(self) -> FloatArray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(np.abs(self.ece_y - self.ece_s).sum(axis=1) / self.rows,
                              dtype=np.float64)


def segment_sums(membership: Any, cells: dict[str, FloatArray],
                 ece: dict[str, FloatArray]) -> SegmentSums:
    """The sums of every segment from the atoms' (``membership``: segments × atoms)."""
    def per(x: FloatArray) -> FloatArray:
        return np.asarray(membership @ x)

    rows = per(cells["rows"])
    s, y, v = per(cells["s"]), per(cells["y"]), per(cells["v"])
    return SegmentSums(rows.sum(axis=1), s.sum(axis=1), y.sum(axis=1), v.sum(axis=1), y - s,
                       per(ece["rows"]), per(ece["s"]), per(ece["y"]))


def walk_range(residual: FloatArray) -> FloatArray:
    """max(0, max W) − min(0, min W) of the walks W = cumsum(residual) along the last axis."""
    w = np.cumsum(residual, axis=-1)
    return np.asarray(np.maximum(w.max(axis=-1), 0.0) - np.minimum(w.min(axis=-1), 0.0),
                      dtype=np.float64)


def evidence(total: FloatArray, walk: FloatArray, sd: FloatArray) -> tuple[FloatArray, ...]:
    """(z, V/σ, p_z, p_V, min p) from the residual totals and walk ranges; σ = √Σv."""
    from scipy.special import ndtr

    with np.errstate(invalid="ignore", divide="ignore"):
        z = total / sd
        k = walk / sd
    pz = 2.0 * ndtr(-np.abs(z))
    pv = range_sf_array(np.nan_to_num(k, nan=0.0))
    pv = np.where(np.isnan(k), np.nan, pv)
    return z, k, pz, pv, np.fmin(pz, pv)


@dataclass(frozen=True)
class Adjusted:
    """Monte Carlo p-values per segment (``pvalue``, ``pvalue_adjusted``) and the trials."""

    pvalue: FloatArray
    pvalue_adjusted: FloatArray
    trials: int


def range_isf(p: FloatArray) -> FloatArray:
    """The x with P(range of a Brownian motion on [0, 1] ≥ x) = p, elementwise (bisection to
    machine precision; p = 1 gives 0)."""
    lo, hi = np.zeros_like(p), np.full_like(p, 40.0)
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        above = range_sf_array(mid) > p
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return hi


def thresholds(observed: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(|z|, V/σ) at which each reference p-value equals the observed evidence: a draw's
    segment is as extreme as observed when its |z| or its V/σ reaches these."""
    from scipy.special import ndtri

    zc = np.where(observed > 0, -ndtri(np.clip(observed, 0, 1) / 2.0), np.inf)
    return zc * (1.0 - 1e-12), range_isf(observed) * (1.0 - 1e-12)


def adjust(membership: Any, cells: dict[str, FloatArray], sd: FloatArray, observed: FloatArray,
           *, trials: int, seed: int, progress: Any = None) -> Adjusted:
    """The max-type adjustment of the segments' evidence ``observed`` (min p; NaN for a
    segment without variance, which takes no part) by ``trials`` joint null draws.  min(p_z,
    p_V) of a draw is at most the observed one exactly when its |z| or its V/σ reaches the
    observed evidence's thresholds (the reference p-values are decreasing), and the smallest
    over the segments is at most it when the largest |z| or the largest V/σ does: so no
    p-value of a draw is computed.  Draws come in batches of :data:`DRAWS_PER_BATCH`, batch b
    from its own generator seeded (``seed``, b), two batches at a time on two threads: the
    counts do not depend on the threads."""
    from calcheck._threads import map_two

    m = cells["rows"].ravel()
    filled = np.flatnonzero(m > 0)
    count = m[filled].astype(np.int64)
    ssum = cells["s"].ravel()[filled]
    p = np.clip(ssum / count, 0.0, 1.0)
    a, g = cells["rows"].shape
    tested = ~np.isnan(observed)
    sd_t = sd[tested][:, None]
    zc, vc = (x[:, None] for x in thresholds(observed[tested]))
    mem = membership[np.flatnonzero(tested)]

    def batch(b: int, k: int) -> tuple[IntArray, IntArray]:
        rng = np.random.default_rng([seed, b])
        draws = rng.binomial(count[None, :], p[None, :], size=(k, filled.size))
        r = np.zeros((k, a * g))
        r[:, filled] = draws - ssum[None, :]
        per_atom = r.reshape(k, a, g).transpose(1, 0, 2).reshape(a, k * g)
        seg = np.asarray(mem @ per_atom).reshape(-1, k, g)
        z = np.abs(seg.sum(axis=2)) / sd_t
        v = walk_range(seg) / sd_t
        hit = ((z >= zc) | (v >= vc)).sum(axis=1)
        top = (z.max(axis=0)[None, :] >= zc) | (v.max(axis=0)[None, :] >= vc)
        return hit, top.sum(axis=1)

    sizes = [min(DRAWS_PER_BATCH, trials - lo) for lo in range(0, trials, DRAWS_PER_BATCH)]
    hits = np.zeros(int(tested.sum()), dtype=np.int64)
    hits_adj = np.zeros_like(hits)
    done = 0
    for lo in range(0, len(sizes) if hits.size else 0, 2):   # two batches at a time
        for hit, top in map_two(batch, [(b, sizes[b]) for b in range(lo, min(lo + 2,
                                                                           len(sizes)))]):
            hits += hit
            hits_adj += top
        done += sum(sizes[lo:lo + 2])
        if progress is not None:
            progress(done, trials)
    out = np.full(observed.shape, np.nan)
    out_adj = np.full(observed.shape, np.nan)
    out[tested] = (1.0 + hits) / (1.0 + trials)
    out_adj[tested] = (1.0 + hits_adj) / (1.0 + trials)
    return Adjusted(out, out_adj, trials)


def row_walk_ranges(scores: FloatArray, labels: IntArray, segment_of: IntArray,
                    segments: int, by_score: IntArray | None = None,
                    counts: FloatArray | None = None) -> FloatArray:
    """The walk range V_k on the rows themselves (every distinct score of the segment a step;
    tied scores one step, so no value depends on the row order) for rows grouped by
    ``segment_of`` (−1: in none of these segments) — the numerator of MCGrad's ECCE.
    ``by_score``: the rows in increasing score (a sort shared by several calls); ``counts``:
    each row stands for that many (the expanded rows' walk: its copies are tied)."""
    if by_score is None:
        by_score = np.argsort(scores, kind="stable")
    codes = segment_of[by_score]
    narrow = codes.astype(np.int16) if segments < (1 << 15) else codes
    order = by_score[np.argsort(narrow, kind="stable")]         # (radix sort on int16)
    order = order[np.searchsorted(segment_of[order], 0):] if segments else order[:0]
    seg = segment_of[order]
    s = scores[order]
    w = np.cumsum(labels[order] - s if counts is None else counts[order] * (labels[order] - s))
    out = np.zeros(segments)
    if not seg.size:
        return out
    first = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])     # each present segment's start
    base = np.where(first > 0, w[np.maximum(first - 1, 0)], 0.0)
    end = np.ones(seg.size, dtype=bool)
    end[:-1] = (seg[1:] != seg[:-1]) | (s[1:] != s[:-1])
    top = np.maximum.reduceat(np.where(end, w, -np.inf), first) - base
    bottom = np.minimum.reduceat(np.where(end, w, np.inf), first) - base
    out[seg[first]] = np.maximum(top, 0.0) - np.minimum(bottom, 0.0)
    return out
