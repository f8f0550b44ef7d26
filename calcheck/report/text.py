"""Text that reaches a terminal, a markdown viewer or a CSV cell: made safe and plain.

Names and values from a file (paths, column names, ``--by`` values, class names) can carry
terminal control sequences (ESC, BEL, …) or characters that mean something to the output
format.  :func:`clean` makes any such text visible and inert (control characters become
``\\x1b``-style escapes), :func:`markdown` escapes a table cell for markdown (``|``, ``<``,
``>``, backslash), and :func:`ascii` turns calcheck's own typography (α, χ², –, ≤, …) into plain
ASCII for output that is not a terminal.  Rich markup is never interpreted: renderings pass
:class:`rich.text.Text` objects, not strings.
"""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ASCII = {"σ̂": "sigma", "\u0302": "", "–": "-", "—": "-", "α": "alpha", "σ": "sigma",
          "χ²": "chi2", "χ": "chi", "²": "^2",
          "≤": "<=", "≥": ">=", "…": "...", "·": "*", "√": "sqrt", "∞": "inf", "Σ": "sum",
          "×": "x", "±": "+/-", "→": "->", "’": "'", "“": '"', "”": '"', "μ": "mu", "ν": "nu", "Δ": "delta",
          "‖": "||", "⌊": "floor(", "⌋": ")", "▇": "#", "█": "#", "✓": "ok", "✗": "x"}
_ASCII_RE = re.compile("|".join(sorted(map(re.escape, _ASCII), key=len, reverse=True)))


def clean(value: Any) -> str:
    """``str(value)`` with control characters shown as escapes (tab and newline too: a table
    cell is one line)."""
    text = str(value)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text).replace("\t", "\\t") \
        .replace("\n", "\\n")


def markdown(value: Any) -> str:
    """A markdown table cell: cleaned, with ``\\``, ``|``, ``<`` and ``>`` escaped."""
    return (clean(value).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;"))


def ascii(text: str) -> str:
    """calcheck's typography as plain ASCII (data text outside the map is left as it is)."""
    return _ASCII_RE.sub(lambda m: _ASCII[m.group()], text)


def setting(v: Any) -> str:
    """A setting as a reader wants it: no Python literals (None, True, lists, dicts)."""
    if v is None:
        return "default"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(setting(x) for x in v) if v else "none"
    if isinstance(v, dict):
        return "; ".join(f"{k} {setting(x)}" for k, x in v.items())
    return clean(v)
