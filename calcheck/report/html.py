"""One self-contained HTML report: the summary first, then the input, the tests with their
direction, the metrics with their intervals, the groups, the figures (embedded as base64 PNG)
and the settings as a table.  No script, stylesheet, font or image is fetched from anywhere: the
file opens offline.  Every text from the data is escaped.

Layout: a figure is shown at most at its natural size (the PNG's pixel width, given as the
``<img>``'s width and height) and shrinks with a narrow window; tables wrap their cells instead
of widening the page, so neither a 1600 px nor a 420 px window scrolls sideways.
:func:`render_fragment` is the compact notebook view (``Report._repr_html_``): the same
styles scoped to one ``<div>``, the verdict first, the intervals, the groups and a small
reliability diagram.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from typing import Any

from calcheck.formatting import number, statistic
from calcheck.formatting import pvalue as format_p
from calcheck.formatting import value as format_value
from calcheck.registry import title
from calcheck.report.describe import (
    adjusted_shown,
    ci_level,
    ci_text,
    grouping,
    groups_of,
    per_class_rows,
    short_settings,
    test_note,
    weights_text,
)
from calcheck.report.text import clean, setting

# every rule is scoped to .calcheck, so a notebook's page keeps its own styles
CSS = """
body { margin: 0; }
.calcheck { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; color: #222;
            line-height: 1.45; overflow-wrap: break-word; }
.calcheck.page { max-width: 1100px; margin: 2rem auto; padding: 0 1.2rem; }
.calcheck h1 { font-size: 1.7rem; margin-bottom: 0.2rem; }
.calcheck h2 { margin-top: 2.2rem; font-size: 1.3rem; }
.calcheck .meta { color: #555; font-size: 0.92rem; }
.calcheck .summary { font-size: 1.05rem; padding: 0.8rem 1rem; border-radius: 6px;
                     margin: 1rem 0; border-left: 6px solid #888; background: #f5f5f5; }
.calcheck .summary.miscalibrated { border-color: #b00020; background: #fdecee; }
.calcheck .summary.ok { border-color: #1b5e20; background: #edf7ee; }
.calcheck .summary.inconclusive { border-color: #b26a00; background: #fff4e0; }
.calcheck .summary b { display: block; font-size: 1.15rem; margin-bottom: 0.3rem; }
.calcheck table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.95rem;
                  max-width: 100%; }
.calcheck th, .calcheck td { border-bottom: 1px solid #ddd; padding: 0.35rem 0.7rem;
                             text-align: left; vertical-align: top; }
.calcheck th { background: #fafafa; }
.calcheck td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.calcheck .wide { overflow-x: auto; max-width: 100%; }
.calcheck .ci { color: #555; font-size: 0.9em; }
.calcheck .flag { color: #b26a00; }
.calcheck .reject { color: #b00020; font-weight: 600; } .calcheck .accept { color: #1b5e20; }
.calcheck figure { margin: 1.4rem 0; max-width: 100%; }
.calcheck figure img { display: block; box-sizing: border-box; max-width: 100%; height: auto;
                      border: 1px solid #eee; }
.calcheck figcaption { color: #444; font-size: 0.95rem; margin-top: 0.3rem; }
.calcheck table.settings { font-size: 0.92rem; }
.calcheck table.settings th { background: none; color: #555; font-weight: normal; }
.calcheck table.nested { margin: 0; font-size: 1em; }
.calcheck table.nested th, .calcheck table.nested td { border: none; padding: 0 0.8rem 0 0; }
.calcheck.fragment { max-width: 760px; font-size: 0.92rem; }
.calcheck.fragment h2 { font-size: 1.05rem; margin: 1rem 0 0.3rem; }
.calcheck.fragment figure { margin: 0.6rem 0; }
@media (max-width: 640px) {
  .calcheck.page { margin: 1rem auto; padding: 0 0.6rem; }
  .calcheck table { font-size: 0.82rem; }
  .calcheck th, .calcheck td { padding: 0.25rem 0.35rem; }
}
"""


def _e(x: Any) -> str:
    return html.escape(clean(x))


def settings_table(settings: Mapping[str, Any]) -> str:
    """A report's settings as a readable two-column table: each key in words, each value as
    :func:`~calcheck.report.text.setting` shows it — no Python literal (``None``, ``{…}``);
    a nested setting (the intervals', the grid's) as a table of its own in the cell."""
    def cell(v: Any) -> str:
        if isinstance(v, Mapping) and v:
            return "<table class='nested'>" + "".join(
                f"<tr><th>{_e(str(k).replace('_', ' '))}</th><td>{cell(x)}</td></tr>"
                for k, x in v.items()) + "</table>"
        return _e(setting(v))
    rows = "".join(f"<tr><th>{_e(str(k).replace('_', ' '))}</th><td>{cell(v)}</td></tr>"
                   for k, v in settings.items())
    return f"<h2>Settings</h2><div class='wide'><table class='settings'>{rows}</table></div>"


def png_size(png: bytes) -> tuple[int, int]:
    """A PNG's width and height in pixels (its IHDR chunk)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        raise ValueError("not a PNG")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def _img(png: bytes, caption: str, *, width: int | None = None) -> str:
    """A figure at most at its natural width (or ``width`` px), shrinking with the window."""
    data = base64.b64encode(png).decode("ascii")
    w, h = png_size(png)
    if width is not None and width < w:
        w, h = width, round(h * width / w)
    return (f'<figure style="width: {w}px"><img alt="{_e(caption)}" width="{w}" height="{h}" '
            f'src="data:image/png;base64,{data}"><figcaption>{_e(caption)}</figcaption>'
            "</figure>")


def render_html(report: Mapping[str, Any], figures: list[tuple[str, bytes]]) -> str:
    """The report as one HTML page; ``figures`` are (caption, PNG bytes)."""
    inp = report["input"]
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
             "img-src data:; style-src 'unsafe-inline'\">"
             "<meta name='viewport' content='width=device-width, initial-scale=1'>"
             f"<title>calcheck report: {_e(inp['path'])}</title><style>{CSS}</style></head><body>"
             "<main class='calcheck page'>",
             f"<h1>Calibration report</h1><p class='meta'>{_e(inp['path'])} · calcheck "
             f"{_e(report['calcheck_version'])}</p>", *_sections(report, full=True)]
    if figures:
        parts.append("<h2>Figures</h2>")
        parts.extend(_img(png, cap) for cap, png in figures)
    if report.get("notes"):
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in report["notes"])
                     + "</ul>")
    parts.append(settings_table(report.get("settings", {})) + "</main></body></html>")
    return "\n".join(parts)


def render_fragment(report: Mapping[str, Any], figure: tuple[str, bytes] | None = None) -> str:
    """The compact notebook view of a report: styled (a scoped ``<style>``), the verdict first,
    the tests, the metrics with their intervals, the groups, and ``figure`` — (caption, PNG) —
    drawn small.  Self-contained: nothing is loaded from anywhere."""
    parts = [f"<div class='calcheck fragment'><style>{CSS.replace('body { margin: 0; }', '')}"
             "</style>", *_sections(report, full=False)]
    if figure is not None:
        parts.append(_img(figure[1], figure[0], width=360))
    if report.get("notes"):
        parts.append(f"<p class='meta'>{len(report['notes'])} note(s): "
                     + _e(" · ".join(report["notes"][:3]))
                     + (" …" if len(report["notes"]) > 3 else "") + "</p>")
    return "\n".join(parts) + "</div>"


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
    weights = weights_text(inp)
    if weights:
        rows.append(("row weights", weights))
    return ("<h2>Input</h2><table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>"
                                              for k, v in rows) + "</table>")


def _groups(report: Mapping[str, Any]) -> str:
    """The ``--by`` groups (or ``--time`` windows): a row each, every metric with its
    interval; groups under ``--min-group-size`` flagged."""
    groups = groups_of(report)
    if not groups:
        return ""
    ids = list(report.get("metrics", {}))
    head = "".join(f"<th>{_e(title(mid))}</th>" for mid in ids)
    out = [f"<h2>Groups {_e(grouping(report))}</h2><table><tr><th>group</th><th>rows</th>"
           f"{head}</tr>"]
    for name, g in groups.items():
        flag = " <span class='flag' title='under --min-group-size'>small</span>" \
            if g.get("flagged") else ""
        label = "(missing)" if g.get("missing") else name
        cells = []
        for mid in ids:
            m = g.get("metrics", {}).get(mid, {})
            text = _e(format_value(m.get("value"), m.get("unit", "fraction")))
            if m.get("ci") and m["ci"].get("low") is not None:
                text += f"<br><span class='ci'>{_e(ci_text(m))}</span>"
            cells.append(f"<td class='num'>{text}</td>")
        out.append(f"<tr><td>{_e(label)}{flag}</td><td class='num'>{g.get('n', 0):,}</td>"
                   + "".join(cells) + "</tr>")
    return "".join(out) + "</table>"


def _wide(html_text: str) -> str:
    """Every table in a box that scrolls by itself when the window is narrower than the table
    (the page never scrolls sideways)."""
    return html_text.replace("<table>", "<div class='wide'><table>").replace(
        "</table>", "</table></div>")


def _sections(report: Mapping[str, Any], *, full: bool) -> list[str]:
    return [_wide(part) for part in _section_parts(report, full=full)]


def _section_parts(report: Mapping[str, Any], *, full: bool) -> list[str]:
    parts = [_summary(report)]
    if full:
        parts.append(_input(report))
    else:
        inp = report["input"]
        parts.append(f"<p class='meta'>{_e(inp['path'])} · {inp['rows_used']:,} rows</p>")
    if report.get("tests"):
        adj = adjusted_shown(report)
        fam = (report.get("summary") or {}).get("family") or {}
        how = f" ({_e(fam['method'])} over {fam['size']} tests)" if adj else ""
        parts.append(f"<h2>Calibration tests at α = {_e(report['settings'].get('alpha'))}{how}"
                     "</h2><table><tr><th>test</th><th>statistic</th><th>p-value</th>"
                     + (f"<th>{_e(fam['method'])} p</th>" if adj else "")
                     + "<th>verdict</th><th>details</th></tr>")
        for tid, t in report["tests"].items():
            verdict = ("<span class='reject'>rejected</span>"
                       if t.get("reject_adjusted", t["reject"])
                       else "<span class='accept'>not rejected</span>")
            stat = "∞" if t.get("infinite") else ("–" if t["statistic"] is None
                                                   else statistic(t["statistic"]))
            q = f"<td class='num'>{_e(format_p(t.get('pvalue_adjusted')))}</td>" if adj else ""
            parts.append(f"<tr><td>{_e(title(tid))}</td><td class='num'>{stat}</td>"
                         f"<td class='num'>{_e(format_p(t.get('pvalue')))}</td>{q}"
                         f"<td>{verdict}</td><td>{_e(test_note(tid, t))}</td></tr>")
        parts.append("</table>")
    if report.get("metrics"):
        level = ci_level(report)
        cols = "<th>id</th><th>metric</th><th>value</th>" + (
            f"<th>{level:.0%} interval</th>" if level is not None else "") + "<th>bins</th>"
        parts.append(f"<h2>Metrics</h2><table><tr>{cols}</tr>")
        for mid, m in report["metrics"].items():
            ci = f"<td class='num ci'>{_e(ci_text(m))}</td>" if level is not None else ""
            parts.append(f"<tr><td>{_e(mid)}</td><td>{_e(title(mid))}</td>"
                         f"<td class='num'>{_e(format_value(m['value'], m['unit']))}</td>{ci}"
                         f"<td>{_e(short_settings(mid, m))}</td></tr>")
        parts.append("</table>")
        parts.append(_groups(report))
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
                         f"<td class='num'>{number(v['vece'])}</td><td class='num'>"
                         f"{number(v['vce_max'])}</td><td class='num'>{v['v_star']:.4g}</td></tr>")
        parts.append("</table>")
    if report.get("audit"):
        from calcheck.report.document import audit_blocks

        parts += [_block(b) for b in audit_blocks(report["audit"])]
    return parts


def _block(block: tuple[Any, ...]) -> str:
    """One block of :mod:`calcheck.report.document` as HTML (heading, text or table)."""
    kind = block[0]
    if kind == "heading":
        return f"<h2>{_e(block[1])}</h2>"
    if kind == "table":
        _, head, rows, right = block
        return ("<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"
                + "".join("<tr>" + "".join(
                    f"<td class='num'>{_e(c)}</td>" if i in right else f"<td>{_e(c)}</td>"
                    for i, c in enumerate(r)) + "</tr>" for r in rows) + "</table>")
    return f"<p>{_e(block[1])}</p>"
