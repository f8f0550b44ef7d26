r"""Anytime-valid monitoring of calibration: an e-process and a confidence sequence.

Rows arrive in windows; under calibration each label is y ~ Bernoulli(s) given its score (and
everything before it).  With η = logit(s) (s clipped to [1e-15, 1 − 1e-15]), an alternative
(a, b) says y ~ Bernoulli(expit(a + b·η)) — Cox's recalibration family: a shifts every
prediction (calibration in the large), b ≠ 1 makes them too extreme or too cautious.

**The e-process** E_t = ½·M_t + ½·P_t averages two test martingales (nonnegative, mean 1
under calibration, built window by window from what came before):

* M_t, the mixture likelihood ratio Σ_k w_k Π_{i ≤ t} p_{a_k b_k}(y_i) / p_{0,1}(y_i) over a
  fixed grid of alternatives (:data:`SHIFTS` × :data:`SLOPES` without (0, 1), equal weights
  w_k) — it bets on every alternative from the first row;
* P_t, a predictable plug-in: for each window it picks the alternative whose log likelihood
  ratio summed over the previous :data:`RECENT` windows is largest (none when no alternative
  beats calibration there) and multiplies by (1 − h) + h·LR of that alternative on the
  window's rows (h = :data:`HEDGE`; by 1 when none is picked).  Chosen before the window is
  read, each factor has mean 1 under calibration.  While the model is calibrated it bets
  little and loses little; after a drift it follows the new alternative within a window —
  where M_t has first to win back what it lost on the calibrated windows.

A mean of test martingales is one, and Ville's inequality gives P(E_t ≥ 1/α for some t) ≤ α,
however many windows are looked at and whenever one stops (Robbins 1970; Ville 1939; Ramdas,
Grünwald, Vovk & Shafer 2023; Waudby-Smith & Ramdas 2024 on predictable plug-ins).  The alarm
is raised at the first window whose E_t reaches 1/α.  E_t after a window is a function of the
windows' sums in order, so a daily job that carries them in a state file gets the e-values of
one run over every window.

**The confidence sequence** for the offset θ — the calibration intercept, logit P(y = 1) =
θ + η — inverts the same construction: for each θ₀ on :data:`OFFSETS`, E_t(θ₀) mixes the
likelihood ratios of θ₀ + δ against θ₀ over the steps δ of :data:`STEPS` that stay on the grid;
{θ₀ : E_t(θ₀) < 1/α} covers a constant true offset at every window at once with probability
≥ 1 − α.  Reported as its smallest and largest grid point (None where it reaches an end of the
grid: unbounded on that side); empty when no constant offset on the grid fits the rows.

The construction assumes the labels are independent given the scores (within and across
windows); a shift of the score distribution alone raises no alarm, only a change of
P(y = 1 | s).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from calcheck._typing import FloatArray
from calcheck.hypotests.classical import cox_logit

SHIFTS = (-1.0, -0.5, -0.25, -0.1, 0.0, 0.1, 0.25, 0.5, 1.0)
SLOPES = (0.5, 0.7, 0.85, 1.0, 1.2, 1.5, 2.0)
ALTERNATIVES = np.array([(a, b) for a in SHIFTS for b in SLOPES if (a, b) != (0.0, 1.0)])
OFFSET_STEP = 0.025
OFFSETS = np.round(np.arange(-80, 81) * OFFSET_STEP, 6)          # θ₀ ∈ [−2, 2]
STEPS = (1, 2, 4, 8, 16, 32)                                    # δ = ±steps × 0.025
SUBSTEPS = 25                 # off-grid offsets checked every 0.025 / 25 = 0.001
CHUNK_ROWS = 1 << 12          # rows a chunk: (223 × 4,096) float64 temporaries stay in cache (3.4x over 2^14)
RECENT = 7                    # windows the plug-in looks back on
HEDGE = 0.5                   # the plug-in's stake on its alternative


@dataclass
class WindowSums:
    """The sums one window contributes: rows, Σy, Σs, the log likelihood ratio of every
    alternative against calibration, and the log likelihood at every grid offset."""

    rows: int = 0
    positives: float = 0.0
    score_sum: float = 0.0
    log_ratio: FloatArray = field(default_factory=lambda: np.zeros(len(ALTERNATIVES)))
    offset_loglik: FloatArray = field(default_factory=lambda: np.zeros(OFFSETS.size))


def _softplus(x: FloatArray, scratch: FloatArray) -> FloatArray:
    """log(1 + eˣ) in place (``x`` is overwritten), as max(x, 0) + log1p(e^−|x|): numpy's
    ``logaddexp(0, x)`` to the last bit or two, 2.5x faster."""
    np.abs(x, out=scratch)
    np.negative(scratch, out=scratch)
    np.exp(scratch, out=scratch)
    np.log1p(scratch, out=scratch)
    np.maximum(x, 0.0, out=x)
    x += scratch
    return x


def window_sums(scores: FloatArray, labels: FloatArray,
                counts: FloatArray | None = None) -> WindowSums:
    """The sums of one window's rows.  Every log likelihood is Σ y·x − Σ log(1 + eˣ) with x
    linear in η, so the per-row work is one softplus per alternative and offset; Σ y, Σ y·η
    and Σ log(1 + e^η) give the rest.  Rows are taken in chunks of :data:`CHUNK_ROWS` from the
    window's first row, the first and second half of the chunks on two threads, each chunk's
    sums kept and added in chunk order: the same numbers whatever the threads, and a window's
    sums do not depend on what else was read with it.  ``counts``: each row stands for that
    many identical rows (``--count``), every sum the expanded window's (a row's terms times
    its count: the likelihood of k identical rows is the row's to the power k)."""
    from calcheck._threads import halves

    n = int(scores.shape[0])
    y = np.asarray(labels, dtype=np.float64)
    k_all = None if counts is None else np.asarray(counts, dtype=np.float64)
    out = WindowSums(rows=n, positives=float(np.sum(labels)), score_sum=float(np.sum(scores))) \
        if k_all is None else WindowSums(rows=round(float(k_all.sum())),
                                         positives=float(np.dot(k_all, y)),
                                         score_sum=float(np.dot(k_all, scores)))
    k = len(ALTERNATIVES)
    slope = np.concatenate((ALTERNATIVES[:, 1], np.ones(OFFSETS.size)))[:, None]
    shift = np.concatenate((ALTERNATIVES[:, 0], OFFSETS))[:, None]
    starts = range(0, n, CHUNK_ROWS)
    soft = np.zeros((len(starts), slope.shape[0]))      # Σ log(1 + e^(shift + slope·η))
    lin = np.zeros((len(starts), 3))                     # Σ y, Σ y·η, Σ log(1 + e^η)

    def run(first: int, last: int) -> None:
        x = np.empty((slope.shape[0], CHUNK_ROWS))
        scratch = np.empty_like(x)
        for j in range(first, last):
            lo = starts[j]
            eta = cox_logit(scores[lo:lo + CHUNK_ROWS])
            m = eta.shape[0]
            xs, ss = x[:, :m], scratch[:, :m]
            np.multiply(slope, eta[None, :], out=xs)
            xs += shift
            yy = y[lo:lo + m]
            null = _softplus(eta.copy(), np.empty(m))
            if k_all is None:
                soft[j] = _softplus(xs, ss).sum(axis=1)
                lin[j] = yy.sum(), (yy * eta).sum(), null.sum()
            else:
                kk = k_all[lo:lo + m]
                soft[j] = _softplus(xs, ss) @ kk
                ky = kk * yy
                lin[j] = ky.sum(), np.dot(ky, eta), np.dot(kk, null)

    halves(run, len(starts))
    total = np.zeros(slope.shape[0])
    sy = syeta = snull = 0.0
    for j in range(len(starts)):                         # chunk order, whatever the threads
        total += soft[j]
        sy, syeta, snull = sy + lin[j, 0], syeta + lin[j, 1], snull + lin[j, 2]
    null = syeta - snull                                 # log likelihood of calibration
    out.log_ratio = ALTERNATIVES[:, 0] * sy + ALTERNATIVES[:, 1] * syeta - total[:k] - null
    out.offset_loglik = OFFSETS * sy + syeta - total[k:]
    return out


def log_mixture(log_ratio: FloatArray) -> float:
    """log M of the fixed mixture, equal weights, from the alternatives' cumulative log
    ratios."""
    top = float(np.max(log_ratio))
    return top + float(np.log(np.mean(np.exp(log_ratio - top))))


def plugin_choice(recent: list[FloatArray]) -> int | None:
    """The alternative the plug-in bets on next: the largest log ratio summed over the
    ``recent`` windows' (oldest first), if it beats calibration (> 0); else None."""
    if not recent:
        return None
    total = np.sum(np.vstack(recent), axis=0)
    k = int(np.argmax(total))
    return k if total[k] > 0 else None


def plugin_step(window_log_ratio: FloatArray, choice: int | None) -> float:
    """log of the plug-in's factor on a window: log((1 − h) + h·LR), 0 without a choice."""
    if choice is None:
        return 0.0
    return float(np.logaddexp(np.log1p(-HEDGE), np.log(HEDGE) + window_log_ratio[choice]))


def log_evalue(log_ratio: FloatArray, log_plugin: float) -> float:
    """log E = log(½M + ½P)."""
    return float(np.logaddexp(log_mixture(log_ratio), log_plugin) - np.log(2.0))


def _log_mean(terms: FloatArray, valid: np.ndarray) -> FloatArray:
    """log of the mean of exp(terms) over the valid rows of each column."""
    t = np.where(valid, terms, -np.inf)
    top = np.max(t, axis=0)
    out: FloatArray = top + np.log(np.sum(np.exp(t - top), axis=0) / np.sum(valid, axis=0))
    return out


def confidence_sequence(offset_loglik: FloatArray, alpha: float) -> tuple[bool, float | None,
                                                                          float | None]:
    """(empty, low, high) of {θ₀ : E(θ₀) < 1/α} over every real offset θ₀ in the grid's range,
    from the cumulative log likelihoods ℓ on :data:`OFFSETS`; low/high None where the set
    reaches the grid's end.

    On a grid point θ₀ = g_i, E(θ₀) is the mean of exp(ℓ(g_{i±s}) − ℓ(g_i)) over the steps s of
    :data:`STEPS` that stay on the grid.  Between grid points, g_i < θ₀ < g_{i+1}, E(θ₀) is the
    mean of the likelihood ratios of g_{i+s} and g_{i+1−s} against θ₀ — a test martingale
    under θ₀ like the grid's, but ℓ(θ₀) is not known.  ℓ is concave in θ (a sum of
    −log(1 + e^{η+θ}) and linear terms), so the secant through g_{i−1}, g_i extended to the
    right, and the one through g_{i+1}, g_{i+2} extended to the left, bound it from above; with
    that bound E(θ₀) is bounded from below, and θ₀ is kept unless even the bound rejects it.
    So the set covers any constant offset, not only grid ones, with probability ≥ 1 − α at
    every window at once.  Off-grid offsets are checked every step/:data:`SUBSTEPS`, and the
    hull is widened by that much on each side."""
    n = OFFSETS.size
    threshold = np.log(1.0 / alpha)
    ell = np.asarray(offset_loglik, dtype=np.float64)
    idx = np.arange(n)
    # on the grid
    terms: list[FloatArray] = []
    valid: list[np.ndarray] = []
    for st in STEPS:
        for sign in (-1, 1):
            j = idx + sign * st
            ok = (j >= 0) & (j < n)
            terms.append(ell[np.clip(j, 0, n - 1)] - ell)
            valid.append(ok)
    keep_grid = _log_mean(np.vstack(terms), np.vstack(valid)) < threshold
    # between grid points i and i + 1, at fractions f of a step
    i = np.arange(n - 1)[:, None]
    f = (np.arange(1, SUBSTEPS) / SUBSTEPS)[None, :]
    left_ok = i >= 1
    right_ok = i + 2 <= n - 1
    slope_l = (ell[i] - ell[np.maximum(i - 1, 0)]) / OFFSET_STEP
    slope_r = (ell[np.minimum(i + 2, n - 1)] - ell[i + 1]) / OFFSET_STEP
    ub_l = np.where(left_ok, ell[i] + slope_l * f * OFFSET_STEP, np.inf)
    ub_r = np.where(right_ok, ell[i + 1] - slope_r * (1 - f) * OFFSET_STEP, np.inf)
    upper = np.minimum(ub_l, ub_r) + 1e-9 * (1.0 + np.abs(ell).max())
    alt: list[FloatArray] = []
    on_grid: list[np.ndarray] = []
    for st in STEPS:
        for j in (i[:, 0] + st, i[:, 0] + 1 - st):
            alt.append(ell[np.clip(j, 0, n - 1)])
            on_grid.append((j >= 0) & (j < n))
    log_alt = _log_mean(np.vstack(alt), np.vstack(on_grid))     # per interval
    keep_sub = (log_alt[:, None] - upper) < threshold            # (interval, fraction)
    # every checked point in order: g_0, its fractions, g_1, …
    points = np.concatenate((OFFSETS[:-1, None], OFFSETS[:-1, None] + f * OFFSET_STEP),
                            axis=1).ravel()
    points = np.append(points, OFFSETS[-1])
    keep = np.concatenate((keep_grid[:-1, None], keep_sub), axis=1).ravel()
    keep = np.append(keep, keep_grid[-1])
    if not keep.any():
        return True, None, None
    inside = np.flatnonzero(keep)
    lo, hi = int(inside[0]), int(inside[-1])
    sub = OFFSET_STEP / SUBSTEPS
    low = None if lo == 0 else float(np.round(points[lo] - sub, 6))
    high = None if hi == points.size - 1 else float(np.round(points[hi] + sub, 6))
    return False, low, high
