"""Every figure calcheck draws, and the only package that imports matplotlib.

* :mod:`calcheck.figures.draw` — the drawing: reliability, test-based (TCE), CORP, variable,
  per-class, overlay (OLD/NEW or ``--by`` groups) and drift figures, from the engines' tables.
* :mod:`calcheck.figures.arrays` — figures of in-memory data (compute the tables, then draw);
  the public ``calcheck.plot_reliability``, ``plot_tce``, ``plot_corp``, ``plot_variable``.
* :mod:`calcheck.figures.stream` — what a figure needs on the streaming engines (histograms,
  violin points) from passes over the files.
* :mod:`calcheck.figures.pdf` — the PDF report document.

matplotlib is optional (the ``plot`` extra): it is imported inside functions, never when this
package is imported, and its absence is a :class:`~calcheck.figures.MissingExtra`.
"""

from __future__ import annotations

import importlib
from typing import Any

from calcheck.figures._extra import INSTALL_HINT, MissingExtra

__all__ = ["INSTALL_HINT", "MissingExtra", "plot_corp", "plot_reliability", "plot_tce",
           "plot_variable", "require_matplotlib"]


def __getattr__(name: str) -> Any:            # the array figures load the metrics: lazily
    if name in ("plot_corp", "plot_reliability", "plot_tce", "plot_variable"):
        return getattr(importlib.import_module("calcheck.figures.arrays"), name)
    raise AttributeError(f"module 'calcheck.figures' has no attribute {name!r}")


def require_matplotlib() -> None:
    """Raise :class:`MissingExtra` (before any work) when matplotlib is not installed."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise MissingExtra(f"plots need matplotlib, which is not installed; {INSTALL_HINT}")
