"""The :class:`Report`: what ``calcheck.score()`` and ``calcheck.run_tests()`` return, and what
the command line prints.

A report is frozen.  :meth:`Report.to_dict` is the versioned JSON document (schema 1) exactly
as ``--json`` prints it; :meth:`Report.render` gives any output format as text;
:meth:`Report.save` writes a file (atomically); in a notebook the report shows itself as an
HTML table (``_repr_html_``).  The gate results (``--fail-if``) and the test verdicts are
properties, so a script can decide what to do without parsing anything.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from calcheck.errors import ExitCode, UsageError


@dataclass(frozen=True, eq=False)
class Report:
    """A calibration report.

    Attributes
    ----------
    data : dict
        The JSON document (use :meth:`to_dict` for a copy).
    bins_for : tuple of str
        The metrics whose bin tables the renderings show.
    messages : tuple of str
        Diagnostics for stderr that are not part of the document (rows dropped, …).
    text_plot : str or None
        The metric whose terminal reliability diagram ``render("table")`` adds.
    diagram : (str, list of dict) or None
        The bin table behind the summary — (metric id, bin rows) — which the notebook view
        draws as a small reliability diagram.
    """

    data: Mapping[str, Any]
    bins_for: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()
    text_plot: str | None = None
    fail_on_reject: bool = False
    figures: tuple[tuple[str, Any], ...] = field(default=(), repr=False)
    per_class: bool = False
    diagram: tuple[str, list[dict[str, Any]]] | None = field(default=None, repr=False)
    fail_if_beyond: bool = False
    fail_on_alarm: bool = False

    # -- the document ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (a deep copy): ``schema_version``, ``input``, ``settings``,
        ``metrics`` / ``tests`` / ``variables`` / ``groups``, ``notes``, ``gates``."""
        return copy.deepcopy(dict(self.data))

    def to_json(self) -> str:
        from calcheck.report.render import to_json

        return to_json(self.data)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    @property
    def command(self) -> str:
        return str(self.data["command"])

    @property
    def metrics(self) -> dict[str, Any]:
        """Metric id → its JSON entry (``value``, ``unit``, ``settings``, …)."""
        return dict(self.data.get("metrics", {}))

    @property
    def tests(self) -> dict[str, Any]:
        """Test id → its JSON entry (``statistic``, ``pvalue``, ``reject``, …)."""
        return dict(self.data.get("tests", {}))

    @property
    def notes(self) -> list[str]:
        return list(self.data.get("notes", []))

    def value(self, metric: str) -> float | None:
        """The value of one metric."""
        try:
            return self.data["metrics"][metric]["value"]  # type: ignore[no-any-return]
        except KeyError:
            raise KeyError(f"no metric {metric!r} in this report; it has "
                           f"{', '.join(self.data.get('metrics', {})) or 'none'}") from None

    # -- verdicts ----------------------------------------------------------------------------

    @property
    def gates(self) -> list[dict[str, Any]]:
        """The ``--fail-if`` conditions with their outcome."""
        return list(self.data.get("gates", []))

    @property
    def failed_gates(self) -> list[dict[str, Any]]:
        return [g for g in self.gates if g["failed"]]

    @property
    def rejected(self) -> list[str]:
        """The tests that rejected calibration after the family adjustment (``--family``):
        test ids, and "GROUP: id" for a ``--by`` group's test (the keys of
        ``summary.decided_by``)."""
        s = self.data.get("summary", {})
        if self.command == "audit":                   # the segments that reject
            return list(s.get("rejected", []))
        return list(s.get("decided_by", [])) if s.get("verdict") == "miscalibrated" and \
            "tests" in self.data else []

    @property
    def alarm(self) -> dict[str, Any] | None:
        """``monitor``: the alarm (the window that raised it, its e-value), or None."""
        return self.data.get("summary", {}).get("alarm") if self.command == "monitor" else None

    @property
    def beyond_tolerance(self) -> bool:
        """Whether the ``--tolerance`` verdict is "beyond tolerance"."""
        t = self.data.get("summary", {}).get("tolerance") or {}
        return bool(t.get("verdict") == "beyond tolerance")

    @property
    def exit_code(self) -> int:
        """What the command line exits with: 1 when a gate failed (or a test rejected under
        ``fail_on_reject``, or the tolerance verdict is "beyond tolerance" under
        ``fail_if_beyond``), else 0."""
        if self.failed_gates or (self.fail_on_reject and self.rejected) or \
                (self.fail_if_beyond and self.beyond_tolerance) or \
                (self.fail_on_alarm and self.alarm is not None):
            return int(ExitCode.GATE_FAILED)
        return int(ExitCode.OK)

    # -- renderings --------------------------------------------------------------------------

    def render(self, fmt: str = "table", *, width: int | None = None,
               color: bool | None = None, plain: bool = False, details: bool = False) -> str:
        """The report as text in ``fmt``: table, json, csv or markdown (html too).  ``width``
        (default: the terminal's), ``color`` and ``plain`` (ASCII, for files and pipes) shape
        the table; ``details`` adds every setting and every T-Cal level."""
        from calcheck.report import render as r  # the module

        if fmt == "html":
            return self.html()
        own = _own_renderer(self.command)
        if own is not None and fmt in r.OUTPUT_FORMATS:
            return own.render(self.data, fmt, width=width or 100,  # type: ignore[no-any-return]
                              color=bool(color), plain=plain, details=details)
        if fmt not in r.OUTPUT_FORMATS:
            raise UsageError(f"unknown format {fmt!r}; use one of "
                             f"{', '.join((*r.OUTPUT_FORMATS, 'html'))}")
        if width is None:
            import shutil

            width = shutil.get_terminal_size((100, 24)).columns
        text = r.render(self.data, fmt, bins_for=self.bins_for, color=color, width=width,
                        plain=plain, details=details, per_class=self.per_class)
        if fmt == "table" and self.text_plot:
            text += r.render_text_reliability(self.data, self.text_plot, color=color,
                                              width=width, plain=plain)
        return text

    @property
    def summary(self) -> str:
        """The one-line summary: verdict, direction, where (``to_dict()["summary"]`` has its
        parts)."""
        return str(self.data.get("summary", {}).get("text", ""))

    def html(self) -> str:
        """The self-contained HTML report (with the figures, when the report has them)."""
        from calcheck.report.html import render_html

        own = _own_renderer(self.command)
        if own is not None:
            return own.render_html(self.data,  # type: ignore[no-any-return]
                                   [(cap, png) for cap, png in self.figures])
        return render_html(self.data, [(cap, png) for cap, png in self.figures])

    def save(self, path: str, fmt: str | None = None) -> None:
        """Write the report to ``path`` atomically; the format is ``fmt``, else taken from
        the extension (.json, .csv, .md, .html, .txt)."""
        from calcheck.io.output import atomic_write
        from calcheck.report.render import format_for_path

        atomic_write(path, self.render(fmt or format_for_path(path), color=False, plain=True,
                                       width=120), label="path")

    def __str__(self) -> str:
        return self.render("table", color=False, plain=True)

    def __repr__(self) -> str:
        inp = self.data.get("input", {})
        parts = [f"command={self.command!r}", f"input={inp.get('path')!r}",
                 f"rows={inp.get('rows_used')}"]
        if "metrics" in self.data:
            parts.append("metrics=[" + ", ".join(self.data["metrics"]) + "]")
        if "tests" in self.data:
            parts.append("tests=[" + ", ".join(self.data["tests"]) + "]")
        return f"Report({', '.join(parts)})"

    def _repr_html_(self) -> str:
        """The notebook view: the compact, styled, self-contained HTML report, with a small
        reliability diagram when matplotlib is installed."""
        import importlib.util

        from calcheck.report.html import render_fragment

        own = _own_renderer(self.command)
        if own is not None:
            return own.render_fragment(self.data)  # type: ignore[no-any-return]
        figure = None
        if self.diagram is not None and importlib.util.find_spec("matplotlib") is not None:
            from calcheck.figures import draw
            from calcheck.registry import title

            mid, rows = self.diagram
            multiclass = self.data.get("input", {}).get("kind") == "multiclass"
            fig = draw.overlay_figure([(f"{title(mid)} bins", rows)], title="Reliability",
                                      top_label=multiclass, size=(3.8, 3.6))
            figure = (f"Reliability diagram ({title(mid)} bins, 95% intervals)",
                      draw.to_png_bytes(fig))
        return render_fragment(self.data, figure)

    def _repr_json_(self) -> dict[str, Any]:
        return json.loads(self.to_json())  # type: ignore[no-any-return]


def _own_renderer(command: str) -> Any:
    """The rendering module of a command whose report is not a metrics-and-tests report
    (``compare``, ``audit``, ``monitor``), or None."""
    if command == "compare":
        from calcheck.report import comparison

        return comparison
    if command == "audit":
        from calcheck.report import audit

        return audit
    if command == "monitor":
        from calcheck.report import monitoring

        return monitoring
    return None
