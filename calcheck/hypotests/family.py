"""Family-wise error control: one verdict that reads several p-values (docs/tests.md,
"Families of tests").

A headline that says "miscalibrated" when any of k tests rejects at α rejects a calibrated
model far more often than α (13–21 % for the seven tests of ``--method all``).  Every verdict
that reads several p-values — several tests, tests per ``--by`` group or per ``--time``
window, the calibration errors of ``compare`` — reads them through :func:`adjust`, which
controls the probability of *any* false rejection at α whatever the dependence between them:

* ``holm`` (the default; Holm 1979): with the p-values ordered p₍₁₎ ≤ … ≤ p₍ₖ₎, the adjusted
  p₍ᵢ₎ is max_{j ≤ i} min(1, (k − j + 1)·p₍ⱼ₎); a test rejects when its adjusted p-value is at
  most α.  Uniformly more powerful than Bonferroni, valid under any dependence;
* ``bonferroni``: min(1, k·p);
* ``none``: the p-values as they are — the any-rejects rule of calcheck before 0.6, whose
  family-wise error grows with k (named as such in every output).

Tests without a p-value (NaN or None: a group too small to test) are left out of the family
and do not count in k.

References
----------
.. [1] Holm. A simple sequentially rejective multiple test procedure. Scand J Statist 6, 1979.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

FAMILY = ("holm", "bonferroni", "none")
DESCRIPTION = {
    "holm": "Holm's step-down adjustment: the family-wise error rate is at most alpha",
    "bonferroni": "Bonferroni: the family-wise error rate is at most alpha",
    "none": "no adjustment (each p-value on its own): the chance of a false rejection grows "
            "with the number of p-values read",
}


def _usable(p: Any) -> bool:
    return p is not None and isinstance(p, (int, float)) and not math.isnan(float(p))


def adjust(pvalues: Sequence[float | None], method: str = "holm") -> list[float | None]:
    """The family-adjusted p-values of ``pvalues`` (None where a p-value is missing)."""
    if method not in FAMILY:
        from calcheck.errors import UsageError

        raise UsageError(f"unknown family adjustment {method!r}; use one of {', '.join(FAMILY)}")
    idx = [i for i, p in enumerate(pvalues) if _usable(p)]
    out: list[float | None] = [None] * len(pvalues)
    k = len(idx)
    if method == "none":
        for i in idx:
            out[i] = float(pvalues[i])  # type: ignore[arg-type]
        return out
    if method == "bonferroni":
        for i in idx:
            out[i] = min(1.0, k * float(pvalues[i]))  # type: ignore[arg-type]
        return out
    order = sorted(idx, key=lambda i: float(pvalues[i]))  # type: ignore[arg-type]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * float(pvalues[i])))  # type: ignore[arg-type]
        out[i] = running
    return out


def family_size(pvalues: Sequence[float | None]) -> int:
    """k: the p-values that take part in the family."""
    return sum(1 for p in pvalues if _usable(p))


def floor_of(raw_floor: float, k: int, method: str) -> float:
    """The smallest adjusted p-value a Monte Carlo test with smallest raw p-value
    ``raw_floor`` can reach in a family of k (Holm and Bonferroni: k times it)."""
    return raw_floor if method == "none" else min(1.0, k * raw_floor)
