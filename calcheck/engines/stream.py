"""The streaming engines: every metric, test and figure from passes over a Parquet dataset in
bounded memory, in this process (``stream``) or on a Dask cluster (``dask``).

A run's first pass folds the batches into the grid state
(:class:`~calcheck.streaming.states.StreamState`; for multiclass input a classwise state that
carries the top-label grid; with ``--by`` one per group).  The grid metrics come from it
directly; equal-mass and PAVA bins from a rank search and a row pass
(:mod:`calcheck.streaming.positional`); the classwise positional metrics and the groups'
positional metrics from rank searches in shared passes (:mod:`calcheck.streaming.views`);
``--var`` from the variable passes (:mod:`calcheck.streaming.variables`); ``--ci`` from the
Poisson bootstrap over the grid's units (:mod:`calcheck.streaming.bootstrap`); the tests and the
figures from their own passes.  Every pass goes through :class:`StreamSource.run`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from calcheck import registry
from calcheck.engines.base import (
    CAPABILITIES,
    Capabilities,
    FigureOptions,
    GroupOptions,
    IntervalOptions,
    Outcome,
    VariableOptions,
    renormalized,
)
from calcheck.errors import InputError, UsageError
from calcheck.metrics._data import MetricOptions
from calcheck.metrics._result import GroupResult, MetricResult
from calcheck.streaming.engine import (
    BatchesKept,
    StateSpec,
    StreamSource,
    metric_results,
    no_rows_error,
)
from calcheck.streaming.states import GRID_METRICS

if TYPE_CHECKING:
    from calcheck.hypotests import TestOptions
    from calcheck.io.windows import WindowColumn
    from calcheck.segments import SegmentOptions

GRID_NOTE = ("fixed-bin metrics are exact: edge-straddling grid cells are binned row by row; "
             "equal-mass bins are cut at exact ranks found by extra passes")


EXPANDED_NOTE = ("the counted rows (--count) were streamed expanded, each row repeated in place "
                 "as often as its count says: every number is the expanded file's, at the cost "
                 "of its rows (docs/weights.md)")


class FirstPasses:
    """A stream run's first passes — grid passes over every row, cached by spec (the binary
    grid, the classwise state carrying the top-label grid, the grouped states) — and what they
    read: the input section, the reading messages, the engine's settings."""

    def __init__(self, source: StreamSource) -> None:
        self.source = source
        self.states: dict[Any, Any] = {}
        self.stats: Any = None               # the first pass's read statistics
        self.top: Any = None                 # a grid state of every row (binary or top-label)

    @property
    def plan(self) -> Any:
        return self.source.plan

    @property
    def multiclass(self) -> bool:
        return bool(self.plan.multiclass)

    @property
    def classes(self) -> int:
        return len(self.plan.prob_columns or []) if self.multiclass else 0

    def run(self, spec: Any) -> Any:
        state, stats = self.source.run(spec)
        if self.stats is None:
            self.stats = stats
            count = self.plan.count_column
            if count and stats.counted_rows and not stats.count_sum:
                raise InputError(f"{self.source.path}: every count in column {count!r} is zero; "
                                 "nothing to measure", column=count)
        return state

    def grid(self, bins: int, *, log_loss: bool = True, ci: bool = False,
             by: str | None = None, hold: bool = False, sce: bool = True,
             hold_labels: bool = False) -> Any:
        """The first pass's state (cached by its spec): the grid of the binary view, or the
        classwise state carrying the top-label grid; with ``by`` the grouped state.  ``hold``:
        multiclass input keeps its top-label view for the later passes when the file is small
        enough (:func:`_holds_top`), and ``hold_labels`` every row's class; without ``sce`` it
        leaves SCE's sums to the class passes."""
        from calcheck.streaming.classwise import ClasswiseSpec

        inner: Any = StateSpec(bins=bins, log_loss=log_loss, ci=ci)
        kinds = [inner]
        if self.multiclass:          # (a first pass with SCE's sums serves one without them)
            inner = ClasswiseSpec(self.classes, bins, top=inner, sce=sce)
            kinds = [inner] if sce else [replace(inner, sce=True), inner]
        if by is not None:
            from calcheck.streaming.groups import GroupedSpec

            kinds = [GroupedSpec(k, by) for k in kinds]
        spec = next((k for k in kinds if k in self.states), kinds[-1])
        if spec not in self.states:          # (keyed without hold: a held view is an extra)
            keep = self.multiclass and by is None and self.holds_top()
            run = replace(spec, hold=hold, hold_labels=hold_labels) if keep else spec
            self.states[spec] = self.run(run)
        return self.states[spec]

    def holds_top(self) -> bool:
        """A first pass in this process over at most ``tuning.hold_top_rows`` rows (Parquet
        footers)."""
        from calcheck.io.stream import plan_rows

        rows = plan_rows(self.plan)
        return self.source.passes is None and rows is not None and \
            rows <= self.source.tuning.hold_top_rows

    def cached(self, bins: int) -> Any:
        """A first-pass state of all rows with ``bins`` uniform bins, if one was made."""
        for spec, st in self.states.items():
            if not hasattr(st, "overall") and getattr(spec, "bins", None) == bins:
                return st
        return None

    def top_state(self) -> Any:
        """A grid state of all rows (any earlier first pass will do, for the input section)."""
        if self.top is None:
            for st in self.states.values():
                st = st.overall() if hasattr(st, "overall") else st
                self.top = st.top if self.multiclass else st
                break
            else:
                st = self.grid(15 if self.multiclass else 10, log_loss=False)
                self.top = st.top if self.multiclass else st
        return self.top

    def input_info(self, top: bool = False) -> dict[str, Any]:
        state = self.top_state()
        stats, plan = self.stats, self.plan
        rate = state.positives / state.n if state.n else None
        info: dict[str, Any] = {"path": self.source.path,
                                "format": "arrow" if plan.in_memory else "parquet"}
        if plan.multiclass:
            info.update({"kind": "multiclass", "prob_columns": list(plan.prob_columns),
                         "classes": list(plan.class_names), "label_column": plan.label_column,
                         "rows_renormalized": stats.rows_renormalized, "accuracy": rate})
        else:
            info.update({"score_column": plan.score_column, "label_column": plan.label_column,
                         "positives": state.positives, "prevalence": rate})
        info.update({"rows_read": stats.rows_read, "rows_dropped": stats.rows_dropped,
                     "dropped_by_reason": stats.dropped_by_reason, "rows_used": state.n,
                     "batches": stats.batches})
        if plan.count_column:          # the rows read; their counts expanded them (io.stream)
            rows, pos = stats.counted_rows, stats.counted_positives
            info.update({"rows_used": rows, ("accuracy" if plan.multiclass else "prevalence"):
                         pos / rows if rows else None})
            if not plan.multiclass:
                info["positives"] = pos
            info["weights"] = {"kind": "count", "column": plan.count_column,
                               "sum": stats.count_sum, "expanded_rows": stats.count_sum,
                               "zero_rows": stats.zero_counts,
                               "weighted_" + ("accuracy" if plan.multiclass else "prevalence"):
                               rate}
        if top and plan.multiclass:                  # tested on the top-label view
            info.update({"view": "top-label", "positives": state.positives,
                         "prevalence": info["accuracy"]})
        return info

    def reading(self) -> Outcome:
        self.top_state()
        stats = self.stats
        out = Outcome(notes=list(self.source.source.notes))
        if self.plan.count_column:
            out.notes.append(f"--engine {self.source.engine}: {EXPANDED_NOTE}")
        if stats.rows_dropped:
            reasons = ", ".join(f"{k}={v}" for k, v in stats.dropped_by_reason.items())
            out.messages.append(f"dropped {stats.rows_dropped} of {stats.rows_read} rows "
                                f"({reasons})")
        if stats.rows_renormalized:
            out.messages.append(renormalized(stats.rows_renormalized))
        return out

    def settings(self) -> dict[str, Any]:
        """What the streaming engine adds to the report's settings."""
        grid: dict[str, Any] = {"cells": 2 ** StateSpec().grid_bits, "exact": True,
                                "note": GRID_NOTE}
        fine = [st.pos_grid.n_cells for st in self.states.values()
                if getattr(st, "pos_grid", None) is not None]
        if fine:                # the first batch crowded the grid (docs/streaming.md)
            grid["positional_cells"] = max(fine)
        out = {"batch_rows": self.source.batch_rows, "scheduler": self.source.scheduler,
               "passes": self.source.file_passes, "grid": grid}
        if self.plan.count_column and self.stats is not None:   # (after the first pass)
            out["expanded"] = {"rows": self.stats.counted_rows,
                               "expanded_rows": self.stats.count_sum, "note": EXPANDED_NOTE}
        return out

    def summary_bins(self) -> list[dict[str, Any]] | None:
        """The uniform bins of a first pass already made (no extra pass)."""
        if not self.states and self.top is None:
            return None
        return metric_results(self.top_state(), ["ece"])["ece"].bin_rows()


class ClosesClient:
    """A streaming engine closes, on leaving, the Dask client its run opened (``--scheduler``;
    :class:`calcheck.engines.dask.DaskEngine` opens it on entering)."""

    source: StreamSource
    _own_client = False

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._own_client and self.source.client is not None:
            self.source.client.close()
            self.source.client = None
            self._own_client = False


class StreamEngine(ClosesClient):
    """Metrics, tests and figures from passes over a streamed source."""

    def __init__(self, source: StreamSource) -> None:
        self.source = source
        self.name = source.engine
        self.first = FirstPasses(source)
        self._by_group: dict[Any, Any] = {}
        self._spread: Any = None

    def __enter__(self) -> StreamEngine:
        return self

    @property
    def passes(self) -> int:
        """The passes over the data so far (the source counts them: every pass is one run)."""
        return int(self.source.file_passes)

    @property
    def capabilities(self) -> Capabilities:
        return CAPABILITIES[self.name]

    # -- the input ---------------------------------------------------------------------------

    @property
    def plan(self) -> Any:
        return self.source.plan

    @property
    def multiclass(self) -> bool:
        return self.first.multiclass

    @property
    def classes(self) -> int:
        return self.first.classes

    def _sce_in_class_passes(self, ids: list[str], by: str | None) -> bool:
        """SCE from the held classes' rows instead of the first pass's (class, bin) sums —
        ~0.3 s of the first pass at 5·10⁶ rows × 10 classes — when the class passes hold every
        class whole anyway (no ``--by``; the Parquet footers bound the rows)."""
        from calcheck.io.stream import plan_rows
        from calcheck.streaming.classwise import POSITIONAL_CLASSWISE, sce_in_class_passes

        if not self.multiclass or "sce" not in ids or by:
            return False
        rows = plan_rows(self.plan)
        return rows is not None and sce_in_class_passes(
            [m for m in POSITIONAL_CLASSWISE if m in ids], [rows], self.source.tuning)

    def summary_bins(self, ties: str) -> list[dict[str, Any]] | None:
        """The uniform bins of a first pass already made (no extra pass)."""
        return self.first.summary_bins()

    def input_info(self, top: bool = False) -> dict[str, Any]:
        return self.first.input_info(top)

    def reading(self) -> Outcome:
        return self.first.reading()

    def settings(self) -> dict[str, Any]:
        """What the streaming engine adds to the report's settings."""
        return self.first.settings()

    # -- metrics -----------------------------------------------------------------------------

    def metrics(self, ids: list[str], mopts: MetricOptions, *,
                ci: IntervalOptions | None = None, by: str | None = None) -> Outcome:
        from calcheck.streaming import positional as pos_mod

        binary_ids = list(dict.fromkeys(b for m in ids if (b := registry.binary_of(m))))
        positional = [m for m in binary_ids if m not in GRID_METRICS]
        sce_later = self._sce_in_class_passes(ids, by)
        class_passes = self.multiclass and any(m in ids for m in ("ace_cw", "tace", "tce_cw"))
        first = self.first.grid(mopts.bins, log_loss="log_loss" in binary_ids,
                                ci=ci is not None, by=by, hold=bool(positional),
                                sce="sce" in ids and not sce_later, hold_labels=class_passes)
        if by:
            grouped = first
            first = grouped.overall()
        state = first.top if self.multiclass else first
        if state.n == 0:
            raise no_rows_error(self.source.path, self.source.where)
        if self.multiclass and "tce_cw" in ids:
            _preload_class_pava(first)          # loads while the top-label passes read
        out = Outcome()
        results = metric_results(state, [m for m in binary_ids if m in GRID_METRICS],
                                 mopts.smece_sigma)
        if positional:
            held = first.held_batches() if self.multiclass else None
            kept = () if held is None else (BatchesKept(held, self.source.tuning),)
            more, _ = pos_mod.positional_results(
                self.source, state, positional, kept=kept, bins=mopts.bins, alpha=mopts.alpha,
                test=mopts.test, n_min=mopts.tce_nmin, n_max=mopts.tce_nmax, ties=mopts.ties)
            results.update(more)
            if held is not None:
                first.held = None           # (the classwise passes need the memory)
                del held, kept
        if ci is not None:
            results = _with_intervals(state, results, ids, binary_ids, ci, out, self.name)
        classwise: dict[str, MetricResult] = {}
        if self.multiclass:
            from calcheck.streaming.classwise import classwise_positional
            from calcheck.streaming.views import ALL

            sizes: dict[Any, int] = {ALL: first.n}
            if by:
                sizes.update({k: g.n for k, g in grouped.groups.items()})
            by_group = classwise_positional(
                self.source, self.classes, ids, sizes=sizes, by=by, bins=mopts.bins,
                threshold=mopts.tace_threshold, alpha=mopts.alpha, test=mopts.test,
                n_min=mopts.tce_nmin, n_max=mopts.tce_nmax, ties=mopts.ties, sce=sce_later,
                labels=first.take_held_labels())
            more, errors = by_group.pop(ALL)
            if errors:
                raise InputError(next(iter(errors.values())))
            classwise = {**first.results(ids), **more}
            self._by_group = by_group
        out.values = named_results(ids, results, classwise, multiclass=self.multiclass)
        for m, r in out.values.items():
            if str(r.settings.get("pava_input", "")).startswith("approximate"):
                out.messages.append(
                    f"{m}: n > {self.source.tuning.exact_pava_rows:,} rows, so PAVA ran on "
                    f"{r.settings['pava_blocks']:,} equal-mass blocks of ~"
                    f"{r.settings['pava_block_rows']:,} rows (bins end at block boundaries; "
                    "recorded in the report settings)")
        return out

    def groups(self, ids: list[str], mopts: MetricOptions, ci: IntervalOptions | None,
               grouping: GroupOptions) -> Outcome:
        """Every group's grid metrics (with intervals), positional metrics (a rank search per
        group, :func:`calcheck.streaming.groups.group_positional`) and, for multiclass input,
        classwise ones (computed with the overall metrics)."""
        from calcheck.streaming.bootstrap import grid_bootstrap
        from calcheck.streaming.groups import group_positional
        from calcheck.uncertainty import simultaneous_level, with_intervals

        binary_ids = list(dict.fromkeys(b for m in ids if (b := registry.binary_of(m))))
        grouped = self.first.grid(mopts.bins, log_loss="log_loss" in binary_ids,
                                  ci=ci is not None, by=grouping.by, sce="sce" in ids)
        grids = {key: g.top if self.multiclass else g for key, g in grouped.groups.items()}
        grid_ids = [m for m in binary_ids if m in GRID_METRICS]
        positional = group_positional(
            self.source, grids, grouped.by, [m for m in binary_ids if m not in GRID_METRICS],
            bins=mopts.bins, alpha=mopts.alpha, test=mopts.test, n_min=mopts.tce_nmin,
            n_max=mopts.tce_nmax, ties=mopts.ties)
        out = Outcome(settings={"group_metrics": ids})
        if ci is not None and grouping.windows:
            ci = replace(ci, level=simultaneous_level(ci.level, len(grids), grouping.family))
        for key in sorted(grids, key=lambda k: (k is None, k or "")):
            g = grids[key]
            res = metric_results(g, grid_ids, mopts.smece_sigma) if grid_ids else {}
            more, errors = positional[key]
            res.update(more)
            ci_ids = [m for m in res if registry.METRICS[m].stream_ci]
            if ci is not None and ci_ids:
                res = with_intervals(res, grid_bootstrap(g, ci_ids, reps=ci.reps, level=ci.level,
                                                         seed=ci.seed)[0])
            cw_res, cw_errors = self._by_group.get(key, ({}, {}))
            if self.multiclass:
                cw_res = {**grouped.groups[key].results(ids), **cw_res}
            named = named_results(ids, res, cw_res, multiclass=self.multiclass)
            errs = {m: cw_errors[m] if registry.binary_of(m) is None
                    else errors[registry.binary_of(m)]  # type: ignore[index]
                    for m in ids if m not in named}
            out.values[key] = GroupResult(value=key, n=g.n, flagged=g.n < grouping.min_group_size,
                                          metrics=named, errors=errs)
        return out

    # -- variables ---------------------------------------------------------------------------

    def variables(self, names: list[str], vopts: VariableOptions) -> Outcome:
        from calcheck.metrics.vece import variables_result
        from calcheck.streaming.variables import variable_results

        before = self.passes
        res, ece = variable_results(self.source, names, binary=not self.multiclass,
                                    span=vopts.span, correct_from=vopts.correct_from)
        passes = self.passes - before
        result = variables_result(res, ece.value)
        return Outcome(values={"result": result}, notes=result.notes(),
                       settings={"variable_passes": passes})

    # -- tests -------------------------------------------------------------------------------

    def group_tests(self, methods: list[str], topts: TestOptions,
                    grouping: GroupOptions) -> Outcome:
        from calcheck.errors import UsageError

        lab = grouping.name_of
        raise UsageError(f"calcheck test with {lab('by')} or {lab('time')} needs "
                         f"{lab('engine')} memory: the streaming engines test the whole data "
                         "only")

    def tests(self, methods: list[str], topts: TestOptions) -> Outcome:
        """The tests from the grid pass and the passes they add
        (:func:`calcheck.engines.stream_tests.stream_tests`)."""
        from calcheck.engines.stream_tests import stream_tests

        state = self.first.run(StateSpec(tcal_m=topts.bins, log_loss=False,
                                         spiegelhalter="spiegelhalter" in methods))
        if self.first.top is None:
            self.first.top = state
        if state.n == 0:
            raise no_rows_error(self.source.path, self.source.where)
        return stream_tests(self.source, state, methods, topts, classes=self.classes)

    def summary_ties(self, mid: str, rows: list[dict[str, Any]], ties: str) -> list[Any]:
        return []

    def segment_table(self, columns: list[str], sopts: SegmentOptions) -> Any:
        """The audit's columns and cell table from passes (:mod:`calcheck.streaming.segments`):
        the segments' walks on the score cells (the rows are not held)."""
        from calcheck.streaming.segments import segment_data

        return segment_data(self.source, columns, sopts)

    def window_rows(self, column: WindowColumn) -> tuple[Any, Any, Any, Any]:
        raise UsageError(f"the {self.name} engine does not read windows in order: the monitor "
                         "runs on the memory engine")

    def rows(self, view: str = "top") -> Iterator[tuple[Any, Any]]:
        from calcheck.io.stream import stream_batches

        for batch in stream_batches(self.plan, pos_label=self.source.pos_label,
                                    batch_rows=self.source.batch_rows, view=view):
            yield batch[0], batch[1]

    def recalibration(self, alpha: float, ci_level: float) -> Any:
        """Cox's fit from Newton passes, started from the first pass's grid."""
        from calcheck.streaming.rowtests import cox_stream

        return cox_stream(self.source, self.first.top_state(), alpha=alpha, ci_level=ci_level)

    # -- figures -----------------------------------------------------------------------------

    def figure(self, kind: str, fopts: FigureOptions, *, variables: Any = None,
               ax: Any = None) -> Outcome:
        """The in-memory engine's figure from passes over the files (``variables``: the run's
        VariablesResult, when the caller has it)."""
        from calcheck.figures import draw
        from calcheck.figures import stream as sfig

        if kind == "corp":                      # (counted rows streamed expanded)
            raise UsageError("--kind corp needs --engine memory (the PAV fit and its "
                             "consistency band use every distinct score), or weighted rows "
                             "the streaming engines hold (docs/weights.md)")
        out = Outcome()
        if kind == "variable":
            name = fopts.variable
            if variables is None:
                got = self.variables([name], fopts.variables)
                variables, out.notes = got.values["result"], got.notes
            entry = variables.to_dict()[name]
            v = np.asarray(entry["curve"]["v"], float)
            window = (float(v.min()), float(v.max()))
            out.values["figure"] = draw.variable_figure(
                entry, sfig.stream_spread(self.source, var=name, window=window), name, ax=ax)
            return out
        bins = fopts.bins or (15 if self.multiclass else 10)
        state = self.first.cached(bins) or self.first.grid(bins, log_loss=False)
        state = state.top if self.multiclass else state
        if state.n == 0:
            raise no_rows_error(self.source.path, self.source.where)
        out.values["figure"] = sfig.grid_figure(
            self.source, state, kind, self.spread(), bins=bins, binning=fopts.binning,
            ties=fopts.ties, yscale=fopts.yscale, top_label=self.multiclass, ax=ax)
        return out

    def spread(self) -> Any:
        """The predictions' :class:`~calcheck.figures.draw.Spread` (one pass, kept for the run)."""
        from calcheck.figures.stream import stream_spread

        if self._spread is None:
            self._spread = stream_spread(self.source)
        return self._spread


def named_results(ids: list[str], binary: dict[str, MetricResult],
                  classwise: dict[str, MetricResult], *, multiclass: bool
                  ) -> dict[str, MetricResult]:
    """The results under the reported ids: a binary metric computed on the top-label view of
    multiclass input takes the multiclass id and ``view: top-label`` (as in memory)."""
    out = {}
    for m in ids:
        b = registry.binary_of(m)
        got = classwise.get(m) if b is None else binary.get(b)
        if got is None:
            continue                                    # not computed (a group's error)
        if b is None or not multiclass:
            out[m] = got
        else:
            out[m] = replace(got, id=m, settings={**got.settings, "view": "top-label"})
    return out


def _preload_class_pava(first: Any) -> None:
    """Start loading numba's PAVA-BC scan (:func:`~calcheck.pava.preload_compiled_pava`) for
    ``tce_cw`` of a first-pass classwise state, sized by the class whose labels alternate most
    (its one-vs-rest scan walks the most runs); without it the first class's TCE waited
    ~0.3 s for the load."""
    from calcheck.pava import preload_compiled_pava

    state = first.overall() if hasattr(first, "overall") else first
    if not state.n:
        return
    positives = state.class_n
    k = int(np.argmax(np.minimum(positives, state.n - positives)))
    preload_compiled_pava(state.n, int(positives[k]))


def _with_intervals(state: Any, results: dict[str, MetricResult], ids: list[str],
                    binary_ids: list[str], ci: IntervalOptions, out: Outcome,
                    engine: str) -> dict[str, MetricResult]:
    """``results`` with the grid bootstrap's intervals (its settings and a message naming the
    metrics left without one into ``out``)."""
    from calcheck.streaming.bootstrap import grid_bootstrap
    from calcheck.uncertainty import with_intervals

    cis, out.settings["ci"] = grid_bootstrap(state, binary_ids, reps=ci.reps, level=ci.level,
                                             seed=ci.seed)
    without = [m for m in ids if not registry.METRICS[m].stream_ci]
    if without:
        with_ci = [m for m in ids if registry.METRICS[m].stream_ci]
        out.messages.append(
            f"--ci with --engine {engine}: intervals for {', '.join(with_ci) or 'none'} only; "
            f"none for {', '.join(without)} (the streamed bootstrap resamples the grid state's "
            "units; PAVA bins, PDE and classwise bins need the rows: use --engine memory)")
    return with_intervals(results, cis)

