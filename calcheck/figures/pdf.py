"""The PDF report: a document, not a dump of the terminal.

Every page has one size — A4 (210 × 297 mm) or US Letter (8.5 × 11 in), ``--paper`` — and a
footer with the page number ("page 2 of 7").  Page 1 holds the title and input, the verdict in
a coloured box, the headline metrics with their intervals and the tests, all set in a
proportional font (DejaVu Sans, embedded as TrueType so that the text can be selected and
extracted); the groups, variables, notes and settings follow, flowing onto further pages as
needed.  Each figure then gets its own page: drawn at 200 dpi, scaled to fit inside the margins
with its caption set below it, so caption and figure never overlap.

The file is reproducible: no creation date, fixed ids (the same input gives the same bytes).
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Callable
from typing import Any

from calcheck.figures.draw import STABLE_METADATA, STABLE_RC, _mpl

PAPER = {"a4": (8.27, 11.69), "letter": (8.5, 11.0)}
MARGIN = 0.75                          # inches, every side
FONT = 9.0                             # body text, points
LINE = FONT * 1.45 / 72                # inches per line of body text
CHAR = FONT * 0.56 / 72                # inches per character, DejaVu Sans on average
VERDICT_COLORS = {"miscalibrated": ("#fdecee", "#b00020"), "inconclusive": ("#fff4e0", "#b26a00"),
                  "no evidence of miscalibration": ("#edf7ee", "#1b5e20"),
                  "consistent with calibration": ("#edf7ee", "#1b5e20")}

Draw = Callable[[Any], None]           # draws one page onto a matplotlib Figure


class _Flow:
    """Text and tables laid out top to bottom over as many pages as they need."""

    def __init__(self, size: tuple[float, float]) -> None:
        self.w, self.h = size
        self.pages: list[list[Draw]] = [[]]
        self.y = self.h - MARGIN                        # inches from the bottom

    def _room(self, height: float) -> None:
        if self.y - height < MARGIN + 0.4 and self.pages[-1]:
            self.pages.append([])
            self.y = self.h - MARGIN

    def text(self, text: str, *, size: float = FONT, weight: str = "normal",
             color: str = "#222222", gap: float = 0.0) -> None:
        chars = max(20, int((self.w - 2 * MARGIN) / (CHAR * size / FONT)))
        lines = textwrap.wrap(text, chars, break_long_words=False,
                              break_on_hyphens=False) or [""]
        step = LINE * size / FONT
        self.y -= gap
        for line in lines:
            self._room(step)
            y = self.y - step

            def draw(fig: Any, line: str = line, y: float = y) -> None:
                fig.text(MARGIN / self.w, y / self.h, line, fontsize=size, weight=weight,
                         color=color, va="bottom")
            self.pages[-1].append(draw)
            self.y = y

    def heading(self, text: str) -> None:
        self._room(7 * LINE)                 # a heading never ends a page
        self.text(text, size=12, weight="bold", gap=0.12)
        self.y -= 0.04

    def box(self, title: str, body: str, colors: tuple[str, str]) -> None:
        """The verdict: a tinted box with a coloured left rule."""
        chars = max(20, int((self.w - 2 * MARGIN - 0.35) / CHAR))
        lines = textwrap.wrap(body, chars, break_long_words=False, break_on_hyphens=False)
        height = 0.22 + 1.45 * 11 / 72 + LINE * len(lines) + 0.12
        self._room(height + 0.1)
        top = self.y - 0.08

        def draw(fig: Any) -> None:
            from matplotlib.patches import Rectangle

            x0, w = MARGIN / self.w, (self.w - 2 * MARGIN) / self.w
            fig.patches.append(Rectangle((x0, (top - height) / self.h), w, height / self.h,
                                         transform=fig.transFigure, facecolor=colors[0],
                                         edgecolor="none", zorder=0))
            fig.patches.append(Rectangle((x0, (top - height) / self.h), 0.06 / self.w,
                                         height / self.h, transform=fig.transFigure,
                                         facecolor=colors[1], edgecolor="none", zorder=1))
            y = top - 0.12 - 11 * 1.3 / 72
            fig.text((MARGIN + 0.2) / self.w, y / self.h, title, fontsize=11, weight="bold",
                     color=colors[1], va="bottom")
            for line in lines:
                y -= LINE
                fig.text((MARGIN + 0.2) / self.w, y / self.h, line, fontsize=FONT,
                         va="bottom", color="#222222")
        self.pages[-1].append(draw)
        self.y = top - height - 0.1

    def table(self, head: list[str], rows: list[list[str]], *,
              right: tuple[int, ...] = ()) -> None:
        """Columns as wide as their longest cell (the last wraps between words), a rule
        under the header; a table longer than the page continues on the next, header
        repeated."""
        if not rows:
            return
        usable = self.w - 2 * MARGIN
        widths = [max(len(str(c)) for c in [h, *(r[j] for r in rows)]) * CHAR + 0.18
                  for j, h in enumerate(head)]
        fixed = sum(widths[:-1])
        widths[-1] = max(min(widths[-1], usable - fixed), 0.8)
        scale = min(1.0, usable / sum(widths))
        xs = [MARGIN + sum(widths[:j]) * scale for j in range(len(head))]
        last_chars = max(8, int(widths[-1] * scale / CHAR) - 1)
        wrapped = [[*r[:-1], textwrap.wrap(str(r[-1]), last_chars, break_long_words=False,
                                           break_on_hyphens=False) or [""]] for r in rows]

        def header() -> None:
            self._room(2 * LINE)
            y = self.y - LINE

            def draw(fig: Any, y: float = y) -> None:
                for j, h in enumerate(head):
                    x = xs[j] + (widths[j] * scale - 0.12 if j in right else 0)
                    fig.text(x / self.w, y / self.h, h, fontsize=FONT, weight="bold",
                             ha="right" if j in right else "left", va="bottom")
                fig.lines.append(_rule(fig, MARGIN / self.w, (MARGIN + sum(widths) * scale)
                                       / self.w, (y - 0.05) / self.h))
            self.pages[-1].append(draw)
            self.y = y - 0.07

        header()
        for r in wrapped:
            need = LINE * len(r[-1])
            page = len(self.pages)
            self._room(need)
            if len(self.pages) != page:
                header()
            y = self.y - LINE

            def draw(fig: Any, r: list[Any] = r, y: float = y) -> None:
                for j, cell in enumerate(r):
                    lines = cell if j == len(r) - 1 else [cell]
                    for k, line in enumerate(lines):
                        x = xs[j] + (widths[j] * scale - 0.12 if j in right else 0)
                        fig.text(x / self.w, (y - k * LINE) / self.h, str(line), fontsize=FONT,
                                 ha="right" if j in right else "left", va="bottom")
            self.pages[-1].append(draw)
            self.y = y - LINE * (len(r[-1]) - 1)
        self.y -= 0.08


def _rule(fig: Any, x0: float, x1: float, y: float) -> Any:
    from matplotlib.lines import Line2D

    return Line2D([x0, x1], [y, y], transform=fig.transFigure, color="#999999", lw=0.6)


def _figure_page(size: tuple[float, float], caption: str, fig: Any) -> Draw:
    """One figure, drawn at 200 dpi and scaled into the page's margins, caption below."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=200)
    _mpl().close(fig)
    buf.seek(0)
    from matplotlib.image import imread

    img = imread(buf)
    w, h = size
    cap_lines = textwrap.wrap(caption, max(20, int((w - 2 * MARGIN) / CHAR)))
    cap_h = LINE * len(cap_lines) + 0.2
    box_w, box_h = w - 2 * MARGIN, h - 2 * MARGIN - cap_h - 0.3
    ih, iw = img.shape[0] / 200, img.shape[1] / 200          # inches at 200 dpi
    k = min(1.0, box_w / iw, box_h / ih)
    fw, fh = iw * k, ih * k
    left, top = MARGIN + (box_w - fw) / 2, h - MARGIN

    def draw(page: Any) -> None:
        ax = page.add_axes((left / w, (top - fh) / h, fw / w, fh / h))
        ax.imshow(img, interpolation="antialiased")
        ax.set_axis_off()
        y = top - fh - 0.15
        for line in cap_lines:
            y -= LINE
            page.text(MARGIN / w, y / h, line, fontsize=FONT, color="#444444", va="bottom",
                      style="italic")
    return draw


def layout(blocks: list[tuple[Any, ...]], figures: list[tuple[str, Any]], *,
           paper: str = "a4") -> list[list[Draw]]:
    """The pages: the report's blocks (:func:`calcheck.report.document.blocks`) flowed from
    page 1, then one page per figure."""
    size = PAPER[paper]
    flow = _Flow(size)
    for kind, *args in blocks:
        if kind == "title":
            flow.text(args[0], size=18, weight="bold")
        elif kind == "meta":
            flow.text(args[0], color="#555555", gap=0.05)
        elif kind == "verdict":
            verdict, body = args
            flow.box(verdict[:1].upper() + verdict[1:], body,
                     VERDICT_COLORS.get(verdict, ("#f5f5f5", "#555555")))
        elif kind == "heading":
            flow.heading(args[0])
        elif kind == "table":
            head, rows, right = args
            flow.table(head, rows, right=right)
        else:
            flow.text(args[0], gap=0.02)
    pages = [p for p in flow.pages if p]
    return pages + [[_figure_page(size, caption, fig)] for caption, fig in figures]


def write_pdf(path: str, blocks: list[tuple[Any, ...]], figures: list[tuple[str, Any]], *,
              paper: str = "a4") -> None:
    """Write the PDF report to ``path``: the text ``blocks`` of
    :func:`calcheck.report.document.blocks`, then the figures."""
    plt = _mpl()
    from matplotlib.backends.backend_pdf import PdfPages

    pages = layout(blocks, figures, paper=paper)
    size = PAPER[paper]
    rc = {**STABLE_RC, "pdf.fonttype": 42, "font.family": "DejaVu Sans"}
    with plt.rc_context(rc), PdfPages(path, metadata=STABLE_METADATA["pdf"]) as pdf:
        for i, steps in enumerate(pages, 1):
            fig = plt.figure(figsize=size)
            for step in steps:
                step(fig)
            fig.text(0.5, 0.4 / size[1], f"page {i} of {len(pages)}", ha="center",
                     fontsize=8, color="#777777")
            fig.text(1 - MARGIN / size[0], 0.4 / size[1], "calcheck calibration report",
                     ha="right", fontsize=8, color="#999999")
            pdf.savefig(fig)
            plt.close(fig)
