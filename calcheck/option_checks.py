"""A run's options from what the user gave (:func:`parse`: each option checked alone, by the
option table of :mod:`calcheck.options`), then the checks that involve several of them
(:func:`cross_checks`), before any input is read: options that exclude each other, options an
engine or command cannot honour, and options that would be silently ignored in their
combination (:func:`meaningless`).  Messages name the keyword in the API and the flag on the
command line (``Options.name_of``)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from calcheck import registry
from calcheck.errors import UsageError
from calcheck.options import COMMANDS, Options

# what the printed output of ``score``/``test`` options becomes in Python: the API returns a
# Report and prints nothing, so these keywords are refused with the way to do the same
# (``plot=True`` is kept: the Report's table rendering then carries the text diagram)
DISPLAY_ONLY = {
    "output": "write the report with report.save(path) (format from the extension)",
    "format": "render it with report.render('json' | 'csv' | 'markdown' | 'table')",
    "json": "take report.to_dict() or report.to_json()",
    "quiet": "the API prints nothing; notes are in report.notes",
    "no_progress": "the API draws no progress bar",
    "details": "render with report.render('table', details=True)",
}


def parse(command: str, values: Mapping[str, Any], *, style: str = "python",
          required: bool = True) -> Options:
    """Validate ``values`` (keyword → value; None means "not given") for ``command``.

    Unknown keywords are a :class:`UsageError` naming the closest known one; ``required=False``
    waives the required options (the API's ``plot`` returns the figure instead of writing it).
    """
    opts_of = COMMANDS[command]
    table = {(o.kw if style == "python" else o.name): o for o in opts_of}
    known = list(table)
    kwargs: dict[str, Any] = {}
    given = []
    for name, value in values.items():
        opt = table.get(name)
        if style == "python" and command in ("score", "test", "compare", "audit",
                                             "monitor") and \
                name in DISPLAY_ONLY:
            raise UsageError(f"{command}() does not take {name}= (a command-line display "
                             f"option): {DISPLAY_ONLY[name]}")
        if opt is None:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"{command}() got an unknown option {name!r}{hint}; options: "
                             f"{', '.join(known)}")
        if value is None or (opt.type == "list" and isinstance(value, (list, tuple))
                             and not value):
            continue
        name = opt.name
        kwargs[name] = opt.check(value, opt.label(style)) if opt.check else value
        if opt.type != "bool" or kwargs[name] != opt.default:     # a toggle typed is given
            given.append(name)
    for opt in opts_of:
        if required and opt.required and opt.name not in kwargs:
            what = opt.help.removeprefix("Required: ")
            if style == "cli":
                raise UsageError(f"{command} needs {'/'.join(reversed(opt.flags))} "
                                 f"{opt.metavar or ''}: {what}")
            raise UsageError(f"{opt.kw}= is required: {what}")
        if opt.name not in kwargs and opt.default is not None:
            kwargs[opt.name] = opt.default
    if command == "plot" and ("by" in given or "weight" in given) and "kind" not in given:
        # the groups' overlay is a reliability diagram; sampling weights have no test-based
        # one (TCE counts predictions), so their default figure is the reliability diagram
        kwargs["kind"] = "reliability"
    opts = Options(command=command, given=frozenset(given), style=style, **kwargs)
    cross_checks(opts)
    return opts


def cross_checks(o: Options) -> None:
    """Checks that involve several options, before any input is read."""
    lab = o.name_of
    if o.probs and o.score:
        raise UsageError(f"{lab('score')} (one binary score column) and {lab('probs')} (the "
                         "class-probability columns of multiclass input) exclude each other; "
                         "give one")
    if o.json and o.format not in (None, "json"):
        raise UsageError(f"{lab('json')} conflicts with {lab('format')} {o.format}")
    if o.tce_nmin is not None and o.tce_nmax is not None and o.tce_nmax < o.tce_nmin:
        raise UsageError(f"{lab('tce_nmax')} ({o.tce_nmax}) must be >= {lab('tce_nmin')} "
                         f"({o.tce_nmin})")
    if o.command == "test" and o.bins is not None and o.adaptive:
        raise UsageError(f"{lab('bins')} (T-Cal with fixed m) and {lab('adaptive')} exclude "
                         "each other")
    if o.fail_if_beyond and not o.tolerance:
        raise UsageError(f"{lab('fail_if_beyond')} gates on the {lab('tolerance')} verdict; "
                         f"give {lab('tolerance')} METRIC:VALUE too")
    if o.gate_groups and not (o.by and o.fail_if):
        raise UsageError(f"{lab('gate_groups')} applies the {lab('fail_if')} gates to each "
                         f"{lab('by')} group; give both")
    if o.command == "score" and o.correct_from and not o.variables:
        raise UsageError(f"{lab('correct_from')} sets the correctness behind {lab('variables')}; "
                         f"give {lab('variables')} COLUMN too")
    if (o.time is None) != (o.window is None):
        raise UsageError(f"{lab('time')} COLUMN and {lab('window')} LENGTH go together (the "
                         "metrics per time window); give both")
    if o.time and o.by:
        raise UsageError(f"{lab('time')} and {lab('by')} exclude each other: one grouping per "
                         "run")
    if o.weight and o.count:
        raise UsageError(f"{lab('weight')} (sampling weights) and {lab('count')} (counts of "
                         "identical rows) are two meanings of a row weight; give one")
    if o.weighting:
        _weighting_checks(o)
    if o.scheduler and o.engine != "dask":
        raise UsageError(f"{lab('scheduler')} applies to {lab('engine')} dask only")
    if o.engine != "memory" and o.input_format not in (None, "parquet"):
        raise UsageError(f"{lab('engine')} {o.engine} reads Parquet only; {lab('input_format')} "
                         f"{o.input_format} needs {lab('engine')} memory")
    if o.engine != "memory" and o.compat:
        raise UsageError(f"{lab('compat')} {o.compat} (that library's conventions) needs "
                         f"{lab('engine')} memory")
    if o.command == "report" and o.output is not None:
        ext = o.output.lower().rsplit(".", 1)[-1] if "." in o.output else ""
        kind = o.format or ("pdf" if ext == "pdf" else "html")
        if ext not in ("html", "htm", "pdf") or (kind == "pdf") != (ext == "pdf"):
            raise UsageError(f"{lab('output')} {o.output}: a report is written as .html (or "
                             ".htm) or .pdf; name the file with one of those extensions")
    if o.command == "plot":
        _plot_checks(o)
    meaningless(o)


def _weighting_checks(o: Options) -> None:
    """What ``--weight`` / ``--count`` do not combine with in this version."""
    assert o.weighting is not None
    lab = o.name_of
    flag = lab(o.weighting[1])
    if o.weighting[1] == "weight" and (o.command == "audit" or o.audit):
        raise UsageError(f"{flag}: the audit's null redraws every row's label as Bernoulli(s) "
                         "and its walks step row by row; sampling weights have no form of "
                         f"either here (aggregated rows take {lab('count')}; score --by gives "
                         "weighted metrics per group)")
    if o.command == "monitor" and o.weighting[1] == "weight":
        raise UsageError(f"{flag}: the monitor's e-process multiplies one likelihood ratio "
                         "per row, whose mean is 1 under calibration; a sampling weight as a "
                         "power breaks that (a weighted product is no test martingale), so "
                         "there is no anytime-valid weighted form here. Aggregated rows take "
                         f"{lab('count')}; score --time --window gives weighted metrics per "
                         "window (docs/weights.md)")
    if o.compat and o.command == "test":
        raise UsageError(f"{flag}: {lab('compat')} {o.compat}'s tests take no row weights; "
                         "run the weighted tests without --compat")
    drawn = ("reliability", "variable", "corp", "drift", "tce", "monitor") \
        if o.weighting[1] == "count" else ("reliability", "variable", "corp", "drift")
    if o.command == "plot" and o.kind not in drawn:
        why = ("TCE takes counts, not weights" if o.kind == "tce" else
               "the monitor's e-process takes counts, not weights (calcheck monitor says why)"
               if o.kind == "monitor" else "not drawn from weighted rows in this version")
        raise UsageError(f"{flag}: {lab('kind')} {o.kind}: {why}; {lab('kind')} "
                         f"{', '.join(drawn)} {'are' if len(drawn) > 1 else 'is'}")
    if o.command == "test" and o.resample != "labels":
        raise UsageError(f"{flag}: T-Cal's {lab('resample')} {o.resample} redraws unweighted "
                         f"rows; weighted rows use {lab('resample')} labels")


def _plot_checks(o: Options) -> None:
    """The combinations of ``calcheck plot``'s options."""
    lab = o.name_of
    if o.per_class and (o.kind != "reliability" or o.engine != "memory"):
        raise UsageError(f"{lab('per_class')} draws the per-class reliability diagrams: "
                         f"{lab('kind')} reliability on {lab('engine')} memory")
    if o.kind == "corp" and o.engine != "memory" and not o.weighting:   # (weighted rows:
        raise UsageError(f"{lab('kind')} corp needs {lab('engine')} memory (the PAV fit and "
                         "its consistency band use every distinct score)")  # held draw it)
    if o.by and o.kind != "reliability":
        raise UsageError(f"{lab('by')} overlays the groups' reliability diagrams: use it "
                         f"with {lab('kind')} reliability")
    if o.by and o.per_class:
        raise UsageError(f"{lab('by')} and {lab('per_class')} exclude each other")
    if o.kind in ("drift", "monitor") and not o.time:
        raise UsageError(f"{lab('kind')} {o.kind} draws over time: give "
                         f"{lab('time')} COLUMN and {lab('window')} LENGTH")
    if o.kind not in ("drift", "monitor") and o.time:
        raise UsageError(f"{lab('time')} and {lab('window')} apply to {lab('kind')} drift "
                         "or monitor")
    if o.kind != "drift" and o.metrics:
        raise UsageError(f"{lab('metrics')} applies to {lab('kind')} drift")
    if o.metrics and len(registry.split_ids(o.metrics)) != 1:
        raise UsageError(f"{lab('metrics')}: {lab('kind')} drift draws one metric")
    if o.kind == "variable" and not o.variables:
        raise UsageError(f"{lab('kind')} variable needs {lab('variables')} COLUMN")
    if o.variables and len(o.variables) > 1:
        raise UsageError(f"{lab('variables')}: a plot draws one variable, got "
                         f"{len(o.variables)}")
    if o.output is not None and not o.output.lower().endswith((".png", ".svg", ".pdf")):
        raise UsageError(f"{lab('output')} {o.output}: the image format comes from the "
                         "extension: .png, .svg or .pdf")


def meaningless(o: Options) -> None:
    """Options that would be silently ignored in this combination are refused."""
    lab = o.name_of
    given = o.given

    def needs(names: tuple[str, ...], cond: bool, what: str) -> None:
        for name in names:
            if name in given and not cond:
                raise UsageError(f"{lab(name)} has no effect without {what}")

    if o.command in ("score", "report", "test"):
        if o.command != "test":
            needs(("ci_reps", "ci_level"), o.ci, lab("ci"))
        needs(("min_group_size", "max_groups"), o.by is not None or o.time is not None,
              f"{lab('by')} COLUMN" + (f" or {lab('time')} COLUMN" if o.command != "report"
                                      else ""))
    if o.command == "test":
        needs(("tz",), o.window is not None, f"{lab('window')}")
    if o.command == "score":
        needs(("tz",), o.window is not None, f"{lab('window')}")
        needs(("family",), o.by is not None or o.time is not None,
              f"{lab('by')} COLUMN or {lab('time')} COLUMN (it adjusts their verdicts)")
        needs(("loess_span",), bool(o.variables), f"{lab('variables')} COLUMN")
        chosen = registry.split_ids(o.metrics or [])
        needs(("smece_sigma",), any(m in ("all", "smece", "smece_cw") for m in chosen),
              f"{lab('metrics')} smece (or smece_cw)")
        needs(("skce_bandwidth",), any(m in ("all", "skce") for m in chosen),
              f"{lab('metrics')} skce")
    if o.command == "test":
        methods = registry.split_ids(o.methods or [])
        every = "all" in methods
        needs(("hl_df",), every or "hl" in methods, f"{lab('methods')} hl")
        needs(("adaptive_grid", "adaptive_correction"), o.bins is None,
              f"adaptive T-Cal (they set its levels; {lab('bins')} fixes m)")
    if o.command == "report":
        needs(("buckets", "depth", "min_size", "max_segments"), bool(o.audit),
              f"{lab('audit')} COLUMN")
    if o.command in ("score", "test", "report", "plot", "audit", "monitor"):
        needs(("max_dropped",), o.drop_invalid, lab("drop_invalid"))
    if o.command in ("score", "test", "report", "plot", "compare"):
        needs(("weight_null",), bool(o.weight), f"{lab('weight')} COLUMN (counts are exact "
              "either way)")
    if o.command == "report":
        needs(("paper",), (o.format or "") == "pdf" or (o.output or "").lower().endswith(
            ".pdf"), "a PDF report (.pdf)")
    if o.command == "plot":
        needs(("band_level", "band_reps"), o.kind == "corp", f"{lab('kind')} corp")
        needs(("ci_reps", "ci_level"), o.kind == "drift", f"{lab('kind')} drift")
