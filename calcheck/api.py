"""The report API: what the command line prints, from Python.

>>> import calcheck                                                     # doctest: +SKIP
>>> r = calcheck.score("preds.parquet", metrics=["ece", "ace"], bins=15)  # doctest: +SKIP
>>> r.value("ece"), r.to_dict()["metrics"]["ace"]["bins"]                # doctest: +SKIP
>>> calcheck.score(scores=p, labels=y, ci=True)                          # doctest: +SKIP

:func:`score` and :func:`run_tests` take a **source** — a path (a CSV or Parquet file, a
directory of Parquet parts, or ``"-"`` for stdin), a pandas or polars DataFrame, a pyarrow
Table, or :class:`~calcheck.data.Predictions` — or the arrays themselves (``scores=`` or
``probs=`` with ``labels=``), and the options of the matching command as keyword-only
arguments named exactly like its long options (``metrics=``, ``bins=``, ``by=``, ``var=`` for
``--var``, ``method=`` for ``--method``, ``ci=True``, ``engine="stream"``…).  The names of
0.4 (``variables=``, ``methods=``) still work until 0.6, with a DeprecationWarning.  They
return a :class:`~calcheck.report.Report` whose ``to_dict()`` is what ``--json`` prints for
the same options.  :func:`figure` returns a matplotlib figure (or draws into ``ax=``) and
:func:`write_report` the report behind the self-contained HTML (or PDF) file it writes.

Validation errors name the keyword (``bins must be an integer >= 1``); the command line, which
runs the same functions, names the flag.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from numpy.typing import ArrayLike

from calcheck import registry
from calcheck._quiet import quiet
from calcheck.data import Predictions
from calcheck.engines import Progress, capabilities, open_engine
from calcheck.engines.base import Engine, Outcome
from calcheck.errors import TooFewRows, UsageError
from calcheck.figures import require_matplotlib
from calcheck.options import COMMANDS, DEFAULT_BATCH_ROWS, Options, parse
from calcheck.report.build import build_report, group_names, settings_of
from calcheck.report.model import Report

__all__ = ["compare", "figure", "run_tests", "score", "write_report"]


FIGURES = (("tce", "uniform", "Test-based reliability diagram (TCE, PAVA-BC bins)"),
           ("reliability", "uniform", "Reliability diagram, equal-width bins (ECE)"),
           ("reliability", "quantile", "Reliability diagram, equal-mass bins (ACE)"))


# ---------------------------------------------------------------------------------------------
# public functions: keyword-only parameters named like the command's long options

F = TypeVar("F", bound=Callable[..., Any])
# 0.4's keywords that differ from the long option: accepted until 0.6, with a warning
LEGACY = {"variables": "var", "methods": "method"}


def _keywords(fn: F) -> F:
    """Accept :data:`LEGACY` keywords under their new names, with a DeprecationWarning; an
    unknown keyword is a UsageError naming the closest known one (a display option of the
    command line, how to do the same)."""
    import difflib

    from calcheck.options import DISPLAY_ONLY

    known = list(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for name in kwargs:
            if name in known or name in LEGACY:
                continue
            if name in DISPLAY_ONLY:
                raise UsageError(f"{fn.__name__}() does not take {name}= (a command-line display "
                                 f"option): {DISPLAY_ONLY[name]}")
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"{fn.__name__}() got an unknown option {name!r}{hint}; options: "
                             f"{', '.join(k for k in known if k != 'source')}")
        for old, new in LEGACY.items():
            if old in kwargs:
                if new in kwargs:
                    raise UsageError(f"give {new}= only ({old}= is its deprecated name)")
                warnings.warn(f"calcheck.{fn.__name__}({old}=...) is deprecated and will be "
                              f"removed in 0.6: use {new}= (the command line's --{new})",
                              DeprecationWarning, stacklevel=2)
                kwargs[new] = kwargs.pop(old)
        return fn(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


def _given(command: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The options a caller set: None and a scalar equal to the option's default are "not
    given" (so ``ci_reps=1000`` without ``ci`` is no error, as on the command line)."""
    table = {o.kw: o for o in COMMANDS[command]}
    out = {}
    for k, v in values.items():
        if v is None:
            continue
        d = table[k].default
        if table[k].type != "toggle" and isinstance(v, (bool, int, float, str)) and \
                type(v) is type(d) and v == d:
            continue
        out[k] = v
    return out


def _is_array(v: Any) -> bool:
    """Data rather than column names: an array, or a sequence whose items are not text."""
    if v is None or isinstance(v, (str, bytes, os.PathLike)):
        return False
    if hasattr(v, "__array__"):
        return True
    if isinstance(v, Sequence):
        return len(v) > 0 and not isinstance(v[0], str)
    return False


def _inputs(command: str, values: Mapping[str, Any], *,
            required: bool = True) -> tuple[Any, Options]:
    """The source and the parsed options of one API call (``values``: its ``locals()``).
    ``scores=``/``probs=`` arrays with ``labels=`` become :class:`Predictions`; then ``by=``,
    ``correct_from=``, ``time=`` and ``var=`` may be arrays (or ``var={name: array}``)."""
    values = dict(values)
    source, scores, labels = values.pop("source"), values.pop("scores"), values.pop("labels")
    values.pop("ax", None)
    probs = values.get("probs")
    columns: dict[str, Any] = {}
    if scores is not None or labels is not None or _is_array(probs):
        if source is not None:
            raise UsageError(f"{command}(): give a source (a file, a DataFrame, …) or arrays "
                             "(scores= or probs=, with labels=), not both")
        if labels is None:
            raise UsageError(f"{command}(): labels= is required with scores= or probs=")
        if (scores is None) == (not _is_array(probs)):
            raise UsageError(f"{command}(): give scores= (binary: an array of n probabilities) "
                             "or probs= (multiclass: an n × K array), not both")
        for key, name in (("by", "group"), ("correct_from", "correct_from"), ("time", "time")):
            if _is_array(values.get(key)):
                columns[name], values[key] = values[key], name
        for key in ("segment", "audit"):
            named = values.get(key)
            if isinstance(named, Mapping):
                columns.update({str(k): a for k, a in named.items()})
                values[key] = [str(k) for k in named]
        var = values.get("var")
        if isinstance(var, Mapping):
            columns.update({str(k): a for k, a in var.items()})
            values["var"] = [str(k) for k in var]
        elif _is_array(var):
            columns["var"], values["var"] = var, "var"
        values.pop("probs")
        source = Predictions(scores=scores, probs=None if scores is not None else probs,
                             labels=labels, columns=columns)
    elif source is None:
        raise UsageError(f"{command}(): give a source (a CSV or Parquet file, a directory, a "
                         "DataFrame, a pyarrow Table, Predictions) or arrays: scores= (or "
                         "probs=) with labels=")
    else:
        for key in ("by", "correct_from", "time", "var", "segment"):
            if _is_array(values.get(key)) or isinstance(values.get(key), Mapping):
                raise UsageError(f"{key}= names a column of the source; arrays are for input "
                                 "given as arrays (scores= or probs= with labels=)")
    return source, parse(command, _given(command, values), style="python", required=required)



@_keywords
@quiet
def score(
        source: Any = None,
        *,
        scores: ArrayLike | None = None,
        labels: ArrayLike | None = None,
        score: str | None = None,
        label: str | None = None,
        pos_label: str | None = None,
        probs: str | Sequence[str] | ArrayLike | None = None,
        renormalize: bool = False,
        input_format: str | None = None,
        drop_invalid: bool = False,
        max_dropped: float = 0.5,
        where: str | None = None,
        ties: str = "share",
        metrics: str | Sequence[str] | None = None,
        bins: int | None = None,
        alpha: float = 0.05,
        test: str = "binomial",
        tce_nmin: int | None = None,
        tce_nmax: int | None = None,
        tace_threshold: float = 0.01,
        smece_sigma: float | None = None,
        skce_bandwidth: float | None = None,
        compat: str | None = None,
        var: str | Sequence[str] | Mapping[str, ArrayLike] | None = None,
        loess_span: float = 0.75,
        correct_from: str | ArrayLike | None = None,
        by: str | ArrayLike | None = None,
        max_groups: int = 1000,
        min_group_size: int = 100,
        time: str | ArrayLike | None = None,
        window: str | None = None,
        tz: str = "UTC",
        family: str = "holm",
        ci: bool = False,
        ci_reps: int = 1000,
        ci_level: float = 0.95,
        seed: int = 0,
        fail_if: str | Sequence[str] | None = None,
        gate_groups: bool = False,
        tolerance: str | Sequence[str] | None = None,
        fail_if_beyond: bool = False,
        bins_table: str | Sequence[str] | None = None,
        per_class: bool = False,
        plot: bool = False,
        engine: str = "memory",
        scheduler: str | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Report:
    """Calibration metrics side by side — ``calcheck score`` as a function.

    ``source`` is a CSV or Parquet file, a directory of Parquet parts, ``"-"`` (stdin), a
    pandas or polars DataFrame, a pyarrow Table or :class:`calcheck.Predictions`; or give the
    arrays themselves: ``scores=`` (binary) or ``probs=`` (an n × K array), with ``labels=``.
    Every keyword is the command's long option (``--ci-reps`` → ``ci_reps``).  The returned
    :class:`Report`'s ``to_dict()`` equals ``calcheck score ... --json`` for the same options.
    """
    return run_score(*_inputs("score", locals()))


@_keywords
@quiet
def run_tests(
        source: Any = None,
        *,
        scores: ArrayLike | None = None,
        labels: ArrayLike | None = None,
        score: str | None = None,
        label: str | None = None,
        pos_label: str | None = None,
        probs: str | Sequence[str] | ArrayLike | None = None,
        renormalize: bool = False,
        input_format: str | None = None,
        drop_invalid: bool = False,
        max_dropped: float = 0.5,
        where: str | None = None,
        ties: str = "share",
        method: str | Sequence[str] | None = None,
        bins: int | None = None,
        adaptive: bool = False,
        trials: int = 1000,
        resample: str = "labels",
        adaptive_grid: str = "bounded",
        adaptive_correction: str = "minp",
        hl_df: str = "external",
        skce_bandwidth: float | None = None,
        ci_level: float = 0.95,
        seed: int = 0,
        alpha: float = 0.05,
        discrete_max: int = 50,
        compat: str | None = None,
        family: str = "holm",
        fail_on_reject: bool = False,
        tolerance: str | Sequence[str] | None = None,
        fail_if_beyond: bool = False,
        by: str | ArrayLike | None = None,
        max_groups: int = 1000,
        min_group_size: int = 100,
        time: str | ArrayLike | None = None,
        window: str | None = None,
        tz: str = "UTC",
        engine: str = "memory",
        scheduler: str | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Report:
    """Calibration tests — ``calcheck test`` as a function.

    Input as for :func:`score` (multiclass input is tested on its top-label view).  The
    returned :class:`Report`'s ``tests`` hold each test's statistic, p-value and verdict;
    ``to_dict()`` equals ``calcheck test ... --json``.
    """
    return run_test(*_inputs("test", locals()))


@_keywords
@quiet
def figure(
        source: Any = None,
        *,
        scores: ArrayLike | None = None,
        labels: ArrayLike | None = None,
        ax: Any = None,
        score: str | None = None,
        label: str | None = None,
        pos_label: str | None = None,
        probs: str | Sequence[str] | ArrayLike | None = None,
        renormalize: bool = False,
        input_format: str | None = None,
        drop_invalid: bool = False,
        max_dropped: float = 0.5,
        where: str | None = None,
        ties: str = "share",
        kind: str = "tce",
        output: str | None = None,
        var: str | Sequence[str] | Mapping[str, ArrayLike] | None = None,
        by: str | ArrayLike | None = None,
        bins: int | None = None,
        binning: str = "uniform",
        yscale: str = "auto",
        loess_span: float = 0.75,
        correct_from: str | ArrayLike | None = None,
        band_level: float = 0.9,
        band_reps: int = 200,
        metrics: str | Sequence[str] | None = None,
        time: str | ArrayLike | None = None,
        window: str | None = None,
        tz: str = "UTC",
        ci_reps: int = 1000,
        ci_level: float = 0.95,
        seed: int = 0,
        per_class: bool = False,
        engine: str = "memory",
        scheduler: str | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Any:
    """A figure — ``calcheck plot`` as a function.

    ``kind`` is ``"tce"`` (the test-based reliability diagram), ``"reliability"`` (``bins=``,
    ``binning=``; ``by=`` overlays the groups with a legend), ``"corp"``, ``"variable"``
    (``var="age"``) or ``"drift"``.  Input as for :func:`score`.  Returns the matplotlib
    Figure, or, with ``ax=``, draws the diagram's main panel into that Axes and returns it
    (matplotlib's convention).  With ``output=`` the figure is also saved (.png, .svg, .pdf).
    """
    src, opts = _inputs("plot", locals(), required=False)
    if ax is not None and not (hasattr(ax, "figure") and hasattr(ax, "plot")):
        raise UsageError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
    if ax is not None and opts.per_class:
        raise UsageError("per_class=True draws one panel per class: it makes its own figure "
                         "(leave out ax=)")
    fig = run_figure(src, opts, ax=ax).values["figure"]
    if opts.output:
        save_figure(fig.figure if ax is not None else fig, opts.output)
    return fig


@_keywords
@quiet
def write_report(
        source: Any = None,
        output: str | os.PathLike[str] | None = None,
        *,
        scores: ArrayLike | None = None,
        labels: ArrayLike | None = None,
        score: str | None = None,
        label: str | None = None,
        pos_label: str | None = None,
        probs: str | Sequence[str] | ArrayLike | None = None,
        renormalize: bool = False,
        input_format: str | None = None,
        drop_invalid: bool = False,
        max_dropped: float = 0.5,
        where: str | None = None,
        ties: str = "share",
        metrics: str | Sequence[str] | None = None,
        bins: int | None = None,
        var: str | Sequence[str] | Mapping[str, ArrayLike] | None = None,
        by: str | ArrayLike | None = None,
        max_groups: int = 1000,
        min_group_size: int = 100,
        ci: bool | None = None,
        ci_reps: int = 1000,
        ci_level: float = 0.95,
        adaptive: bool | None = None,
        trials: int = 1000,
        seed: int = 0,
        alpha: float = 0.05,
        family: str = "holm",
        tolerance: str | Sequence[str] | None = None,
        format: str | None = None,
        paper: str = "a4",
        loess_span: float = 0.75,
        correct_from: str | ArrayLike | None = None,
        band_level: float = 0.9,
        band_reps: int = 200,
        audit: str | Sequence[str] | Mapping[str, ArrayLike] | None = None,
        buckets: int = 4,
        depth: int = 2,
        min_size: int = 200,
        max_segments: int = 1000,
        engine: str = "memory",
        scheduler: str | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Report:
    """The self-contained HTML (or PDF) report — ``calcheck report`` as a function.

    Input as for :func:`score`.  Writes ``output`` (.html, or .pdf on ``paper="a4"`` or
    ``"letter"`` pages) and returns the :class:`Report` behind it (its figures included).
    """
    src, opts = _inputs("report", locals())
    rep = run_report(src, opts)
    save_report_file(rep, opts)
    return rep


@_keywords
@quiet
def compare(
        old: Any,
        new: Any = None,
        *,
        score: str | Sequence[str] | None = None,
        label: str | None = None,
        pos_label: str | None = None,
        probs: str | Sequence[str] | None = None,
        renormalize: bool = False,
        input_format: str | None = None,
        where: str | None = None,
        ties: str = "share",
        id: str | None = None,
        metrics: str | Sequence[str] | None = None,
        bins: int | None = None,
        alpha: float = 0.05,
        test: str = "binomial",
        tce_nmin: int | None = None,
        tce_nmax: int | None = None,
        tace_threshold: float = 0.01,
        smece_sigma: float | None = None,
        by: str | None = None,
        max_groups: int = 1000,
        min_group_size: int = 100,
        ci_reps: int = 1000,
        ci_level: float = 0.95,
        seed: int = 0,
        family: str = "holm",
        fail_if_worse: str | Sequence[str] | None = None,
        engine: str = "memory",
        scheduler: str | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Report:
    """Compare two models' calibration on the same rows — ``calcheck compare`` as a function.

    ``old`` and ``new`` are two sources (paths, DataFrames, pyarrow Tables) of the same
    examples, matched by ``id=`` (else by position); or give one source and name the two
    models' columns with ``score=["a", "b"]`` (binary) or ``probs=["p_*", "q_*"]``.  Returns
    the comparison :class:`Report`: ``to_dict()["metrics"]["ece"]`` has ``old``, ``new``,
    ``delta``, ``ci`` and ``verdict``; ``exit_code`` is 1 when a ``fail_if_worse`` gate
    failed."""
    values = {k: v for k, v in locals().items() if k not in ("old", "new")}
    opts = parse("compare", _given("compare", values), style="python")
    return run_compare([old] if new is None else [old, new], opts)

# what help() shows under "Parameters": each keyword's type, default and help, from the same
# table as the command line's --help (so the two cannot drift apart)
API_ONLY = {
    "source": ("str, path, DataFrame, pyarrow.Table or Predictions, optional",
               "The predictions: a CSV or Parquet file, a directory of Parquet parts, \"-\" "
               "(stdin), a pandas or polars DataFrame, a pyarrow Table or calcheck.Predictions."),
    "scores": ("array_like of shape (n,), optional",
               "Binary input given as arrays: the predicted probabilities of the positive "
               "class (with labels=, instead of a source)."),
    "labels": ("array_like of shape (n,), optional",
               "The labels of scores= (0/1) or probs= (class indices 0..K-1)."),
    "ax": ("matplotlib Axes, optional",
           "Draw the diagram's main panel into this Axes and return it."),
    "output": ("str or path", "The file to write: .html or .pdf (figure: .png, .svg, .pdf)."),
    "old": ("source", "The reference model's predictions (as source= of score)."),
    "new": ("source, optional", "The candidate model's predictions on the same rows."),
}
ARRAY_NOTES = {"probs": " Or an (n, K) array of class probabilities, with labels=.",
               "by": " With array input, also an array of group values.",
               "var": " With array input, also an array or a {name: array} mapping.",
               "correct_from": " With array input, also an array.",
               "time": " With array input, also an array of timestamps."}


def _parameters_doc(fn: Callable[..., Any], command: str) -> str:
    table = {o.kw: o for o in COMMANDS[command]}
    out = ["", "    Parameters", "    ----------"]
    for name, par in inspect.signature(fn).parameters.items():
        if name in API_ONLY:
            kind, text = API_ONLY[name]
        else:
            o = table[name]
            kind = {"list": "str or list of str", "bool": "bool", "toggle": "bool",
                    "int": "int", "float": "float"}.get(o.type, "str")
            kind += f", default {par.default!r}" if par.default is not None else ", optional"
            text = f"{o.help} (command line: {o.flags[0]})"
            if command != "compare":
                text += ARRAY_NOTES.get(name, "")
        out.append(f"    {name} : {kind}")
        words, line = text.split(), "       "
        for w in words:
            if len(line) + len(w) > 95:
                out.append(line)
                line = "       "
            line += " " + w
        out.append(line)
    return "\n".join(out) + "\n"


for _fn, _cmd in ((score, "score"), (run_tests, "test"), (figure, "plot"),
                  (write_report, "report"), (compare, "compare")):
    _fn.__doc__ = (_fn.__doc__ or "").rstrip() + "\n" + _parameters_doc(_fn, _cmd)


def run_compare(sources: list[Any], opts: Options, *, progress: Progress | None = None) -> Report:
    from calcheck.comparison import run_compare as _run

    rep: Report = _run(sources, opts, progress=progress)
    return rep


# ---------------------------------------------------------------------------------------------
# engines


@contextlib.contextmanager
def _engine(source: Any, opts: Options, progress: Progress | None) -> Iterator[Engine]:
    with open_engine(source, opts, progress=progress) as eng:
        if eng.capabilities.rows:
            check_bins_against_rows(opts, eng.input_info().get("rows_used") or 0)
        yield eng


MIN_BIN_CEILING = 1000         # --bins up to this is always accepted (peers' conventions)


def check_bins_against_rows(opts: Options, n: int) -> None:
    """An explicit ``--bins`` larger than the rows is refused before any work: more bins than
    rows leaves bins empty (equal-mass ones by construction) and only costs memory."""
    most = max(n, MIN_BIN_CEILING)
    if "bins" in opts.given and opts.bins is not None and n and opts.bins > most:
        raise UsageError(f"{opts.name_of('bins')} {opts.bins:,}: at most {most:,} bins make "
                         f"sense for {n:,} rows (more bins than rows leaves them empty and only "
                         "costs memory)")


def _settings(eng: Engine) -> dict[str, Any]:
    return dict(getattr(eng, "settings", dict)())


# ---------------------------------------------------------------------------------------------
# score


def plan_metrics(opts: Options, multiclass: bool, engine: str) -> tuple[list[str], list[str],
                                                                          list[str]]:
    """The metric ids a ``score`` run computes, the ids whose bin tables it shows, and
    messages: ``metrics`` (default: the input kind's default set), plus the ``--fail-if`` and
    ``--bins-table`` metrics, plus ECE for ``--plot``.  On the streaming engines ``all`` is
    every id they compute; any other id they cannot compute is an error naming it."""
    from calcheck.metrics import resolve_metric_ids

    label = opts.name_of("metrics")
    caps = capabilities(engine)
    streamed = not caps.rows
    can = caps.metrics(multiclass)
    messages: list[str] = []
    if opts.compat:
        ids, can = compat_ids(opts, multiclass)
    elif opts.metrics is None:
        ids = registry.default_ids(multiclass)
        left = [m for m in ids if m not in can]
        ids = [m for m in ids if m in can]
        if left:
            messages.append(f"{', '.join(left)} not computed on --engine {engine} (memory "
                            "only)")
    else:
        ids = resolve_metric_ids(opts.metrics, multiclass=multiclass, name=label, allowed=can)
        if streamed and "all" in registry.split_ids(opts.metrics):
            left = [m for m in registry.selectable(multiclass) if m not in can]
            if left:
                messages.append(f"{label} all on --engine {engine}: every metric it computes; "
                                f"{', '.join(left)} need(s) --engine memory")

    def resolve(raw: str, name: str) -> list[str]:
        return resolve_metric_ids([raw], multiclass=multiclass, name=name)

    for g in opts.fail_if or []:
        from calcheck.gates import parse_gate

        ids += [m for m in resolve(parse_gate(g).metric, opts.name_of("fail_if")) if m not in ids]
    bins_for: list[str] = []
    for raw in opts.bins_table or []:
        everything = raw.strip().lower() == "all"
        for mid in (ids if everything else resolve(raw, opts.name_of("bins_table"))):
            if not registry.METRICS[mid].binned:
                if everything:
                    continue
                raise UsageError(f"{opts.name_of('bins_table')} {mid}: {mid} is not a binned "
                                 "metric")
            if mid not in ids:
                ids.append(mid)
            if mid not in bins_for:
                bins_for.append(mid)
    if opts.plot:
        plot_id = "ece_top" if multiclass else "ece"
        if plot_id not in ids:
            ids.append(plot_id)
        if plot_id not in bins_for:
            bins_for.append(plot_id)
    bad = [m for m in ids if m not in can]
    if bad and opts.compat:
        from calcheck import compat

        compat.check_ids(opts.compat, bad, multiclass, opts.name_of("compat"))
    if bad:
        raise UsageError(f"--engine {engine} computes {', '.join(can)}; {', '.join(bad)} "
                         "need(s) --engine memory")
    return ids, bins_for, messages


def _summary_bins(eng: Engine, opts: Options,
                  results: dict[str, Any]) -> tuple[str, list[dict[str, Any]]] | None:
    """The bin table behind the summary: the first of ECE, ACE, … the run computed, else the
    engine's equal-width bins when they come without another pass."""
    from calcheck.report.summary import BIN_SOURCES

    for mid in BIN_SOURCES:
        r = results.get(mid)
        if r is not None and getattr(r, "bins", None) is not None:
            return mid, _with_ranges(eng, r.bin_rows())
    rows = eng.summary_bins(opts)
    if not rows:
        return None
    quantile = eng.capabilities.rows
    return ("ace_top" if eng.multiclass else "ace") if quantile else \
        ("ece_top" if eng.multiclass else "ece"), _with_ranges(eng, rows)


def _ties_of(eng: Engine, sb: tuple[str, list[dict[str, Any]]] | None,
             opts: Options) -> list[Any]:
    """The tie groups the summary's bins share, for its consistency resampling."""
    return eng.summary_ties(sb[0], sb[1], opts) if sb else []


def _with_ranges(eng: Engine, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """In memory, when the metrics sorted the scores, each bin row with the smallest and
    largest score inside its edges, so the summary names the scores a bin really holds
    (all-equal scores: one value, not 0–0.3).  Without a sort the summary asks the engine
    for the one bin it names (``score_range``), rather than sort every score for it."""
    sorted_scores = getattr(eng, "sorted_scores", None)
    if sorted_scores is None or not rows:
        return rows
    import numpy as np

    s = sorted_scores(sort=False)
    if s is None:
        return rows
    out = []
    for r in rows:
        lo = int(np.searchsorted(s, r["lower"], side="left"))
        hi = int(np.searchsorted(s, r["upper"], side="right")) - 1
        out.append({**r, "min_score": float(s[lo]), "max_score": float(s[hi])}
                   if r.get("n") and lo <= hi else r)
    return out


def direction_fit(eng: Engine, opts: Options, tests: Mapping[str, Any],
                  summary_bins: tuple[str, list[dict[str, Any]]] | None,
                  sections: Mapping[str, Any] | None = None) -> Any:
    """Cox's fit behind the headline's direction (its JSON entry), made only when the verdict
    will claim one (miscalibrated or inconclusive) and the tests did not fit it already;
    ``sections``: the report's ``groups`` or ``windows`` whose verdicts the headline reads too."""
    import copy

    from calcheck.report.build import apply_family
    from calcheck.report.summary import NEEDS_DIRECTION, verdict

    if "cox" in tests and not opts.compat:
        return None                              # the summary reads the cox test itself
    rows = summary_bins[1] if summary_bins else []
    fragment: dict[str, Any] = {"tests": {k: t.to_dict() for k, t in tests.items()},
                                "settings": {"family": opts.family, "by": opts.by},
                                **copy.deepcopy({k: v for k, v in (sections or {}).items()
                                                 if v is not None})}
    apply_family(fragment, opts.family, opts.alpha)
    got, _, _ = verdict(fragment, rows, alpha=opts.alpha, seed=opts.seed,
                        ties=_ties_of(eng, summary_bins, opts))
    if got not in NEEDS_DIRECTION:
        return None
    return eng.recalibration(opts.replace(compat=None)).to_dict()


def plan_tolerance(opts: Options, multiclass: bool, engine: str) -> list[Any]:
    """The ``--tolerance`` bounds, each on a metric whose interval covers its population
    value on this engine (refused before any work otherwise)."""
    from calcheck.gates import parse_tolerance
    from calcheck.metrics import resolve_metric_ids
    from calcheck.uncertainty import covers_population

    label = opts.name_of("tolerance")
    out = []
    for text in opts.tolerance or []:
        t = parse_tolerance(text, label)
        mid = resolve_metric_ids([t.metric], multiclass=multiclass, name=label)[0]
        if not covers_population(mid):
            raise UsageError(f"{label} {text}: {mid} has no interval that covers its population "
                             "value (docs/uncertainty.md), so no equivalence verdict; use ece, "
                             "ece_l2, ace (or their debiased forms), sce, brier or log_loss")
        if not capabilities(engine).interval(mid):
            raise UsageError(f"{label} {text}: {mid} has no interval on --engine {engine}; use "
                             "--engine memory or ece, ece_l2, ace, brier, log_loss")
        out.append((mid, t.value))
    return out


def tolerance_checks(eng: Engine, opts: Options, bounds: list[Any],
                     results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The equivalence verdicts of ``bounds`` (:func:`plan_tolerance`) from each metric's
    covering interval — the run's own ``--ci`` interval, else one computed for it alone."""
    from calcheck.report.summary import tolerance_verdict

    if not bounds:
        return []
    have = {m: r.extra["ci"] for m, r in results.items() if r.extra.get("ci")}
    need = [m for m, _ in bounds if m not in have]
    if need:
        extra = eng.metrics(list(dict.fromkeys(need)),
                            opts.replace(ci=True, bins=opts.bins if opts.command != "test"
                                         else None))
        have.update({m: r.extra["ci"] for m, r in extra.values.items() if r.extra.get("ci")})
    return [tolerance_verdict(m, v, have.get(m)) for m, v in bounds]


def compat_ids(opts: Options, multiclass: bool) -> tuple[list[str], list[str]]:
    """Under ``compat``: the ids to compute (default and ``all``: every id the library has)
    and the ids it can compute; an id it has not, or a library without a metric for this kind
    of input, is a usage error naming what it has."""
    from calcheck import compat

    assert opts.compat is not None
    m = compat.mode(opts.compat)
    can = m.ids(multiclass)
    label = opts.name_of("compat")
    if not can:
        raise UsageError(f"{label} {opts.compat}: {m.what_it_has(multiclass)}")
    if opts.metrics is None:
        return list(can), can
    ids: list[str] = []
    for mid in registry.split_ids(opts.metrics):
        for x in (can if mid == "all" else [mid]):
            if x not in ids:
                ids.append(x)
    compat.check_ids(opts.compat, ids, multiclass, label)
    return ids, can


def check_dropped(eng: Engine, opts: Options) -> None:
    """No verdict on what is left when more than ``--max-dropped`` of the rows were dropped."""
    info = eng.input_info()
    read, dropped = info.get("rows_read"), info.get("rows_dropped") or 0
    if read and dropped / read > opts.max_dropped:
        from calcheck.errors import InputError

        reasons = ", ".join(f"{k}={v:,}" for k, v in (info.get("dropped_by_reason") or {}).items())
        raise InputError(f"{opts.name_of('drop_invalid')} dropped {dropped:,} of {read:,} rows "
                         f"({dropped / read:.1%}: {reasons}), more than "
                         f"{opts.name_of('max_dropped')} {opts.max_dropped:g}; what is left says "
                         "little about the model: fix the input (see the first invalid rows "
                         f"without {opts.name_of('drop_invalid')}) or raise "
                         f"{opts.name_of('max_dropped')}")


def _windows(opts: Options) -> tuple[Any, Options]:
    """``--time``/``--window``: the window, and the options whose ``by`` keys every row by its
    window's start (windows are groups)."""
    if not opts.time:
        return None, opts
    from calcheck.io.windows import WindowColumn, parse_window

    window = parse_window(opts.window or "", opts.tz, opts.name_of("window"))
    return window, opts.replace(by=WindowColumn(opts.time, window))


def _group_test_sections(g: Outcome, window: Any, opts: Options) -> dict[str, Any]:
    """The report's ``groups`` (``--by``) or ``windows`` (``--time``) of a ``test`` run: each
    group's rows, whether it is flagged small, and its tests."""
    entries = {key: {"n": n, "flagged": flagged,
                     "tests": {tid: r.to_dict() for tid, r in out.values.items()}}
               for key, (n, flagged, out) in g.values.items()}
    if window is not None:
        from calcheck.io.windows import assemble

        return {"windows": assemble(window, entries, "tests")}
    names = group_names(entries)
    return {"groups": {names[k]: e for k, e in entries.items()}}


def window_intervals(opts: Options, k: int) -> dict[str, Any]:
    """What the ``--time`` windows' ``--ci`` intervals are: simultaneous (Bonferroni over the
    k windows with rows: all cover at once with probability at least the level) unless
    ``--family none`` (each covers on its own)."""
    from calcheck.uncertainty import simultaneous_level

    each = simultaneous_level(opts.ci_level, k, opts.family)
    return {"kind": "marginal" if each == opts.ci_level else "simultaneous",
            "method": "none: each window's interval at the level" if each == opts.ci_level
            else "bonferroni over the windows with rows", "windows": k,
            "level": opts.ci_level, "per_window_level": each}


def group_verdicts(g: Outcome, opts: Options) -> dict[Any, dict[str, Any]]:
    """Each ``--by`` group's (or ``--time`` window's) consistency verdict on its own bins (the
    first of ACE, ECE, … it has), for the groups not flagged small; their draws let the
    smallest p-value adjusted over the family reach α/10."""
    from calcheck.report.summary import BIN_SOURCES, consistency_draws, group_verdict

    tables = {}
    for key, gr in g.values.items():
        mid = next((m for m in BIN_SOURCES if m in gr.metrics
                    and gr.metrics[m].bins is not None), None)
        if mid is not None and not gr.flagged and gr.n:
            tables[key] = (mid, gr.metrics[mid].bin_rows())
    k = 1 + len(tables) if opts.family != "none" else 1
    draws = consistency_draws(opts.alpha, k)
    return {key: group_verdict(rows, alpha=opts.alpha, seed=opts.seed, draws=draws, metric=mid)
            for key, (mid, rows) in tables.items()}


def run_score(source: Any, opts: Options, *, progress: Progress | None = None) -> Report:
    """``calcheck score`` on ``source`` with validated options."""
    window, run_opts = _windows(opts)
    with _engine(source, opts, progress) as eng:
        mc = eng.multiclass
        ids, bins_for, messages = plan_metrics(opts, mc, eng.name)
        bounds = plan_tolerance(opts, mc, eng.name)
        m = _metrics(eng, ids, run_opts, optional_tce=opts.metrics is None and not opts.compat)
        ids = [i for i in ids if i in m.values]
        v = eng.variables(opts.variable_list, opts) if opts.variables else Outcome()
        g = eng.groups(ids, run_opts) if run_opts.by else None
        check_dropped(eng, opts)
        reading = eng.reading()
        gates = None
        if opts.fail_if:
            from calcheck.gates import evaluate_gates, parse_gate

            conditions = [parse_gate(x) for x in opts.fail_if]
            values = {k: r.value for k, r in m.values.items()}
            for c in conditions:                      # a gate gates or refuses, never passes
                got = values.get(c.metric)            # on a metric that was not computed
                if got is None or got != got:
                    why = next((n for n in m.notes if n.startswith(f"{c.metric} ")), "")
                    raise UsageError(f"{opts.name_of('fail_if')} {c.text}: {c.metric} was not "
                                     "computed" + (f" ({why})" if why else "") + "; the gate "
                                     "cannot be evaluated")
            gates = evaluate_gates(conditions, values)
            if opts.gate_groups and g is not None:
                names = group_names(g.values)
                skipped = []
                for key, gr in g.values.items():
                    if gr.flagged:
                        skipped.append(names[key])
                        continue
                    for entry in evaluate_gates(conditions, {k: r.value for k, r in
                                                            gr.metrics.items()}):
                        gates.append({**entry, "group": names[key]})
                if skipped:
                    messages.append(f"{opts.name_of('gate_groups')}: {len(skipped)} group(s) "
                                    f"under {opts.name_of('min_group_size')} "
                                    f"{opts.min_group_size} not gated: "
                                    + ", ".join(skipped[:10]) + (" …" if len(skipped) > 10
                                                                 else ""))
        groups = None
        extra = None
        verdicts = group_verdicts(g, opts) if g is not None else {}
        entries = {k: {**gr.to_dict(), **({"verdict": verdicts[k]} if k in verdicts else {})}
                   for k, gr in (g.values.items() if g is not None else ())}
        if window is not None and g is not None:
            from calcheck.io.windows import assemble

            extra = {"windows": assemble(window, entries)}
        elif g is not None:
            names = group_names(g.values)
            groups = {names[k]: e for k, e in entries.items()}
        sb = _summary_bins(eng, opts, m.values)
        fit = direction_fit(eng, opts, {}, sb, {"groups": groups, **(extra or {})})
        tolerance = tolerance_checks(eng, opts, bounds, m.values)
        settings = settings_of(opts, multiclass=mc, ids=ids, engine=_settings(eng),
                               extra={**m.settings, **v.settings,
                                      **(g.settings if g else {})})
        if window is not None and g is not None and opts.ci:
            settings["window_intervals"] = window_intervals(opts, len(g.values))
        var = v.values.get("result")
        data = build_report(command="score", input_info=eng.input_info(), settings=settings,
                            metrics=m.values, bins_for=bins_for, gates=gates,
                            notes=reading.notes + m.notes + v.notes,
                            variables=var.to_dict() if var is not None else None, groups=groups,
                            extra=extra, score_range=getattr(eng, "score_range", None),
                            summary_bins=sb, seed=opts.seed, direction_fit=fit,
                            tolerance=tolerance, family=opts.family,
                            summary_ties=_ties_of(eng, sb, opts))
    plot_id = ("ece_top" if mc else "ece") if opts.plot else None
    return Report(data, bins_for=tuple(b for b in bins_for if b != plot_id),
                  messages=tuple(reading.messages + messages + m.messages),
                  text_plot=plot_id, per_class=opts.per_class, diagram=sb,
                  fail_if_beyond=opts.fail_if_beyond)


# ---------------------------------------------------------------------------------------------
# tests


def resolve_methods(methods: list[str] | None, label: str = "methods",
                    compat: str | None = None, engine: str = "memory") -> list[str]:
    """Validate ``--method`` values (comma lists allowed; ``all``); default ``tcal`` — under
    ``compat``, every test the library has (an unknown one is an error naming them).  On a
    streaming engine ``all`` is every test it runs; naming one it cannot run is an error."""
    if compat:
        from calcheck import compat as peers

        known = list(peers.mode(compat).tests)
        if not known:
            raise UsageError(f"--compat {compat}: {peers.mode(compat).library} has no "
                             "calibration test")
    else:
        known = registry.methods()
    if not methods:
        return list(known) if compat else ["tcal"]
    out: list[str] = []
    for m in registry.split_ids(methods):
        if m == "all":
            out.extend(x for x in known if x not in out)
        elif m in known:
            if m not in out:
                out.append(m)
        elif compat:
            from calcheck import compat as peers

            peers.check_methods(compat, [m])
        else:
            raise UsageError(f"unknown {label} {m!r}; use one of {', '.join(known)}, all")
    if not out:
        raise UsageError(f"{label}: no test method selected")
    if not capabilities(engine).rows and not compat:
        runs = capabilities(engine).methods()
        if "all" in registry.split_ids(methods):
            out = [m for m in out if m in runs]
        bad = [m for m in out if m not in runs]
        if bad:
            raise UsageError(f"--engine {engine} runs {', '.join(runs)}; {', '.join(bad)} "
                             "need(s) --engine memory")
    return out


def run_test(source: Any, opts: Options, *, progress: Progress | None = None) -> Report:
    """``calcheck test`` on ``source`` with validated options."""
    methods = resolve_methods(opts.methods, opts.name_of("methods"), opts.compat, opts.engine)
    messages = []
    if not capabilities(opts.engine).rows and not opts.compat and \
            "all" in registry.split_ids(opts.methods or []):
        left = [m for m in registry.methods() if m not in methods]
        if left:
            messages.append(f"{opts.name_of('methods')} all on --engine {opts.engine}: every "
                            f"test it runs; {', '.join(left)} need(s) --engine memory")
    window, run_opts = _windows(opts)
    with _engine(source, opts, progress) as eng:
        if not opts.methods and not opts.compat and eng.multiclass and eng.capabilities.rows:
            methods = ["tcal", "skce"]           # T-Cal sees the top label; SKCE every class
        bounds = plan_tolerance(opts, eng.multiclass, eng.name)
        g = eng.group_tests(methods, run_opts) if run_opts.by else None
        tested = sum(1 for _, flagged, _ in (g.values.values() if g else []) if not flagged)
        t = eng.tests(methods, opts, groups=1 + tested)
        extra = _group_test_sections(g, window, run_opts) if g is not None else None
        check_dropped(eng, opts)
        reading = eng.reading()
        sb = _summary_bins(eng, opts, {})
        fit = direction_fit(eng, opts, t.values, sb)
        tolerance = tolerance_checks(eng, opts, bounds, {})
        settings = settings_of(opts, multiclass=eng.multiclass, methods=methods,
                               engine=_settings(eng), extra=t.settings)
        data = build_report(command="test", input_info=eng.input_info(top=True),
                            settings=settings, tests=t.values, notes=reading.notes + t.notes,
                            extra=extra,
                            score_range=getattr(eng, "score_range", None),
                            summary_bins=sb, seed=opts.seed, direction_fit=fit,
                            tolerance=tolerance, family=opts.family,
                            summary_ties=_ties_of(eng, sb, opts))
    return Report(data, messages=tuple(reading.messages + messages + t.messages),
                  fail_on_reject=opts.fail_on_reject, diagram=sb,
                  fail_if_beyond=opts.fail_if_beyond)


TCE_SKIPPED = "tce not computed: "


def _metrics(eng: Engine, ids: list[str], opts: Options, *, optional_tce: bool) -> Outcome:
    """``eng.metrics``; when TCE is only there by default (``optional_tce``) and the input is
    too small for PAVA-BC bins, the other metrics with a note saying why TCE is missing."""
    try:
        return eng.metrics(ids, opts)
    except TooFewRows as exc:
        pava_bc = [m for m in ids if m in ("tce", "tce_cw")]
        if not optional_tce or not pava_bc:
            raise
        reason = str(exc).split(";")[0]
        out = eng.metrics([m for m in ids if m not in pava_bc], opts)
        out.notes.insert(0, f"{TCE_SKIPPED}{reason}; the other metrics are computed "
                            f"({', '.join(pava_bc)} omitted; set --tce-nmin/--tce-nmax to "
                            "compute it anyway)")
        return out


# ---------------------------------------------------------------------------------------------
# figures and the HTML report


def run_figure(source: Any, opts: Options, *, progress: Progress | None = None,
               ax: Any = None) -> Outcome:
    """``calcheck plot``: the figure (``values["figure"]``; with ``ax``, that Axes drawn
    into) and its notes."""
    require_matplotlib()
    if opts.kind == "drift":
        return _drift_figure(source, opts, progress, ax)
    if opts.kind == "monitor":
        return _monitor_figure(source, opts, progress, ax)
    with _engine(source, opts, progress) as eng:
        if opts.by:
            out = _groups_figure(eng, opts, ax)
        else:
            out = eng.figure(opts.kind, opts, ax=ax)
        check_dropped(eng, opts)
        out.messages = eng.reading().messages + out.messages
    return out


def _groups_figure(eng: Engine, opts: Options, ax: Any = None) -> Outcome:
    """The ``--by`` groups' reliability diagrams (equal-width bins) overlaid, with a legend:
    the :data:`MAX_OVERLAY` largest groups."""
    from calcheck.figures import draw

    mid = "ece_top" if eng.multiclass else "ece"
    g = eng.groups([mid], opts.replace(ci=False, binning="uniform"))
    names = group_names(g.values)
    ranked = sorted(((gr.n, names[k], gr) for k, gr in g.values.items() if mid in gr.metrics),
                    key=lambda t: -t[0])
    shown = ranked[:draw.MAX_OVERLAY]
    tables = [(f"{name} (n={n:,})", gr.metrics[mid].to_dict(bins=True)["bins"])
              for n, name, gr in shown]
    left = len(ranked) - len(shown)
    title = f"Reliability diagrams by {opts.by}" + (f" — the {len(shown)} largest of "
                                                      f"{len(ranked)} groups" if left else "")
    fig = draw.overlay_figure(tables, title=title, top_label=eng.multiclass, ax=ax)
    notes = [f"the overlay draws the {len(shown)} largest of {len(ranked)} groups of "
             f"{opts.name_of('by')} {opts.by}"] if left else []
    return Outcome(values={"figure": fig, "groups": [name for _, name, _ in shown]},
                   notes=notes)


def _drift_figure(source: Any, opts: Options, progress: Progress | None,
                  ax: Any = None) -> Outcome:
    """``plot --kind drift``: one metric per ``--time`` window with its bootstrap interval."""
    from calcheck.figures import draw

    sopts = opts.replace(command="score", ci=True, kind="tce", metrics=opts.metrics or ["ece"])
    rep = run_score(source, sopts, progress=progress)
    mid = next(iter(rep.metrics))
    fig = draw.drift_figure(rep.data["windows"], mid, registry.title(mid),
                             window=f"{opts.window} windows of {opts.time} ({opts.tz})", ax=ax)
    return Outcome(values={"figure": fig}, notes=list(rep.notes), messages=list(rep.messages))


def _monitor_figure(source: Any, opts: Options, progress: Progress | None,
                    ax: Any = None) -> Outcome:
    """``plot --kind monitor``: the e-value path and the offset's confidence sequence."""
    from calcheck.figures.watch import monitor_figure
    from calcheck.monitoring import run_monitor

    mopts = parse("monitor", {"time": opts.time, "window": opts.window, "tz": opts.tz,
                              "score": opts.score, "label": opts.label,
                              "pos_label": opts.pos_label, "probs": opts.probs,
                              "where": opts.where, "drop_invalid": opts.drop_invalid,
                              "input_format": opts.input_format},
                  style=opts.style)
    rep = run_monitor(source, mopts, progress=progress)
    fig = monitor_figure(rep.data["windows"], alpha=rep.data["settings"]["alpha"], ax=ax)
    return Outcome(values={"figure": fig}, notes=list(rep.notes), messages=list(rep.messages))


def run_report(source: Any, opts: Options, *, progress: Progress | None = None) -> Report:
    """``calcheck report``: the default metrics, the tests, the variables and every figure."""
    from calcheck.figures import draw

    require_matplotlib()
    methods = (["tcal"] if opts.adaptive else []) + ["hl", "spiegelhalter", "cox"]
    with _engine(source, opts, progress) as eng:
        mc = eng.multiclass
        ids, _, planned = plan_metrics(opts, mc, eng.name)
        bounds = plan_tolerance(opts, mc, eng.name)
        m = _metrics(eng, ids, opts, optional_tce=opts.metrics is None)
        ids = [i for i in ids if i in m.values]
        tce_skipped = any(n.startswith(TCE_SKIPPED) for n in m.notes) or \
            not any(i in ids for i in ("tce", "tce_top"))
        if mc and eng.capabilities.rows:
            methods.append("skce")                   # every class, not only the top label
        t = eng.tests(methods, opts.replace(bins=None))
        notes = planned + m.notes + t.notes
        g = eng.groups(ids, opts) if opts.by else None
        groups = None
        if g is not None:
            names = group_names(g.values)
            groups = {names[k]: gr.to_dict() for k, gr in g.values.items()}
        var = None
        if opts.variables:
            v = eng.variables(opts.variable_list, opts)
            var, notes = v.values["result"], notes + v.notes
        figs: list[tuple[str, Any]] = []
        for kind, binning, caption in FIGURES:
            if kind == "tce" and tce_skipped:
                continue
            fopts = opts.replace(binning=binning, yscale="auto")
            figs.append((caption, eng.figure(kind, fopts).values["figure"]))
        if g is not None:
            over = _groups_figure(eng, opts)
            figs.append((f"Reliability diagrams by {opts.by}, overlaid (equal-width bins, "
                         "95% intervals)", over.values["figure"]))
            notes += over.notes
        if eng.capabilities.rows and mc:
            figs.append(("Per-class reliability diagrams (one-vs-rest)",
                         eng.figure("reliability", opts.replace(per_class=True, bins=None,
                                                                binning="uniform")
                                    ).values["figure"]))
        elif mc:
            notes.append(f"the per-class diagrams need --engine memory; not drawn on --engine "
                         f"{eng.name}")
        if eng.capabilities.rows:
            figs.append((f"CORP reliability diagram: PAV recalibration with its "
                         f"{opts.band_level:.0%} consistency band and the score decomposition",
                         eng.figure("corp", opts).values["figure"]))
        else:
            notes.append(f"the CORP diagram needs --engine memory (PAV over every distinct "
                         f"score); not drawn on --engine {eng.name}")
        for name in opts.variable_list:
            fopts = opts.replace(variables=[name])
            figs.append((f"Variable-based calibration along {name}",
                         eng.figure("variable", fopts, variables=var).values["figure"]))
        extra = None
        if opts.audit:
            from calcheck.auditing import audit_section
            from calcheck.figures.watch import segments_figure

            aopts = opts.replace(segments=opts.audit)
            section = audit_section(eng.segment_table(list(dict.fromkeys(opts.audit)), aopts),
                                    aopts)
            extra = {"audit": section}
            figs.append(("The worst segments: observed rate − mean score (red: miscalibrated "
                         "after adjusting for every segment searched)",
                         segments_figure(section["segments"], alpha=opts.alpha)))
        check_dropped(eng, opts)
        reading = eng.reading()
        sb = _summary_bins(eng, opts, m.values)
        fit = direction_fit(eng, opts, t.values, sb)
        tolerance = tolerance_checks(eng, opts, bounds, m.values)
        settings = settings_of(opts, multiclass=mc, ids=ids, engine=_settings(eng),
                               extra={**m.settings, **t.settings,
                                      **(g.settings if g else {})})
        data = build_report(command="report", input_info=eng.input_info(), settings=settings,
                            metrics=m.values, tests=t.values, notes=reading.notes + notes,
                            variables=var.to_dict() if var is not None else None,
                            groups=groups, extra=extra,
                            score_range=getattr(eng, "score_range", None),
                            summary_bins=sb, seed=opts.seed, direction_fit=fit,
                            tolerance=tolerance, family=opts.family,
                            summary_ties=_ties_of(eng, sb, opts))
    pngs = tuple((cap, draw.to_png_bytes(f)) for cap, f in figs) if report_kind(opts) == "html" \
        else tuple(figs)
    return Report(data, messages=tuple(reading.messages + m.messages + t.messages),
                  figures=pngs, diagram=sb)


def report_kind(opts: Options) -> str:
    """html or pdf: ``format``, else the extension of ``output``."""
    assert opts.output is not None
    return opts.format or ("pdf" if opts.output.lower().endswith(".pdf") else "html")


def save_report_file(rep: Report, opts: Options) -> None:
    """Write the HTML or PDF report file atomically."""
    from calcheck.io.output import atomic_write, write_output

    assert opts.output is not None
    if report_kind(opts) == "html":
        atomic_write(opts.output, rep.html(), label=opts.name_of("output"))
        return
    from calcheck.figures.pdf import write_pdf
    from calcheck.report.document import blocks

    content = blocks(rep.data)

    def write(tmp: str) -> None:
        write_pdf(tmp, content, list(rep.figures), paper=opts.paper)

    write_output(opts.output, write, label=opts.name_of("output"))


def save_figure(fig: Any, path: str, label: str = "output") -> None:
    """Save a figure atomically; the format follows the extension."""
    from calcheck.figures import draw
    from calcheck.io.output import write_output

    ext = os.path.splitext(path)[1]

    def write(tmp: str) -> None:
        draw.save(fig, tmp, fmt=ext.lstrip(".").lower())

    write_output(path, write, label=label)
