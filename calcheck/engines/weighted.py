"""Sampling weights (``--weight``) — and counts (``--count``) of a run that asks only for what
these passes compute — on ``--engine stream`` and ``dask`` beyond the rows they hold in memory
(:attr:`calcheck.tuning.Tuning.hold_weighted_rows`): the metrics and tests that have weighted
passes (:mod:`calcheck.streaming.weighted`), each the in-memory engine's number
(docs/weights.md, "Engines"), at the cost of the file's rows.

It computes ECE, ECE-l2, MCE, ACE, MCE(Q), PDE, the Brier score, the log loss, the
debiased ECE and ECE-l2 and the smooth ECE (with
``--ci``: the Poisson bootstrap per score unit of the first pass's units,
:func:`calcheck.streaming.bootstrap.weighted_bootstrap`; per ``--by`` group and ``--time``
window too, every group's passes in lockstep), the T-Cal, Hosmer–Lemeshow, Spiegelhalter and
Cox tests (:mod:`calcheck.engines.weighted_tests`; per ``--by`` group too), with the
headline (from the equal-width bins and Cox's direction), ``--var``
(:mod:`calcheck.streaming.weighted_variables`; also multiclass input's top-label view), and
draws the reliability and variable diagrams (their bins the metrics', the histograms
weighted: ``plot``, the ``--by`` overlay, ``report``); ``compare`` reads each model's metrics
from its passes.  The computations on
one set of rows live in :mod:`calcheck.engines.weighted_rows`.  A file of at most
``Tuning.exact_pava_rows`` rows (``held``) also gets what the passes lack — the other
metrics its weights take (:func:`calcheck.engines.base.held_metrics`; TCE for counts), the
KS, Kuiper and SKCE tests, the CORP and test-based figures, and ``--var`` and its figure
exactly as in memory (LOESS over every distinct value) — by the in-memory engine's kernels
on the rows held (:meth:`WeightedStreamEngine.kept`, one pass),
for the whole file (not per group).  Multiclass input (sampling weights): the passes read its
top-label view — the top-label and binary metrics, the tests and the reliability diagram —
and every class's one-vs-rest view for SCE, classwise ACE and TACE
(:mod:`calcheck.engines.weighted_classes`); no rows are held for it.  What needs more —
``--ties order``, beyond that budget the held ones, multiclass input's other metrics — is
refused for sampling weights before any pass, with a message naming the limit
(:func:`limits`; the default metric set leaves the others out with a message), and streams
counts expanded (:func:`calcheck.engines.base.passes_serve` decides, from the options,
for binary and for multiclass input)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from calcheck import registry
from calcheck._typing import Passes
from calcheck.engines.base import (
    PASSES_METHODS,
    PASSES_METRICS,
    Capabilities,
    FigureOptions,
    GroupOptions,
    Outcome,
    held_methods,
    held_metrics,
    passes_metrics,
    renormalized,
)
from calcheck.engines.stream import ClosesClient
from calcheck.engines.weighted_rows import WeightedRows
from calcheck.errors import InputError, UsageError
from calcheck.metrics._data import MetricOptions
from calcheck.metrics._result import MetricResult
from calcheck.streaming.engine import StreamSource
from calcheck.streaming.runner import drive
from calcheck.streaming.weighted import FirstSpec, FirstState
from calcheck.tuning import Tuning

T = TypeVar("T")

if TYPE_CHECKING:
    from calcheck.hypotests import TestOptions

NOTE = ("the weighted rows were streamed: every number comes from weighted passes over the "
        "rows (docs/weights.md, \"Engines\")")
COUNT_NOTE = ("the counted rows were streamed as they are, each count a weight: every number is "
              "the expanded file's, at the cost of the file's rows (docs/weights.md, "
              "\"Engines\")")


def limits(engine: str, tuning: Tuning) -> str:
    """Why a streamed run of sampling weights refuses something: the message's tail."""
    return (f"--engine {engine} streams sampling weights (--weight) beyond "
            f"{tuning.hold_weighted_rows:,} rows (Tuning.hold_weighted_rows) for "
            f"{', '.join(PASSES_METRICS)} (multiclass input: also on the top-label view, "
            "and sce, ace_cw, tace), the "
            f"{', '.join(PASSES_METHODS)} tests, --var and the "
            f"reliability and variable diagrams, and for binary scores up to "
            f"{tuning.exact_pava_rows:,} rows (Tuning.exact_pava_rows) the other metrics, the KS, "
            "Kuiper and SKCE tests and the CORP diagram from the rows held, without --by and "
            "--time; use --engine memory")


class Refusals:
    """What the weighted passes' engine refuses, each with ``why`` (:func:`limits`)."""

    why = ""

    def refuse(self, what: str) -> UsageError:
        return UsageError(f"{what}: {self.why}")

    def segment_table(self, columns: list[str], sopts: Any) -> Any:
        raise self.refuse("--segment")

    def window_rows(self, column: Any) -> tuple[Any, Any, Any, Any]:
        raise self.refuse("--time")

    def summary_ties(self, mid: str, rows: list[dict[str, Any]], ties: str) -> list[Any]:
        return []


class WeightedStreamEngine(Refusals, ClosesClient):
    """Metrics and tests of sampling-weighted rows from weighted passes over a streamed
    source (module docstring)."""

    multiclass = False
    classes = 0

    def __init__(self, source: StreamSource, null: str = "auto", held: bool = False,
                 numeric: tuple[str, ...] = ()) -> None:
        self.source = source
        self.name = source.engine
        self.null = null
        self.frequency = source.weight_kind == "count"      # counts: the expanded file's
        self.note = COUNT_NOTE if self.frequency else NOTE
        self.multiclass = bool(source.plan.multiclass)
        self.classes = len(source.plan.prob_columns or ()) if self.multiclass else 0
        self.why = limits(self.name, source.tuning)
        # held: the rows fit Tuning.exact_pava_rows, so what the passes lack comes from the
        # in-memory kernels on the rows held (with the --var columns ``numeric``)
        self.held = held
        self.numeric = numeric
        extra = held_metrics(source.weight_kind) if held else ()
        self.capabilities = Capabilities(
            self.name, rows=False, why=self.why,
            only=self.passes_ids() + PASSES_METHODS + extra +
            (held_methods(source.weight_kind) if held else ()),
            named_only=tuple(m for m in extra if not registry.METRICS[m].stream), held=held)
        self._kept: Any = None                  # the held rows, once read
        self._first: FirstState | None = None
        self._rows: WeightedRows | None = None
        self._stats: Any = None
        if self.name == "dask":                 # every pass folded by Dask (engines.dask)
            from calcheck.engines.dask import DaskPasses
            from calcheck.io.stream import DASK_NEEDS_FILES

            if source.plan.in_memory:
                raise UsageError(DASK_NEEDS_FILES)
            source.passes = DaskPasses()

    def passes_ids(self) -> tuple[str, ...]:
        """The metric ids the passes compute (beyond them: from the rows held)."""
        return passes_metrics(self.multiclass)

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
                what = "count" if self.frequency else "weight"
                raise InputError(f"{self.source.path}: every {what} in column {col!r} is zero; "
                                 "nothing to measure", column=col)
            if self._rows is None:
                self._rows = self.rows_of(self._first)
            self._rows.first = self._first
        return self._first

    def rows_of(self, first: FirstState) -> WeightedRows:
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
        n = first.rows
        weights = self.all_rows.weights_info(self.source.weight_kind, self.source.weight,
                                             self.multiclass)
        info: dict[str, Any] = {"path": self.source.path,
                                "format": "arrow" if plan.in_memory else "parquet"}
        rate = first.positives / n if n else None
        read = {"rows_read": stats.rows_read, "rows_dropped": stats.rows_dropped,
                "dropped_by_reason": dict(stats.dropped_by_reason)}
        if self.multiclass:               # (the first pass's view: top-label, correct)
            info.update({"kind": "multiclass", "prob_columns": list(plan.prob_columns),
                         "classes": list(plan.class_names), "label_column": plan.label_column,
                         **read, "rows_renormalized": stats.rows_renormalized,
                         "rows_used": n, "accuracy": rate})
            if top:                                  # tested on the top-label view
                info.update({"view": "top-label", "positives": first.positives,
                             "prevalence": rate})
        else:
            info.update({"score_column": plan.score_column, "label_column": plan.label_column,
                         **read, "rows_used": n, "positives": first.positives,
                         "prevalence": rate})
        info["weights"] = weights
        return info

    def reading(self) -> Outcome:
        self.first()
        stats = self._stats
        out = Outcome(notes=[*self.source.source.notes, f"--engine {self.name}: {self.note}"])
        if stats.rows_dropped:
            reasons = ", ".join(f"{k}={v}" for k, v in stats.dropped_by_reason.items())
            out.messages.append(f"dropped {stats.rows_dropped} of {stats.rows_read} rows "
                                f"({reasons})")
        if stats.rows_renormalized:
            out.messages.append(renormalized(stats.rows_renormalized))
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
        self._check(ids, mopts, self.capabilities.only or ())
        b = mopts.bins
        self.first(b, units=b if ci is not None else 0)
        if self.multiclass:
            from calcheck.engines.weighted_classes import CLASSWISE, file_metrics

            out = file_metrics(self, ids, mopts)
            passed = [m for m in ids if m not in CLASSWISE]
        else:
            passed = [m for m in ids if m in PASSES_METRICS]
            out = {**self.drive(self.all_rows.metrics(passed, b, mopts.smece_sigma)),
                   **self.held_metrics([m for m in ids if m not in passed], mopts)}
        out = {m: out[m] for m in ids}
        if ci is None:
            return Outcome(values=out)
        with_ci = [m for m in passed if self.capabilities.interval(m)]
        values, settings = self.all_rows.intervals(out, with_ci, b, ci)
        return Outcome(values=dict(values), settings={"ci": settings},
                       notes=_without_intervals(ids, with_ci, self.name))

    def _check(self, ids: list[str], mopts: MetricOptions, has: tuple[str, ...]) -> None:
        if mopts.ties != "share":
            raise self.refuse("--ties order")
        for mid in ids:
            if mid not in has:
                raise self.refuse(f"-m {mid}")

    def kept(self) -> Any:
        """The rows held (:class:`~calcheck.streaming.weighted.HeldRowsSpec`, one pass, in
        the file's order) as the in-memory engine's :class:`~calcheck.data.Predictions`
        with their weights (and ``--var`` columns): its kernels read them as in memory."""
        from calcheck.engines.held import held_predictions
        from calcheck.streaming.weighted import HeldRowsSpec

        if self._kept is None:
            state, _ = self.source.run(HeldRowsSpec(self.numeric))
            self._kept = held_predictions(self.source, state.arrays(), self.numeric,
                                          self.null)
        return self._kept

    def held_metrics(self, ids: list[str], mopts: MetricOptions) -> dict[str, MetricResult]:
        """The metrics the passes lack by the in-memory kernels on the rows held: the
        in-memory engine's numbers."""
        from calcheck.engines.memory import compute

        if not ids:
            return {}
        if not self.held:
            raise self.refuse(f"-m {ids[0]}")
        return dict(compute(self.kept(), ids, mopts))

    def variables(self, names: list[str], vopts: Any) -> Outcome:
        """VECE and VCE(v*) by the in-memory engine's kernels on the rows held, or beyond
        them from passes (:mod:`calcheck.streaming.weighted_variables`)."""
        from calcheck.engines.memory import variables_of

        if self.held and not vopts.correct_from:
            kept = self.kept()
            return variables_of(kept, {n: kept.column(n) for n in names}, vopts)
        return _passed_variables(self, names, vopts)

    def groups(self, ids: list[str], mopts: MetricOptions, ci: Any,
               grouping: GroupOptions) -> Outcome:
        """Every ``--by`` group's (``--time`` window's) metrics, in lockstep
        (:func:`calcheck.engines.weighted_groups.group_metrics`)."""
        from calcheck.engines.weighted_groups import group_metrics

        self._check(ids, mopts, self.capabilities.only or ())
        return group_metrics(self, ids, mopts, ci, grouping)

    # -- tests -------------------------------------------------------------------------------

    def group_tests(self, methods: list[str], topts: TestOptions,
                    grouping: GroupOptions) -> Outcome:
        """Every ``--by`` group's (``--time`` window's) tests, in lockstep
        (:func:`calcheck.engines.weighted_groups.group_tests`)."""
        from calcheck.engines.weighted_groups import group_tests

        if topts.ties != "share":
            raise self.refuse("--ties order")
        return group_tests(self, methods, topts, grouping)

    def tests(self, methods: list[str], topts: TestOptions) -> Outcome:
        """T-Cal, Hosmer–Lemeshow, Spiegelhalter and Cox from the weighted passes; KS,
        Kuiper and SKCE from the rows held (:mod:`calcheck.engines.weighted_tests`)."""
        from calcheck.engines.weighted_tests import weighted_tests

        if topts.ties != "share":
            raise self.refuse("--ties order")
        return weighted_tests(self, methods, topts)

    def recalibration(self, alpha: float, ci_level: float) -> Any:
        from calcheck.engines.weighted_tests import recalibration

        return recalibration(self, alpha, ci_level)

    # -- figures ---------------------------------------------------------------------------

    def figure(self, kind: str, fopts: FigureOptions, *, variables: Any = None,
               ax: Any = None) -> Outcome:
        """The reliability diagram (equal-width bins: ECE's; equal-mass: ACE's) from the
        weighted passes, its histogram weighted as in memory (one pass for the range, one
        for the counts); from the rows held, the variable, CORP and (counts) test-based
        figures by the in-memory engine's code; the others are refused."""
        from calcheck.figures import draw
        from calcheck.figures.stream import stream_spread

        if fopts.ties != "share":
            raise self.refuse("--ties order")
        if kind in ("tce", "corp") and self.held:
            from calcheck.engines.memory import figure_of

            return Outcome(values={"figure": figure_of(self.kept(), kind, fopts, ax)})
        if kind == "variable":
            name = fopts.variable
            entry = (variables or self.variables([name], fopts.variables).values["result"]
                     ).to_dict()[name]
            if self.held:
                kept = self.kept()
                return Outcome(values={"figure": draw.variable_figure(
                    entry, kept.column(name), name, ax=ax, weights=kept.weights)})
            v = entry["curve"]["v"]
            spread = stream_spread(self.source, var=name, window=(float(min(v)), float(max(v))),
                                   unit="weight")
            return Outcome(values={"figure": draw.variable_figure(entry, spread, name, ax=ax)})
        if kind != "reliability" or (fopts.per_class and self.multiclass):
            raise self.refuse("the per-class reliability diagram" if kind == "reliability"
                              else f"the {kind} figure")
        mc = self.multiclass                    # (the passes read its top-label view)
        bins = fopts.bins or (15 if mc else 10)
        mid = "ece" if fopts.binning == "uniform" else "ace"
        self.first(bins)
        res = self.drive(self.all_rows.metrics([mid], bins))[mid]
        spread = stream_spread(self.source, unit="rows" if self.frequency else "weight")
        return Outcome(values={"figure": draw.reliability_figure(
            res.bin_rows(), spread, title=draw.reliability_title(bins, fopts.binning, mc),
            top_label=mc, ax=ax)})

    def rows(self, view: str = "top") -> Iterator[tuple[Any, Any, Any]]:
        """(scores, labels, weights) batches in the file's order: ``compare``'s paired pass."""
        from calcheck.io.stream import stream_batches

        src = self.source
        for batch in stream_batches(src.plan, pos_label=src.pos_label,
                                    batch_rows=src.batch_rows, drop_invalid=src.drop_invalid,
                                    view=view):
            yield batch[0], batch[1], batch[-1]

    def summary_bins(self, ties: str) -> list[dict[str, Any]] | None:
        """The equal-width bins (10) of the first pass, with their effective sizes."""
        return MetricResult(id="ece", value=0.0,
                            bins=self.drive(self.all_rows.uniform(10))).bin_rows()


def _passed_variables(engine: WeightedStreamEngine, names: list[str], vopts: Any) -> Outcome:
    """``--var`` from the weighted variables' passes
    (:mod:`calcheck.streaming.weighted_variables`)."""
    from calcheck.metrics.vece import variables_result
    from calcheck.streaming.weighted_variables import weighted_variable_results

    before = engine.source.file_passes
    res, ece = engine.drive(weighted_variable_results(
        tuple(names), binary=not engine.multiclass, span=vopts.span,
        correct_from=vopts.correct_from, tuning=engine.source.tuning))
    result = variables_result(res, ece.value)
    return Outcome(values={"result": result}, notes=result.notes(),
                   settings={"variable_passes": engine.source.file_passes - before})


def _without_intervals(ids: list[str], with_ci: list[str], engine: str) -> list[str]:
    """Why ``--ci`` gives no interval on the weighted passes to the metrics ``ids`` not in
    ``with_ci``: each metric's own reason, as in memory, or that its replicates need the
    rows."""
    from calcheck.uncertainty import no_interval

    notes = [f"{m}: {no_interval(m)}" for m in ids if not registry.METRICS[m].ci]
    rows = [m for m in ids if m not in with_ci and registry.METRICS[m].ci]
    if rows:
        notes.append(f"--ci with --engine {engine}: no interval for {', '.join(rows)} (the "
                     "streamed bootstrap resamples score units of one bin; its replicates "
                     "need the rows; use --engine memory)")
    return notes
