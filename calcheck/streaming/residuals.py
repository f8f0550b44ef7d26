"""The debiased ECEs' pass of weighted rows (``--weight``/``--count`` on the weighted passes,
:mod:`calcheck.streaming.weighted`): each equal-width bin's residual sums, from which the
in-memory kernels of :mod:`calcheck.metrics.debiased` compute the debiased ECE and ECE-l2
(:meth:`calcheck.engines.weighted_rows.WeightedRows.debiased`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import uniform_assign
from calcheck.streaming.states import CompensatedSum


@dataclass(frozen=True)
class ResidualsSpec:
    """The debiased ECEs' sums per equal-width bin of ``bins``
    (:class:`calcheck.metrics.debiased.BinResiduals`): Σw, Σw·r, Σw·r², Σw·s(1 − s), r = y − s,
    and for sampling weights (``sampled``) Σw², Σw²·r, Σw²·r² and the rows of positive
    weight."""

    bins: int
    sampled: bool
    threaded = True

    def new(self) -> ResidualsState:
        return ResidualsState(self)


class ResidualsState:
    def __init__(self, spec: ResidualsSpec) -> None:
        self.spec = spec
        self.sums = CompensatedSum.zeros((8 if spec.sampled else 4) * spec.bins)

    def update(self, s: FloatArray, y: IntArray, start: int, *rest: Any) -> ResidualsState:
        w = np.asarray(rest[-1], dtype=np.float64)      # the weights, last
        r = y.astype(np.float64) - s
        ids = uniform_assign(s, self.spec.bins)
        cols = [w, w * r, w * r * r, w * s * (1.0 - s)]
        if self.spec.sampled:
            w2 = w * w
            cols += [w2, w2 * r, w2 * r * r, (w > 0).astype(np.float64)]
        self.sums.add(np.concatenate([np.bincount(ids, weights=c, minlength=self.spec.bins)
                                      for c in cols]))
        return self

    def merge(self, other: ResidualsState) -> ResidualsState:
        self.sums.merge(other.sums)
        return self

    def residuals(self, n: float) -> Any:
        """The bins' :class:`~calcheck.metrics.debiased.BinResiduals` of ``n`` rows (Σw)."""
        from calcheck.metrics.debiased import BinResiduals

        v = self.sums.value.reshape(-1, self.spec.bins)
        return BinResiduals(v[0], v[1], v[2], v[3], n,
                            (v[4], v[5], v[6], v[7]) if self.spec.sampled else None)
