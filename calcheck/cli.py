"""The ``calcheck`` command line: parse → read → engine → report → exit code.

Only typer is imported at module level; everything else is imported inside the commands so
that ``calcheck --help`` stays fast.  :func:`run` is the one place that maps exceptions to exit
codes (0 ok, 1 a requested gate failed, 2 usage or input error, 3 internal error, 130 Ctrl-C).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from calcheck.errors import CalcheckError, ExitCode, InputError, UsageError

try:  # typer >= 0.22 vendors click; older releases raise click's own exceptions
    from typer import TyperException as _UsageBase
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import ClickException as _UsageBase  # type: ignore[assignment]
_USAGE_ERRORS = (_UsageBase,)

app = typer.Typer(
    name="calcheck",
    help="Is this classifier calibrated? Calibration metrics and tests, exact to the papers.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version_callback(value: bool) -> None:
    if value:
        from calcheck._version import SCHEMA_VERSION, __version__

        sys.stdout.write(f"calcheck {__version__} (report schema {SCHEMA_VERSION})\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_version_callback,
                                 help="Print the version and exit."),
) -> None:
    """Is this classifier calibrated? Calibration metrics and tests, exact to the papers."""


def note(message: str, *, quiet: bool = False) -> None:
    """A message for the user, on stderr."""
    if not quiet:
        sys.stderr.write(f"calcheck: {message}\n")


def _output_format(fmt: str | None, as_json: bool) -> str:
    from calcheck.report import OUTPUT_FORMATS

    if as_json:
        if fmt not in (None, "json"):
            raise UsageError(f"--json conflicts with --format {fmt}")
        return "json"
    if fmt is None:
        return "table"
    if fmt not in OUTPUT_FORMATS:
        raise UsageError(f"unknown --format {fmt!r}; use one of {', '.join(OUTPUT_FORMATS)}")
    return fmt


def _file_format(path: str, fmt: str) -> str:
    if fmt != "table":
        return fmt
    lower = path.lower()
    if lower.endswith(".csv"):
        return "csv"
    if lower.endswith((".md", ".markdown")):
        return "markdown"
    return "json"


FILE_HELP = "CSV, gzipped CSV, Parquet file or directory of Parquet parts; '-' reads stdin."


# the streaming options every command takes (score, test, plot, report)
SCHEDULER_OPTION = typer.Option(
    None, "--scheduler", help="Dask scheduler address for --engine dask (default: local threads).")
BATCH_ROWS_OPTION = typer.Option(
    1_000_000, "--batch-rows", help="Rows per batch of --engine stream/dask.")
WHERE_OPTION = typer.Option(
    None, "--where",
    help="Keep only rows matching, e.g. \"split = 'test' and score >= 0.1\" (pushed down to "
         "Parquet scans).")


def _check_engine_options(engine_name: str, scheduler: str | None, batch_rows: int,
                          where: str | None, input_format: str | None = None) -> None:
    """--engine, --scheduler, --batch-rows and --where, checked before any reading."""
    from calcheck.validation import check_bins

    if engine_name not in ("memory", "stream", "dask"):
        raise UsageError(f"unknown --engine {engine_name!r}; use memory, stream or dask")
    if engine_name != "memory" and input_format not in (None, "parquet"):
        raise UsageError(f"--engine {engine_name} reads Parquet only; --input-format "
                         f"{input_format} needs --engine memory")
    if scheduler and engine_name != "dask":
        raise UsageError("--scheduler applies to --engine dask only")
    check_bins(batch_rows, name="--batch-rows")
    if where:
        from calcheck.io import parse_where

        parse_where(where)


def _renormalized_note(rows: int) -> str:
    return f"renormalized {rows} rows whose probabilities did not sum to 1"


def _top_label_note(classes: int) -> str:
    return (f"multiclass input ({classes} classes): testing the top-label view (confidence of "
            "the predicted class vs correctness)")


def _stream_input(file: str, state: Any, stats: Any,
                  plan: Any) -> tuple[dict[str, Any], str | None]:
    """The report's ``input`` of a streamed read (``state``: the binary or top-label grid
    state), and the dropped-rows note (or None)."""
    rate = state.positives / state.n if state.n else None
    info: dict[str, Any] = {"path": file, "format": "parquet"}
    if plan.prob_columns:
        info.update({"kind": "multiclass", "prob_columns": list(plan.prob_columns),
                     "classes": list(plan.class_names), "label_column": stats.label_column,
                     "rows_renormalized": stats.rows_renormalized, "accuracy": rate})
    else:
        info.update({"score_column": stats.score_column, "label_column": stats.label_column,
                     "positives": state.positives, "prevalence": rate})
    info.update({"rows_read": stats.rows_read, "rows_dropped": stats.rows_dropped,
                 "dropped_by_reason": stats.dropped_by_reason, "rows_used": state.n,
                 "batches": stats.batches})
    dropped = None
    if stats.rows_dropped:
        reasons = ", ".join(f"{k}={v}" for k, v in stats.dropped_by_reason.items())
        dropped = f"dropped {stats.rows_dropped} of {stats.rows_read} rows ({reasons})"
    return info, dropped


def _score_streaming(file: str, score_col: str | None, label_col: str | None,
                     pos_label: str | None, metrics: list[str] | None, opts: Any,
                     where: str | None, batch_rows: int, drop_invalid: bool, out_fmt: str,
                     output: str | None, gates: list[Any], bins_table: list[str] | None,
                     quiet: bool, text_plot: bool = False, engine_name: str = "stream",
                     scheduler: str | None = None,
                     intervals: dict[str, Any] | None = None, by: str | None = None,
                     min_group_size: int = 100, probs: list[str] | None = None,
                     renormalize: bool = False, variables: list[str] | None = None,
                     loess_span: float = 0.75, correct_from: str | None = None) -> None:
    """``score --engine stream|dask``: a grid pass, then (for positional bins) a rank search
    and a row pass, each over the same Parquet files.  Multiclass input runs the binary
    engine on its top-label view (one pass also fills SCE's classwise state).  ``--var``
    adds the variable passes of :mod:`calcheck.streaming.variables`."""
    from dataclasses import replace

    from calcheck.gates import evaluate_gates
    from calcheck.report import build_report
    from calcheck.streaming import positional as pos_mod
    from calcheck.streaming.classwise import ClasswiseSpec
    from calcheck.streaming.engine import StateSpec, StreamSource

    source = StreamSource(file, engine_name, score_col, label_col, pos_label, where, batch_rows,
                          drop_invalid, scheduler, tuple(probs) if probs else None, renormalize)
    classes = len(source.plan.prob_columns or [])
    if opts.bins is None:
        opts = replace(opts, bins=15 if classes else 10)
    ids, binary_of = _stream_metric_ids(metrics, gates, multiclass=bool(classes))
    plot_id = "ece_top" if classes else "ece"
    if text_plot and plot_id not in ids:                 # --plot draws ECE's bin table
        ids.append(plot_id)
        binary_of[plot_id] = "ece"
    bin_ids = list(dict.fromkeys(b for b in binary_of.values() if b is not None))
    spec = StateSpec(bins=opts.bins, log_loss="log_loss" in bin_ids, ci=intervals is not None)
    first_spec = ClasswiseSpec(classes, opts.bins, top=spec) if classes else spec
    grouped = None
    if by:
        from calcheck.streaming.groups import GroupedSpec

        if by not in source.plan.schema.names:
            raise InputError(f"{source.plan.name}: no column {by!r} for --by (columns: "
                             f"{', '.join(source.plan.schema.names)})")
        grouped, stats = source.run(GroupedSpec(first_spec, by))
        first = grouped.overall()
    else:
        first, stats = source.run(first_spec)
    state = first.top if classes else first
    sizes = {k: g.n for k, g in grouped.groups.items()} if grouped else {}
    results, by_group, details, ci_settings = _stream_metric_results(
        source, first, ids, binary_of, opts, sizes=sizes, by=by, intervals=intervals,
        quiet=quiet)
    var_result, var_notes, var_passes = (_stream_variables(source, variables, loess_span,
                                                           correct_from, binary=not classes)
                                         if variables else (None, [], 0))
    groups = None
    if grouped is not None:
        groups, group_passes = _stream_groups(source, grouped, ids, binary_of, opts,
                                              min_group_size, intervals, by_group)
        details["extra_passes"] += group_passes
    binned = [m for m, r in results.items() if r.bins is not None]
    bins_for = [m for raw in (bins_table or []) for m in
                (binned if raw.strip().lower() == "all" else [raw.strip()]) if m in binned]
    if text_plot and plot_id not in bins_for:
        bins_for.append(plot_id)
    info, dropped = _stream_input(file, state, stats, source.plan)
    if dropped:
        note(dropped, quiet=quiet)
    if stats.rows_renormalized:
        note(_renormalized_note(stats.rows_renormalized), quiet=quiet)
    outcomes = evaluate_gates(gates, {m: r.value for m, r in results.items()}) if gates else None
    settings = {"metrics": ids, "bins": opts.bins, "alpha": opts.alpha, "test": opts.test,
                "engine": engine_name, "batch_rows": batch_rows, "where": where,
                "pos_label": pos_label, "drop_invalid": drop_invalid, "scheduler": scheduler,
                "passes": 1 + details["extra_passes"] + var_passes,
                "grid": {"cells": 2 ** spec.grid_bits, "exact": True,
                         "note": "fixed-bin metrics are exact: edge-straddling grid cells are "
                                 "binned row by row; equal-mass bins are cut at exact ranks "
                                 "found by extra passes"}}
    if classes:
        settings.update({"input": "multiclass", "tace_threshold": opts.tace_threshold})
    if variables:
        settings.update({"variables": variables, "vece_bins": 10, "loess_span": loess_span,
                         "correct_from": correct_from, "variable_passes": var_passes})
    for n_ in var_notes:
        note(n_, quiet=quiet)
    if ci_settings is not None:
        settings["ci"] = ci_settings
    if by:
        settings.update({"by": by, "min_group_size": min_group_size,
                         "group_metrics": ids})
    for m, r in results.items():
        if str(r.settings.get("pava_input", "")).startswith("approximate"):
            note(f"{m}: n > {pos_mod.EXACT_PAVA_ROWS:,} rows, so PAVA ran on "
                 f"{r.settings['pava_blocks']:,} equal-mass blocks of ~"
                 f"{r.settings['pava_block_rows']:,} rows (bins end at block boundaries; "
                 "recorded in the report settings)", quiet=quiet)
    report = build_report(command="score", input_info=info, settings=settings, metrics=results,
                          bins_for=bins_for, gates=outcomes, groups=groups, notes=var_notes,
                          variables=var_result.to_dict() if var_result else None)
    _emit(report, out_fmt, output, [b for b in bins_for if not (text_plot and b == plot_id)])
    if text_plot:
        _text_plot(report, plot_id, out_fmt, quiet)
    failed = [o for o in outcomes or [] if o["failed"]]
    for o in failed:
        note(f"gate failed: {o['condition']} (value {o['value']})")
    if failed:
        raise typer.Exit(int(ExitCode.GATE_FAILED))


def _stream_metric_results(source: Any, first: Any, ids: list[str],
                           binary_of: dict[str, str | None], opts: Any, *,
                           sizes: dict[Any, int] | None = None, by: str | None = None,
                           intervals: dict[str, Any] | None = None, quiet: bool = False,
                           ) -> tuple[dict[str, Any], dict[Any, Any], dict[str, Any], Any]:
    """The metrics ``ids`` of a streamed source whose first pass gave ``first`` (a grid state,
    or a classwise one for multiclass input): (results by id, the classwise results of each
    ``--by`` group in ``sizes``, search details, the ``--ci`` settings or None)."""
    from calcheck.streaming import GRID_METRICS
    from calcheck.streaming import positional as pos_mod
    from calcheck.streaming.engine import metric_results

    classes = source.plan.prob_columns
    classwise = first if classes else None
    state = first.top if classes else first
    bin_ids = list(dict.fromkeys(b for b in binary_of.values() if b is not None))
    results = metric_results(state, [m for m in bin_ids if m in GRID_METRICS])
    details: dict[str, Any] = {"extra_passes": 0}
    positional = [m for m in bin_ids if m not in GRID_METRICS]
    if positional:
        more, details = pos_mod.positional_results(
            source, state, positional, bins=opts.bins, alpha=opts.alpha, test=opts.test,
            n_min=opts.tce_nmin, n_max=opts.tce_nmax)
        results.update(more)
    ci_settings = None
    if intervals is not None:
        from calcheck.streaming.bootstrap import CI_METRICS, grid_bootstrap
        from calcheck.uncertainty import with_intervals

        cis, ci_settings = grid_bootstrap(state, bin_ids, **intervals)
        results = with_intervals(results, cis)
        without = [m for m in ids if binary_of[m] not in CI_METRICS]
        if without:
            note(f"--ci with --engine {source.engine}: intervals for "
                 f"{', '.join(m for m in ids if binary_of[m] in CI_METRICS) or 'none'} only; "
                 f"none for {', '.join(without)} (the streamed bootstrap resamples the grid "
                 "state's units; PAVA bins, PDE and classwise bins need the rows: use "
                 "--engine memory)", quiet=quiet)
    classwise_results: dict[str, Any] = {}
    by_group: dict[Any, Any] = {}
    if classwise is not None:
        from calcheck.streaming.classwise import classwise_positional

        by_group, cw_passes = classwise_positional(
            source, len(classes), ids, sizes={None: classwise.n, **(sizes or {})}, by=by,
            bins=opts.bins, threshold=opts.tace_threshold, alpha=opts.alpha, test=opts.test,
            n_min=opts.tce_nmin, n_max=opts.tce_nmax)
        more, errors = by_group.pop(None)
        if errors:
            raise InputError(next(iter(errors.values())))
        classwise_results = {**classwise.results(ids), **more}
        details["extra_passes"] += cw_passes
    results = _named_results(ids, binary_of, results, classwise_results,
                             multiclass=bool(classes))
    return results, by_group, details, ci_settings


def _stream_variables(source: Any, variables: list[str], span: float,
                      correct_from: str | None, *, binary: bool) -> tuple[Any, list[str], int]:
    """``--var`` on a streaming engine: the VariablesResult, its notes and the passes taken."""
    from calcheck.engine import VariablesResult
    from calcheck.io import _check_extra_names
    from calcheck.streaming.variables import variable_results

    plan = source.plan
    _check_extra_names(list(plan.schema.names), [*variables, *([correct_from] if correct_from
                                                               else [])], plan.name)
    res, ece, passes = variable_results(source, variables, binary=binary, span=span,
                                        correct_from=correct_from)
    notes = []
    for name, vr in res.items():
        if vr.excluded_missing:
            notes.append(f"--var {name}: {vr.excluded_missing} rows with a missing value "
                         "excluded from its VECE")
        if vr.table.empty_bins:
            notes.append(f"--var {name}: {vr.table.empty_bins} empty bin(s) skipped")
    ranking = sorted(res, key=lambda k: -res[k].vece)
    return VariablesResult(results=res, ece_qcut=ece.value, ranking=ranking), notes, passes


# multiclass ids the streaming engines compute: top-label ones (binary metrics on the top-label
# view), SCE's classwise sums and the classwise positional metrics (a rank search per class)
_TOP_IDS = {"ece_top": "ece", "mce_top": "mce", "ace_top": "ace"}


def _stream_metric_ids(metrics: list[str] | None, gates: list[Any], *,
                       multiclass: bool) -> tuple[list[str], dict[str, str | None]]:
    """The ids a streamed ``score`` reports and, for each, the binary metric that computes it
    (on the top-label view for multiclass input; None for SCE)."""
    from calcheck.metrics import (
        DEFAULT_METRICS,
        DEFAULT_MULTICLASS_METRICS,
        resolve_metric_ids,
        resolve_multiclass_ids,
    )
    from calcheck.streaming import STREAMABLE
    from calcheck.streaming.classwise import CLASSWISE_METRICS, POSITIONAL_CLASSWISE
    from calcheck.streaming.engine import check_streamable

    if not multiclass:
        ids = resolve_metric_ids(metrics or [m for m in DEFAULT_METRICS if m in STREAMABLE])
        ids += [g.metric for g in gates if g.metric not in ids]
        check_streamable(ids)
        return ids, {m: m for m in ids}
    ids = resolve_multiclass_ids(metrics or list(DEFAULT_MULTICLASS_METRICS))
    ids += [m for g in gates for m in resolve_multiclass_ids([g.metric]) if m not in ids]
    binary_of: dict[str, str | None] = {}
    for m in ids:
        if m in CLASSWISE_METRICS or m in POSITIONAL_CLASSWISE:
            binary_of[m] = None
        elif _TOP_IDS.get(m, m) in STREAMABLE:
            binary_of[m] = _TOP_IDS.get(m, m)
    bad = [m for m in ids if m not in binary_of]
    if bad:
        raise UsageError(f"--engine stream/dask computes, for multiclass input, "
                         f"{', '.join([*_TOP_IDS, *CLASSWISE_METRICS, *POSITIONAL_CLASSWISE])} "
                         "and the binary metrics "
                         f"on the top-label view; {', '.join(bad)} need(s) --engine memory")
    return ids, binary_of


def _named_results(ids: list[str], binary_of: dict[str, str | None], binary: dict[str, Any],
                   classwise: dict[str, Any], *, multiclass: bool) -> dict[str, Any]:
    """The results under the reported ids: a binary metric computed on the top-label view of
    multiclass input takes the multiclass id and ``view: top-label`` (as in memory)."""
    from dataclasses import replace

    out = {}
    for m in ids:
        b = binary_of[m]
        if (classwise if b is None else binary).get(m if b is None else b) is None:
            continue                                    # not computed (a group's error)
        if b is None:
            out[m] = classwise[m]
        elif not multiclass:
            out[m] = binary[b]
        else:
            r = binary[b]
            out[m] = replace(r, id=m, settings={**r.settings, "view": "top-label"})
    return out


def _stream_groups(source: Any, grouped: Any, ids: list[str], binary_of: dict[str, str | None],
                   opts: Any, min_size: int, intervals: dict[str, Any] | None,
                   classwise: dict[Any, Any]) -> tuple[dict[str, Any], int]:
    """The report's ``groups`` of a streamed ``--by`` and the passes taken: the grid metrics
    of every group (with their intervals) and its positional metrics (a rank search per
    group, :func:`calcheck.streaming.groups.group_positional`); for multiclass input, the
    top-label view's and, from ``classwise`` (group → (results, errors)), the classwise
    ones."""
    from calcheck.engine import GroupResult
    from calcheck.streaming import GRID_METRICS
    from calcheck.streaming.bootstrap import CI_METRICS, grid_bootstrap
    from calcheck.streaming.engine import metric_results
    from calcheck.streaming.groups import group_positional
    from calcheck.uncertainty import with_intervals

    multiclass = bool(classwise)
    bin_ids = list(dict.fromkeys(b for b in binary_of.values() if b is not None))
    grid_ids = [m for m in bin_ids if m in GRID_METRICS]
    grids = {key: g.top if multiclass else g for key, g in grouped.groups.items()}
    positional, passes = group_positional(
        source, grids, grouped.by, [m for m in bin_ids if m not in GRID_METRICS],
        bins=opts.bins, alpha=opts.alpha, test=opts.test, n_min=opts.tce_nmin,
        n_max=opts.tce_nmax)
    out = {}
    for key in sorted(grids):
        g = grids[key]
        res = metric_results(g, grid_ids) if grid_ids else {}
        more, errors = positional[key]
        res.update(more)
        ci_ids = [m for m in res if m in CI_METRICS]
        if intervals is not None and ci_ids:
            res = with_intervals(res, grid_bootstrap(g, ci_ids, **intervals)[0])
        cw_res, cw_errors = classwise.get(key, ({}, {}))
        if multiclass:
            cw_res = {**grouped.groups[key].results(ids), **cw_res}
        named = _named_results(ids, binary_of, res, cw_res, multiclass=multiclass)
        errors = {m: cw_errors[m] if binary_of[m] is None else errors[binary_of[m]]  # type: ignore[index]
                  for m in ids if m not in named}
        out[key] = GroupResult(value=key, n=g.n, flagged=g.n < min_size, metrics=named,
                               errors=errors).to_dict()
    return out, passes


def _with_bootstrap(data: Any, results: dict[str, Any], opts: Any,
                    intervals: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The in-memory engine's results with their bootstrap intervals, and the notes."""
    from calcheck.uncertainty import NO_INTERVAL, bootstrap, with_intervals

    progress = _Progress("bootstrap") if sys.stderr.isatty() else None
    try:
        cis = bootstrap(data, list(results), opts, **intervals, progress=progress)
    finally:
        if progress is not None:
            progress.close()
    notes = [f"{m}: {NO_INTERVAL[m]}" for m in results if m in NO_INTERVAL]
    notes += [f"{m}: {c.failed} of {c.reps} bootstrap replicates could not be computed"
              + ("" if c.low is not None else "; no interval") for m, c in cis.items() if c.failed]
    return with_intervals(results, cis), notes


def _load_any(src: Any, multiclass: bool, score_col: str | None, label_col: str | None,
              pos_label: str | None, probs: list[str] | None, renormalize: bool,
              drop_invalid: bool, quiet: bool, numeric_extras: list[str],
              raw_extras: list[str], where: str | None = None) -> tuple[Any, Any, dict[str, Any]]:
    """Read binary or multiclass input: (engine.ScoreInput, the loaded data, report input)."""
    from calcheck import engine
    from calcheck.io import load_binary, load_multiclass

    if multiclass:
        mc = load_multiclass(src, probs=probs, label=label_col, renormalize=renormalize,
                             drop_invalid=drop_invalid, numeric_extras=numeric_extras,
                             raw_extras=raw_extras, where=where)
        _report_dropped(mc, quiet)
        if mc.rows_renormalized:
            note(_renormalized_note(mc.rows_renormalized), quiet=quiet)
        data = engine.ScoreInput(labels=mc.labels, probs=mc.probs)
        info = mc.input_dict()
        info["accuracy"] = float(1.0 - data.error_view()[1].mean())
        return data, mc, info
    loaded = load_binary(src, score=score_col, label=label_col, pos_label=pos_label,
                         drop_invalid=drop_invalid, numeric_extras=numeric_extras,
                         raw_extras=raw_extras, where=where)
    _report_dropped(loaded, quiet)
    return engine.ScoreInput(labels=loaded.labels, scores=loaded.scores), loaded, \
        loaded.input_dict()


def _incorrect_from(loaded: Any, data: Any, column: str, multiclass: bool,
                    pos_label: str | None, source: str) -> Any:
    """``--correct-from``: incorrect = 1[column's prediction ≠ label]."""
    from calcheck.io import incorrect_from

    return incorrect_from(loaded.extras[column], data.labels,
                          class_names=loaded.class_names if multiclass else None,
                          pos_label=pos_label, source=source, column=column).astype(float)


def _read_test_input(file: str, score_col: str | None, label_col: str | None,
                     pos_label: str | None, probs: list[str] | None, renormalize: bool,
                     input_format: str | None, drop_invalid: bool,
                     quiet: bool, where: str | None = None) -> tuple[Any, Any, dict[str, Any]]:
    """Binary input as it is; multiclass input as its top-label view (confidence, correct)."""
    from calcheck.io import input_kind, open_source
    from calcheck.multiclass import top_label_view

    src = open_source(file, input_format)
    multiclass = input_kind(src, score=score_col, probs=probs) == "multiclass"
    data, _, info = _load_any(src, multiclass, score_col, label_col, pos_label, probs,
                              renormalize, drop_invalid, quiet, [], [], where=where)
    if not multiclass:
        return data.scores, data.labels, info
    conf, correct = top_label_view(data.probs, data.labels)
    note(_top_label_note(data.probs.shape[1]), quiet=quiet)
    info.update({"view": "top-label", "positives": int(correct.sum()),
                 "prevalence": float(correct.mean()), "accuracy": float(correct.mean())})
    return conf, correct, info


def _report_dropped(data: Any, quiet: bool) -> None:
    for w in data.warnings:
        note(f"warning: {w}", quiet=quiet)
    if data.rows_dropped:
        reasons = ", ".join(f"{k}={v}" for k, v in data.dropped_by_reason.items())
        note(f"dropped {data.rows_dropped} of {data.rows_read} rows ({reasons})")


def _emit(report: dict[str, Any], out_fmt: str, output: str | None,
          bins_for: list[str] | None = None) -> None:
    """Write the report file (atomically) first, then the requested output on stdout."""
    from calcheck.io import atomic_write
    from calcheck.report import render

    if output:
        atomic_write(output, render(report, _file_format(output, out_fmt), bins_for=bins_for or []))
    sys.stdout.write(render(report, out_fmt, bins_for=bins_for or [], color=sys.stdout.isatty()))


class _Progress:
    """A progress bar on stderr, shown only on a TTY and only after the first second."""

    def __init__(self, label: str) -> None:
        import time

        self.label = label
        self.start = time.monotonic()
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
        import time

        if self.bar is None:
            if time.monotonic() - self.start < 1.0:
                return
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total)
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@app.command()
def score(
    file: str = typer.Argument(..., help=FILE_HELP, show_default=False),
    score_col: str | None = typer.Option(
        None, "--score", help="Score column (default: found by name, e.g. score, prob, y_prob)."),
    label_col: str | None = typer.Option(
        None, "--label", help="Label column (default: found by name, e.g. label, y, target)."),
    pos_label: str | None = typer.Option(
        None, "--pos-label", help="Value of the label column that means the positive class."),
    probs: list[str] | None = typer.Option(
        None, "--probs",
        help="Multiclass: class-probability columns (names, comma list or glob such as "
             "'prob_*'); default: prob_0..prob_{K-1} when there is no score column."),
    renormalize: bool = typer.Option(
        False, "--renormalize", help="Multiclass: divide rows that do not sum to 1 by their sum."),
    metrics: list[str] | None = typer.Option(
        None, "--metrics", "-m",
        help="Metric ids, comma-separated or repeated; 'all' for every one. Binary default: "
             "tce, tce_q, ece, ece_l2, mce, ace, mce_q, brier, log_loss, pde, pc (also tce_v, "
             "tce_u). Multiclass default: ece_top, mce_top, ace_top, sce, ace_cw, tace, tce_cw "
             "(binary ids are computed on the top-label view)."),
    bins: int | None = typer.Option(
        None, "--bins",
        help="Bins of the fixed-count binnings (ECE, MCE, ACE, MCE(Q), PDE, TCE(Q), TCE(U), "
             "SCE, ACE, TACE): default 10 for binary input, 15 for multiclass."),
    alpha: float = typer.Option(
        0.05, "--alpha", help="Significance level of the tests inside TCE, in (0, 1)."),
    test: str = typer.Option(
        "binomial", "--test", help="Test inside TCE: binomial (exact, default) or t."),
    tce_nmin: int | None = typer.Option(
        None, "--tce-nmin", help="PAVA-BC minimum bin size for TCE (default ⌊n/20⌋)."),
    tce_nmax: int | None = typer.Option(
        None, "--tce-nmax", help="PAVA-BC maximum bin size for TCE (default ⌊n/5⌋)."),
    tace_threshold: float = typer.Option(
        0.01, "--tace-threshold", help="TACE keeps the probabilities >= this value."),
    compat: str | None = typer.Option(
        None, "--compat",
        help="nixon: compute top-label ECE/ACE, SCE, ACE and TACE exactly as Nixon et al.'s "
             "reference code does (its bin edges, empty bins and weights)."),
    var: list[str] | None = typer.Option(
        None, "--var",
        help="Variable-based calibration (VECE, VCE(v*)) along this numeric column (repeatable)."),
    loess_span: float = typer.Option(
        0.75, "--loess-span", help="LOESS span of the variable-based calibration curves."),
    correct_from: str | None = typer.Option(
        None, "--correct-from",
        help="Take correctness for VECE as 1[COL = label] (e.g. the model's `pred` column)."),
    by: str | None = typer.Option(
        None, "--by", help="Also compute every selected metric per value of this column."),
    min_group_size: int = typer.Option(
        100, "--min-group-size", help="Groups smaller than this are reported but flagged."),
    fmt: str | None = typer.Option(
        None, "--format", "-f", help="Output: table (default), json, csv or markdown."),
    as_json: bool = typer.Option(False, "--json", help="Shorthand for --format json."),
    output: str | None = typer.Option(
        None, "--output", "-o",
        help="Also write the report to this file, atomically (format from --format, else from "
             "the extension: .csv, .md, otherwise JSON)."),
    fail_if: list[str] | None = typer.Option(
        None, "--fail-if",
        help="Exit 1 when a condition holds, e.g. 'ece>0.02' (repeatable; >, >=, <, <=)."),
    bins_table: list[str] | None = typer.Option(
        None, "--bins-table",
        help="Show the per-bin table of this metric (repeatable; 'all' for every binned one)."),
    input_format: str | None = typer.Option(
        None, "--input-format", help="csv or parquet, when it cannot be told from the input."),
    drop_invalid: bool = typer.Option(
        False, "--drop-invalid",
        help="Drop rows with invalid scores or labels (counted and reported) instead of failing."),
    engine_name: str = typer.Option(
        "memory", "--engine",
        help="memory (default: every metric, exact), stream (Parquet files or directories, "
             "hive partitions included, in bounded memory; every binary metric but pc, in a few "
             "passes) or dask (the same on a Dask cluster; pip install 'calcheck[dask]')."),
    scheduler: str | None = SCHEDULER_OPTION,
    batch_rows: int = BATCH_ROWS_OPTION,
    where: str | None = WHERE_OPTION,
    text_plot: bool = typer.Option(
        False, "--plot",
        help="Also draw a compact reliability diagram in the terminal (table output only)."),
    ci: bool = typer.Option(
        False, "--ci",
        help="Percentile bootstrap confidence intervals of the metrics (rows resampled with "
             "replacement, bins re-estimated; per group too with --by)."),
    ci_reps: int = typer.Option(1000, "--ci-reps", help="Bootstrap replicates of --ci."),
    ci_level: float = typer.Option(0.95, "--ci-level", help="Confidence level of --ci."),
    seed: int = typer.Option(0, "--seed", help="Seed of the --ci bootstrap."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No notes on stderr."),
) -> None:
    """Compute calibration metrics side by side (binary or multiclass), per variable and group."""
    from calcheck.gates import evaluate_gates, parse_gate
    from calcheck.validation import check_alpha, check_bins

    # -- validate every option before touching the data
    out_fmt = _output_format(fmt, as_json)
    if test not in ("binomial", "t"):
        raise UsageError(f"unknown --test {test!r}; use binomial or t")
    for name, val in (("--tce-nmin", tce_nmin), ("--tce-nmax", tce_nmax)):
        if val is not None and val < 0:
            raise UsageError(f"{name} must be >= 0, got {val}")
    if tce_nmin is not None and tce_nmax is not None and tce_nmax < tce_nmin:
        raise UsageError(f"--tce-nmax ({tce_nmax}) must be >= --tce-nmin ({tce_nmin})")
    if not 0.0 < loess_span <= 1.0:
        raise UsageError(f"--loess-span must be in (0, 1], got {loess_span}")
    if not 0.0 <= tace_threshold < 1.0:
        raise UsageError(f"--tace-threshold must be in [0, 1), got {tace_threshold}")
    if compat not in (None, "nixon"):
        raise UsageError(f"unknown --compat {compat!r}; the only convention offered is nixon")
    if bins is not None:
        check_bins(bins)
    check_bins(min_group_size, name="--min-group-size", minimum=0)
    check_alpha(alpha)
    gates = [parse_gate(g) for g in (fail_if or [])]
    intervals = None
    if ci:
        from calcheck.uncertainty import check_ci_options

        check_ci_options(ci_reps, ci_level)
        intervals = {"reps": ci_reps, "level": ci_level, "seed": seed}

    _check_engine_options(engine_name, scheduler, batch_rows, where, input_format)
    if correct_from and not var:
        raise UsageError("--correct-from sets the correctness behind --var; give --var COL too")
    if engine_name in ("stream", "dask"):
        from calcheck.metrics import MetricOptions

        if compat:
            raise UsageError(f"--compat {compat} (the reference code's conventions) needs "
                             "--engine memory")
        stream_opts = MetricOptions(bins=bins, alpha=alpha, test=test,  # type: ignore[arg-type]
                                    tce_nmin=tce_nmin, tce_nmax=tce_nmax,   # bins: by input kind
                                    tace_threshold=tace_threshold)
        _score_streaming(file, score_col, label_col, pos_label, metrics, stream_opts, where,
                         batch_rows, drop_invalid, out_fmt, output, gates, bins_table, quiet,
                         text_plot, engine_name, scheduler, intervals, by, min_group_size, probs,
                         renormalize, list(dict.fromkeys(var or [])), loess_span, correct_from)
        return
    from calcheck import engine
    from calcheck.io import input_kind, open_source
    from calcheck.metrics import METRICS, MetricOptions, resolve_metric_ids, resolve_multiclass_ids
    from calcheck.report import build_report

    src = open_source(file, input_format)
    multiclass = input_kind(src, score=score_col, probs=probs) == "multiclass"
    resolve = resolve_multiclass_ids if multiclass else resolve_metric_ids
    binned = {m for m, s in METRICS.items() if s.binned} | (
        {"ece_top", "mce_top", "ace_top"} if multiclass else set())
    ids = resolve(metrics)
    for g in gates:
        ids += [m for m in resolve([g.metric]) if m not in ids]
    bins_for: list[str] = []
    for raw in bins_table or []:
        everything = raw.strip().lower() == "all"
        for mid in (ids if everything else resolve([raw])):
            if mid not in binned:
                if everything:
                    continue
                raise UsageError(f"--bins-table {mid}: {mid} is not a binned metric")
            if mid not in ids:
                ids.append(mid)
            if mid not in bins_for:
                bins_for.append(mid)
    plot_id = "ece_top" if multiclass else "ece"
    if text_plot:
        if plot_id not in ids:
            ids.append(plot_id)
        if plot_id not in bins_for:
            bins_for.append(plot_id)
    opts = MetricOptions(bins=bins if bins is not None else (15 if multiclass else 10),
                         alpha=alpha, test=test, tce_nmin=tce_nmin, tce_nmax=tce_nmax,
                         tace_threshold=tace_threshold, compat=compat)

    # -- read
    variables = list(dict.fromkeys(var or []))
    data, loaded, input_info = _load_any(src, multiclass, score_col, label_col, pos_label, probs,
                                         renormalize, drop_invalid, quiet, variables,
                                         [c for c in (correct_from, by) if c], where=where)

    # -- compute
    if compat and not multiclass:
        note("--compat nixon changes multiclass metrics only; binary metrics are unchanged",
             quiet=quiet)
    results = engine.compute(data, ids, opts)
    notes: list[str] = []
    if intervals is not None:
        results, ci_notes = _with_bootstrap(data, results, opts, intervals)
        notes += ci_notes
    var_result = None
    if variables:
        incorrect = None
        if correct_from:
            incorrect = _incorrect_from(loaded, data, correct_from, multiclass, pos_label,
                                        src.name)
        var_result = engine.variables(data, {v: loaded.extras[v] for v in variables},
                                      span=loess_span, incorrect=incorrect)
        for name, vr in var_result.results.items():
            if vr.excluded_missing:
                notes.append(f"--var {name}: {vr.excluded_missing} rows with a missing value "
                             "excluded from its VECE")
            if vr.table.empty_bins:
                notes.append(f"--var {name}: {vr.table.empty_bins} empty bin(s) skipped")
    group_results = None
    if by:
        group_results = engine.groups(data, loaded.extras[by], ids, opts,
                                      min_size=min_group_size, intervals=intervals)
    for n_ in notes:
        note(n_, quiet=quiet)
    outcomes = evaluate_gates(gates, {m: r.value for m, r in results.items()}) if gates else None
    settings: dict[str, Any] = {
        "metrics": ids, "bins": opts.bins, "alpha": opts.alpha, "test": opts.test,
        "tce_nmin": opts.tce_nmin, "tce_nmax": opts.tce_nmax, "pos_label": pos_label,
        "drop_invalid": drop_invalid, "input": "multiclass" if multiclass else "binary",
        "engine": "memory", "where": where,
    }
    if multiclass:
        settings.update({"tace_threshold": tace_threshold,
                         "convention": "nixon" if compat == "nixon" else "calcheck"})
    if variables:
        settings.update({"variables": variables, "vece_bins": 10, "loess_span": loess_span,
                         "correct_from": correct_from})
    if by:
        settings.update({"by": by, "min_group_size": min_group_size})
    if intervals is not None:
        settings["ci"] = {**intervals, "method": "percentile bootstrap",
                          "resampling": "rows with replacement, bins re-estimated"}
    report = build_report(
        command="score", input_info=input_info, settings=settings, metrics=results,
        bins_for=bins_for, gates=outcomes, notes=notes,
        variables=var_result.to_dict() if var_result else None,
        groups={g.value: g.to_dict() for g in group_results} if group_results else None)
    _emit(report, out_fmt, output, [b for b in bins_for if not (text_plot and b == plot_id)])
    if text_plot:
        _text_plot(report, plot_id, out_fmt, quiet)
    failed = [o for o in outcomes or [] if o["failed"]]
    for o in failed:
        note(f"gate failed: {o['condition']} (value {o['value']})")
    if failed:
        raise typer.Exit(int(ExitCode.GATE_FAILED))


def _text_plot(report: dict[str, Any], plot_id: str, out_fmt: str, quiet: bool) -> None:
    """``score --plot``: the terminal reliability diagram of ``plot_id``'s bin table."""
    from calcheck.report import render_text_reliability

    if out_fmt == "table":
        sys.stdout.write(render_text_reliability(report, plot_id, color=sys.stdout.isatty()))
    else:
        note("--plot draws in the terminal only with --format table", quiet=quiet)


@app.command("test")
def test_cmd(
    file: str = typer.Argument(..., help=FILE_HELP, show_default=False),
    method: list[str] | None = typer.Option(
        None, "--method",
        help="tcal (default), hl, spiegelhalter, cox, or all; comma-separated or repeated."),
    bins: int | None = typer.Option(
        None, "--bins", help="T-Cal with this fixed number of bins m (bin id ⌊m·s⌋)."),
    adaptive: bool = typer.Option(
        False, "--adaptive",
        help="Adaptive T-Cal over the dyadic levels 2^1..2^B (the default without --bins)."),
    trials: int = typer.Option(1000, "--trials", help="Monte Carlo draws of the null."),
    resample: str = typer.Option(
        "labels", "--resample",
        help="Null simulation: labels (redraw y ~ Bernoulli(s); exact) or consistency (the "
             "authors': redraw scores, then labels)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the Monte Carlo simulation."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level, in (0, 1)."),
    discrete_max: int = typer.Option(
        50, "--discrete-max",
        help="With at most this many distinct scores, also run the exact binomial test per value."),
    fail_on_reject: bool = typer.Option(
        False, "--fail-on-reject", help="Exit 1 when any selected test rejects calibration."),
    score_col: str | None = typer.Option(None, "--score", help="Score column."),
    label_col: str | None = typer.Option(None, "--label", help="Label column."),
    pos_label: str | None = typer.Option(None, "--pos-label", help="Positive label value."),
    probs: list[str] | None = typer.Option(
        None, "--probs",
        help="Multiclass: class-probability columns (names, comma list or glob, e.g. 'prob_*'); "
             "default: prob_0..prob_{K-1} when there is no score column. Tested on the top-label "
             "view (confidence vs correctness)."),
    renormalize: bool = typer.Option(
        False, "--renormalize", help="Multiclass: divide rows that do not sum to 1 by their sum."),
    fmt: str | None = typer.Option(
        None, "--format", "-f", help="Output: table (default), json, csv or markdown."),
    as_json: bool = typer.Option(False, "--json", help="Shorthand for --format json."),
    output: str | None = typer.Option(
        None, "--output", "-o", help="Also write the report to this file, atomically."),
    input_format: str | None = typer.Option(
        None, "--input-format", help="csv or parquet, when it cannot be told from the input."),
    drop_invalid: bool = typer.Option(
        False, "--drop-invalid", help="Drop invalid rows (counted and reported) instead of failing."),
    engine_name: str = typer.Option(
        "memory", "--engine",
        help="memory (default, exact), stream (Parquet datasets in bounded memory: every "
             "method; T-Cal's null drawn per 2^-16 score cell, recorded in the report) or dask "
             "(the same on a Dask cluster)."),
    scheduler: str | None = SCHEDULER_OPTION,
    batch_rows: int = BATCH_ROWS_OPTION,
    where: str | None = WHERE_OPTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No notes on stderr."),
) -> None:
    """Test calibration: T-Cal / adaptive T-Cal with p-values, and the classical tests."""
    from calcheck.hypotests import TestOptions, resolve_methods, run_tests
    from calcheck.report import build_report
    from calcheck.validation import check_alpha, check_bins

    out_fmt = _output_format(fmt, as_json)
    methods = resolve_methods(method)
    if bins is not None and adaptive:
        raise UsageError("--bins (T-Cal with fixed m) and --adaptive exclude each other")
    if bins is not None:
        check_bins(bins)
    check_bins(trials, name="--trials")
    check_bins(discrete_max, name="--discrete-max", minimum=0)
    if resample not in ("labels", "consistency"):
        raise UsageError(f"unknown --resample {resample!r}; use labels or consistency")
    opts = TestOptions(alpha=check_alpha(alpha), bins=bins, trials=trials, resample=resample,
                       seed=seed, discrete_max=discrete_max)
    _check_engine_options(engine_name, scheduler, batch_rows, where, input_format)

    if engine_name == "memory":
        scores, labels, input_info = _read_test_input(
            file, score_col, label_col, pos_label, probs, renormalize, input_format, drop_invalid,
            quiet, where)
        progress = _Progress("simulating the null") if sys.stderr.isatty() else None
        try:
            results, notes = run_tests(scores, labels, methods, opts, progress=progress)
        finally:
            if progress is not None:
                progress.close()
    else:
        results, notes, input_info = _test_streaming(
            file, methods, opts, engine_name, scheduler, score_col, label_col, pos_label,
            where, batch_rows, drop_invalid, probs, renormalize)
    for n_ in notes:
        note(n_, quiet=quiet)
    settings: dict[str, Any] = {
        "methods": methods, "alpha": opts.alpha, "tcal": "fixed" if bins is not None else "adaptive",
        "bins": bins, "trials": trials, "resample": resample, "seed": seed,
        "discrete_max": discrete_max, "pos_label": pos_label, "drop_invalid": drop_invalid,
        "engine": engine_name, "where": where,
    }
    report = build_report(command="test", input_info=input_info, settings=settings,
                          tests=results, notes=notes)
    _emit(report, out_fmt, output)
    if fail_on_reject and any(r.reject for r in results.values()):
        rejected = ", ".join(tid for tid, r in results.items() if r.reject)
        note(f"calibration rejected by: {rejected}")
        raise typer.Exit(int(ExitCode.GATE_FAILED))


def _test_streaming(file: str, methods: list[str], opts: Any, engine_name: str,
                    scheduler: str | None, score_col: str | None, label_col: str | None,
                    pos_label: str | None, where: str | None, batch_rows: int,
                    drop_invalid: bool, probs: list[str] | None = None,
                    renormalize: bool = False) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """``test --engine stream|dask``: one pass into a grid state, then the tests on it —
    Hosmer–Lemeshow after a rank search, Cox after a few Newton passes, the binomial test per
    value after a pass counting distinct scores when few grid cells are occupied (multiclass
    input: on its top-label view, as in memory)."""
    from calcheck.streaming.engine import StreamSource

    source = StreamSource(file, engine_name, score_col, label_col, pos_label, where, batch_rows,
                          drop_invalid, scheduler, tuple(probs) if probs else None, renormalize)
    return _stream_tests(source, methods, opts)


def _stream_tests(source: Any, methods: list[str], opts: Any,
                  ) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """The tests ``methods`` on a streamed source: (results, notes, the report's input)."""
    import numpy as np

    from calcheck.hypotests import discrete_note
    from calcheck.streaming import tests as stests
    from calcheck.streaming.engine import StateSpec
    from calcheck.streaming.positional import positional_results
    from calcheck.streaming.rowtests import cox_stream, discrete_stream

    engine_name = source.engine
    spec = StateSpec(tcal_m=opts.bins, log_loss=False,
                     spiegelhalter="spiegelhalter" in methods)
    state, stats = source.run(spec)
    if state.n == 0:
        raise InputError("no rows to test (after the --where filter and dropped rows)")
    results: dict[str, Any] = {}
    notes = []
    classes = source.plan.prob_columns
    if classes:
        notes.append(_top_label_note(len(classes)))
    if stats.rows_renormalized:
        notes.append(_renormalized_note(stats.rows_renormalized))
    if "tcal" in methods:
        if opts.bins is not None:
            results["tcal"] = stests.tcal_fixed_stream(state, alpha=opts.alpha,
                                                       trials=opts.trials, seed=opts.seed,
                                                       resample=opts.resample)
        else:
            r = stests.tcal_adaptive_stream(state, alpha=opts.alpha, trials=opts.trials,
                                            seed=opts.seed, resample=opts.resample)
            results["tcal_adaptive"] = r
            if r.details["levels_omitted"]:
                notes.append(f"adaptive T-Cal on the {engine_name} engine tests the levels "
                             f"{r.settings['levels']} (bins of at least one 2^-"
                             f"{state.grid_bits} grid cell); finer levels of the B = "
                             f"{r.details['B_spec']} in memory are omitted")
        tc = results.get("tcal") or results["tcal_adaptive"]
        width = round(float(np.log2(tc.settings["null_unit_width"])))
        notes.append(f"T-Cal's null: {tc.settings['engine_null']} (units up to 2^{width} "
                     "wide), not per row; relative variance excess "
                     f"{tc.settings['null_variance_excess']:.1e}")
        discrete, distinct = discrete_stream(source, state, limit=opts.discrete_max,
                                             alpha=opts.alpha)
        if discrete is not None:
            results["binomial_discrete"] = discrete
            notes.append(discrete_note(distinct, opts.discrete_max))
    if "hl" in methods:
        more, _ = positional_results(source, state, [], alpha=opts.alpha,
                                     hl_groups=opts.hl_groups)
        results["hosmer_lemeshow"] = more["hosmer_lemeshow"]
    if "spiegelhalter" in methods:
        results["spiegelhalter"] = stests.spiegelhalter_stream(state, alpha=opts.alpha)
    if "cox" in methods:
        results["cox"], _ = cox_stream(source, state, alpha=opts.alpha)
    info, dropped = _stream_input(source.path, state, stats, source.plan)
    if classes:                                         # as the in-memory test reports it
        info.update({"view": "top-label", "positives": state.positives,
                     "prevalence": info["accuracy"]})
    if dropped:
        notes.append(dropped)
    return results, notes, info


PLOT_KINDS = ("reliability", "tce", "variable")


@app.command()
def plot(
    file: str = typer.Argument(..., help=FILE_HELP, show_default=False),
    kind: str = typer.Option(
        "tce", "--kind", help="reliability, tce (test-based reliability diagram) or variable."),
    output: str = typer.Option(..., "--output", "-o", help="Image file: .png, .svg or .pdf."),
    var: str | None = typer.Option(None, "--var", help="The variable of --kind variable."),
    bins: int = typer.Option(10, "--bins", help="Bins of the reliability diagram."),
    binning: str = typer.Option(
        "uniform", "--binning", help="Reliability diagram bins: uniform or quantile."),
    yscale: str = typer.Option(
        "auto", "--yscale",
        help="Probability axis of the TCE diagram: auto (logit when predictions crowd near 0 "
             "or 1), linear or logit."),
    loess_span: float = typer.Option(0.75, "--loess-span", help="LOESS span (--kind variable)."),
    correct_from: str | None = typer.Option(
        None, "--correct-from", help="Correctness from this column (--kind variable)."),
    score_col: str | None = typer.Option(None, "--score", help="Score column."),
    label_col: str | None = typer.Option(None, "--label", help="Label column."),
    pos_label: str | None = typer.Option(None, "--pos-label", help="Positive label value."),
    probs: list[str] | None = typer.Option(
        None, "--probs", help="Multiclass probability columns (top-label view for reliability/tce)."),
    renormalize: bool = typer.Option(False, "--renormalize", help="Multiclass: fix row sums."),
    input_format: str | None = typer.Option(None, "--input-format", help="csv or parquet."),
    drop_invalid: bool = typer.Option(False, "--drop-invalid", help="Drop invalid rows."),
    engine_name: str = typer.Option(
        "memory", "--engine",
        help="memory (default), stream (Parquet datasets in bounded memory: the same figure "
             "from passes over the files) or dask (the same on a Dask cluster)."),
    scheduler: str | None = SCHEDULER_OPTION,
    batch_rows: int = BATCH_ROWS_OPTION,
    where: str | None = WHERE_OPTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No notes on stderr."),
) -> None:
    """Draw a reliability diagram, the test-based reliability diagram, or a variable plot."""
    from calcheck.io import input_kind, open_source
    from calcheck.validation import check_bins

    kind = kind.lower()
    if kind not in PLOT_KINDS:
        raise UsageError(f"unknown --kind {kind!r}; use one of {', '.join(PLOT_KINDS)}")
    if kind == "variable" and not var:
        raise UsageError("--kind variable needs --var COL")
    if not output.lower().endswith((".png", ".svg", ".pdf")):
        raise UsageError(f"-o {output}: the image format comes from the extension: .png, .svg "
                         "or .pdf")
    if binning not in ("uniform", "quantile"):
        raise UsageError(f"unknown --binning {binning!r}; use uniform or quantile")
    if yscale not in ("auto", "linear", "logit"):
        raise UsageError(f"unknown --yscale {yscale!r}; use auto, linear or logit")
    check_bins(bins)
    _check_engine_options(engine_name, scheduler, batch_rows, where, input_format)
    _require_matplotlib()
    if engine_name != "memory":
        from calcheck.streaming.engine import StreamSource

        source = StreamSource(file, engine_name, score_col, label_col, pos_label, where,
                              batch_rows, drop_invalid, scheduler,
                              tuple(probs) if probs else None, renormalize)
        fig, notes = _figure_stream(kind, source, var, bins=bins, binning=binning,
                                    yscale=yscale, span=loess_span, correct_from=correct_from)
        for n in notes:
            note(n, quiet=quiet)
        _save_figure(fig, output)
        note(f"wrote {output}", quiet=quiet)
        return
    src = open_source(file, input_format)
    multiclass = input_kind(src, score=score_col, probs=probs) == "multiclass"
    data, loaded, _ = _load_any(src, multiclass, score_col, label_col, pos_label, probs,
                                renormalize, drop_invalid, quiet, [var] if var else [],
                                [correct_from] if correct_from else [], where=where)
    fig = _figure(kind, data, loaded, var, bins=bins, binning=binning, yscale=yscale,
                  span=loess_span, correct_from=correct_from, multiclass=multiclass,
                  pos_label=pos_label, source=src.name)
    _save_figure(fig, output)
    note(f"wrote {output}", quiet=quiet)


def _require_matplotlib() -> None:
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        from calcheck.plots import INSTALL_HINT, MissingExtra

        raise MissingExtra(f"plots need matplotlib, which is not installed; {INSTALL_HINT}")


def _figure(kind: str, data: Any, loaded: Any, var: str | None, *, bins: int, binning: str,
            yscale: str, span: float, correct_from: str | None, multiclass: bool,
            pos_label: str | None, source: str, title: str | None = None) -> Any:
    from calcheck import figures, plots
    from calcheck.engine import variables
    from calcheck.metrics import MulticlassPrepared, Prepared

    top = MulticlassPrepared(data.probs, data.labels).top if multiclass else \
        Prepared(data.scores, data.labels, validate=False)
    view = " (top-label view)" if multiclass else ""
    if kind == "reliability":
        return figures.reliability(top, bins=bins, binning=binning,
                                   title=title or f"Reliability diagram{view}")
    if kind == "tce":
        return figures.test_based(top, yscale=yscale,
                                  title=title or f"Test-based reliability diagram{view}")
    assert var is not None
    incorrect = (_incorrect_from(loaded, data, correct_from, multiclass, pos_label, source)
                 if correct_from else None)
    res = variables(data, {var: loaded.extras[var]}, span=span, incorrect=incorrect)
    return plots.variable_figure(res.to_dict()[var], loaded.extras[var], var)


def _figure_stream(kind: str, source: Any, var: str | None, *, bins: int, binning: str,
                   yscale: str, span: float, correct_from: str | None, state: Any = None,
                   spread: Any = None) -> tuple[Any, list[str]]:
    """``plot --engine stream|dask``: :func:`_figure`'s figure from passes over the files
    (``state``: a grid pass with ``bins`` bins, and ``spread``: the predictions' spread, when
    the caller has them already)."""
    from calcheck import plots
    from calcheck.streaming import figures as sfig
    from calcheck.streaming.engine import StateSpec, metric_results
    from calcheck.streaming.positional import positional_results

    classes = source.plan.prob_columns
    view = " (top-label view)" if classes else ""          # in the title, as in memory
    notes: list[str] = []
    if kind == "variable":
        assert var is not None
        res, notes, _ = _stream_variables(source, [var], span, correct_from, binary=not classes)
        return _variable_figure_stream(source, res.to_dict()[var], var), notes
    if state is None:
        state, _ = source.run(StateSpec(bins=bins, log_loss=False))
    if state.n == 0:
        raise InputError("no rows to plot (after the --where filter and dropped rows)")
    if spread is None:
        spread = sfig.stream_spread(source)
    if kind == "reliability":
        if binning == "uniform":
            res = metric_results(state, ["ece"])["ece"]
        else:
            res = positional_results(source, state, ["ace"], bins=bins)[0]["ace"]
        return plots.reliability_figure(res.bin_rows(), spread,
                                        title=f"Reliability diagram{view}"), notes
    res = positional_results(source, state, ["tce"])[0]["tce"]
    points = sfig.violins(source, state, res.bins.count)
    return plots.tce_figure_from(res.bin_rows(), points, spread, value=res.value, yscale=yscale,
                                 title=f"Test-based reliability diagram{view}"), notes


def _variable_figure_stream(source: Any, entry: dict[str, Any], var: str) -> Any:
    """The variable plot of a streamed ``variables.VAR`` entry (one more pass for the spread
    of the values inside the curve's range, one for their histogram)."""
    import numpy as np

    from calcheck import plots
    from calcheck.streaming.figures import stream_spread

    v = np.asarray(entry["curve"]["v"], float)
    spread = stream_spread(source, var=var, window=(float(v.min()), float(v.max())))
    return plots.variable_figure(entry, spread, var)


def _save_figure(fig: Any, path: str) -> None:
    """Save atomically: draw to a temporary file in the same folder, then rename."""
    from pathlib import Path

    from calcheck import plots

    target = Path(path)
    tmp = target.with_name(f".{target.stem}.tmp-{os.getpid()}{target.suffix}")
    try:
        plots.save(fig, str(tmp))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


@app.command()
def report(
    file: str = typer.Argument(..., help=FILE_HELP, show_default=False),
    output: str = typer.Option(..., "--output", "-o", help="The report: .html (or .pdf)."),
    var: list[str] | None = typer.Option(None, "--var", help="Variables for VECE (repeatable)."),
    adaptive: bool = typer.Option(
        True, "--adaptive/--no-tcal", help="Run adaptive T-Cal (default) or skip it."),
    trials: int = typer.Option(1000, "--trials", help="T-Cal Monte Carlo draws."),
    seed: int = typer.Option(0, "--seed", help="Seed of the T-Cal simulation."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level."),
    fmt: str | None = typer.Option(
        None, "--format", "-f", help="html (default) or pdf; default from the extension."),
    loess_span: float = typer.Option(0.75, "--loess-span", help="LOESS span of variable plots."),
    correct_from: str | None = typer.Option(
        None, "--correct-from", help="Correctness for VECE from this column."),
    score_col: str | None = typer.Option(None, "--score", help="Score column."),
    label_col: str | None = typer.Option(None, "--label", help="Label column."),
    pos_label: str | None = typer.Option(None, "--pos-label", help="Positive label value."),
    probs: list[str] | None = typer.Option(None, "--probs", help="Multiclass probability columns."),
    renormalize: bool = typer.Option(False, "--renormalize", help="Multiclass: fix row sums."),
    input_format: str | None = typer.Option(None, "--input-format", help="csv or parquet."),
    drop_invalid: bool = typer.Option(False, "--drop-invalid", help="Drop invalid rows."),
    engine_name: str = typer.Option(
        "memory", "--engine",
        help="memory (default), stream (Parquet datasets in bounded memory) or dask (the same "
             "on a Dask cluster): the streamed metrics, tests and figures."),
    scheduler: str | None = SCHEDULER_OPTION,
    batch_rows: int = BATCH_ROWS_OPTION,
    where: str | None = WHERE_OPTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No notes on stderr."),
) -> None:
    """One self-contained report: metrics, test verdicts and every figure (HTML or PDF)."""
    from calcheck import engine, plots
    from calcheck.hypotests import TestOptions, run_tests
    from calcheck.io import input_kind, open_source
    from calcheck.metrics import MetricOptions, MulticlassPrepared
    from calcheck.report import build_report
    from calcheck.validation import check_alpha, check_bins

    kind = (fmt or ("pdf" if output.lower().endswith(".pdf") else "html")).lower()
    if kind not in ("html", "pdf"):
        raise UsageError(f"unknown --format {kind!r}; use html or pdf")
    check_alpha(alpha)
    check_bins(trials, name="--trials")
    _check_engine_options(engine_name, scheduler, batch_rows, where, input_format)
    _require_matplotlib()
    variables = list(dict.fromkeys(var or []))
    settings = {"alpha": alpha, "trials": trials, "seed": seed, "tcal": adaptive,
                "variables": variables, "loess_span": loess_span, "correct_from": correct_from,
                "engine": engine_name, "where": where}
    methods = (["tcal"] if adaptive else []) + ["hl", "spiegelhalter", "cox"]
    if engine_name != "memory":
        from calcheck.streaming.engine import StreamSource

        source = StreamSource(file, engine_name, score_col, label_col, pos_label, where,
                              batch_rows, drop_invalid, scheduler,
                              tuple(probs) if probs else None, renormalize)
        rep, figs = _report_stream(source, methods, TestOptions(alpha=alpha, trials=trials,
                                                                seed=seed),
                                   settings, variables, loess_span, correct_from, quiet)
        _write_report(output, kind, rep, figs)
        note(f"wrote {output}", quiet=quiet)
        return
    src = open_source(file, input_format)
    multiclass = input_kind(src, score=score_col, probs=probs) == "multiclass"
    data, loaded, info = _load_any(src, multiclass, score_col, label_col, pos_label, probs,
                                   renormalize, drop_invalid, quiet, variables,
                                   [correct_from] if correct_from else [], where=where)
    opts = MetricOptions(bins=15 if multiclass else 10, alpha=alpha)
    metrics = engine.compute(data, list(_default_ids(multiclass)), opts)
    if multiclass:
        top = MulticlassPrepared(data.probs, data.labels).top
        s, y = top.scores, top.labels
    else:
        s, y = data.scores, data.labels
    progress = _Progress("simulating the null") if sys.stderr.isatty() else None
    try:
        tests, notes = run_tests(s, y, methods, TestOptions(alpha=alpha, trials=trials,
                                                           seed=seed), progress=progress)
    finally:
        if progress is not None:
            progress.close()
    var_result = None
    if variables:
        incorrect = (_incorrect_from(loaded, data, correct_from, multiclass, pos_label, src.name)
                     if correct_from else None)
        var_result = engine.variables(data, {v: loaded.extras[v] for v in variables},
                                      span=loess_span, incorrect=incorrect)
    settings["input"] = "multiclass" if multiclass else "binary"
    rep = build_report(command="report", input_info=info, settings=settings, metrics=metrics,
                       tests=tests, notes=notes,
                       variables=var_result.to_dict() if var_result else None)
    def draw(kind: str, binning: str) -> Any:
        return _figure(kind, data, loaded, None, bins=10, binning=binning, yscale="auto",
                       span=loess_span, correct_from=correct_from, multiclass=multiclass,
                       pos_label=pos_label, source=src.name)

    figs = [(caption, draw(k, binning)) for k, binning, caption in FIGURE_CAPTIONS]
    for v in variables:
        assert var_result is not None
        figs.append((f"Variable-based calibration along {v}",
                     plots.variable_figure(var_result.to_dict()[v], loaded.extras[v], v)))
    _write_report(output, kind, rep, figs)
    note(f"wrote {output}", quiet=quiet)


FIGURE_CAPTIONS = (("tce", "uniform", "Test-based reliability diagram (TCE, PAVA-BC bins)"),
                   ("reliability", "uniform", "Reliability diagram, 10 equal-width bins (ECE)"),
                   ("reliability", "quantile", "Reliability diagram, 10 equal-mass bins (ACE)"))


def _write_report(output: str, kind: str, rep: dict[str, Any], figs: list[tuple[str, Any]],
                  ) -> None:
    from calcheck import plots
    from calcheck.io import atomic_write

    if kind == "pdf":
        _write_pdf(output, [f for _, f in figs])
    else:
        from calcheck.html_report import render_html

        atomic_write(output, render_html(rep, [(cap, plots.to_png_bytes(f)) for cap, f in figs]))


def _report_stream(source: Any, methods: list[str], test_opts: Any, settings: dict[str, Any],
                   variables: list[str], span: float, correct_from: str | None,
                   quiet: bool) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """``report --engine stream|dask``: the report and its figures from passes over the
    files (the streamed ``score`` default set, ``test``'s methods and ``plot``'s figures)."""
    from calcheck.metrics import MetricOptions
    from calcheck.report import build_report
    from calcheck.streaming.classwise import ClasswiseSpec
    from calcheck.streaming.engine import StateSpec
    from calcheck.streaming.figures import stream_spread

    classes = source.plan.prob_columns
    opts = MetricOptions(bins=15 if classes else 10, alpha=test_opts.alpha)
    ids, binary_of = _stream_metric_ids(None, [], multiclass=bool(classes))
    spec = StateSpec(bins=opts.bins, log_loss="log_loss" in binary_of.values())
    first, stats = source.run(ClasswiseSpec(len(classes), opts.bins, top=spec) if classes
                              else spec)
    state = first.top if classes else first
    if state.n == 0:
        raise InputError("no rows to report on (after the --where filter and dropped rows)")
    info, dropped = _stream_input(source.path, state, stats, source.plan)
    if dropped:
        note(dropped, quiet=quiet)
    metrics, _, _, _ = _stream_metric_results(source, first, ids, binary_of, opts, quiet=quiet)
    tests, notes, _ = _stream_tests(source, methods, test_opts)
    left = [m for m in _default_ids(bool(classes)) if m not in ids]
    if left:
        notes.append(f"{', '.join(left)} not computed on --engine {source.engine} (the "
                     "probabilistic count needs every distinct score; --engine memory has it)")
    var_result = None
    if variables:
        var_result, var_notes, _ = _stream_variables(source, variables, span, correct_from,
                                                     binary=not classes)
        notes += var_notes
    settings = {**settings, "input": "multiclass" if classes else "binary",
                "batch_rows": source.batch_rows, "scheduler": source.scheduler}
    rep = build_report(command="report", input_info=info, settings=settings, metrics=metrics,
                       tests=tests, notes=notes,
                       variables=var_result.to_dict() if var_result else None)
    # one grid state (the metrics' when it has the figures' 10 bins) and one spread serve the
    # three figures
    fig_state = state if state.bins == 10 else source.run(StateSpec(bins=10, log_loss=False))[0]
    spread = stream_spread(source)
    figs = []
    for kind, binning, caption in FIGURE_CAPTIONS:
        figs.append((caption, _figure_stream(kind, source, None, bins=10, binning=binning,
                                             yscale="auto", span=span, correct_from=correct_from,
                                             state=fig_state, spread=spread)[0]))
    for v in variables:
        assert var_result is not None
        figs.append((f"Variable-based calibration along {v}",
                     _variable_figure_stream(source, var_result.to_dict()[v], v)))
    return rep, figs


def _default_ids(multiclass: bool) -> tuple[str, ...]:
    from calcheck.metrics import DEFAULT_METRICS, DEFAULT_MULTICLASS_METRICS

    return DEFAULT_MULTICLASS_METRICS if multiclass else DEFAULT_METRICS


def _write_pdf(path: str, figs: list[Any]) -> None:
    """Figures as the pages of one PDF, written atomically."""
    from pathlib import Path

    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with PdfPages(tmp) as pdf:
            for f in figs:
                pdf.savefig(f)
                plt.close(f)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code (the one place that maps exceptions to codes)."""
    try:
        rv = app(args=argv, prog_name="calcheck", standalone_mode=False)
        return int(rv) if isinstance(rv, int) else int(ExitCode.OK)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("calcheck: interrupted\n")
        return int(ExitCode.INTERRUPTED)
    except _USAGE_ERRORS as exc:
        sys.stderr.write(f"calcheck: error: {exc.format_message()} (see calcheck --help)\n")
        return int(ExitCode.USAGE_OR_INPUT)
    except CalcheckError as exc:
        sys.stderr.write(f"calcheck: error: {exc}\n")
        return int(ExitCode.USAGE_OR_INPUT)
    except KeyboardInterrupt:
        sys.stderr.write("calcheck: interrupted\n")
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        return int(ExitCode.OK)
    except Exception as exc:
        if os.environ.get("CALCHECK_TRACEBACK"):
            raise
        sys.stderr.write(f"calcheck: internal error: {type(exc).__name__}: {exc} "
                         "(please report it; set CALCHECK_TRACEBACK=1 for details)\n")
        return int(ExitCode.INTERNAL)


def main() -> None:
    """Console-script entry point."""
    sys.exit(run())
