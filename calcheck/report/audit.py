"""Renderings of a ``calcheck audit`` report: the segments worst first (``--top`` of them in
the table and markdown; every one in the JSON and CSV)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calcheck.formatting import number
from calcheck.report import sheet as sh
from calcheck.report.document import AUDIT_HEAD, audit_rows
from calcheck.report.render import _write_rows, to_json
from calcheck.report.text import clean

COLUMNS = tuple((name, i > 0) for i, name in enumerate(AUDIT_HEAD))


def _points(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:+.2f} pts"


def as_sheet(report: Mapping[str, Any], top: int | None = None) -> sh.Sheet:
    inp, st, s = report["input"], report["settings"], report["summary"]
    search = report["search"]
    segments = list(report["segments"])
    shown = segments if top is None else segments[:top]
    rows = tuple(tuple(r) for r in audit_rows(shown))
    marked = frozenset(i for i, e in enumerate(shown) if e["reject_adjusted"])
    mc = report.get("multicalibration") or {}
    after = []
    if len(shown) < len(segments):
        after.append(f"… {len(segments) - len(shown):,} more segment(s) in the JSON and CSV "
                     "(--top N shows more)")
    if mc.get("mce") is not None:
        after.append(f"multicalibration error (MCGrad's MCE): {number(mc['mce'], 5)} = "
                     f"{number(mc['mce_sigma'], 2)} σ, in {mc['segment']}; global ECCE "
                     f"{number(mc['global_ecce'], 5)} ({number(mc['global_ecce_sigma'], 2)} σ)")
    after.append(f"searched {search['searched']:,} segment(s) of {', '.join(st['segments'])} up "
                 f"to depth {st['depth']} (p-values: z and Kuiper on {st['score_cells']} score "
                 f"cells; adjusted: max-type over all {search['searched']:,}, "
                 f"{st['trials']:,} null draws, seed {st['seed']})")
    header = (f"calcheck audit: {clean(inp.get('path'))}, {inp.get('rows_used', 0):,} rows, "
              f"{len(segments):,} segments searched")
    return sh.Sheet("calcheck audit", header, s["text"],
                    "miscalibrated" if s["verdict"] == "miscalibrated" else "ok", COLUMNS, rows,
                    marked, tuple(after), tuple(report.get("notes", [])), st)


def render_csv(report: Mapping[str, Any]) -> str:
    keys = ("name", "depth", "n", "positives", "mean_score", "observed_rate", "difference",
            "direction", "ece", "ecce", "ecce_sigma", "z", "kuiper", "pvalue_z", "pvalue_kuiper",
            "pvalue", "pvalue_adjusted", "reject_adjusted")
    return _write_rows([{k: e.get(k) for k in keys} for e in report["segments"]])


def render(report: Mapping[str, Any], fmt: str, *, width: int = 100, color: bool = False,
           plain: bool = False, details: bool = False) -> str:
    top = None if details else int(report["settings"].get("top") or 20)
    if fmt == "json":
        return to_json(report)
    if fmt == "csv":
        return render_csv(report)
    if fmt == "markdown":
        return sh.render_markdown(as_sheet(report, top))
    return sh.render_table(as_sheet(report, top), width=width, color=color, plain=plain)


def render_html(report: Mapping[str, Any], figures: list[tuple[str, bytes]]) -> str:
    return sh.render_html(as_sheet(report), figures)


def render_fragment(report: Mapping[str, Any]) -> str:
    return sh.render_fragment(as_sheet(report, 20))
