"""T-Cal of weighted or counted rows from units of rows, without the rows: the streaming
engines' weighted passes (:mod:`calcheck.engines.weighted`; the rows' definitions are
:mod:`calcheck.hypotests.weighted`'s).

A unit is the rows of one score cell ⌊2^16·s⌋ (and, for a fixed m, of one bin ⌊m·s⌋): every
level's bins are unions of units, so the observed statistics T_m = (1/W) Σ_b (S_b² − Q_b)/N_b
are exact, from the units' sums S = Σw(s − y), Q = Σv(s − y)² (v = w², or k for counts),
N = Σw.  The Monte Carlo null cannot redraw each row's label, so it redraws one count per
unit, K ~ Binomial(k, p), and moves the unit's sums linearly in it —
S* = A + a·K, Q* = B + b·K, N* = N₀ + c·K — with coefficients that give the per-row null's
means and, for the label sums, its variance when the unit's scores (2^-16 apart at most) and
weights are equal:

* **counts**: K the unit's positives among its Σk expanded rows, p = Σks/Σk: the unweighted
  streaming engines' grid null on the expanded rows (A = Σks, a = −1, B = Σks²,
  b = 1 − 2Σks²/Σks);
* **fixed weights**: K the unit's drawn positives among its R rows of positive weight,
  p = Σws/Σw, and Σw·y* = Σw·p + σ·(K − R·p) with σ = √(Σw²/R) — the mean Σw·s and the
  variance Σw²·p(1 − p) of the per-row Σw·y* (exactly its law when the unit's weights are
  equal: σ = w); Q*'s slope b = (Σw²s − 2Σw²s²)/(R·p);
* **labels** (class weights w₀, w₁): K the unit's drawn positives among its rows of positive
  weight, p = mean q(s); each positive's terms a = w₁(s − 1) − w₀s, b = w₁²(1 − s)² − w₀²s²
  and mass c = w₁ − w₀ taken at their q-weighted means.

``null_variance_excess`` reports Σ(the draws' variance − the per-row null's) / Σ the per-row
null's variance of the label sums.  Draws depend on the seed and the units only (the same for
any partitioning).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import run_starts
from calcheck.hypotests._result import TestResult
from calcheck.hypotests.weighted import dpe, plugin_of

TRIAL_CHUNK = 50        # fixed, so the draws do not depend on the machine


@dataclass(frozen=True)
class UnitNull:
    """Per unit: K ~ Binomial(k, p); S* = A + a·K, Q* = B + b·K, N* = N + c·K."""

    k: IntArray
    p: FloatArray
    A: FloatArray
    a: FloatArray
    B: FloatArray
    b: FloatArray
    N: FloatArray
    c: FloatArray
    excess: float

    @classmethod
    def of(cls, u: dict[str, FloatArray], regime: str,
           classes: tuple[float, float] | None) -> UnitNull:
        """The null of units ``u`` (:meth:`calcheck.streaming.weighted.TcalState.table`) under
        ``regime`` (``count``, ``fixed`` or ``labels`` with ``classes``)."""
        mass, WS, VS, VS2 = u["mass"], u["WS"], u["VS"], u["VS2"]
        zero = np.zeros_like(mass)

        def ratio(x: FloatArray, y: FloatArray) -> FloatArray:
            return np.divide(x, y, out=np.zeros_like(x), where=y > 0)

        if regime == "labels" and classes is not None:
            w0, w1 = classes
            rows, q = u["rows"], u["q"]
            p = ratio(q, rows)
            exact = float(np.sum(q - u["q2"]))
            approx = float(np.sum(rows * p * (1.0 - p)))
            return cls(np.rint(rows).astype(np.int64), np.clip(p, 0.0, 1.0), w0 * u["s"],
                       ratio(u["qa"], q), w0 * w0 * u["s2"], ratio(u["qb"], q), w0 * rows,
                       zero + (w1 - w0), _relative(approx, exact))
        p = np.clip(ratio(WS, mass), 0.0, 1.0)
        if regime == "count":
            exact = float(np.sum(WS - VS2))
            approx = float(np.sum(mass * p * (1.0 - p)))
            return cls(np.rint(mass).astype(np.int64), p, WS, zero - 1.0, VS2,
                       1.0 - 2.0 * ratio(VS2, WS), mass, zero, _relative(approx, exact))
        rows = u["rows"]
        step = np.sqrt(ratio(u["V"], rows))               # Σw·y* = Σw·p + step·(K − R·p)
        exact = float(np.sum(VS - VS2))
        approx = float(np.sum(u["V"] * p * (1.0 - p)))
        return cls(np.rint(rows).astype(np.int64), p, step * rows * p, -step, VS2,
                   ratio(VS - 2.0 * VS2, rows * p), mass, zero, _relative(approx, exact))

    def draws(self, levels: list[IntArray], trials: int, seed: int) -> FloatArray:
        """``trials`` null draws of T_m at every level (``levels[i]``: each unit's bin, the
        levels finest first, each a coarsening of the one before): levels × trials."""
        rng = np.random.default_rng(seed)
        out = np.empty((len(levels), trials))
        starts = nested_starts(levels, self.k.shape[0])
        done = 0
        while done < trials:
            t = min(TRIAL_CHUNK, trials - done)
            K = rng.binomial(self.k, self.p, size=(t, self.k.shape[0])).astype(np.float64)
            S, Q, N = self.A + self.a * K, self.B + self.b * K, self.N + self.c * K
            total = N.sum(axis=1)
            for i, st in enumerate(starts):
                S, Q, N = (np.add.reduceat(x, st, axis=1) for x in (S, Q, N))
                out[i, done:done + t] = dpe(S, Q, N) / total
            done += t
        return out


def nested_starts(levels: list[IntArray], units: int) -> list[IntArray]:
    """For levels of bin ids over ``units`` sorted units (finest first, each a coarsening of
    the one before): each level's group starts among the previous level's groups, so a draw
    reduces level by level (``np.add.reduceat`` of the one before)."""
    starts, first = [], np.arange(units)
    for ids in levels:
        st = run_starts(ids[first])[0]
        starts.append(st)
        first = first[st]
    return starts


def _relative(approx: float, exact: float) -> float:
    return (approx - exact) / exact if exact > 0 else 0.0


def unit_tcal(u: dict[str, FloatArray], null: UnitNull, *, ms: list[int], fixed: bool,
              alpha: float, trials: int, seed: int, correction: str, grid: str,
              settings: dict[str, Any], bits: int) -> TestResult:
    """T-Cal (fixed m = ``ms[0]``, or adaptive over the dyadic ``ms``) of the units ``u``:
    exact statistics, the units' null (module docstring)."""
    from calcheck.hypotests.tcal import adaptive_result, fixed_result

    total = float(u["mass"].sum())
    if fixed:
        levels = [u["bin"].astype(np.int64)]
    else:                                       # ⌊2^j·s⌋ = cell >> (bits − j), finest first
        levels = [u["cell"].astype(np.int64) >> (bits - int(np.log2(m))) for m in ms[::-1]]
    obs = []
    for ids in levels:                          # the statistics from the units' exact sums
        st = run_starts(ids)[0]
        S, Q, N = (np.add.reduceat(u[k], st) for k in ("S", "Q", "mass"))
        obs.append(plugin_of(S, Q, N, total))
    null_draws = null.draws(levels, trials, seed)
    more = {"trials": trials, "resample": "labels", "seed": seed, **settings,
            "null_variance_excess": null.excess}
    if fixed:
        return fixed_result(obs[0], null_draws[0], m=ms[0], alpha=alpha,
                            settings={"m": ms[0], **more})
    return adaptive_result(obs[::-1], null_draws[::-1], ms, alpha=alpha, correction=correction,
                           details={"grid": grid, "max_bins": ms[-1]},
                           settings={"levels": f"2^1..2^{len(ms)}", "grid": grid, **more})
