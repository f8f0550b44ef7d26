r"""The estimated cumulative calibration errors ECCE-MAD and ECCE-R.

Sort the predictions by score; the walk of cumulative differences is

.. math:: C_0 = 0, \qquad C_k = \frac{1}{n} \sum_{i \le k} (y_{(i)} - s_{(i)}),

ECCE-MAD = max_k |C_k| and ECCE-R = max_k C_k − min_k C_k (k = 0 … n, so the walk starts at
the origin as the Brownian motion it is compared with).  Rows with equal scores have no order
between them, so the walk is read only at the end of each tie group — the result is the same
for every order of the rows.  Under calibration C/σ̂, σ̂ = √(Σ s_i(1 − s_i))/n, behaves like a
standard Brownian motion on [0, 1] (the ``ks`` and ``kuiper`` tests of
:mod:`calcheck.hypotests.cumulative`).  No bins, no bandwidth.

References
----------
.. [1] Arrieta-Ibarra, Gujral, Tannen, Tygert, Xu. Metrics of calibration for probabilistic
   predictions. JMLR 23(351), 2022.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calcheck._typing import FloatArray
from calcheck.binning import tie_bounds
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics._result import MetricResult


@dataclass(frozen=True)
class Walk:
    """The walk at the ends of the tie groups (``c[0] = 0``), the scores where each group
    ends, and σ̂."""

    c: FloatArray
    at: FloatArray
    sigma: float

    @property
    def mad(self) -> float:
        return float(np.max(np.abs(self.c)))

    @property
    def range(self) -> float:
        return float(np.max(self.c) - np.min(self.c))


def walk(data: Prepared) -> Walk:
    """The cumulative differences of ``data`` at the end of every tie group.  Weighted rows:
    C_k = Σ_{i≤k} w_i (y_i − s_i) / Σw and σ̂ = √(Σ v_i s_i(1 − s_i)) / Σw with the variance
    mass v (k for counts, w² for weights: :mod:`calcheck.weights`)."""
    s, y = data.sorted_scores, data.sorted_labels
    b = tie_bounds(s)
    value = s[b[:-1]]
    n = data.mass
    if data.weights is None:
        count = np.diff(b).astype(np.float64)
        var = count
        # per group Σy (an exact integer) − count·s: no digit depends on the order in a group
        ysum = np.add.reduceat(y.astype(np.float64), b[:-1])
    else:
        w = data.sorted_weights
        count = np.add.reduceat(w, b[:-1])
        var = np.add.reduceat(data.weights.variance_mass(w), b[:-1])
        ysum = np.add.reduceat(w * y, b[:-1])
    diff = ysum - count * value
    c = np.concatenate(([0.0], np.cumsum(diff) / n))
    sigma = float(np.sqrt(np.sum(var * value * (1.0 - value))) / n)
    return Walk(c=c, at=np.concatenate(([value[0]], value)), sigma=sigma)


def _result(mid: str, w: Walk, n: int) -> MetricResult:
    value = w.mad if mid == "ecce_mad" else w.range
    where = int(np.argmax(np.abs(w.c))) if mid == "ecce_mad" else None
    extra = {"sigma": w.sigma, "ratio": value / w.sigma if w.sigma > 0 else None}
    if where is not None:
        extra["at_score"] = float(w.at[where])
    else:
        extra["from_score"] = float(w.at[int(np.argmin(w.c))])
        extra["to_score"] = float(w.at[int(np.argmax(w.c))])
    return MetricResult(id=mid, value=value, settings={"walk": "read at tie-group ends",
                                                       "start": "C_0 = 0"},
                        n_samples=n, extra=extra)


def ecce_mad(data: Prepared, o: MetricOptions) -> MetricResult:
    """ECCE-MAD: the largest |C_k|."""
    return _result("ecce_mad", walk(data), data.n_samples)


def ecce_r(data: Prepared, o: MetricOptions) -> MetricResult:
    """ECCE-R: the range max C_k − min C_k."""
    return _result("ecce_r", walk(data), data.n_samples)
