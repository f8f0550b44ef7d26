"""The one number formatter of every table, report, headline and figure.

* :func:`number` — fixed decimals (4 by default) for a reader, never more than
  :data:`MAX_SIGNIFICANT` (6) significant digits: a value whose fixed form would show more, or
  that would round to zero, is shown in ``g`` form (``226.993``, ``1.234e+06``, ``3.2e-07``).
  Integers are counts and are shown exactly, with thousands separators.
* :func:`value` — a metric in its unit: ``2.35 %``, ``0.0123``, ``0.2311 nats``.
* :func:`pvalue` — 4 significant digits, scientific below 1e-4, ``< 1e-300`` below the
  float range's reach.

JSON (and CSV, a data format) keep full precision; only what people read goes through here.
This module imports nothing but the standard library.
"""

from __future__ import annotations

import math
from typing import Any

MAX_SIGNIFICANT = 6


def significant(text: str) -> int:
    """The significant digits a formatted number shows (``"0.01230"`` → 4)."""
    mantissa = text.lower().split("e")[0].lstrip("+-").replace(",", "")
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits) if "." in mantissa else len(digits.rstrip("0")) or (1 if digits else 0)


def number(v: Any, digits: int = 4) -> str:
    """A number for a table: ``digits`` decimals, at most 6 significant digits, ``–`` for
    none, ``∞`` for infinity."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") in "iu"):
        return f"{int(v):,}"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if math.isnan(f):
        return "–"
    if math.isinf(f):
        return "∞" if f > 0 else "-∞"
    text = f"{f:.{digits}f}"
    if f != 0.0 and (significant(text) > MAX_SIGNIFICANT or float(text) == 0.0
                     or abs(f) < 10 ** -digits):
        text = f"{f:.{MAX_SIGNIFICANT}g}"
    return text


def value(v: float | None, unit: str) -> str:
    """A metric value in its unit."""
    if v is None:
        return "–"
    if unit == "percent":
        return f"{number(v, 2)} %"
    if unit == "count":                 # a (possibly fractional) count of rows or scores
        text = f"{v:,.1f}"
        return text if significant(text) <= MAX_SIGNIFICANT else f"{round(v):,}"
    if unit == "nats":
        return f"{number(v)} nats"
    return number(v)


def pvalue(p: float | None) -> str:
    """A p-value as every output shows it: 4 significant digits, ``< 1e-300`` below."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    if p < 1e-300:
        return "< 1e-300"
    if p < 1e-4:
        return f"{p:.2e}"
    return f"{p:.4g}"


def statistic(v: Any) -> str:
    """A test statistic: up to 6 significant digits."""
    return number(v, 6)
