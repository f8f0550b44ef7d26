"""Sampling weights (``--weight``) — and counts (``--count``) of a run that asks only for what
these passes compute — on ``--engine stream`` and ``dask`` beyond the rows they hold in memory
(:attr:`calcheck.tuning.Tuning.hold_weighted_rows`): the metrics and tests that have weighted
passes (:mod:`calcheck.streaming.weighted`), each the in-memory engine's number
(docs/weights.md, "Engines"), at the cost of the file's rows.

It computes ECE, ECE-l2, MCE, ACE, MCE(Q), PDE, the Brier score and the log loss (with
``--ci``: the Poisson bootstrap per score unit of the first pass's units,
:func:`calcheck.streaming.bootstrap.weighted_bootstrap`; per ``--by`` group and ``--time``
window too, every group's passes in lockstep), and the T-Cal (from one pass over its
units, :mod:`calcheck.hypotests.unit_tcal`), Hosmer–Lemeshow, Spiegelhalter and Cox tests,
with the headline (from the equal-width bins and Cox's direction), and draws the reliability
diagrams (their bins the metrics', the histogram weighted: ``plot``, the ``--by`` overlay,
``report``); the computations on one set of rows live in
:mod:`calcheck.engines.weighted_rows`.  What needs more — the other metrics, tests and
figures, tests per group, ``--var``, ``--ties order``, multiclass input — is refused for
sampling weights before any pass, with a message naming the limit (:func:`limits`; the default
metric set leaves the others out with a message), and streams counts expanded
(:func:`calcheck.engines.base.passes_serve` decides, from the options).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from calcheck._typing import Passes
from calcheck.engines.base import (
    PASSES_METHODS,
    PASSES_METRICS,
    Capabilities,
    FigureOptions,
    GroupOptions,
    Outcome,
)
from calcheck.engines.stream import ClosesClient
from calcheck.engines.weighted_rows import WeightedRows
from calcheck.errors import InputError, UsageError
from calcheck.hypotests.weighted import regime_note
from calcheck.metrics._data import MetricOptions
from calcheck.metrics._result import MetricResult
from calcheck.streaming.engine import StreamSource
from calcheck.streaming.runner import drive
from calcheck.streaming.weighted import FirstSpec, FirstState, SandwichSpec
from calcheck.weights import ZERO_MASS, mass_cuts

T = TypeVar("T")

if TYPE_CHECKING:
    from calcheck.hypotests import TestOptions

NOTE = ("the weighted rows were streamed: every number comes from weighted passes over the "
        "rows (docs/weights.md, \"Engines\")")
COUNT_NOTE = ("the counted rows were streamed as they are, each count a weight: every number is "
              "the expanded file's, at the cost of the file's rows (docs/weights.md, "
              "\"Engines\")")


def limits(engine: str, limit: int) -> str:
    """Why a streamed run of sampling weights refuses something: the message's tail."""
    return (f"--engine {engine} streams sampling weights (--weight) beyond "
            f"{limit:,} rows (Tuning.hold_weighted_rows) for {', '.join(PASSES_METRICS)}, "
            f"the {', '.join(PASSES_METHODS)} tests and the reliability diagrams only; use "
            "--engine memory")


class Refusals:
    """What the weighted passes' engine refuses, each with ``why`` (:func:`limits`)."""

    why = ""

    def refuse(self, what: str) -> UsageError:
        return UsageError(f"{what}: {self.why}")

    def group_tests(self, methods: list[str], topts: TestOptions,
                    grouping: GroupOptions) -> Outcome:
        raise self.refuse(grouping.name_of("by"))

    def variables(self, names: list[str], vopts: Any) -> Outcome:
        raise self.refuse("--var")

    def segment_table(self, columns: list[str], sopts: Any) -> Any:
        raise self.refuse("--segment")

    def window_rows(self, column: Any) -> tuple[Any, Any, Any]:
        raise self.refuse("--time")

    def rows(self, view: str = "top") -> Iterator[tuple[Any, Any]]:
        raise self.refuse("this command")

    def summary_ties(self, mid: str, rows: list[dict[str, Any]], ties: str) -> list[Any]:
        return []


class WeightedStreamEngine(Refusals, ClosesClient):
    """Metrics and tests of sampling-weighted rows from weighted passes over a streamed
    source (module docstring)."""

    multiclass = False
    classes = 0

    def __init__(self, source: StreamSource, null: str = "auto") -> None:
        self.source = source
        self.name = source.engine
        self.null = null
        self.frequency = source.weight_kind == "count"      # counts: the expanded file's
        self.note = COUNT_NOTE if self.frequency else NOTE
        self.why = limits(self.name, source.tuning.hold_weighted_rows)
        self.capabilities = Capabilities(self.name, rows=False,
                                         only=PASSES_METRICS + PASSES_METHODS, why=self.why)
        self._first: FirstState | None = None
        self._rows: WeightedRows | None = None
        self._stats: Any = None
        if self.name == "dask":                 # every pass folded by Dask (engines.dask)
            from calcheck.engines.dask import DaskPasses
            from calcheck.io.stream import DASK_NEEDS_FILES

            if source.plan.in_memory:
                raise UsageError(DASK_NEEDS_FILES)
            source.passes = DaskPasses()

    def __enter__(self) -> WeightedStreamEngine:
        if self.name == "dask" and self.source.scheduler and self.source.client is None:
            from calcheck.engines.dask import connect

            self.source.client = connect(self.source.scheduler,
                                         self.source.tuning.connect_timeout)
            self._own_client = True
        return self

    # -- passes ------------------------------------------------------------------------------

    def first(self, *bins: int, units: int = 0) -> FirstState:
        """The first pass (with the equal-width binnings ``bins``, and any asked before; with
        ``--ci``'s bootstrap units of binning ``units``)."""
        have = self._first.spec if self._first is not None else FirstSpec(())
        if self._first is None or not set(bins) <= set(have.bins) or \
                units not in (0, have.units):
            spec = FirstSpec(tuple(sorted({*have.bins, *bins, 10})),
                             units or have.units)
            self._first, stats = self.source.run(spec)
            self._stats = self._stats or stats
            if not self._first.rows:
                raise InputError("no rows to compute on (after the --where filter and dropped "
                                 "rows)")
            if self._first.scalar("mass") <= 0:
                col = self.source.weight
                raise InputError(f"{self.source.path}: every weight in column {col!r} is zero; "
                                 "nothing to measure", column=col)
            if self._rows is None:
                self._rows = self._rows_of(self._first)
            self._rows.first = self._first
        return self._first

    def _rows_of(self, first: FirstState) -> WeightedRows:
        return WeightedRows(first, frequency=self.frequency, null=self.null,
                            tuning=self.source.tuning)

    @property
    def all_rows(self) -> WeightedRows:
        """The file's rows (:class:`WeightedRows`), after the first pass."""
        self.first()
        assert self._rows is not None
        return self._rows

    def drive(self, passes: Passes[T]) -> T:
        """Run a program of passes over the file."""
        return drive(self.source, passes)

    def regime(self) -> tuple[str, tuple[float, float] | None]:
        return self.all_rows.regime()

    # -- the input ---------------------------------------------------------------------------

    def input_info(self, top: bool = False) -> dict[str, Any]:
        first, stats, plan = self.first(), self._stats, self.source.plan
        total = first.scalar("mass")
        n = first.rows
        regime, cw = self.regime()
        weights: dict[str, Any] = {"kind": self.source.weight_kind,
                                   "column": self.source.weight,
                                   "sum": int(total) if total.is_integer() else total}
        if self.frequency:
            weights["expanded_rows"] = round(total)
        else:
            weights["effective_n"] = total ** 2 / first.scalar("mass_sq")
        weights.update({"zero_rows": first.zero_rows,
                        "weighted_prevalence": first.scalar("label") / total})
        if not self.frequency:
            weights["null"] = regime
        if cw is not None:
            weights["class_weights"] = {"negative": cw[0], "positive": cw[1]}
        return {"path": self.source.path, "format": "arrow" if plan.in_memory else "parquet",
                "score_column": plan.score_column, "label_column": plan.label_column,
                "rows_read": stats.rows_read, "rows_dropped": stats.rows_dropped,
                "dropped_by_reason": dict(stats.dropped_by_reason), "rows_used": n,
                "positives": first.positives, "prevalence": first.positives / n if n else None,
                "weights": weights}

    def reading(self) -> Outcome:
        self.first()
        stats = self._stats
        out = Outcome(notes=[*self.source.source.notes, f"--engine {self.name}: {self.note}"])
        if stats.rows_dropped:
            reasons = ", ".join(f"{k}={v}" for k, v in stats.dropped_by_reason.items())
            out.messages.append(f"dropped {stats.rows_dropped} of {stats.rows_read} rows "
                                f"({reasons})")
        return out

    def settings(self) -> dict[str, Any]:
        bins = self._rows.bins if self._rows is not None else None
        units = bins.units.shape[0] if bins is not None else 0
        return {"batch_rows": self.source.batch_rows, "scheduler": self.source.scheduler,
                "passes": self.source.file_passes,
                "weighted": {"cut_units": units, "note": self.note}}

    # -- metrics -----------------------------------------------------------------------------

    def metrics(self, ids: list[str], mopts: MetricOptions, *, ci: Any = None,
                by: str | None = None) -> Outcome:
        self._check(ids, mopts)
        b = mopts.bins
        self.first(b, units=b if ci is not None else 0)
        out = self.drive(self.all_rows.metrics(ids, b))
        if ci is None:
            return Outcome(values=dict(out))
        with_ci = [m for m in ids if self.capabilities.interval(m)]
        values, settings = self.all_rows.intervals(out, with_ci, b, ci)
        return Outcome(values=dict(values), settings={"ci": settings},
                       messages=_without_intervals(ids, with_ci, self.name))

    def _check(self, ids: list[str], mopts: MetricOptions) -> None:
        if mopts.ties != "share":
            raise self.refuse("--ties order")
        for mid in ids:
            if mid not in PASSES_METRICS:
                raise self.refuse(f"-m {mid}")

    def groups(self, ids: list[str], mopts: MetricOptions, ci: Any,
               grouping: GroupOptions) -> Outcome:
        """Every ``--by`` group's (``--time`` window's) metrics: one grouped first pass, then
        every group's passes in lockstep (:mod:`calcheck.engines.weighted_rows`)."""
        from calcheck.metrics._result import GroupResult
        from calcheck.streaming.runner import drive_lockstep
        from calcheck.streaming.views import SubStream
        from calcheck.streaming.weighted import GroupedFirstSpec
        from calcheck.uncertainty import simultaneous_level

        self._check(ids, mopts)
        b = mopts.bins
        spec = GroupedFirstSpec(FirstSpec(tuple(sorted({b, 10})), b if ci is not None else 0),
                                grouping.by)
        grouped, _ = self.source.run(spec)
        keys = sorted(grouped.groups, key=lambda k: (k is None, k or ""))
        rows = {k: self._rows_of(grouped.groups[k]) for k in keys}
        live = [k for k in keys if rows[k].first.scalar("mass") > 0]
        results = drive_lockstep(self.source, {k: (SubStream(group=k), rows[k].metrics(
            ids, b)) for k in live}, by=grouping.by)
        if ci is not None and grouping.windows:
            ci = replace(ci, level=simultaneous_level(ci.level, len(keys), grouping.family))
        with_ci = [m for m in ids if self.capabilities.interval(m)]
        out = Outcome(settings={"group_metrics": ids})
        for k in keys:
            res = results.get(k)
            errors: dict[str, str] = {}
            if res is None:
                res, errors = {}, dict.fromkeys(ids, ZERO_MASS)
            elif isinstance(res, Exception):
                res, errors = {}, {m: str(res) for m in ids}
            elif ci is not None:
                res = rows[k].intervals(res, with_ci, b, ci)[0]
            n = rows[k].n
            out.values[k] = GroupResult(value=k, n=n, flagged=n < grouping.min_group_size,
                                        metrics=dict(res), errors=errors)
        return out

    # -- tests -------------------------------------------------------------------------------

    def tests(self, methods: list[str], topts: TestOptions) -> Outcome:
        from calcheck.hypotests import tcal_trials
        from calcheck.hypotests.weighted import hl_on_axis, spiegelhalter_of_sums

        if topts.ties != "share":
            raise self.refuse("--ties order")
        first = self.first()
        regime, cw = self.regime()
        total = first.scalar("mass")
        how = regime_note(regime, cw)
        rows = self.all_rows
        if "hl" in methods:                     # one bins pass for every test
            self.drive(rows.bins_pass(rows.cuts(topts.hl_groups)))
        out = Outcome()
        for m in methods:
            if m == "tcal":
                self._tcal(methods, topts, out)
            elif m == "spiegelhalter":
                den = float(self.drive(rows.bins_pass([])).den.value[0])
                res = spiegelhalter_of_sums(first.scalar("spiegelhalter_num"), den, total,
                                            first.scalar("score"), first.scalar("label"),
                                            alpha=topts.alpha)
                out.values["spiegelhalter"] = _noted(res, how)
            elif m == "hl":
                trials, _ = tcal_trials(None if topts.auto_trials else topts.trials,
                                        topts.alpha, 1, auto=topts.auto_trials,
                                        family=topts.family_size(methods, self.frequency))
                groups = topts.hl_groups
                exact = regime == "labels"
                ax, vcum = self.drive(rows.bins_pass(rows.cuts(groups))).axis(exact)
                cuts = mass_cuts(ax.total, groups, self.frequency)
                res = hl_on_axis(ax, vcum, cuts, exact, groups=groups, alpha=topts.alpha,
                                 df=topts.hl_df, trials=trials, seed=topts.seed,
                                 null=_group_null(ax, vcum, cuts, exact, topts.seed),
                                 null_how=GROUP_NULL)
                out.values["hosmer_lemeshow"] = _noted(res, how, ties="share")
            elif m == "cox":
                out.values["cox"] = self.recalibration(topts.alpha, topts.ci_level)
            else:
                raise self.refuse(f"--method {m}")
        return out

    def _tcal(self, methods: list[str], topts: TestOptions, out: Outcome) -> None:
        """T-Cal (fixed m, or adaptive over the dyadic levels) from one pass over its units
        (:mod:`calcheck.hypotests.unit_tcal`), into ``out``."""
        from calcheck.hypotests import levels_n, tcal_trials
        from calcheck.hypotests.tcal import adaptive_ms, check_null_size
        from calcheck.hypotests.unit_tcal import UnitNull, unit_tcal
        from calcheck.streaming.weighted import TCAL_BITS, TcalSpec

        first = self.first()
        mass = first.scalar("mass")
        n = levels_n(mass, mass ** 2 / first.scalar("mass_sq"), self.frequency)
        ms = [topts.bins] if topts.bins is not None else \
            adaptive_ms(n, topts.adaptive_grid, dyadic=True)[:TCAL_BITS]
        levels = 1 if topts.bins is not None or topts.adaptive_correction == "minp" \
            else len(ms)
        trials, note = tcal_trials(topts.trials, topts.alpha, levels, auto=topts.auto_trials,
                                   label=topts.trials_label,
                                   family=topts.family_size(methods, False))
        if note:
            out.notes.append(note)
        check_null_size(len(ms), trials)
        regime, cw = self.regime()
        state, _ = self.source.run(TcalSpec(topts.bins, cw if regime == "labels" else None,
                                            count=self.frequency))
        u = state.table()
        res = unit_tcal(u, UnitNull.of(u, regime, cw), ms=ms, fixed=topts.bins is not None,
                        alpha=topts.alpha, trials=trials, seed=topts.seed,
                        correction=topts.adaptive_correction, grid=topts.adaptive_grid,
                        bits=TCAL_BITS, settings={"weights": regime_note(regime, cw),
                                                  "engine_null": TCAL_NULL,
                                                  "null_unit_width": 2.0 ** -TCAL_BITS})
        out.values["tcal" if topts.bins is not None else "tcal_adaptive"] = res
        out.notes.append(f"T-Cal on --engine {self.name}: {TCAL_NULL}, not per row; relative "
                         f"variance excess {res.settings['null_variance_excess']:.1e}")
        if topts.bins is None and topts.adaptive_grid == "bounded":
            out.notes.append(f"adaptive T-Cal on --engine {self.name} tests the bounded "
                             "grid's powers of two (bins are unions of 2^-16 cells); in "
                             "memory it also tests the levels between them")

    def recalibration(self, alpha: float, ci_level: float) -> Any:
        """Cox's fit by weighted Newton passes and one pass for its Hessian (and, for sampling
        weights, its sandwich): for counts the likelihood-ratio test of the expanded file,
        for sampling weights the robust Wald test (:mod:`calcheck.hypotests.weighted`)."""
        from calcheck.hypotests.classical import cox_result
        from calcheck.hypotests.weighted import robust_cox
        from calcheck.streaming.rowtests import cells_start, newton_passes

        cnt, tot = self.first().label_cells()
        before = self.source.file_passes
        fit = newton_passes(self.source, cells_start(cnt, tot), cells_start(cnt, tot, True),
                            weighted=True)
        a, b, ll_fit = fit.fit
        state, _ = self.source.run(SandwichSpec(((a, b), (fit.intercept, 1.0))))
        s = state.sums.value
        settings = {"engine_fit": "weighted Newton passes from the first pass's key buckets' "
                                  "fit", "passes": self.source.file_passes - before}
        if self.frequency:
            return _noted(cox_result(a, b, ll_fit, fit.ll_null, alpha=alpha, ci_level=ci_level,
                                     settings=settings, hessian=s[0:3],
                                     citl=(fit.intercept, float(s[6]))),
                          regime_note("count", None))

        def moments(v: Any) -> Any:
            return np.array([[v[0], v[1]], [v[1], v[2]]])

        return robust_cox(a, b, ll_fit, fit.ll_null, fit.intercept, moments(s[0:3]),
                          moments(s[3:6]), float(s[6]), float(s[9]), alpha=alpha,
                          ci_level=ci_level, settings=settings)

    # -- figures ---------------------------------------------------------------------------

    def figure(self, kind: str, fopts: FigureOptions, *, variables: Any = None,
               ax: Any = None) -> Outcome:
        """The reliability diagram (equal-width bins: ECE's; equal-mass: ACE's) from the
        weighted passes, its histogram weighted as in memory (one pass for the range, one
        for the counts); the other figures are refused."""
        from calcheck.figures import draw
        from calcheck.figures.stream import stream_spread

        if kind != "reliability":
            raise self.refuse(f"the {kind} figure")
        if fopts.ties != "share":
            raise self.refuse("--ties order")
        bins = fopts.bins or 10
        mid = "ece" if fopts.binning == "uniform" else "ace"
        self.first(bins)
        res = self.drive(self.all_rows.metrics([mid], bins))[mid]
        spread = stream_spread(self.source, unit="rows" if self.frequency else "weight")
        return Outcome(values={"figure": draw.reliability_figure(
            res.bin_rows(), spread, title=draw.reliability_title(bins, fopts.binning), ax=ax)})

    def summary_bins(self, ties: str) -> list[dict[str, Any]] | None:
        """The equal-width bins (10) of the first pass, with their effective sizes."""
        return MetricResult(id="ece", value=0.0,
                            bins=self.drive(self.all_rows.uniform(10))).bin_rows()


def _without_intervals(ids: list[str], with_ci: list[str], engine: str) -> list[str]:
    """The message naming the metrics ``--ci`` gives no interval on the weighted passes."""
    without = [m for m in ids if m not in with_ci]
    if not without:
        return []
    return [f"--ci with --engine {engine}: intervals for {', '.join(with_ci) or 'none'} only; "
            f"none for {', '.join(without)} (the streamed bootstrap resamples score units of "
            "one bin: the maximum errors' and PDE's replicates need the rows; use --engine "
            "memory)"]


def _noted(res: Any, how: str, **more: Any) -> Any:
    import dataclasses

    return dataclasses.replace(res, settings={**res.settings, "weights": how, **more})


TCAL_NULL = ("one Binomial draw per score unit (a 2^-16 cell, within one bin), the unit's sums "
             "moved linearly in it (calcheck.hypotests.unit_tcal)")
GROUP_NULL = ("per group, a Binomial on its effective size (the unweighted rows whose count at "
              "its mean score has its null variance), scaled to its mass: an approximation "
              "of the exact null (the streamed rows are not at hand)")


def _group_null(ax: Any, vcum: Any, cuts: Any, exact: bool, seed: int) -> Any:
    """Hosmer–Lemeshow's small-count simulation on streamed weighted rows, whose rows are not
    at hand: each group's O*_g = E_g + (m/k)(K − k·p̄), K ~ Binomial(k, p̄), k = max(⌊n_e⌋, 1),
    with m its mass, p̄ = E_g/m and n_e = m²·p̄(1 − p̄)/V_g its effective size — V_g the
    group's null variance of O_g as the statistic takes it (Σ Var w(y − s) under the
    ``labels`` null (``exact``), else Σw²·p̄(1 − p̄)) — so each O*_g has the exact null's mean
    and, n_e rounded down, at least its variance (conservative)."""
    mass = np.diff(cuts)
    exp = np.diff(ax.at(ax.S, cuts))
    pbar = np.clip(np.divide(exp, mass, out=np.zeros_like(mass), where=mass > 0), 0.0, 1.0)
    var = np.diff(ax.at(ax.V, cuts)) if exact else \
        np.diff(ax.at(vcum, cuts)) * pbar * (1.0 - pbar)
    eff = np.divide(mass * mass * pbar * (1.0 - pbar), var, out=np.zeros_like(mass),
                    where=var > 0)
    size = np.maximum(np.floor(eff), 1).astype(np.int64)

    def null(trials: int) -> Any:
        rng = np.random.default_rng(seed)
        k = rng.binomial(size, pbar, size=(trials, mass.shape[0]))
        return exp + (mass / size) * (k - size * pbar)

    return null
