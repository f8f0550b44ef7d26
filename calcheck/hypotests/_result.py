"""Result objects of the hypothesis-test engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from calcheck._json import jsonable


@dataclass(frozen=True, slots=True, kw_only=True)
class TestResult:
    """A calibration test: statistic, p-value, verdict at ``alpha``, and whatever explains it.

    Attributes
    ----------
    id : str
        Test id of docs/report.md (``"tcal"``, ``"tcal_adaptive"``, ``"hosmer_lemeshow"``, ...).
    statistic : float
        The test statistic (for ``tcal`` the DPE T_m itself: squared, possibly negative).
    pvalue : float
        The p-value (Monte Carlo p-values use the +1 correction).
    reject : bool
        Whether calibration is rejected at ``alpha``.
    alpha : float
        The significance level.
    details : dict
        Test-specific fields (critical values, per-level table, direction, ...), JSON-ready.
    settings : dict
        Every option that determined the result (trials, resampling, seed, ...).
    """

    __test__ = False  # not a pytest test class

    id: str
    statistic: float
    pvalue: float
    reject: bool
    alpha: float
    details: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: statistic, pvalue, reject, alpha, the details and the settings."""
        out: dict[str, Any] = {"statistic": self.statistic, "pvalue": self.pvalue,
                               "reject": bool(self.reject), "alpha": self.alpha}
        out.update(self.details)
        out["settings"] = self.settings
        return jsonable(out)  # type: ignore[no-any-return]
