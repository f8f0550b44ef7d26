"""Renderings of a ``calcheck monitor`` report: one line per window — rows, rates, Cox's
calibration intercept and slope, the running e-value and the offset's confidence sequence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calcheck.formatting import number
from calcheck.report import sheet as sh
from calcheck.report.render import _write_rows, to_json
from calcheck.report.text import clean

COLUMNS = (("window", False), ("n", True), ("mean score", True), ("observed", True),
           ("intercept", True), ("slope", True), ("e-value", True), ("offset CS", True),
           ("alarm", False))


def cs_text(cs: Mapping[str, Any]) -> str:
    if cs.get("empty"):
        return "empty"
    lo = "−∞" if cs.get("low") is None else f"{cs['low']:+.3f}"
    hi = "+∞" if cs.get("high") is None else f"{cs['high']:+.3f}"
    return f"[{lo}, {hi}]"


def _e(v: float) -> str:
    return f"{v:.3g}"


SHOWN = 30                      # windows in the table and markdown (the last; --details: all)


def as_sheet(report: Mapping[str, Any], shown: int | None = SHOWN) -> sh.Sheet:
    inp, st, s = report["input"], report["settings"], report["summary"]
    every = list(report["windows"])
    windows = every if shown is None else every[-shown:]
    rows = tuple((w["start"], f"{w['n']:,}", number(w.get("mean_score")),
                  number(w.get("observed_rate")), number(w.get("calibration_intercept"), 3),
                  number(w.get("slope"), 3), _e(w["evalue"]), cs_text(w["offset_cs"]),
                  "ALARM" if w["alarm"] else "") for w in windows)
    marked = frozenset(i for i, w in enumerate(windows) if w["alarm"])
    header = (f"calcheck monitor: {clean(inp.get('path'))}, {inp.get('rows_used', 0):,} rows, "
              f"{st['window']} windows of {st['time']} ({st['tz']}), α = {st['alpha']:g}"
              + (f", state {st['state']}" if st.get("state") else ""))
    after = ((f"… {len(every) - len(windows):,} earlier window(s) in the JSON and CSV "
              "(--details shows them)",) if len(windows) < len(every) else ()) + \
        (f"e-value: {st['construction']}",)
    return sh.Sheet("calcheck monitor", header, s["text"],
                    "alarm" if s.get("alarm") else "ok", COLUMNS, rows, marked, after,
                    tuple(report.get("notes", [])), st)


def render_csv(report: Mapping[str, Any]) -> str:
    recs = []
    for w in report["windows"]:
        cs = w["offset_cs"]
        recs.append({"start": w["start"], "end": w["end"], "n": w["n"],
                     "positives": w.get("positives"), "mean_score": w.get("mean_score"),
                     "observed_rate": w.get("observed_rate"),
                     "calibration_intercept": w.get("calibration_intercept"),
                     "slope": w.get("slope"), "evalue": w["evalue"],
                     "log_evalue": w["log_evalue"], "offset_cs_low": cs.get("low"),
                     "offset_cs_high": cs.get("high"), "offset_cs_empty": cs.get("empty"),
                     "alarm": w["alarm"]})
    return _write_rows(recs)


def render(report: Mapping[str, Any], fmt: str, *, width: int = 100, color: bool = False,
           plain: bool = False, details: bool = False) -> str:
    if fmt == "json":
        return to_json(report)
    if fmt == "csv":
        return render_csv(report)
    shown = None if details else SHOWN
    if fmt == "markdown":
        return sh.render_markdown(as_sheet(report, shown))
    return sh.render_table(as_sheet(report, shown), width=width, color=color, plain=plain)


def render_html(report: Mapping[str, Any], figures: list[tuple[str, bytes]]) -> str:
    return sh.render_html(as_sheet(report, None), figures)


def render_fragment(report: Mapping[str, Any]) -> str:
    return sh.render_fragment(as_sheet(report))
