"""Tests that go back to the rows on a stream: Cox's logistic recalibration and the binomial
test of discrete scores.

**Cox.** Newton's method needs the log-likelihood, gradient and Hessian at each iterate; they
are sums over rows (:func:`calcheck.hypotests.classical.logistic_sums`), so each iterate is one
pass whose per-batch sums merge as compensated float64 sums.  The iterates start from the fit
to the grid state (each grid cell and label one weighted point at logit of its mean score), a
few 1e-5 from the optimum, so Newton's quadratic convergence needs two or three passes; the
first pass also gives ℓ(0, 1).  The calibration intercept (the slope held at 1) is fitted in
the same passes, from its own grid-state start.  The stopping rule and step halving are the in-memory ones
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

from calcheck._typing import FloatArray, IntArray, Passes
from calcheck.hypotests._result import TestResult
from calcheck.hypotests.classical import (
    NULL_FIT,
    binomial_discrete_counts,
    cox_logit,
    cox_result,
    logistic_sums,
    newton_logistic,
    newton_steps,
)
from calcheck.streaming.runner import drive, one_pass
from calcheck.streaming.states import CompensatedSum, StreamState

NULL = NULL_FIT        # Cox's (intercept, slope) of calibrated scores


@dataclass(frozen=True)
class CoxSpec:
    """One pass of Newton's method for Cox's fits: the sums at every β of ``betas`` (and ℓ at
    (0, 1) when ``null``); ``weighted``: each row weighted by the weight its batch carries
    last (streamed ``--weight``, :mod:`calcheck.streaming.weighted`)."""

    betas: tuple[tuple[float, float], ...]
    null: bool = False
    weighted: bool = False
    threaded = True

    def new(self) -> CoxState:
        return CoxState(self)


class CoxState:
    def __init__(self, spec: CoxSpec) -> None:
        self.spec = spec
        self.sums = CompensatedSum.zeros(6 * len(spec.betas) + 1)

    def update(self, scores: FloatArray, labels: IntArray, start: int, *rest: Any) -> CoxState:
        x = cox_logit(scores)
        y = labels.astype(np.float64)
        w = rest[-1] if self.spec.weighted else None
        out = np.zeros(self.sums.value.shape[0])
        for j, beta in enumerate(self.spec.betas):
            out[6 * j:6 * j + 6] = logistic_sums(x, y, np.asarray(beta), w)
        if self.spec.null:
            out[-1] = logistic_sums(x, y, np.asarray(NULL), w)[0]
        self.sums.add(out)
        return self

    def merge(self, other: CoxState) -> CoxState:
        self.sums.merge(other.sums)
        return self


def grid_start(state: StreamState, slope_fixed: bool = False) -> tuple[float, float]:
    """Cox's fit (or, ``slope_fixed``, the calibration intercept's) to the grid state's cells
    (each label's rows in a cell at their mean score)."""
    assert state.cell_score is not None
    return cells_start(state.cell_count.reshape(-1, 2).astype(np.float64),
                       state.cell_score.value.reshape(-1, 2), slope_fixed)


def cells_start(cnt: FloatArray, tot: FloatArray, slope_fixed: bool = False
                ) -> tuple[float, float]:
    """Cox's fit (or the calibration intercept's) to cells: each cell's rows of each label
    (``cnt``: their number or mass, cells × 2) at their mean score (``tot``: Σ s or Σ w·s)."""
    occ = cnt > 0
    x = cox_logit(tot[occ] / cnt[occ])
    y = np.broadcast_to(np.array([0.0, 1.0]), cnt.shape)[occ]
    a, b, _ = newton_logistic(lambda beta: logistic_sums(x, y, beta, cnt[occ]), NULL,
                              slope_fixed=slope_fixed)
    return a, b


def cox_stream(source: Any, state: StreamState, *, alpha: float = 0.05,
               ci_level: float = 0.95) -> TestResult:
    """Cox's test by Newton passes over ``source`` (its grid ``state`` gives the starts; the
    settings say how many it took)."""
    before = source.file_passes
    fit = newton_passes(source, grid_start(state), grid_start(state, slope_fixed=True))
    a, b, ll_fit = fit.fit
    return cox_result(a, b, ll_fit, fit.ll_null, alpha=alpha, ci_level=ci_level,
                      settings={"engine_fit": "Newton passes from the grid-state fit",
                                "passes": source.file_passes - before},
                      hessian=fit.sums[0][3:6], citl=(fit.intercept, float(fit.sums[1][3])))


@dataclass(frozen=True)
class NewtonFit:
    """Cox's fits by :func:`newton_program`: (a, b, ℓ), ℓ(0, 1), the calibration intercept,
    each fit's last evaluated :func:`logistic_sums` (the fit's, the intercept's) and the
    passes it took."""

    fit: tuple[float, float, float]
    ll_null: float
    intercept: float
    sums: tuple[FloatArray, FloatArray]
    passes: int = 0                     # the passes it took


def newton_passes(source: Any, start: tuple[float, float], start_fixed: tuple[float, float],
                  *, weighted: bool = False) -> NewtonFit:
    """:func:`newton_program` run over ``source``."""
    return drive(source, newton_program(start, start_fixed, weighted=weighted))


def newton_program(start: tuple[float, float], start_fixed: tuple[float, float], *,
                   weighted: bool = False) -> Passes[NewtonFit]:
    """The fit of (a, b) and the calibration intercept's iterate together, from their starts,
    each pass evaluating the pending β of both (``weighted``: the rows' weights, streamed
    ``--weight``): a program of passes (:func:`calcheck.streaming.runner.drive`), so a
    ``--by`` group's fit runs in lockstep with the others'."""
    fits = [newton_steps(start, last_eval=False),
            newton_steps(start_fixed, last_eval=False, slope_fixed=True)]
    pending: list[Any] = [next(f) for f in fits]       # the β each fit waits for (None: done)
    results: list[tuple[float, float, float] | None] = [None, None]
    last: list[FloatArray] = [np.zeros(6), np.zeros(6)]  # each fit's last evaluated sums
    ll_null = None
    passes = 0
    while any(b is not None for b in pending):
        live = [j for j, b in enumerate(pending) if b is not None]
        spec = CoxSpec(tuple((float(pending[j][0]), float(pending[j][1])) for j in live),
                       null=ll_null is None, weighted=weighted)
        st = yield from one_pass(spec)
        passes += 1
        sums = st.sums.value
        if ll_null is None:
            ll_null = float(sums[-1])
        for k, j in enumerate(live):
            last[j] = sums[6 * k:6 * k + 6]
            try:
                pending[j] = fits[j].send(last[j])
            except StopIteration as done:
                results[j], pending[j] = done.value, None
    assert results[0] is not None and results[1] is not None and ll_null is not None
    return NewtonFit(results[0], ll_null, results[1][0], (last[0], last[1]), passes)


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
