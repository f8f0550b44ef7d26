"""Gates that make a run exit 1: ``--fail-if`` conditions on metric values (``score``, ``test``),
``--fail-if-worse`` conditions on the change of a metric (``compare``), and the
``--tolerance METRIC:VALUE`` bounds behind ``--fail-if-beyond``."""

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


@dataclass(frozen=True, slots=True)
class WorseGate:
    """One ``--fail-if-worse METRIC[:MARGIN]`` condition of ``compare``: it trips when the
    metric's interval of the change new − old lies above ``margin``."""

    text: str
    metric: str
    margin: float


_WORSE = re.compile(r"\s*([A-Za-z0-9_]+)\s*(?::\s*([-+0-9.eE]+)\s*)?")


def parse_worse_gate(text: str, label: str = "--fail-if-worse") -> WorseGate:
    """Parse ``"ece"`` or ``"ece:0.005"``; raise :class:`UsageError` on anything else."""
    m = _WORSE.fullmatch(text)
    if m is None:
        raise UsageError(f"{label} {text!r}: expected METRIC or METRIC:MARGIN, e.g. ece or "
                         "ece:0.005")
    try:
        margin = float(m.group(2)) if m.group(2) is not None else 0.0
    except ValueError:
        raise UsageError(f"{label} {text!r}: the margin must be a number") from None
    if margin != margin or margin in (float("inf"), float("-inf")):
        raise UsageError(f"{label} {text!r}: the margin must be finite")
    return WorseGate(text.strip(), m.group(1).lower(), margin)


@dataclass(frozen=True, slots=True)
class Tolerance:
    """One ``--tolerance METRIC:VALUE``: how large a calibration error may be and still count
    as calibrated enough (the equivalence verdict of :mod:`calcheck.report.summary`)."""

    text: str
    metric: str
    value: float


_TOLERANCE = re.compile(r"\s*([A-Za-z0-9_]+)\s*:\s*([-+0-9.eE]+)\s*")


def parse_tolerance(text: str, label: str = "--tolerance") -> Tolerance:
    """Parse ``"ece:0.02"``; raise :class:`UsageError` on anything else."""
    m = _TOLERANCE.fullmatch(text)
    if m is None:
        raise UsageError(f"{label} {text!r}: expected METRIC:VALUE, e.g. ece:0.02")
    try:
        value = float(m.group(2))
    except ValueError:
        raise UsageError(f"{label} {text!r}: the value must be a number") from None
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{label} {text!r}: the value must be a positive finite number (the "
                         "largest error that still counts as calibrated)")
    return Tolerance(text.strip(), m.group(1).lower(), value)
