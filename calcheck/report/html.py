"""One self-contained HTML report: metric table, test verdicts and figures embedded as base64
PNG.  No script, stylesheet, font or image is fetched from anywhere: the file opens offline.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from typing import Any

from calcheck.registry import title
from calcheck.report.render import describe_settings, format_value

CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem auto;
       max-width: 1100px; color: #222; line-height: 1.4; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; } h2 { margin-top: 2rem; font-size: 1.25rem; }
.meta { color: #555; font-size: 0.9rem; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.3rem 0.7rem; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.reject { color: #b00020; font-weight: 600; } .accept { color: #1b5e20; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.85rem; }
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


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
             f"<title>calcheck report: {_e(inp['path'])}</title><style>{CSS}</style></head><body>",
             "<h1>Calibration report</h1>", *_sections(report)]
    if figures:
        parts.append("<h2>Figures</h2>")
        parts.extend(_img(png, cap) for cap, png in figures)
    if report.get("notes"):
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in report["notes"])
                     + "</ul>")
    settings = ", ".join(f"{k}={v}" for k, v in report.get("settings", {}).items())
    parts.append(f"<h2>Settings</h2><p class='meta'>{_e(settings)}</p></body></html>")
    return "\n".join(parts)


def render_fragment(report: Mapping[str, Any]) -> str:
    """The report's tables as an HTML fragment (a notebook's view of a Report)."""
    return "<div class='calcheck-report'>" + "\n".join(_sections(report)) + "</div>"


def _sections(report: Mapping[str, Any]) -> list[str]:
    inp = report["input"]
    parts = [f"<p class='meta'>{_e(inp['path'])} · {inp['rows_used']:,} rows"
             + (f" · prevalence {inp['prevalence']:.4f}" if inp.get("prevalence") is not None
                else "")
             + (f" · {inp['rows_dropped']:,} rows dropped" if inp.get("rows_dropped") else "")
             + f" · calcheck {_e(report['calcheck_version'])}</p>"]
    if report.get("metrics"):
        parts.append("<h2>Metrics</h2><table><tr><th>id</th><th>metric</th><th>value</th>"
                     "<th>settings</th></tr>")
        for mid, m in report["metrics"].items():
            parts.append(f"<tr><td>{_e(mid)}</td><td>{_e(title(mid))}</td>"
                         f"<td class='num'>{_e(format_value(m['value'], m['unit']))}</td>"
                         f"<td>{_e(describe_settings(m['settings']))}</td></tr>")
        parts.append("</table>")
    if report.get("tests"):
        parts.append("<h2>Calibration tests</h2><table><tr><th>test</th><th>statistic</th>"
                     "<th>p-value</th><th>verdict</th></tr>")
        for tid, t in report["tests"].items():
            verdict = ("<span class='reject'>rejected</span>" if t["reject"]
                       else "<span class='accept'>not rejected</span>")
            stat = ("∞" if t.get("infinite") else "–") if t["statistic"] is None \
                else f"{t['statistic']:.6g}"
            pval = "–" if t["pvalue"] is None else f"{t['pvalue']:.4g}"
            parts.append(f"<tr><td>{_e(title(tid))}</td><td class='num'>{stat}"
                         f"</td><td class='num'>{pval}</td><td>{verdict} at α = {t['alpha']}"
                         "</td></tr>")
        parts.append("</table>")
        levels = report["tests"].get("tcal_adaptive", {}).get("levels")
        if levels:
            rej = [lv["m"] for lv in levels if lv["reject"]]
            parts.append(f"<p class='meta'>Adaptive T-Cal tested {len(levels)} dyadic levels; "
                         f"rejecting at m = {', '.join(map(str, rej)) if rej else 'none'}.</p>")
    if report.get("variables"):
        parts.append("<h2>Variable-based calibration</h2><table><tr><th>rank</th>"
                     "<th>variable</th><th>VECE</th><th>VCE(v*)</th><th>v*</th></tr>")
        for name, v in report["variables"].items():
            parts.append(f"<tr><td>{v['rank']}</td><td>{_e(name)}</td>"
                         f"<td class='num'>{v['vece']:.4f}</td><td class='num'>"
                         f"{v['vce_max']:.4f}</td><td class='num'>{v['v_star']:.4g}</td></tr>")
        parts.append("</table>")
    return parts
