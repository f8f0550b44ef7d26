"""Tests that go back to the rows on a stream: Cox's logistic recalibration and the binomial
test of discrete scores.

**Cox.** Newton's method needs the log-likelihood, gradient and Hessian at each iterate; they
are sums over rows (:func:`calcheck.hypotests.classical.logistic_sums`), so each iterate is one
pass whose per-batch sums merge as compensated float64 sums.  The iterates start from the fit
to the grid state (each grid cell and label one weighted point at logit of its mean score), a
few 1e-5 from the optimum, so Newton's quadratic convergence needs two or three passes; the
first pass also gives ℓ(0, 1).  The stopping rule and step halving are the in-memory ones
(except that the last, sub-1e-10 step is taken without a pass to evaluate its end point, when ℓ
cannot change by 1e-12 relative along it), so the fit agrees with memory to ~1e-12 relative.

**Binomial per value.** In memory the test is added to T-Cal when scores take at most
``--discrete-max`` distinct values.  More occupied grid cells than that rule it out with no
extra pass; otherwise one pass counts the distinct values (stopping at the limit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.hypotests._result import TestResult
from calcheck.hypotests.classical import (
    binomial_discrete_counts,
    cox_logit,
    cox_result,
    logistic_sums,
    newton_logistic,
)
from calcheck.streaming.states import CompensatedSum, StreamState

NULL = (0.0, 1.0)        # Cox's (intercept, slope) of calibrated scores


@dataclass(frozen=True)
class CoxSpec:
    """One Newton pass of Cox's fit at ``beta`` (and at (0, 1) when ``null``)."""

    beta: tuple[float, float]
    null: bool = False
    threaded = True

    def new(self) -> CoxState:
        return CoxState(self)


class CoxState:
    def __init__(self, spec: CoxSpec) -> None:
        self.spec = spec
        self.sums = CompensatedSum.zeros(7)

    def update(self, scores: FloatArray, labels: IntArray, start: int, *_: Any) -> CoxState:
        x = cox_logit(scores)
        y = labels.astype(np.float64)
        out = np.zeros(7)
        out[:6] = logistic_sums(x, y, np.asarray(self.spec.beta))
        if self.spec.null:
            out[6] = logistic_sums(x, y, np.asarray(NULL))[0]
        self.sums.add(out)
        return self

    def merge(self, other: CoxState) -> CoxState:
        self.sums.merge(other.sums)
        return self


def grid_start(state: StreamState) -> tuple[float, float]:
    """Cox's fit to the grid state's cells (each label's rows in a cell at their mean score)."""
    cnt = state.cell_count.reshape(-1, 2).astype(np.float64)
    assert state.cell_score is not None
    tot = state.cell_score.value.reshape(-1, 2)
    occ = cnt > 0
    x = cox_logit(tot[occ] / cnt[occ])
    y = np.broadcast_to(np.array([0.0, 1.0]), cnt.shape)[occ]
    a, b, _ = newton_logistic(lambda beta: logistic_sums(x, y, beta, cnt[occ]), NULL)
    return a, b


def cox_stream(source: Any, state: StreamState, *, alpha: float = 0.05,
               ci_level: float = 0.95) -> tuple[TestResult, int]:
    """Cox's test by Newton passes over ``source`` (its grid ``state`` gives the start), and
    the number of passes."""
    sums_of: list[FloatArray] = []           # every pass's sums; the first has ℓ(0, 1)

    def evaluate(beta: FloatArray) -> FloatArray:
        st, _ = source.run(CoxSpec((float(beta[0]), float(beta[1])), null=not sums_of))
        sums_of.append(st.sums.value)
        return sums_of[-1][:6]

    a, b, ll_fit = newton_logistic(evaluate, grid_start(state), last_eval=False)
    passes = len(sums_of)
    res = cox_result(a, b, ll_fit, float(sums_of[0][6]), alpha=alpha, ci_level=ci_level,
                     settings={"engine_fit": "Newton passes from the grid-state fit",
                               "passes": passes}, hessian=sums_of[-1][3:6])
    return res, passes


# ---------------------------------------------------------------------------------------------
# distinct values

@dataclass(frozen=True)
class DistinctSpec:
    """Rows and positives per distinct score, given up beyond ``limit`` values."""

    limit: int
    threaded = True

    def new(self) -> DistinctState:
        return DistinctState(self.limit)


class DistinctState:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.values: FloatArray | None = np.zeros(0)
        self.counts = np.zeros(0, dtype=np.int64)
        self.positives = np.zeros(0, dtype=np.int64)

    def _absorb(self, values: FloatArray, counts: IntArray, positives: IntArray) -> None:
        if self.values is None:
            return
        v, inv = np.unique(np.concatenate([self.values, values]), return_inverse=True)
        if v.shape[0] > self.limit:
            self.values = None                  # too many: the test does not apply
            return
        self.counts = np.bincount(inv, weights=np.concatenate([self.counts, counts]),
                                  minlength=v.shape[0]).round().astype(np.int64)
        self.positives = np.bincount(inv, weights=np.concatenate([self.positives, positives]),
                                     minlength=v.shape[0]).round().astype(np.int64)
        self.values = v

    def update(self, scores: FloatArray, labels: IntArray, start: int, *_: Any) -> DistinctState:
        if self.values is not None:
            v, inv, n = np.unique(scores, return_inverse=True, return_counts=True)
            k = np.bincount(inv, weights=labels, minlength=v.shape[0]).round().astype(np.int64)
            self._absorb(v, n, k)
        return self

    def merge(self, other: DistinctState) -> DistinctState:
        if other.values is None:
            self.values = None
        else:
            self._absorb(other.values, other.counts, other.positives)
        return self


def discrete_stream(source: Any, state: StreamState, *, limit: int,
                    alpha: float = 0.05) -> tuple[TestResult | None, int]:
    """The binomial test per value when the scores take at most ``limit`` distinct values
    (None otherwise), and the distinct values (``limit + 1`` meaning "more")."""
    occupied = int(np.count_nonzero(state.cell_count.reshape(-1, 2).sum(axis=1)))
    if occupied > limit:
        return None, limit + 1
    st, _ = source.run(DistinctSpec(limit))
    if st.values is None:
        return None, limit + 1
    return binomial_discrete_counts(st.values, st.counts, st.positives, alpha=alpha), \
        int(st.values.shape[0])
