"""``--where``: a row filter written as comparisons joined by ``and``.

``"split = 'test' and score >= 0.1"`` parses into conditions (column, operator, value) without
importing anything heavy, so the filter is checked before any input is read; the readers turn
it into a pyarrow expression (:func:`calcheck.io.source.to_expression`, pushed down to Parquet
scans) once the columns are known, and a column that does not exist is an error naming the
available ones.  Nothing the user writes is
ever evaluated.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from calcheck.errors import InputError, UsageError

_COND = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(==|=|!=|<=|>=|<|>)\s*(.+?)\s*$")
OPS = {"==": "__eq__", "=": "__eq__", "!=": "__ne__", "<": "__lt__", "<=": "__le__",
       ">": "__gt__", ">=": "__ge__"}


@dataclass(frozen=True)
class Condition:
    column: str
    op: str
    value: Any


def parse_where(text: str, *, label: str = "--where") -> list[Condition]:
    """The conditions of a ``--where`` filter; values are numbers or quoted strings."""
    out = []
    if not text.strip():
        raise UsageError(f"{label}: empty filter")
    for part in re.split(r"\s+and\s+", text.strip(), flags=re.IGNORECASE):
        m = _COND.match(part)
        if not m:
            raise UsageError(f"cannot parse {label} {part!r}; write COL OP VALUE joined by 'and' "
                             "(OP one of = != < <= > >=; text values in quotes)")
        col, op, raw = m.groups()
        value: Any
        if raw[:1] in "'\"" and raw[-1:] == raw[:1] and len(raw) >= 2:
            value = raw[1:-1]
        else:
            try:
                value = int(raw)
            except ValueError:
                try:
                    value = float(raw)
                except ValueError:
                    raise UsageError(f"{label} {part!r}: {raw!r} is neither a number nor a "
                                     "quoted string") from None
        out.append(Condition(col, op, value))
    return out


def check_columns(conditions: list[Condition], available: list[str], source: str,
                  label: str = "--where") -> None:
    """Every column the filter names must exist."""
    for c in conditions:
        if c.column not in available:
            close = difflib.get_close_matches(c.column, available, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(f"{source}: {label} names no column {c.column!r}{hint}; available "
                             f"columns: {', '.join(available) or '(none)'}", column=c.column)
