"""One set of streamed weighted rows — a file's, or one ``--by`` group's — and what the
weighted passes compute on it (:mod:`calcheck.engines.weighted`).

:class:`WeightedRows` starts from its first pass (:class:`~calcheck.streaming.weighted.
FirstState`) and writes every later pass as a :data:`~calcheck._typing.Passes` program: it
yields each pass's spec and is sent the pass's state.  The file's rows run their programs one
at a time (:func:`calcheck.streaming.runner.drive`); ``--by`` groups and ``--time`` windows run
theirs in lockstep, one shared pass over the file per round for every group
(:func:`calcheck.streaming.runner.drive_lockstep`, each group a sub-stream of the rows), so
the groups cost the passes of one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calcheck import registry
from calcheck._typing import FloatArray, Passes
from calcheck.metrics._result import MetricResult
from calcheck.streaming.residuals import ResidualsSpec
from calcheck.streaming.runner import one_pass
from calcheck.streaming.weighted import (
    BinsSpec,
    BinsState,
    DeviationSpec,
    FirstState,
    cut_units,
)
from calcheck.tuning import Tuning
from calcheck.weights import mass_cuts, resolve_null, uniform_of_sums


class WeightedRows:
    """The weighted passes' computations on one set of rows, from its first pass ``first``
    (``frequency``: counts, the expanded rows' numbers; ``null``: ``--weight-null``).  The
    bins pass is kept, and run again only for cuts or binnings it lacks."""

    def __init__(self, first: FirstState, *, frequency: bool, null: str,
                 tuning: Tuning) -> None:
        self.first = first
        self.frequency = frequency
        self.null = null
        self.tuning = tuning
        self.bins: BinsState | None = None
        self._cuts: set[float] = set()
        self._residuals: dict[int, Any] = {}        # the debiased ECEs' sums, by binning

    @property
    def n(self) -> int:
        """The results' ``n``: the rows, or for counts the expanded rows."""
        return round(self.first.scalar("mass")) if self.frequency else self.first.rows

    def regime(self) -> tuple[str, tuple[float, float] | None]:
        """The tests' null (:func:`calcheck.weights.resolve_null`) and its class weights."""
        if self.frequency:
            return "count", None
        return resolve_null(self.null, self.first.class_weights() if self.null != "fixed"
                            else None)

    def weights_info(self, kind: str, column: str | None, multiclass: bool) -> dict[str, Any]:
        """The report's ``input.weights`` (the in-memory engine's fields): the column, Σw,
        the expanded rows (counts) or Kish's effective n, the rows of weight zero, the
        weighted prevalence (multiclass: top-label accuracy) and the tests' null."""
        first = self.first
        total = first.scalar("mass")
        regime, cw = self.regime()
        out: dict[str, Any] = {"kind": kind, "column": column,
                               "sum": int(total) if total.is_integer() else total}
        if self.frequency:
            out["expanded_rows"] = round(total)
        else:
            out["effective_n"] = total ** 2 / first.scalar("mass_sq")
        out.update({"zero_rows": first.zero_rows,
                    "weighted_" + ("accuracy" if multiclass else "prevalence"):
                    first.scalar("label") / total})
        if not self.frequency:
            out["null"] = regime
        if cw is not None:
            out["class_weights"] = {"negative": cw[0], "positive": cw[1]}
        return out

    def cuts(self, groups: int) -> list[float]:
        """The inner equal-mass cuts of ``groups`` bins on the mass axis."""
        total = self.first.scalar("mass")
        return [float(c) for c in mass_cuts(total, groups, self.frequency)[1:-1]]

    def bins_pass(self, cuts: list[float], *bins: int) -> Passes[BinsState]:
        """The bins pass over the units of the inner ``cuts`` (and of every cut asked
        before), with the null variances of the equal-width binnings ``bins``; the mass
        search's passes first."""
        have = self.bins.spec.bins if self.bins is not None else ()
        if self.bins is None or not set(cuts) <= self._cuts or not set(bins) <= set(have):
            self._cuts |= set(cuts)
            units = yield from cut_units(self.first, sorted(self._cuts), self.tuning)
            spec = BinsSpec(tuple(float(u) for u in units),
                            tuple(sorted({*have, *bins, *self.first.spec.bins})),
                            self.regime()[1], count=self.frequency)
            self.bins = yield from one_pass(spec)
        return self.bins

    def uniform(self, b: int) -> Passes[Any]:
        """Equal-width binning ``b`` (sampling weights: with its bins' effective sizes, from
        the bins pass)."""
        mass, score, label = self.first.binned(b)
        var = None
        if not self.frequency:
            var = (yield from self.bins_pass([], b)).bins[b].value
        return uniform_of_sums(b, mass, score, label, var)

    def quantile(self, groups: int) -> Passes[Any]:
        """Equal-mass binning of ``groups`` bins, ties shared pro rata."""
        bins = yield from self.bins_pass(self.cuts(groups))
        ax, _ = bins.axis()
        return ax.stats(mass_cuts(ax.total, groups, self.frequency), params={"bins": groups},
                        effective=not self.frequency)

    def deviations(self, b: int, stats: Any) -> Passes[FloatArray]:
        """PDE's Σ w|s − P̂_b| per bin: the gaps' from a pass, the units' from their sums."""
        bins = yield from self.bins_pass(self.cuts(b))
        ax, _ = bins.axis()
        cuts = mass_cuts(ax.total, b, self.frequency)
        phat = np.nan_to_num(stats.mean_label)
        M = ax.M
        mid = (M[:-1] + M[1:]) / 2.0                          # each piece's bin
        owner = np.clip(np.searchsorted(cuts, mid, side="right") - 1, 0, b - 1)
        gaps = owner[0::2]
        state = yield from one_pass(DeviationSpec(tuple(float(u) for u in bins.units),
                                                  tuple(float(p) for p in phat[gaps])))
        out = np.bincount(gaps, weights=state.sums.value, minlength=b).astype(np.float64)
        for u, score in enumerate(bins.units):                # a unit: its share in each bin
            lo, hi = M[2 * u + 1], M[2 * u + 2]
            over = np.clip(np.minimum(hi, cuts[1:]) - np.maximum(lo, cuts[:-1]), 0.0, None)
            out += over * np.abs(score - phat)
        return out

    def metrics(self, ids: list[str], b: int, sigma: float | None = None
                ) -> Passes[dict[str, MetricResult]]:
        """The metrics ``ids`` (of :data:`calcheck.engines.base.PASSES_METRICS`) with ``b``
        bins (``sigma``: the smooth ECE's fixed bandwidth, ``--smece-sigma``)."""
        from calcheck.metrics.binned import binned_result, pde_result
        from calcheck.metrics.scoring import LOG_LOSS_EPS

        first, n = self.first, self.n
        total = first.scalar("mass")
        if any(m in ("ace", "mce_q", "pde") for m in ids):
            yield from self.bins_pass(self.cuts(b), b)       # one search for every binning
        out: dict[str, MetricResult] = {}
        for mid in ids:
            if mid in ("ece", "ece_l2", "mce"):
                out[mid] = binned_result(mid, (yield from self.uniform(b)), b, n)
            elif mid in ("ace", "mce_q"):
                out[mid] = binned_result(mid, (yield from self.quantile(b)), b, n,
                                         ties="share")
            elif mid == "pde":
                stats = yield from self.quantile(b)
                dev = yield from self.deviations(b, stats)
                out[mid] = pde_result(stats, dev, b, total, n, "share")
            elif mid in ("ece_debiased", "ece_l2_debiased"):
                out[mid] = yield from self.debiased(mid, b)
            elif mid == "smece":
                out[mid] = yield from self.smooth(sigma)
            elif mid == "brier":
                out[mid] = MetricResult(id="brier", value=first.scalar("squared_error") / total,
                                        n_samples=n)
            elif mid == "log_loss":
                out[mid] = MetricResult(id="log_loss",
                                        value=-first.scalar("log_likelihood") / total,
                                        unit="nats", settings={"clip": LOG_LOSS_EPS},
                                        n_samples=n)
            else:
                raise ValueError(f"the weighted passes do not compute {mid}")
        return out

    def debiased(self, mid: str, b: int) -> Passes[MetricResult]:
        """The debiased ECE (or ECE-l2) with ``b`` equal-width bins: the in-memory kernel on
        its bins' residual sums (one pass for both), the bins the plain metric's."""
        from dataclasses import replace

        from calcheck.metrics.debiased import debiased_l1, debiased_l2, result

        if b not in self._residuals:
            state = yield from one_pass(ResidualsSpec(b, not self.frequency))
            self._residuals[b] = state.residuals(self.first.scalar("mass"))
        br = self._residuals[b]
        l1 = mid == "ece_debiased"
        res = result(mid, debiased_l1(br) if l1 else debiased_l2(br), "uniform", b,
                     "l1" if l1 else "l2", self.n)
        return replace(res, bins=(yield from self.uniform(b)))

    def smooth(self, sigma: float | None) -> Passes[MetricResult]:
        """The smooth ECE: the in-memory kernel on the 2^16 score cells' Σw, Σw·s and
        Σw(s − y) of T-Cal's unit pass — the cells :func:`calcheck.metrics.smooth.cell_sums`
        sums (sampling weights scaled to sum to the rows of positive weight, as there)."""
        from calcheck.metrics.smooth import cells, smece_of
        from calcheck.streaming.weighted import TcalSpec

        t = (yield from one_pass(TcalSpec(None, None, count=self.frequency))).table()
        first = self.first
        scale = 1.0 if self.frequency else \
            (first.rows - first.zero_rows) / first.scalar("mass")
        return smece_of(cells(t["mass"] * scale, t["WS"] * scale, t["S"] * scale), sigma,
                        self.n)

    def intervals(self, results: dict[str, MetricResult], with_ci: list[str], b: int,
                  ci: Any) -> tuple[dict[str, MetricResult], dict[str, Any]]:
        """``results`` with the Poisson bootstrap per score unit's intervals of ``with_ci``
        (a top-label id: its binary metric's, of the top-label view's units) from the first
        pass's units (:func:`calcheck.streaming.bootstrap.
        weighted_bootstrap`), and the bootstrap's settings."""
        from calcheck.streaming.bootstrap import weighted_bootstrap
        from calcheck.streaming.weighted import unit_bits
        from calcheck.uncertainty import with_intervals

        binary = {m: registry.binary_of(m) or m for m in with_ci}   # (ece_top: ece's)
        cis, settings = weighted_bootstrap(self.first.unit_table(),
                                           list(dict.fromkeys(binary.values())), bins=b,
                                           bits=unit_bits(b), frequency=self.frequency,
                                           reps=ci.reps, level=ci.level, seed=ci.seed)
        return with_intervals(results, {m: cis[i] for m, i in binary.items() if i in cis}), \
            settings
