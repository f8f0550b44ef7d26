"""Bias-corrected binned calibration errors, and the per-bin vectors behind honest intervals.

A binned calibration error is a norm of the vector of per-bin mean residuals
m_b = E[(y − s)·1{s ∈ b}] (estimated by m̂_b = Σ_{i∈b} (y_i − s_i) / n):

* ECE = Σ_b |m_b| (= Σ_b w_b |ȳ_b − s̄_b|, w_b = n_b/n), ACE likewise on equal-mass bins;
* ECE-l2 = (Σ_b m_b² / P_b)^(1/2) (= (Σ_b w_b (ȳ_b − s̄_b)²)^(1/2)), P_b = P(s ∈ b).

The plug-in value is biased upward: |d̂_b| with d̂_b = ȳ_b − s̄_b has expectation above |d_b|,
by about 0.8·sd(d̂_b) when d_b = 0, so a calibrated model's plug-in ECE is positive and shrinks
only like n^(-1/2).  The bias-corrected estimators here remove the per-bin noise by the method
of moments, with v̂_b = S²_b / n_b the estimated variance of d̂_b (S²_b the sample variance of
y − s in bin b, ddof = 1; a bin of one row takes s(1 − s), the variance of a calibrated label):

* ``ece_debiased`` = Σ_b w_b √max(0, d̂_b² − c_b·v̂_b) (and ``ace_debiased`` on equal-mass
  bins), a *tapered* method of moments: E[d̂_b²] = d_b² + v_b, so d̂_b² − v̂_b is unbiased for
  d_b², but the root of it is biased down (by about sd/(2·|d_b|/sd) for a clear gap: −0.33 sd
  at 1.5 sd) while the plug-in |d̂_b| is nearly unbiased there (+0.06 sd at 1.5 sd, +0.02 at 2).
  So the variance is subtracted in full (c_b = 1) where |d̂_b| is within one estimated
  standard error, not at all (c_b = 0) from two, linearly in between:
  c_b = clip(2 − |d̂_b|/√v̂_b, 0, 1).  Its bias is 0.40 sd at d_b = 0 (the plug-in's 0.80 sd,
  pure moments' 0.34 sd) and never below −0.19 sd (pure moments: −0.33 sd), computed for
  d̂_b ~ N(d_b, sd²);
* ``ece_l2_debiased`` = √max(0, Σ_b w_b (d̂_b² − v̂_b)), the root of the unbiased estimator of
  the squared l2-ECE (Kumar, Liang & Ma 2019, §5; T-Cal's DPE has the same form).

References
----------
.. [1] Kumar, Liang, Ma. Verified uncertainty calibration. NeurIPS 2019 (debiased squared
       calibration error).
.. [2] Roelofs, Cain, Shlens, Mozer. Mitigating bias in calibration error estimation. AISTATS
       2022 (the bias of the plug-in ECE).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calcheck._typing import FloatArray
from calcheck.binning import quantile_bounds, shared_cumsum, tie_bounds, uniform_assign
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics._result import MetricResult
from calcheck.weights import Weights


@dataclass(frozen=True)
class BinResiduals:
    """Per bin: rows (may be fractional: shared ties), Σ r and Σ r², r = y − s, Σ s(1 − s).

    Weighted rows: counts k enter as rows (every sum the expanded file's); sampling weights w
    make ``count`` Σw and the sums Σw·r, Σw·r², Σw·s(1 − s), and ``sampled`` holds
    (Σw², Σw²·r, Σw²·r², rows) for the variance of the weighted mean (:meth:`variance`)."""

    count: FloatArray
    sum_r: FloatArray
    sum_r2: FloatArray
    sum_var: FloatArray
    n: float
    sampled: tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None = None

    @property
    def m(self) -> FloatArray:
        """m̂_b = Σ_{i∈b} (y_i − s_i) / n."""
        return self.sum_r / self.n

    @property
    def p(self) -> FloatArray:
        """P̂_b = n_b / n."""
        return self.count / self.n

    def variance(self) -> FloatArray:
        """v̂_b: the estimated variance of d̂_b = ȳ_b − s̄_b (module docstring); 0 for empty
        bins.  Sampling weights: Σw²(r − d̂_b)²/(Σw)² · m/(m − 1) over the bin's m rows (its
        unweighted form at unit weights), a bin of one row Σw²·s(1 − s)/(Σw)²."""
        c = self.count
        if self.sampled is not None:
            return self._weighted_variance()
        out = np.zeros_like(c)
        many = c > 1.0 + 1e-9
        s2 = (self.sum_r2[many] - self.sum_r[many] ** 2 / c[many]) / (c[many] - 1.0)
        out[many] = np.maximum(s2, 0.0) / c[many]
        few = (c > 0) & ~many
        out[few] = self.sum_var[few] / c[few] / c[few]
        return out

    def _weighted_variance(self) -> FloatArray:
        assert self.sampled is not None
        w2, w2r, w2r2, rows = self.sampled
        c = self.count
        d = self.gap()
        out = np.zeros_like(c)
        many = (rows > 1.0 + 1e-9) & (c > 0)
        ss = np.maximum(w2r2 - 2.0 * d * w2r + d * d * w2, 0.0)
        out[many] = ss[many] / (c[many] ** 2) * rows[many] / (rows[many] - 1.0)
        few = (c > 0) & ~many
        # one row: a calibrated label's variance, (Σw·s(1 − s)/Σw)·Σw²/(Σw)² = s(1 − s)
        out[few] = self.sum_var[few] / c[few] * w2[few] / (c[few] * c[few])
        return out

    def gap(self) -> FloatArray:
        return np.divide(self.sum_r, self.count, out=np.zeros_like(self.sum_r),
                         where=self.count > 0)


def uniform_residuals(scores: FloatArray, labels: np.ndarray, bins: int,
                      weights: Weights | None = None) -> BinResiduals:
    """Per-bin residual sums of the ECE's equal-width bins, summed in the order (score,
    label) so that no digit depends on the order of the rows; with row ``weights``, weighted
    (:class:`BinResiduals`)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    order = np.lexsort((y, s))
    s = s[order]
    r = y[order] - s
    ids = uniform_assign(s, bins)
    w = None if weights is None else weights.values[order]

    def sums(x: FloatArray | None, by: FloatArray | None = w) -> FloatArray:
        v = by if x is None else (x if by is None else x * by)
        return np.asarray(np.bincount(ids, weights=v, minlength=bins), dtype=np.float64)

    v = s * (1.0 - s)
    if weights is None or w is None or weights.frequency:
        return BinResiduals(sums(None), sums(r), sums(r * r), sums(v),
                            s.shape[0] if w is None else float(w.sum()))
    w2 = w * w
    return BinResiduals(sums(None), sums(r), sums(r * r), sums(v), float(w.sum()),
                        (sums(None, w2), sums(r, w2), sums(r * r, w2),
                         sums(None, (w > 0).astype(np.float64))))


def weighted_quantile_residuals(data: Prepared, bins: int) -> BinResiduals:
    """:func:`quantile_residuals` of weighted rows: ACE's equal-mass bins on the mass axis, a
    unit straddling a cut shared pro rata (:mod:`calcheck.weights`)."""
    from calcheck.weights import mass_cuts

    assert data.weights is not None
    ax = data.axis
    cuts = mass_cuts(data.mass, bins, data.weights.frequency)
    s = data.sorted_scores
    r = data.sorted_labels.astype(np.float64) - s
    w = data.sorted_weights
    count = np.diff(cuts)

    def sums(x: FloatArray) -> FloatArray:
        return ax.sums(x, cuts)

    v = s * (1.0 - s)
    base = (count, sums(w * r), sums(w * r * r), sums(w * v), float(data.mass))
    if data.weights.frequency:
        return BinResiduals(*base)
    w2 = w * w
    return BinResiduals(*base, sampled=(sums(w2), sums(w2 * r), sums(w2 * r * r),
                                        sums((w > 0).astype(np.float64))))


def quantile_residuals(sorted_scores: FloatArray, sorted_labels: np.ndarray, bins: int,
                       ties: str = "share") -> BinResiduals:
    """Per-bin residual sums of ACE's equal-mass bins (cuts at ⌊j·n/B⌋, a tie group cut by one
    shared pro rata; ``ties="order"`` splits it in row order)."""
    s = np.asarray(sorted_scores, dtype=np.float64)
    r = np.asarray(sorted_labels, dtype=np.float64) - s
    n = s.shape[0]
    b = quantile_bounds(n, bins)
    t = tie_bounds(s) if ties == "share" else np.arange(n + 1, dtype=np.int64)
    sums = [np.diff(shared_cumsum(v, t, b)) for v in (r, r * r, s * (1.0 - s))]
    return BinResiduals(np.diff(b).astype(np.float64), sums[0], sums[1], sums[2], n)


TAPER = (1.0, 2.0)       # full correction for |d̂| ≤ 1 sd, none from 2 sd, linear between


def debiased_l1(br: BinResiduals) -> float:
    """Σ_b w_b √max(0, d̂_b² − c_b·v̂_b), c_b = clip(2 − |d̂_b|/√v̂_b, 0, 1) (module
    docstring)."""
    d = np.abs(br.gap())
    v = br.variance()
    sd = np.sqrt(v)
    lo, hi = TAPER
    c = np.clip((hi - np.divide(d, sd, out=np.full_like(d, np.inf), where=sd > 0)) / (hi - lo),
                0.0, 1.0)
    return float(np.sum(br.p * np.sqrt(np.maximum(d * d - c * v, 0.0))))


def debiased_l2(br: BinResiduals) -> float:
    """√max(0, Σ_b w_b (d̂_b² − v̂_b))."""
    d = br.gap()
    return float(np.sqrt(max(float(np.sum(br.p * (d * d - br.variance()))), 0.0)))


def result(mid: str, value: float, binning: str, bins: int, norm: str, n: int,
            **extra: object) -> MetricResult:
    return MetricResult(id=mid, value=value,
                        settings={"binning": binning, "bins": bins, "norm": norm,
                                  "correction": "per-bin tapered method of moments: "
                                                "sqrt(max(0, gap^2 - c var)), "
                                                "c = clip(2 - |gap|/sd, 0, 1)"
                                  if norm == "l1" else "unbiased squared error, then the root",
                                  **extra},
                        n_samples=n)


def _with_bins(res: MetricResult, data: Prepared, bins: int, kind: str) -> MetricResult:
    """Weighted rows: the result with its bins (the plain metric's: the replicates' bin
    vectors of the weighted bootstrap come from them; no table shows them)."""
    if data.weights is None:
        return res
    from dataclasses import replace

    from calcheck.metrics.binned import quantile_bins, uniform_bins

    stats = uniform_bins(data, bins) if kind == "uniform" else quantile_bins(data, bins)
    return replace(res, bins=stats)


def ece_debiased(data: Prepared, o: MetricOptions) -> MetricResult:
    br = uniform_residuals(data.scores, data.labels, o.bins, data.weights)
    return _with_bins(result("ece_debiased", debiased_l1(br), "uniform", o.bins, "l1",
                             data.n_samples), data, o.bins, "uniform")


def ece_l2_debiased(data: Prepared, o: MetricOptions) -> MetricResult:
    br = uniform_residuals(data.scores, data.labels, o.bins, data.weights)
    return _with_bins(result("ece_l2_debiased", debiased_l2(br), "uniform", o.bins, "l2",
                             data.n_samples), data, o.bins, "uniform")


def ace_debiased(data: Prepared, o: MetricOptions) -> MetricResult:
    if data.weights is not None:
        br = weighted_quantile_residuals(data, o.bins)
        return _with_bins(result("ace_debiased", debiased_l1(br), "quantile", o.bins, "l1",
                                 data.n_samples, ties=data.ties), data, o.bins, "quantile")
    s, y = data.sorted_scores, data.sorted_labels
    if data.ties == "share":                  # equal scores summed in label order
        order = np.lexsort((y, s))
        s, y = s[order], y[order]
    br = quantile_residuals(s, y, o.bins, data.ties)
    return result("ace_debiased", debiased_l1(br), "quantile", o.bins, "l1", data.n,
                   ties=data.ties)
