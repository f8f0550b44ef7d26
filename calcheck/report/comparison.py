"""Renderings of a ``calcheck compare`` report: terminal table, markdown, CSV and the HTML page
(both reliability diagrams overlaid, the change table).  The JSON is the document itself."""

from __future__ import annotations

import html as _html
import io
from collections.abc import Mapping
from typing import Any

from calcheck.formatting import number
from calcheck.formatting import value as format_value
from calcheck.report.describe import weights_text
from calcheck.report.render import _fit as fits
from calcheck.report.render import _write_rows, print_fitted, to_json
from calcheck.report.text import ascii, clean, markdown

COLUMNS = ("id", "metric", "old", "new", "change", "interval", "verdict")


def signed(v: float | None, unit: str) -> str:
    """A change with its sign, as the tables show it."""
    if v is None:
        return "–"
    text = format_value(abs(v), unit)
    return ("−" if v < 0 else "+") + text if v != 0 else text


_signed = signed


def _rows(metrics: Mapping[str, Any]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for mid, e in metrics.items():
        ci = e.get("ci") or {}
        unit = "fraction" if e["unit"] == "nats" else e["unit"]     # nats: in the title
        name = str(e["title"]) + (" (nats)" if e["unit"] == "nats" else "")
        interval = (f"[{_signed(ci['low'], unit)}, {_signed(ci['high'], unit)}]"
                    if ci.get("low") is not None else "–")
        out.append((mid, name, format_value(e["old"], unit), format_value(e["new"], unit),
                    _signed(e["delta"], unit), interval, str(e.get("verdict") or "–")))
    return out


def _header(report: Mapping[str, Any]) -> str:
    inp = report["input"]
    weights = weights_text(inp["old"])
    return (f"calcheck compare: OLD {clean(inp['old'].get('path'))} vs NEW "
            f"{clean(inp['new'].get('path'))}, {inp['rows_used']:,} rows matched by "
            f"{inp['matched_by']}" + (f"\n{weights} (both models' rows)" if weights else ""))


def _level(report: Mapping[str, Any]) -> str:
    return f"{100 * report['settings']['ci']['level']:g}%"


def render_table(report: Mapping[str, Any], *, width: int = 100, color: bool = False,
                 plain: bool = False) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system="standard" if color else None,
                      force_terminal=bool(color), no_color=not color, legacy_windows=False,
                      highlight=False, markup=False, emoji=False)

    def tx(text: str, style: str = "") -> Any:
        return Text(ascii(text) if plain else text, style=style if color else "")

    def table(rows: list[tuple[str, ...]], first: str, title: str | None = None) -> Any:
        """The change table; without the metric's title (its id names it) when the table
        would not fit the width with it."""
        for names in (True, False):
            t = Table(box=box.ASCII if plain else box.HEAVY_HEAD, header_style="bold" if color
                      else "", title=tx(title) if title else None)
            cols = [c for c in (first, *COLUMNS[1:]) if names or c != "metric"]
            for c in cols:
                right = c in ("old", "new", "change", "interval")
                wrap = c != first               # between words (a unit, a bound), never inside
                t.add_column(tx(c if c != "interval" else f"{_level(report)} interval"),
                             justify="right" if right else "left", no_wrap=not wrap,
                             overflow="fold" if wrap else "ellipsis")
            for r in rows:
                style = {"worse": "bold red", "better": "bold green"}.get(r[-1], "")
                cells = r if names else (r[0], *r[2:])
                t.add_row(*(tx(c) for c in cells[:-1]), tx(cells[-1], style))
            if fits(t, console.width):
                break
        return t

    console.print(tx(_header(report)))
    s = report.get("summary") or {}
    for key in ("text", "scores_text"):
        if s.get(key):
            console.print(tx(clean(s[key]), {"worse": "bold red", "better": "bold green"}
                             .get(s.get("verdict", ""), "bold") if key == "text" else ""))
    print_fitted(console, table(_rows(report["metrics"]), "id"), tx)
    for gname, g in (report.get("groups") or {}).items():
        title = f"{report['settings'].get('by')} = {clean(gname)} (n = {g['n']:,}" + \
            (", small)" if g["flagged"] else ")")
        print_fitted(console, table(_rows(g["metrics"]), "id", title), tx)
    for gate in report.get("gates") or []:
        console.print(tx(_gate_text(gate), "bold red" if gate["failed"] else ""))
    return buf.getvalue()


def _gate_text(gate: Mapping[str, Any]) -> str:
    state = "FAILED" if gate["failed"] else "passed"
    return (f"gate --fail-if-worse {gate['condition']}: {state} (lower end of the change "
            f"{number(gate['low'], 6)} {'>' if gate['failed'] else '<='} margin {gate['margin']:g})")


def render_markdown(report: Mapping[str, Any]) -> str:
    def row(cells: Any) -> str:
        return "| " + " | ".join(markdown(c) for c in cells) + " |"

    lines = [*(f"**{markdown(line)}**" for line in _header(report).splitlines()), "",
             markdown((report.get("summary") or {}).get("text", "")), ""]
    head = [*COLUMNS[:5], f"{_level(report)} interval", "verdict"]
    lines += [row(head), "|---|---|---:|---:|---:|---:|---|"]
    lines += [row(r) for r in _rows(report["metrics"])]
    for gname, g in (report.get("groups") or {}).items():
        lines += ["", f"{markdown(str(report['settings'].get('by')))} = {markdown(gname)} "
                      f"(n = {g['n']:,})", "", row(head), "|---|---|---:|---:|---:|---:|---|"]
        lines += [row(r) for r in _rows(g["metrics"])]
    lines += [f"\n- {markdown(_gate_text(g))}" for g in report.get("gates") or []]
    return "\n".join(lines) + "\n"


def render_csv(report: Mapping[str, Any]) -> str:
    def records(metrics: Mapping[str, Any], **keys: Any) -> list[dict[str, Any]]:
        out = []
        for mid, e in metrics.items():
            ci = e.get("ci") or {}
            out.append({**keys, "metric": mid, "old": e["old"], "new": e["new"],
                        "delta": e["delta"], "ci_low": ci.get("low"), "ci_high": ci.get("high"),
                        "ci_level": ci.get("level"), "verdict": e.get("verdict")})
        return out

    recs = records(report["metrics"])
    for gname, g in (report.get("groups") or {}).items():
        recs += records(g["metrics"], group=gname, group_n=g["n"])
    return _write_rows(recs)


def render(report: Mapping[str, Any], fmt: str, *, width: int = 100, color: bool = False,
           plain: bool = False, details: bool = False) -> str:
    if fmt == "json":
        return to_json(report)
    if fmt == "csv":
        return render_csv(report)
    if fmt == "markdown":
        return render_markdown(report)
    return render_table(report, width=width, color=color, plain=plain)


def render_html(report: Mapping[str, Any], figures: list[tuple[str, bytes]]) -> str:
    """The comparison as one self-contained HTML page."""
    from calcheck.report.html import CSS

    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>calcheck compare"
            f"</title><style>{CSS}</style></head><body><main class='calcheck page'>"
            "<h1>Calibration comparison</h1>" + "\n".join(_parts(report, figures, full=True))
            + "</main></body></html>\n")


def render_fragment(report: Mapping[str, Any]) -> str:
    """The comparison's notebook view: verdict, the change table per metric (and group),
    the gates, in one styled ``<div>``."""
    from calcheck.report.html import CSS

    return (f"<div class='calcheck fragment'><style>{CSS.replace('body { margin: 0; }', '')}"
            "</style>" + "\n".join(_parts(report, [], full=False)) + "</div>")


def _parts(report: Mapping[str, Any], figures: list[tuple[str, bytes]], *,
           full: bool) -> list[str]:
    from calcheck.report.html import _img, _wide, settings_table

    def e(x: Any) -> str:
        return _html.escape(clean(x))

    s = report.get("summary") or {}
    cls = {"worse": "miscalibrated", "better": "ok"}.get(s.get("verdict", ""), "inconclusive")
    parts = [*(f"<p class='meta'>{e(line)}</p>" for line in _header(report).splitlines()),
             f"<div class='summary {cls}'><b>{e(s.get('verdict', ''))}</b>{e(s.get('text', ''))}"
             "</div>"]

    def tab(metrics: Mapping[str, Any]) -> str:
        head = "".join(f"<th>{e(c)}</th>" for c in
                       (*COLUMNS[:5], f"{_level(report)} interval", "verdict"))
        body = "".join("<tr>" + "".join(
            f"<td class='num'>{e(c)}</td>" if 2 <= i <= 5 else
            f"<td class='{'reject' if c == 'worse' else 'accept' if c == 'better' else ''}'>"
            f"{e(c)}</td>" if i == 6 else f"<td>{e(c)}</td>" for i, c in enumerate(r)) + "</tr>"
            for r in _rows(metrics))
        return _wide(f"<table><tr>{head}</tr>{body}</table>")

    parts += ["<h2>Change per metric (new − old)</h2>", tab(report["metrics"])]
    for gname, g in (report.get("groups") or {}).items():
        parts += [f"<h2>{e(report['settings'].get('by'))} = {e(gname)} (n = {g['n']:,})</h2>",
                  tab(g["metrics"])]
    for gate in report.get("gates") or []:
        parts.append(f"<p class='{'reject' if gate['failed'] else 'accept'}'>"
                     f"{e(_gate_text(gate))}</p>")
    parts += [_img(png, cap) for cap, png in figures]
    if report.get("notes"):
        parts += ["<h2>Notes</h2><ul>", *(f"<li>{e(n)}</li>" for n in report["notes"]), "</ul>"]
    if full:
        parts.append(settings_table(report["settings"]))
    return parts
