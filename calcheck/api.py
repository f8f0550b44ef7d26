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

import os
from collections.abc import Mapping, Sequence
from typing import Any

from numpy.typing import ArrayLike

from calcheck._quiet import quiet
from calcheck.errors import UsageError
from calcheck.option_checks import parse
from calcheck.options import DEFAULT_BATCH_ROWS
from calcheck.pipeline import run_compare as run_compare  # (re-exported: 0.5's home)
from calcheck.pipeline import run_figure as run_figure
from calcheck.pipeline import run_report as run_report
from calcheck.pipeline import run_score as run_score
from calcheck.pipeline import run_test as run_test
from calcheck.report.files import save_figure as save_figure
from calcheck.report.files import save_report_file as save_report_file
from calcheck.report.model import Report
from calcheck.signatures import given, inputs, keywords, parameters_doc

__all__ = ["compare", "figure", "run_tests", "score", "write_report"]


@keywords
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
        weight: str | ArrayLike | None = None,
        count: str | ArrayLike | None = None,
        weight_null: str = "auto",
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
    return run_score(*inputs("score", locals()))


@keywords
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
        weight: str | ArrayLike | None = None,
        count: str | ArrayLike | None = None,
        weight_null: str = "auto",
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
    return run_test(*inputs("test", locals()))


@keywords
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
        weight: str | ArrayLike | None = None,
        count: str | ArrayLike | None = None,
        weight_null: str = "auto",
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
    src, opts = inputs("plot", locals(), required=False)
    if ax is not None and not (hasattr(ax, "figure") and hasattr(ax, "plot")):
        raise UsageError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
    if ax is not None and opts.per_class:
        raise UsageError("per_class=True draws one panel per class: it makes its own figure "
                         "(leave out ax=)")
    fig = run_figure(src, opts, ax=ax).values["figure"]
    if opts.output:
        save_figure(fig.figure if ax is not None else fig, opts.output)
    return fig


@keywords
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
        weight: str | ArrayLike | None = None,
        count: str | ArrayLike | None = None,
        weight_null: str = "auto",
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
    src, opts = inputs("report", locals())
    rep = run_report(src, opts)
    save_report_file(rep, opts)
    return rep


@keywords
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
        weight: str | ArrayLike | None = None,
        count: str | ArrayLike | None = None,
        weight_null: str = "auto",
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
    opts = parse("compare", given("compare", values), style="python")
    return run_compare([old] if new is None else [old, new], opts)

# what help() shows under "Parameters": each keyword's type, default and help, from the same
# table as the command line's --help (so the two cannot drift apart)


for _fn, _cmd in ((score, "score"), (run_tests, "test"), (figure, "plot"),
                  (write_report, "report"), (compare, "compare")):
    _fn.__doc__ = (_fn.__doc__ or "").rstrip() + "\n" + parameters_doc(_fn, _cmd)
