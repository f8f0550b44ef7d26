"""A one-table report — a header, a headline, one table, lines after it, notes and settings —
rendered as a terminal table, markdown or HTML.  ``audit`` and ``monitor`` describe their
reports as a :class:`Sheet`; the renderings are here once."""

from __future__ import annotations

import html as _html
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from calcheck.report.render import print_fitted
from calcheck.report.text import ascii, clean, markdown


@dataclass(frozen=True)
class Sheet:
    """``columns``: (name, right-justified); ``style``: the headline's class — ``alarm`` /
    ``miscalibrated`` (red), ``ok`` (green) or ``inconclusive``; ``marked``: the rows to
    stress (bold red in a terminal, a class in HTML)."""

    title: str
    header: str
    headline: str
    style: str
    columns: tuple[tuple[str, bool], ...]
    rows: tuple[tuple[str, ...], ...]
    marked: frozenset[int] = frozenset()
    after: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)


def render_table(sheet: Sheet, *, width: int = 100, color: bool = False,
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

    red = sheet.style in ("alarm", "miscalibrated")
    console.print(tx(sheet.header))
    console.print(tx(clean(sheet.headline), "bold red" if red else "bold"))
    t = Table(box=box.ASCII if plain else box.HEAVY_HEAD, header_style="bold" if color else "")
    for name, right in sheet.columns:
        t.add_column(tx(name), justify="right" if right else "left", no_wrap=right,
                     overflow="fold")
    for i, r in enumerate(sheet.rows):
        style = "red" if i in sheet.marked else ""
        t.add_row(*(tx(clean(c), style) for c in r))
    if sheet.rows:
        print_fitted(console, t, tx)
    for line in sheet.after:
        console.print(tx(clean(line)))
    return buf.getvalue()


def render_markdown(sheet: Sheet) -> str:
    def row(cells: Any) -> str:
        return "| " + " | ".join(markdown(c) for c in cells) + " |"

    lines = [f"**{markdown(sheet.header)}**", "", markdown(sheet.headline), ""]
    if sheet.rows:
        lines += [row(n for n, _ in sheet.columns),
                  "|" + "|".join("---:" if right else "---" for _, right in sheet.columns) + "|"]
        lines += [row(r) for r in sheet.rows]
    lines += [f"\n{markdown(line)}" for line in sheet.after]
    return "\n".join(lines) + "\n"


def _parts(sheet: Sheet, figures: list[tuple[str, bytes]], *, full: bool) -> list[str]:
    from calcheck.report.html import _img, _wide, settings_table

    def e(x: Any) -> str:
        return _html.escape(clean(x))

    cls = {"alarm": "miscalibrated"}.get(sheet.style, sheet.style)
    parts = [f"<p class='meta'>{e(sheet.header)}</p>",
             f"<div class='summary {cls}'>{e(sheet.headline)}</div>"]
    if sheet.rows:
        head = "".join(f"<th>{e(n)}</th>" for n, _ in sheet.columns)
        body = "".join(
            f"<tr{' class=reject' if i in sheet.marked else ''}>" + "".join(
                f"<td class='num'>{e(c)}</td>" if right else f"<td>{e(c)}</td>"
                for c, (_, right) in zip(r, sheet.columns)) + "</tr>"
            for i, r in enumerate(sheet.rows))
        parts.append(_wide(f"<table><tr>{head}</tr>{body}</table>"))
    parts += [f"<p>{e(line)}</p>" for line in sheet.after]
    parts += [_img(png, cap) for cap, png in figures]
    if sheet.notes:
        parts += ["<h2>Notes</h2><ul>", *(f"<li>{e(n)}</li>" for n in sheet.notes), "</ul>"]
    if full:
        parts.append(settings_table(sheet.settings))
    return parts


def render_html(sheet: Sheet, figures: list[tuple[str, bytes]]) -> str:
    from calcheck.report.html import CSS

    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_html.escape(sheet.title)}"
            f"</title><style>{CSS}</style></head><body><main class='calcheck page'>"
            f"<h1>{_html.escape(sheet.title)}</h1>" + "\n".join(_parts(sheet, figures, full=True))
            + "</main></body></html>\n")


def render_fragment(sheet: Sheet) -> str:
    from calcheck.report.html import CSS

    return (f"<div class='calcheck fragment'><style>{CSS.replace('body { margin: 0; }', '')}"
            "</style>" + "\n".join(_parts(sheet, [], full=False)) + "</div>")
