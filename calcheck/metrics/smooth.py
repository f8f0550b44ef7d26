r"""Smooth ECE (Błasiok & Nakkiran, ICLR 2024): calibration error without bins.

The residuals r_i = s_i − y_i are smoothed with a Gaussian kernel of bandwidth σ reflected at
0 and 1, and the smoothed residual curve r̂_σ(t) = Σ K_σ(t, s_i) r_i / Σ K_σ(t, s_i) is
averaged against the smoothed density δ̂_σ(t) ∝ Σ K_σ(t, s_i):

.. math:: \mathrm{smECE}_\sigma = \frac{\int_0^1 |\hat r_\sigma(t)|\, \hat\delta_\sigma(t)\,
          dt}{\int_0^1 \hat\delta_\sigma(t)\, dt}.

The bandwidth is the fixed point smECE_σ = σ (the paper's choice: a larger miscalibration is
read at a coarser scale), found by regula falsi on [0.001, 1] (the grid below steps with σ,
so smECE_σ and σ agree to ~1e-4 rather than to the last digit; relplot bisects to 2^-10);
when smECE_σ < σ already at σ = 0.001 (near-perfect calibration on a large sample) the value
at 0.001 is reported, as the reference package ``relplot`` does.  ``--smece-sigma``
evaluates it at a given σ instead.

Discretisation — the reference implementation's (relplot 1.0.3), so that the numbers agree
with it, exact 0s and 1s included:

* the rows are first summed in the 2^16 cells of [0, 1] (cell ⌊2^16·s⌋, a score of 1 in its
  own), each cell's rows and residual placed at the cell's mean score (a shift of at most
  2^-16, the same on every engine: the streaming engines keep exactly these cell sums);
* the masses are split linearly between the two nearest nodes of a grid of
  E = ⌊max(2000, round(20/σ))/2⌋ + 1 points on [0, 1] (spacing ≤ σ/10);
* the reflection is the grid's mirror image about the end nodes, which are not duplicated —
  so a mass exactly at 0 or 1 enters with half the weight of the method of images; this is
  relplot's convention and calcheck keeps it (with the method of images, data with many exact
  0s and 1s would read up to ~20 % lower);
* the Gaussian kernel is sampled on the grid over ±0.5 and applied by (FFT) convolution;
* the curves are read by linear interpolation at max(round(10/σ), 200) evenly spaced points,
  the density with 10⁻⁴ added, and both integrals are the plain sums over those points.

References
----------
.. [1] Błasiok, Nakkiran. Smooth ECE: Principled reliability diagrams via kernel smoothing.
   ICLR 2024.  Reference implementation: apple/ml-calibration ``relplot`` (smECE).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calcheck._typing import FloatArray
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics._result import MetricResult

CELL_BITS = 16
SIGMA_MIN = 0.001
SIGMA_MAX = 1.0


def cell_sums(scores: FloatArray, labels: np.ndarray, weights: FloatArray | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per occupied cell of the 2^16-cell grid: rows, Σs and Σ(s − y) (with row ``weights``:
    Σw, Σw·s and Σw·(s − y); a cell of zero weight is not occupied)."""
    cell = np.floor(scores * float(1 << CELL_BITS)).astype(np.int64)
    size = (1 << CELL_BITS) + 1
    if weights is None:
        n = np.bincount(cell, minlength=size).astype(np.float64)
        ss = np.bincount(cell, weights=scores, minlength=size)
        sr = ss - np.bincount(cell, weights=labels, minlength=size)
    else:
        n = np.asarray(np.bincount(cell, weights=weights, minlength=size), dtype=np.float64)
        ss = np.bincount(cell, weights=weights * scores, minlength=size)
        sr = ss - np.bincount(cell, weights=weights * labels, minlength=size)
    occ = n > 0
    return n[occ], ss[occ], sr[occ]


@dataclass(frozen=True)
class Cells:
    """Occupied cells of the 2^16-cell grid: rows, mean score and Σ(s − y)."""

    count: FloatArray
    at: FloatArray
    resid: FloatArray

    @property
    def n(self) -> int:
        return round(float(self.count.sum()))


def cells(count: FloatArray, sum_score: FloatArray, sum_resid: FloatArray) -> Cells:
    """:class:`Cells` from per-cell rows, Σs and Σ(s − y)."""
    return Cells(count=count, at=np.clip(sum_score / count, 0.0, 1.0), resid=sum_resid)


def grid_size(sigma: float) -> int:
    """Nodes of the smoothing grid at bandwidth σ (spacing ≤ σ/10)."""
    return max(2000, round(20 / sigma)) // 2 + 1


def split(c: Cells, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and residual mass of the cells split linearly onto ``nodes`` grid points."""
    pos = c.at * (nodes - 1)
    left = np.clip(pos.astype(np.int64), 0, nodes - 2)
    frac = pos - left
    out = []
    for v in (c.count, c.resid):
        out.append(np.bincount(left, weights=(1 - frac) * v, minlength=nodes)
                   + np.bincount(left + 1, weights=frac * v, minlength=nodes))
    return out[0], out[1]


def convolve_valid(a: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``numpy.convolve(a, k, "valid")`` by FFT (len(a) ≥ len(k))."""
    size = a.shape[0] + k.shape[0] - 1
    nfft = 1 << (size - 1).bit_length()
    full = np.fft.irfft(np.fft.rfft(a, nfft) * np.fft.rfft(k, nfft), nfft)[:size]
    return np.asarray(full[k.shape[0] - 1: a.shape[0]])


def smooth(values: FloatArray, sigma: float) -> FloatArray:
    """The grid values convolved with the Gaussian, mirrored about the end nodes."""
    nodes = values.shape[0]
    t = np.linspace(0.0, 1.0, nodes)
    kernel = np.exp(-(t - 0.5) ** 2 / (2 * sigma * sigma)) / (np.sqrt(2 * np.pi) * sigma)
    ext = np.concatenate([values[::-1][:-1], values, values[::-1][1:]])
    full = convolve_valid(ext, kernel)
    return np.asarray(full[nodes // 2: nodes // 2 + nodes], dtype=np.float64)


def smece_at(c: Cells, sigma: float) -> float:
    """smECE_σ of the cells."""
    nodes = grid_size(sigma)
    rows, resid = split(c, nodes)
    t = np.linspace(0.0, 1.0, max(round(10 / sigma), 200))
    grid = np.linspace(0.0, 1.0, nodes)
    dens = np.interp(t, grid, smooth(rows, sigma)) + 1e-4
    curve = np.interp(t, grid, smooth(resid, sigma)) / dens
    return float(np.sum(np.abs(curve) * dens) / np.sum(dens))


def fixed_point(m: Cells) -> tuple[float, float]:
    """(σ, smECE_σ) with smECE_σ = σ, σ in [0.001, 1]: the root of g(σ) = smECE_σ − σ by
    regula falsi with the Illinois step, bisecting whenever it stalls (scipy's brentq would
    cost its import)."""
    a, b = SIGMA_MIN, SIGMA_MAX
    fa = smece_at(m, a) - a
    if fa <= 0:
        return a, fa + a
    fb = smece_at(m, b) - b
    if fb >= 0:
        return b, fb + b
    side = 0
    for _ in range(200):
        c = b - fb * (b - a) / (fb - fa)
        if not a < c < b or (b - a) < 1e-12:
            c = 0.5 * (a + b)
        fc = smece_at(m, c) - c
        if fc == 0 or (b - a) < 1e-10:
            break
        if (fc > 0) == (fa > 0):
            a, fa = c, fc
            if side == -1:
                fb /= 2.0
            side = -1
        else:
            b, fb = c, fc
            if side == 1:
                fa /= 2.0
            side = 1
        if b - a < 1e-10 * max(1.0, c):
            break
    # where the grid steps, g can jump over 0: keep the side nearer the fixed point
    if abs(fa) < abs(fc) and abs(fa) <= abs(fb):
        return a, fa + a
    if abs(fb) < abs(fc):
        return b, fb + b
    return c, fc + c


def smece_of(m: Cells, sigma: float | None = None, n: int | None = None) -> MetricResult:
    """The smooth ECE of the cells: at the fixed point, or at ``sigma`` (``n``: the rows to
    report, default the cells' count)."""
    if float(m.count.sum()) <= 0:
        raise ValueError("smooth ECE of no rows")
    if sigma is None:
        sigma, value = fixed_point(m)
        how = "fixed point smECE_sigma = sigma"
    else:
        value = smece_at(m, sigma)
        how = "given (--smece-sigma)"
    return MetricResult(id="smece", value=value, n_samples=m.n if n is None else n,
                        settings={"kernel": "Gaussian reflected at 0 and 1", "bandwidth": how,
                                  "cells": f"2^{CELL_BITS}", "grid_nodes": grid_size(sigma)},
                        extra={"sigma": sigma})


def smece(data: Prepared, o: MetricOptions) -> MetricResult:
    """Smooth ECE of binary predictions (registry kernel); weighted rows: of the weighted
    distribution (cell masses Σw: counts as they are, sampling weights scaled to sum to the
    rows of positive weight, since the density's floor 1e-4 is in rows)."""
    w = None if data.weights is None else data.weights.values
    if w is not None and data.weights is not None and not data.weights.frequency:
        w = w * (np.count_nonzero(w) / data.weights.total)
    return smece_of(cells(*cell_sums(data.scores, data.labels, w)), o.smece_sigma,
                    data.n_samples)
