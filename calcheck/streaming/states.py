"""Partial states of the fixed-edge metrics (see the package docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import uniform_assign
from calcheck.metrics.scoring import LOG_LOSS_EPS

# metric ids the streaming engine computes, and the test ids it can report
STREAMABLE = ("ece", "ece_l2", "mce", "brier", "log_loss")


@dataclass
class CompensatedSum:
    """A float64 vector sum kept as (hi, lo) with TwoSum, so merges lose (almost) nothing.

    Adding batch partial sums or merging two states in any order gives results equal to
    ~1 ulp; the error of each batch's own summation (numpy's pairwise sum or bincount) stays.
    """

    hi: FloatArray
    lo: FloatArray

    @classmethod
    def zeros(cls, size: int) -> CompensatedSum:
        return cls(np.zeros(size), np.zeros(size))

    def add(self, values: FloatArray) -> None:
        s = self.hi + values
        bb = s - self.hi
        err = (self.hi - (s - bb)) + (values - bb)        # TwoSum (Knuth)
        self.hi = s
        self.lo = self.lo + err

    def merge(self, other: CompensatedSum) -> None:
        self.add(other.hi)
        self.lo = self.lo + other.lo

    @property
    def value(self) -> FloatArray:
        return self.hi + self.lo


@dataclass
class FixedBinState:
    """Sufficient statistics of the streamable metrics for ``bins`` uniform bins and T-Cal m.

    Attributes hold int64 counts and :class:`CompensatedSum` sums; ``update`` adds a batch,
    ``merge`` adds another state (commutative and associative up to rounding of the sums),
    ``finalize`` returns the metric values.
    """

    bins: int = 10
    m: int = 15
    n: int = 0
    count: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    positives: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    sum_score: CompensatedSum | None = None
    scalars: CompensatedSum | None = None       # Σ(s−y)², Σ log-lik, Spiegelhalter num, den
    t_count: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    t_s: CompensatedSum | None = None           # T-Cal bins ⌊m·s⌋ (0..m): Σ r, Σ r²

    def __post_init__(self) -> None:
        if self.sum_score is None:
            self.count = np.zeros(self.bins, dtype=np.int64)
            self.positives = np.zeros(self.bins, dtype=np.int64)
            self.sum_score = CompensatedSum.zeros(self.bins)
            self.scalars = CompensatedSum.zeros(4)
            self.t_count = np.zeros(self.m + 1, dtype=np.int64)
            self.t_s = CompensatedSum.zeros(2 * (self.m + 1))

    def update(self, scores: FloatArray, labels: IntArray) -> FixedBinState:
        """Add a batch of validated scores and 0/1 labels."""
        s = np.asarray(scores, dtype=np.float64)
        y = np.asarray(labels, dtype=np.int64)
        assert self.sum_score is not None and self.scalars is not None and self.t_s is not None
        b = uniform_assign(s, self.bins)
        self.count += np.bincount(b, minlength=self.bins)
        self.positives += np.bincount(b, weights=y, minlength=self.bins).round().astype(np.int64)
        self.sum_score.add(np.bincount(b, weights=s, minlength=self.bins))
        r = s - y
        clipped = np.clip(s, LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS)
        ll = np.where(y.astype(bool), np.log(clipped), np.log1p(-clipped))
        w = 1.0 - 2.0 * s
        self.scalars.add(np.array([np.dot(r, r), ll.sum(), np.sum(-r * w),
                                   np.sum(w * w * s * (1.0 - s))]))
        tb = np.floor(s * float(self.m)).astype(np.int64)     # T-Cal's ids, s = 1 → m
        self.t_count += np.bincount(tb, minlength=self.m + 1)
        self.t_s.add(np.concatenate([np.bincount(tb, weights=r, minlength=self.m + 1),
                                     np.bincount(tb, weights=r * r, minlength=self.m + 1)]))
        self.n += int(s.shape[0])
        return self

    def merge(self, other: FixedBinState) -> FixedBinState:
        """Add another partial state with the same settings."""
        if (self.bins, self.m) != (other.bins, other.m):
            raise ValueError("cannot merge states with different bins or m")
        assert self.sum_score and other.sum_score and self.scalars and other.scalars
        assert self.t_s and other.t_s
        self.count += other.count
        self.positives += other.positives
        self.sum_score.merge(other.sum_score)
        self.scalars.merge(other.scalars)
        self.t_count += other.t_count
        self.t_s.merge(other.t_s)
        self.n += other.n
        return self

    def finalize(self) -> dict[str, Any]:
        """Metric values, the uniform bin table and the fixed-m T-Cal statistics."""
        assert self.sum_score is not None and self.scalars is not None and self.t_s is not None
        n = self.n
        cnt = self.count
        ne = cnt > 0
        ms = np.where(ne, self.sum_score.value / np.maximum(cnt, 1), np.nan)
        ml = np.where(ne, self.positives / np.maximum(cnt, 1), np.nan)
        gap = np.where(ne, np.abs(ml - ms), 0.0)
        w = cnt / n
        sq, ll, num, den = self.scalars.value
        z = num / math.sqrt(den) if den > 0 else (0.0 if num == 0 else math.copysign(math.inf, num))
        tc = self.t_count.astype(np.float64)
        S, Q = self.t_s.value[: self.m + 1], self.t_s.value[self.m + 1:]
        occ = tc > 0
        return {
            "n": n,
            "ece": float(np.sum(w * gap)),
            "ece_l2": float(np.sqrt(np.sum(w * gap * gap))),
            "mce": float(gap.max()) if gap.size else 0.0,
            "brier": float(sq / n),
            "log_loss": float(-ll / n),
            "spiegelhalter_z": float(z),
            "tcal_dpe": float(np.sum((S[occ] ** 2 - Q[occ]) / tc[occ]) / n),
            "tcal_plugin_l1": float(np.sum(np.abs(S[occ])) / n),
            "bins": {"count": cnt.copy(), "positives": self.positives.copy(),
                     "sum_score": self.sum_score.value.copy()},
        }
