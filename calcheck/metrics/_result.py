"""Result objects of the metrics engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from calcheck._json import jsonable
from calcheck.binning import BinStats


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricResult:
    """The value of one calibration metric, with the settings and bins that produced it.

    Attributes
    ----------
    id : str
        Metric id of docs/report.md (``"ece"``, ``"tce"``, ...).
    value : float
        The metric; a fraction, except TCE ids which are percentages (0–100).
    unit : str
        ``"fraction"`` or ``"percent"``.
    settings : dict
        Every option that determined the value (binning, bins, norm, alpha, ...).
    n_samples : int
        Rows the metric was computed on.
    bins : BinStats or None
        The bin table, for binned metrics.
    bin_extra : dict
        Extra per-bin columns (e.g. rejection counts for TCE), each a sequence of length B.
    extra : dict
        Further JSON-ready results (e.g. the per-class table of a classwise metric).
    """

    id: str
    value: float
    unit: str = "fraction"
    settings: dict[str, Any] = field(default_factory=dict)
    n_samples: int = 0
    bins: BinStats | None = None
    bin_extra: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def bin_rows(self) -> list[dict[str, Any]]:
        """The bin table as a list of row dicts (empty when the metric is not binned)."""
        if self.bins is None:
            return []
        rows = self.bins.rows()
        for key, col in self.bin_extra.items():
            for row, v in zip(rows, col):
                row[key] = v
        return jsonable(rows)  # type: ignore[no-any-return]

    def to_dict(self, *, bins: bool = True) -> dict[str, Any]:
        """JSON-ready dict: ``value``, ``unit``, ``n``, ``settings`` and (optionally) ``bins``."""
        out: dict[str, Any] = {
            "value": self.value,
            "unit": self.unit,
            "n": self.n_samples,
            "settings": self.settings,
        }
        if bins and self.bins is not None:
            out["bins"] = self.bin_rows()
        out.update(self.extra)
        return jsonable(out)  # type: ignore[no-any-return]


@dataclass
class GroupResult:
    """The metrics of one ``--by`` group; a metric that cannot be computed on the group (TCE
    under 20 rows) is reported with its reason instead of a value."""

    value: str | None                   # None: the rows whose group value is missing
    n: int
    flagged: bool
    metrics: dict[str, MetricResult]
    errors: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        m: dict[str, Any] = {k: r.to_dict(bins=False) for k, r in self.metrics.items()}
        for k, msg in self.errors.items():
            m[k] = {"value": None, "error": msg}
        out: dict[str, Any] = {"n": self.n, "flagged": self.flagged, "metrics": m}
        if self.value is None:
            out["missing"] = True
        return out



@dataclass(frozen=True)
class MetricSet:
    """Several metrics computed together (ICI with E50, E90 and Emax; ECCE-MAD with ECCE-R) as
    one result object: each by id (``r["e90"]`` or ``r.e90``, a :class:`MetricResult`), the
    first one's ``value``, ``ids`` and ``to_dict()``."""

    results: dict[str, MetricResult]

    def __getitem__(self, mid: str) -> MetricResult:
        return self.results[mid]

    def __getattr__(self, mid: str) -> MetricResult:
        try:
            return self.results[mid]
        except KeyError:
            raise AttributeError(mid) from None

    def __iter__(self) -> Any:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def keys(self) -> Any:
        return self.results.keys()

    def items(self) -> Any:
        return self.results.items()

    @property
    def ids(self) -> list[str]:
        return list(self.results)

    @property
    def value(self) -> float:
        """The first metric's value (ICI, ECCE-MAD)."""
        return next(iter(self.results.values())).value

    def to_dict(self) -> dict[str, Any]:
        return {mid: r.to_dict() for mid, r in self.results.items()}

