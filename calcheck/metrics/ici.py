r"""The integrated calibration index and its quantiles: ICI, E50, E90, Emax.

Fit a LOESS of the outcome on the score — local quadratic, tricube weights, span 0.75 (the
q = ⌊0.75·n⌋ nearest rows), no robustness iterations; the same smoother as VECE
(:mod:`calcheck.metrics.vece`) — and evaluate it at every prediction s_i.  With
d_i = |loess(s_i) − s_i|:

* ``ici``  = mean of d_i (the integral of the calibration curve's distance from the diagonal
  against the distribution of the scores);
* ``e50``, ``e90`` = the median and 90th percentile of d_i (linear interpolation, as
  ``numpy.percentile`` over the rows);
* ``emax`` = the largest d_i.

The fit is exact (a local regression at every distinct score, on the rows aggregated by value —
rows tied with a point's q-th neighbour distance get tricube weight 0) up to 4,096 distinct
scores.  Beyond, the scores are grouped into 4,096 equal-count groups at their means (VECE's
approximation), the LOESS is fitted at the group means and read at every s_i by linear
interpolation; the report says so.  This is R's ``loess(y ~ s)`` with ``surface = "direct"``
(R's default ``"interpolate"`` approximates the fit on a kd-tree).  The fitted curve is not
clipped to [0, 1].

**Weighted and aggregated rows** (docs/weights.md): the LOESS is VECE's weighted one (the rows'
masses as prior weights; for counts the expanded rows' neighbourhoods and groups) and every
summary is over the mass: ICI = Σ w·d / Σ w; E50 and E90 the expanded rows' linear
percentiles for counts, the weighted inverted-CDF percentiles for sampling weights (as VECE's
edges); Emax the largest d of a row of positive weight.

References
----------
.. [1] Austin, Steyerberg. The Integrated Calibration Index (ICI) and related metrics for
   quantifying the calibration of logistic regression models. Statistics in Medicine 38(21),
   2019.
.. [2] Cleveland, Devlin. Locally weighted regression. JASA 83(403), 1988.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calcheck._typing import FloatArray
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics._result import MetricResult

SPAN = 0.75


@dataclass(frozen=True)
class Distances:
    """|loess(s) − s| per distinct score (with its row count) or per row when grouped."""

    d: FloatArray
    weight: FloatArray | None          # rows (or mass) per entry; None: one entry per row
    grouped: bool
    span: float
    frequency: bool = True             # weights count rows (False: sampling weights)

    @property
    def n(self) -> int:
        return int(self.d.shape[0] if self.weight is None else round(float(self.weight.sum())))


def distances(data: Prepared, span: float = SPAN) -> Distances:
    """The distances of ``data`` (computed once per data set and span)."""
    cache = data.__dict__.setdefault("_ici", {})
    if span not in cache:
        if data.weights is None:
            cache[span] = _distances(data.sorted_scores, data.sorted_labels, span)
        else:
            cache[span] = _mass_distances(data, span)
    return cache[span]  # type: ignore[no-any-return]


def _mass_distances(data: Prepared, span: float, max_groups: int | None = None) -> Distances:
    """The distances of weighted or counted rows (module docstring): rows of weight 0 take
    no part."""
    from calcheck.metrics.vece import MAX_GROUPS, _aggregate_mass, _local_fits

    assert data.weights is not None
    freq = data.weights.frequency
    m = data.sorted_weights
    used = m > 0
    s, y, m = data.sorted_scores[used], data.sorted_labels[used].astype(np.float64), m[used]
    agg = _aggregate_mass(s, [y], m, freq, MAX_GROUPS if max_groups is None else max_groups)
    fit = _local_fits(agg, agg.x, span)[0][:, 0]
    if agg.grouped:
        return Distances(d=np.abs(np.interp(s, agg.x, fit) - s), weight=m, grouped=True,
                         span=span, frequency=freq)
    return Distances(d=np.abs(fit - agg.x), weight=agg.c, grouped=False, span=span,
                     frequency=freq)


def _distances(s: FloatArray, y: np.ndarray, span: float,
               max_groups: int | None = None) -> Distances:
    """The distances of the sorted scores ``s``; beyond ``max_groups`` distinct scores
    (default: :data:`calcheck.metrics.vece.MAX_GROUPS`) LOESS runs on that many groups."""
    from calcheck.metrics.vece import MAX_GROUPS, _aggregate, _local_fits

    agg = _aggregate(s, [np.asarray(y, dtype=np.float64)], presorted=True,
                     max_groups=MAX_GROUPS if max_groups is None else max_groups)
    fit = _local_fits(agg, agg.x, span)[0][:, 0]
    if agg.grouped:
        return Distances(d=np.abs(np.interp(s, agg.x, fit) - s), weight=None, grouped=True,
                         span=span)
    return Distances(d=np.abs(fit - agg.x), weight=agg.c, grouped=False, span=span)


def weighted_percentile(d: FloatArray, w: FloatArray, q: float) -> float:
    """``numpy.percentile`` of the rows, each value ``d[j]`` repeated ``w[j]`` times."""
    order = np.argsort(d)
    v, c = d[order], np.asarray(w, dtype=np.float64)[order]
    cum = np.cumsum(c)
    pos = q / 100.0 * (cum[-1] - 1)                        # 0-based rank, linear method
    lo, hi = int(np.floor(pos)), int(np.ceil(pos))
    at = np.searchsorted(cum, np.array([lo, hi]), side="right")
    a, b = v[at[0]], v[at[1]]
    return float(a + (pos - lo) * (b - a))


def _result(mid: str, data: Prepared) -> MetricResult:
    dist = distances(data)
    if mid == "ici":
        value = float(np.mean(dist.d)) if dist.weight is None else \
            float(np.sum(dist.d * dist.weight) / np.sum(dist.weight))
    elif mid == "emax":
        value = float(np.max(dist.d))
    else:
        q = 50.0 if mid == "e50" else 90.0
        if dist.weight is None:
            value = float(np.percentile(dist.d, q))
        elif dist.frequency:
            value = weighted_percentile(dist.d, dist.weight, q)
        else:
            from calcheck.metrics.vece import mass_percentiles

            order = np.argsort(dist.d)
            value = float(mass_percentiles(dist.d[order], dist.weight[order], np.array([q]),
                                           False)[0])
    settings = {"smoother": "LOESS, local quadratic, tricube", "span": dist.span,
                "iterations": 0}
    if dist.grouped:
        kind = "equal-count" if dist.frequency else "equal-mass"
        settings["approximation"] = f"scores grouped into 4,096 {kind} groups"
    return MetricResult(id=mid, value=value, settings=settings, n_samples=data.n_samples)


def ici(data: Prepared, o: MetricOptions) -> MetricResult:
    return _result("ici", data)


def e50(data: Prepared, o: MetricOptions) -> MetricResult:
    return _result("e50", data)


def e90(data: Prepared, o: MetricOptions) -> MetricResult:
    return _result("e90", data)


def emax(data: Prepared, o: MetricOptions) -> MetricResult:
    return _result("emax", data)
