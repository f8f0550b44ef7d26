"""The checks of option values, shared by the command line, the Python API and (``bins``,
``sigma``) the array kernels: each takes (value, label) and returns the normalised value or
raises :class:`~calcheck.errors.UsageError` naming ``label`` — the keyword in the API, the flag
on the command line.  Nothing heavy is imported: ``calcheck --help`` reads them."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from calcheck.errors import UsageError
from calcheck.limits import bins_in_range


def check_int(v: Any, label: str, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(v, (bool, np_bool_types())):
        raise UsageError(f"{label} must be an integer, got {v!r} (a boolean)")
    if not isinstance(v, int):
        try:
            if isinstance(v, str):                   # from the command line
                v = int(v.strip().replace("_", ""), 10)
            elif isinstance(v, float) and v.is_integer():
                v = int(v)
            elif hasattr(v, "__index__"):
                v = int(v.__index__())
            else:
                raise TypeError
        except (TypeError, ValueError):
            raise UsageError(f"{label} must be an integer, got {v!r}") from None
    if lo is not None and v < lo:
        raise UsageError(f"{label} must be an integer >= {lo:,}, got {v!r}")
    if hi is not None and v > hi:
        raise UsageError(f"{label} must be an integer <= {hi:,}, got {v!r}")
    return int(v)


def np_bool_types() -> tuple[type, ...]:
    """numpy's bool type when numpy is already imported (this module imports nothing heavy)."""
    import sys

    np = sys.modules.get("numpy")
    return (np.bool_,) if np is not None else ()


def check_float(v: Any, label: str) -> float:
    if isinstance(v, bool):
        raise UsageError(f"{label} must be a number, got {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise UsageError(f"{label} must be a number, got {v!r}") from None
    if not math.isfinite(f):
        raise UsageError(f"{label} must be a finite number, got {v!r}")
    return f


def check_bins(v: Any, label: str) -> int:
    return bins_in_range(check_int(v, label), label)


def check_count(lo: int, hi: int | None = None) -> Callable[[Any, str], int]:
    def check(v: Any, label: str) -> int:
        return check_int(v, label, lo, hi)
    return check


def check_open_unit(v: Any, label: str) -> float:
    f = check_float(v, label)
    if not 0.0 < f < 1.0:
        raise UsageError(f"{label} must be in the open interval (0, 1), got {v!r}")
    return f


def check_positive(v: Any, label: str) -> float:
    f = check_float(v, label)
    if not 1e-6 <= f <= 1e6:
        raise UsageError(f"{label} must be a number in [1e-06, 1e+06], got {v!r}")
    return f


def check_fraction(v: Any, label: str) -> float:
    f = check_float(v, label)
    if not 0.0 <= f <= 1.0:
        raise UsageError(f"{label} must be a fraction in [0, 1], got {v!r}")
    return f


SIGMA_MIN = 1e-4           # the smooth ECE's grid has ~20/sigma nodes


def check_sigma(v: Any, label: str) -> float:
    f = check_float(v, label)
    if not SIGMA_MIN <= f <= 1.0:
        raise UsageError(f"{label} must be in [{SIGMA_MIN:g}, 1] (its kernel grid has about "
                         f"20/sigma nodes: {20 / f if f > 0 else float('inf'):.3g} here), "
                         f"got {v!r}")
    return f


def check_span(v: Any, label: str) -> float:
    f = check_float(v, label)
    if not 0.0 < f <= 1.0:
        raise UsageError(f"{label} must be in (0, 1], got {v!r}")
    return f


def check_threshold(v: Any, label: str) -> float:
    f = check_float(v, label)
    if not 0.0 <= f < 1.0:
        raise UsageError(f"{label} must be in [0, 1), got {v!r}")
    return f


def choice(*allowed: str, aliases: dict[str, str] | None = None) -> Callable[[Any, str], str]:
    def check(v: Any, label: str) -> str:
        text = str(v).strip().lower() if isinstance(v, str) else v
        text = (aliases or {}).get(text, text)
        if text not in allowed:
            raise UsageError(f"unknown {label} {v!r}; use one of {', '.join(allowed)}")
        return str(text)
    return check


def check_text(v: Any, label: str) -> str:
    if not isinstance(v, str):
        raise UsageError(f"{label} must be a string, got {v!r}")
    return v


def check_column(v: Any, label: str) -> str:
    text = check_text(v, label)
    if not text.strip():
        raise UsageError(f"{label} must name a column, got an empty string")
    return text


def check_path(v: Any, label: str) -> str:
    text = str(v) if hasattr(v, "__fspath__") else check_text(v, label)
    if not text:
        raise UsageError(f"{label} must name a file, got an empty string")
    return text


def check_bool(v: Any, label: str) -> bool:
    if not isinstance(v, bool):
        raise UsageError(f"{label} must be True or False, got {v!r}")
    return v


def check_list(item: Callable[[Any, str], Any]) -> Callable[[Any, str], list[Any]]:
    """A list option: a value or a sequence of values (one string is one value)."""
    def check(v: Any, label: str) -> list[Any]:
        values = [v] if isinstance(v, str) or not hasattr(v, "__iter__") else list(v)
        return [item(x, label) for x in values]
    return check


def check_where(v: Any, label: str) -> str:
    from calcheck.where import parse_where

    text = check_text(v, label)
    parse_where(text, label=label)
    return text


def check_gates(v: Any, label: str) -> list[str]:
    from calcheck.gates import parse_gate

    values = check_list(check_text)(v, label)
    for g in values:
        parse_gate(g, label=label)
    return values



def check_gates_worse(v: Any, label: str) -> list[str]:
    from calcheck.gates import parse_worse_gate

    values = check_list(check_text)(v, label)
    for g in values:
        parse_worse_gate(g, label)
    return values


def check_tolerance(v: Any, label: str) -> list[str]:
    from calcheck.gates import parse_tolerance

    values = check_list(check_text)(v, label)
    for t in values:
        parse_tolerance(t, label)
    return values


def check_window(v: Any, label: str) -> str:
    from calcheck.io.windows import parse_window

    text = check_text(v, label)
    parse_window(text, label=label)
    return text


def check_tz(v: Any, label: str) -> str:
    from calcheck.io.windows import check_zone

    text = check_text(v, label)
    check_zone(text, label)
    return text
