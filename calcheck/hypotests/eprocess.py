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
CHUNK_ROWS = 1 << 14
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


def window_sums(scores: FloatArray, labels: FloatArray) -> WindowSums:
    """The sums of one window's rows (in chunks of :data:`CHUNK_ROWS` from the window's first
    row, so a window's sums do not depend on what else was read with it)."""
    out = WindowSums(rows=int(scores.shape[0]), positives=float(np.sum(labels)),
                     score_sum=float(np.sum(scores)))
    a, b = ALTERNATIVES[:, 0][:, None], ALTERNATIVES[:, 1][:, None]
    theta = OFFSETS[:, None]
    for lo in range(0, scores.shape[0], CHUNK_ROWS):
        eta = cox_logit(scores[lo:lo + CHUNK_ROWS])[None, :]
        y = np.asarray(labels[lo:lo + CHUNK_ROWS], dtype=np.float64)[None, :]
        null = y * eta - np.logaddexp(0.0, eta)
        alt = a + b * eta
        out.log_ratio += np.sum(y * alt - np.logaddexp(0.0, alt) - null, axis=1)
        shifted = eta + theta
        out.offset_loglik += np.sum(y * shifted - np.logaddexp(0.0, shifted), axis=1)
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


def confidence_sequence(offset_loglik: FloatArray, alpha: float) -> tuple[bool, float | None,
                                                                          float | None]:
    """(empty, low, high) of {θ₀ : E(θ₀) < 1/α} from the cumulative log likelihoods on
    :data:`OFFSETS`; low/high None where the set reaches the grid's end."""
    n = OFFSETS.size
    keep = np.zeros(n, dtype=bool)
    threshold = np.log(1.0 / alpha)
    idx = np.arange(n)
    terms: list[FloatArray] = []
    valid: list[np.ndarray] = []
    for st in STEPS:
        for sign in (-1, 1):
            j = idx + sign * st
            ok = (j >= 0) & (j < n)
            terms.append(np.where(ok, offset_loglik[np.clip(j, 0, n - 1)] - offset_loglik,
                                  -np.inf))
            valid.append(ok)
    t = np.vstack(terms)
    count = np.sum(np.vstack(valid), axis=0)
    top = np.max(t, axis=0)
    log_e = top + np.log(np.sum(np.exp(t - top), axis=0) / count)
    keep = log_e < threshold
    if not keep.any():
        return True, None, None
    inside = np.flatnonzero(keep)
    lo, hi = int(inside[0]), int(inside[-1])
    return False, None if lo == 0 else float(OFFSETS[lo]), \
        None if hi == n - 1 else float(OFFSETS[hi])
