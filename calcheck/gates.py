"""``--fail-if`` gates: conditions on metric values that make the run exit 1 when they hold."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from calcheck.errors import UsageError

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
}
_GATE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|>|<)\s*([-+]?[0-9.]+(?:[eE][-+]?\d+)?)\s*$")


@dataclass(frozen=True, slots=True)
class Gate:
    """A condition ``metric op threshold``; the gate *fails* (trips) when it holds."""

    metric: str
    op: str
    threshold: float
    text: str

    def trips(self, value: float | None) -> bool:
        """Whether the condition holds for ``value`` (a missing value never trips)."""
        return value is not None and _OPS[self.op](value, self.threshold)


def parse_gate(text: str, *, label: str = "--fail-if") -> Gate:
    """Parse ``"ece>0.02"``; raise :class:`UsageError` on anything else (``label`` names the
    option in the message)."""
    m = _GATE.match(text)
    if not m:
        raise UsageError(f"cannot parse {label} {text!r}; write METRIC>VALUE, e.g. 'ece>0.02' "
                         "(operators >, >=, <, <=)")
    try:
        thr = float(m.group(3))
    except ValueError:
        raise UsageError(f"{label} {text!r}: {m.group(3)!r} is not a number") from None
    return Gate(metric=m.group(1).lower(), op=m.group(2), threshold=thr, text=text.strip())


def evaluate_gates(gates: list[Gate], values: Mapping[str, float | None]) -> list[dict[str, Any]]:
    """Evaluate every gate; each outcome says the condition, the value and whether it tripped."""
    out = []
    for g in gates:
        v = values.get(g.metric)
        out.append({"condition": g.text, "metric": g.metric, "op": g.op,
                    "threshold": g.threshold, "value": v, "failed": g.trips(v)})
    return out
