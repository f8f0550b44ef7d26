"""Monte Carlo nulls of the label sums behind the classical tests, where their asymptotic
reference does not hold (docs/tests.md, "Small expected counts and few distinct scores").

Under calibration the labels are y ~ Bernoulli(s) with the scores fixed.  The rows are taken
in score order as *units*: a run of equal scores (a tie group) is one unit whose label sum is
one Binomial(N, s) draw — exactly the law of its rows' Bernoulli sum — and a row of its own is
a Bernoulli draw.  A statistic of sums over positions of the sorted rows (Hosmer–Lemeshow's
groups, the walk of cumulative differences) is then computed from each trial's unit sums:

* :func:`segment_sums` — the label sums of the segments between cut positions, a tie group cut
  by a position shared pro rata (``ties="share"``) as the observed statistic shares it, or its
  rows counted where they lie (``ties="order"``: the pieces are drawn on their own);
* :func:`walk_extremes` — max |C| and max C − min C of the walk C_j = Σ_{u ≤ j} (K_u − N_u s_u)
  read at the end of every tie group.

Trial j's draws come from one generator seeded by ``seed``, in chunks of trials, so a seed
gives the same null on any machine.  The p-value is (1 + #{T* ≥ T − tol})/(trials + 1), exact
under the null (the observed statistic and the trials are exchangeable).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from calcheck._typing import FloatArray, IntArray

CHUNK_CELLS = 4_000_000          # trials × units drawn at once


def units(sorted_scores: FloatArray, cuts: IntArray | None = None
          ) -> tuple[IntArray, FloatArray, IntArray]:
    """(first row, score, rows) of every unit of the sorted scores: tie groups, further split
    at ``cuts`` (``ties="order"``: a tie group's rows on either side of a cut are drawn
    apart)."""
    n = sorted_scores.shape[0]
    change = np.flatnonzero(sorted_scores[1:] != sorted_scores[:-1]) + 1
    starts = np.concatenate(([0], change)).astype(np.int64)
    if cuts is not None:
        inner = np.asarray(cuts, dtype=np.int64)
        starts = np.union1d(starts, inner[(inner > 0) & (inner < n)])
    size = np.diff(np.append(starts, n)).astype(np.int64)
    return starts, np.asarray(sorted_scores[starts], dtype=np.float64), size


def _draw(score: FloatArray, size: IntArray, t: int, rng: np.random.Generator) -> FloatArray:
    """Label sums of every unit in t trials (t × U): Bernoulli rows compared with a uniform,
    tie groups one Binomial each."""
    out = np.empty((t, score.shape[0]))
    single = size == 1
    if single.any():
        out[:, single] = rng.random((t, int(single.sum()))) < score[single]
    if (~single).any():
        out[:, ~single] = rng.binomial(size[~single], score[~single], size=(t, int((~single).sum())))
    return out


def chunks(score: FloatArray, size: IntArray, trials: int, seed: int) -> Iterator[FloatArray]:
    """The unit label sums of ``trials`` trials, a chunk of trials at a time."""
    rng = np.random.default_rng(seed)
    step = max(1, CHUNK_CELLS // max(1, score.shape[0]))
    done = 0
    while done < trials:
        t = min(step, trials - done)
        yield _draw(score, size, t, rng)
        done += t


def segment_sums(draws: FloatArray, start: IntArray, size: IntArray,
                 positions: IntArray) -> FloatArray:
    """Per trial (rows of ``draws``), the label sums between consecutive ``positions`` of the
    sorted rows; a unit cut by a position is shared pro rata between its two sides."""
    t = draws.shape[0]
    cum = np.concatenate((np.zeros((t, 1)), np.cumsum(draws, axis=1)), axis=1)
    p = np.asarray(positions, dtype=np.int64)
    k = np.clip(np.searchsorted(start, p, side="right") - 1, 0, start.shape[0] - 1)
    frac = np.clip((p - start[k]) / size[k], 0.0, 1.0)
    prefix = cum[:, k] + frac * draws[:, k]
    return np.asarray(np.diff(prefix, axis=1), dtype=np.float64)


def walk_extremes(draws: FloatArray, score: FloatArray, size: IntArray,
                  n: int) -> tuple[FloatArray, FloatArray]:
    """Per trial, max_j |C_j| and max_j C_j − min_j C_j of the walk of cumulative
    differences C_0 = 0, C_j = Σ_{u ≤ j} (K_u − N_u s_u)/n over the units."""
    walk = np.cumsum(draws - size * score, axis=1) / n
    top = np.maximum(walk.max(axis=1), 0.0)
    bottom = np.minimum(walk.min(axis=1), 0.0)
    return np.maximum(top, -bottom), top - bottom


def mc_pvalue(observed: float, null: FloatArray) -> float:
    """(1 + #{T* ≥ T − tol})/(trials + 1), tol = 1e-12·max(1, |T|)."""
    tol = 1e-12 * max(1.0, abs(observed))
    return float((1 + np.sum(null >= observed - tol)) / (null.shape[0] + 1))
