"""Report and figure files: the HTML or PDF report and the image of ``plot``, written
atomically (a temporary file, then a rename; nothing half-written is left)."""

from __future__ import annotations

import os
from typing import Any

from calcheck.options import Options
from calcheck.report.model import Report


def report_kind(opts: Options) -> str:
    """html or pdf: ``format``, else the extension of ``output``."""
    assert opts.output is not None
    return opts.format or ("pdf" if opts.output.lower().endswith(".pdf") else "html")


def save_report_file(rep: Report, opts: Options) -> None:
    """Write the HTML or PDF report file atomically."""
    from calcheck.io.output import atomic_write, write_output

    assert opts.output is not None
    if report_kind(opts) == "html":
        atomic_write(opts.output, rep.html(), label=opts.name_of("output"))
        return
    from calcheck.figures.pdf import write_pdf
    from calcheck.report.document import blocks

    content = blocks(rep.data)

    def write(tmp: str) -> None:
        write_pdf(tmp, content, list(rep.figures), paper=opts.paper)

    write_output(opts.output, write, label=opts.name_of("output"))


def save_figure(fig: Any, path: str, label: str = "output") -> None:
    """Save a figure atomically; the format follows the extension."""
    from calcheck.figures import draw
    from calcheck.io.output import write_output

    ext = os.path.splitext(path)[1]

    def write(tmp: str) -> None:
        draw.save(fig, tmp, fmt=ext.lstrip(".").lower())

    write_output(path, write, label=label)
