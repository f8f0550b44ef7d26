"""One self-contained HTML report: the summary first, then the input, the tests with their
direction, the metrics, the figures (embedded as base64 PNG) and the settings as a list.  No
script, stylesheet, font or image is fetched from anywhere: the file opens offline.  Every
text from the data is escaped.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from typing import Any

from calcheck.registry import title
from calcheck.report.render import (
    _test_note,
    format_value,
    per_class_rows,
    short_settings,
)
from calcheck.report.summary import format_p
from calcheck.report.text import clean, setting

CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem auto;
       max-width: 1280px; color: #222; line-height: 1.45; padding: 0 1.2rem; }
h1 { font-size: 1.7rem; margin-bottom: 0.2rem; } h2 { margin-top: 2.2rem; font-size: 1.3rem; }
.meta { color: #555; font-size: 0.92rem; }
.summary { font-size: 1.08rem; padding: 0.9rem 1.1rem; border-radius: 6px; margin: 1rem 0;
           border-left: 6px solid #888; background: #f5f5f5; }
.summary.miscalibrated { border-color: #b00020; background: #fdecee; }
.summary.ok { border-color: #1b5e20; background: #edf7ee; }
.summary.inconclusive { border-color: #b26a00; background: #fff4e0; }
.summary b { display: block; font-size: 1.2rem; margin-bottom: 0.3rem; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.95rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.35rem 0.8rem; text-align: left;
         vertical-align: top; }
th { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.reject { color: #b00020; font-weight: 600; } .accept { color: #1b5e20; }
figure { margin: 1.4rem 0; } figure img { width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #444; font-size: 0.95rem; margin-top: 0.3rem; }
dl.settings { display: grid; grid-template-columns: max-content auto; gap: 0.2rem 1.2rem;
              font-size: 0.92rem; } dl.settings dt { color: #555; } dl.settings dd { margin: 0; }
"""


def _e(x: Any) -> str:
    return html.escape(clean(x))


def _img(png: bytes, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def render_html(report: Mapping[str, Any], figures: list[tuple[str, bytes]]) -> str:
    """The report as one HTML page; ``figures`` are (caption, PNG bytes)."""
    inp = report["input"]
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
             "img-src data:; style-src 'unsafe-inline'\">"
             "<meta name='viewport' content='width=device-width, initial-scale=1'>"
             f"<title>calcheck report: {_e(inp['path'])}</title><style>{CSS}</style></head><body>",
             f"<h1>Calibration report</h1><p class='meta'>{_e(inp['path'])} · calcheck "
             f"{_e(report['calcheck_version'])}</p>", *_sections(report, full=True)]
    if figures:
        parts.append("<h2>Figures</h2>")
        parts.extend(_img(png, cap) for cap, png in figures)
    if report.get("notes"):
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in report["notes"])
                     + "</ul>")
    parts.append("<h2>Settings</h2><dl class='settings'>" + "".join(
        f"<dt>{_e(k.replace('_', ' '))}</dt><dd>{_e(setting(v))}</dd>"
        for k, v in report.get("settings", {}).items()) + "</dl></body></html>")
    return "\n".join(parts)


def render_fragment(report: Mapping[str, Any]) -> str:
    """The report's summary and tables as an HTML fragment (a notebook's view of a Report)."""
    return "<div class='calcheck-report'>" + "\n".join(_sections(report, full=False)) + "</div>"


def _summary(report: Mapping[str, Any]) -> str:
    s = report.get("summary") or {}
    if not s.get("text"):
        return ""
    verdict = s.get("verdict", "")
    cls = {"miscalibrated": "miscalibrated", "inconclusive": "inconclusive",
           "no evidence of miscalibration": "ok", "consistent with calibration": "ok"}.get(
               verdict, "")
    body = _e(s.get("basis", ""))
    if s.get("direction"):
        body += "<br>Direction: " + _e("; ".join(s["direction"]))
    if s.get("where"):
        body += "<br>Where: " + _e("; ".join(s["where"]))
    return (f"<div class='summary {cls}'><b>{_e(verdict[:1].upper() + verdict[1:])}</b>"
            f"{body}</div>")


def _input(report: Mapping[str, Any]) -> str:
    inp = report["input"]
    st = report.get("settings", {})
    rows = [("file", inp.get("path")), ("format", inp.get("format"))]
    if inp.get("kind") == "multiclass":
        rows += [("probability columns", ", ".join(inp.get("prob_columns", []))),
                 ("classes", ", ".join(inp.get("classes", []))),
                 ("label column", inp.get("label_column")),
                 ("accuracy (top-label)", number(inp.get("accuracy")))]
        if inp.get("rows_renormalized"):
            rows.append(("rows renormalized", f"{inp['rows_renormalized']:,}"))
    else:
        rows += [("score column", inp.get("score_column")),
                 ("label column", inp.get("label_column")),
                 ("positives", f"{inp.get('positives', 0):,}"),
                 ("prevalence", number(inp.get("prevalence")))]
    rows += [("filter (--where)", st.get("where") or "none"),
             ("rows read", f"{inp.get('rows_read', inp.get('rows_used', 0)):,}"),
             ("rows used", f"{inp.get('rows_used', 0):,}")]
    if inp.get("rows_dropped"):
        reasons = ", ".join(f"{k} {v:,}" for k, v in inp.get("dropped_by_reason", {}).items())
        rows.append(("rows dropped", f"{inp['rows_dropped']:,} ({reasons})"))
    return ("<h2>Input</h2><table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>"
                                              for k, v in rows) + "</table>")


def number(v: Any) -> str:
    return "–" if v is None else f"{v:.4f}"


def _sections(report: Mapping[str, Any], *, full: bool) -> list[str]:
    parts = [_summary(report)]
    if full:
        parts.append(_input(report))
    else:
        inp = report["input"]
        parts.append(f"<p class='meta'>{_e(inp['path'])} · {inp['rows_used']:,} rows</p>")
    if report.get("tests"):
        parts.append(f"<h2>Calibration tests at α = {_e(report['settings'].get('alpha'))}</h2>"
                     "<table><tr><th>test</th><th>statistic</th><th>p-value</th>"
                     "<th>verdict</th><th>details</th></tr>")
        for tid, t in report["tests"].items():
            verdict = ("<span class='reject'>rejected</span>" if t["reject"]
                       else "<span class='accept'>not rejected</span>")
            stat = "∞" if t.get("infinite") else ("–" if t["statistic"] is None
                                                   else f"{t['statistic']:.6g}")
            parts.append(f"<tr><td>{_e(title(tid))}</td><td class='num'>{stat}</td>"
                         f"<td class='num'>{_e(format_p(t.get('pvalue')))}</td>"
                         f"<td>{verdict}</td><td>{_e(_test_note(tid, t))}</td></tr>")
        parts.append("</table>")
    if report.get("metrics"):
        parts.append("<h2>Metrics</h2><table><tr><th>id</th><th>metric</th><th>value</th>"
                     "<th>bins</th></tr>")
        for mid, m in report["metrics"].items():
            parts.append(f"<tr><td>{_e(mid)}</td><td>{_e(title(mid))}</td>"
                         f"<td class='num'>{_e(format_value(m['value'], m['unit']))}</td>"
                         f"<td>{_e(short_settings(mid, m))}</td></tr>")
        parts.append("</table>")
        head, rows = per_class_rows(report)
        if rows:
            parts.append("<h2>Per class (one-vs-rest)</h2><table><tr>"
                         + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>")
            for r in rows:
                parts.append("<tr>" + "".join(
                    f"<td{' class=num' if i else ''}>{_e(c)}</td>" for i, c in enumerate(r))
                    + "</tr>")
            parts.append("</table>")
    if report.get("variables"):
        parts.append("<h2>Variable-based calibration</h2><table><tr><th>rank</th>"
                     "<th>variable</th><th>VECE</th><th>VCE(v*)</th><th>v*</th></tr>")
        for name, v in report["variables"].items():
            parts.append(f"<tr><td>{v['rank']}</td><td>{_e(name)}</td>"
                         f"<td class='num'>{v['vece']:.4f}</td><td class='num'>"
                         f"{v['vce_max']:.4f}</td><td class='num'>{v['v_star']:.4g}</td></tr>")
        parts.append("</table>")
    return parts
