"""What the figures need that is not installed: the error and how to install it (apart from
:mod:`calcheck.figures.draw`, so that checking for matplotlib loads no drawing code)."""

from __future__ import annotations

from calcheck.errors import CalcheckError

INSTALL_HINT = ('install it with: pip install "matplotlib>=3.7" (from a calcheck checkout: '
                'pip install -e ".[plot]")')


class MissingExtra(CalcheckError):
    """An optional dependency is not installed."""
