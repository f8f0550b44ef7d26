"""The metrics engine: calibration metrics of binary classifiers.

Every metric here is an *error*: lower is better, 0 is perfect calibration (the probabilistic
count ``pc`` is a count, reported for context).  Each metric is a pure function of a
:class:`~calcheck.metrics._data.Prepared` (validated arrays with a shared stable sort) and
returns a :class:`~calcheck.metrics._result.MetricResult`.  ``METRICS`` is the registry the
CLI, the JSON report and the common tests are driven by.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from calcheck.errors import UsageError
from calcheck.metrics import binned, multiclass, nixon, scoring, tce
from calcheck.metrics._data import Prepared
from calcheck.metrics._result import MetricResult
from calcheck.metrics.multiclass import MulticlassPrepared
from calcheck.validation import split_ids

__all__ = ["DEFAULT_METRICS", "DEFAULT_MULTICLASS_METRICS", "METRICS", "MULTICLASS_METRICS",
           "MetricOptions", "MetricResult", "MetricSpec", "MulticlassPrepared", "Prepared",
           "compute_metrics", "compute_multiclass_metrics", "resolve_metric_ids"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricOptions:
    """Options shared by the metrics of one run (SPEC §9 defaults)."""

    bins: int = 10
    alpha: float = 0.05
    test: str = "binomial"
    tce_nmin: int | None = None
    tce_nmax: int | None = None
    tace_threshold: float = 0.01
    compat: str | None = None        # "nixon": Nixon et al.'s reference conventions


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A registry entry: how to compute a metric and how to describe it."""

    id: str
    title: str
    unit: str
    compute: Callable[[Prepared, MetricOptions], MetricResult]
    needs_sort: bool
    binned: bool


METRICS: dict[str, MetricSpec] = {}


def register(spec: MetricSpec) -> None:
    """Add a metric to the registry (ids are unique)."""
    if spec.id in METRICS:
        raise ValueError(f"metric id {spec.id!r} registered twice")
    METRICS[spec.id] = spec


def _tce(binning: str) -> Callable[[Prepared, MetricOptions], MetricResult]:
    def compute(d: Prepared, o: MetricOptions) -> MetricResult:
        return tce.tce(d, binning=binning, bins=o.bins, alpha=o.alpha, test=o.test,
                       n_min=o.tce_nmin, n_max=o.tce_nmax)
    return compute


register(MetricSpec("tce", "TCE", "percent", _tce("pava-bc"), True, True))
register(MetricSpec("tce_q", "TCE(Q)", "percent", _tce("quantile"), True, True))
register(MetricSpec("tce_v", "TCE(V)", "percent", _tce("pava"), True, True))
register(MetricSpec("tce_u", "TCE(U)", "percent", _tce("uniform"), True, True))
register(MetricSpec("ece", "ECE", "fraction",
                    lambda d, o: binned.ece(d, bins=o.bins, p=1), False, True))
register(MetricSpec("ece_l2", "ECE (l2)", "fraction",
                    lambda d, o: binned.ece(d, bins=o.bins, p=2), False, True))
register(MetricSpec("mce", "MCE", "fraction",
                    lambda d, o: binned.mce(d, bins=o.bins), False, True))
register(MetricSpec("ace", "ACE", "fraction",
                    lambda d, o: binned.ace(d, bins=o.bins), True, True))
register(MetricSpec("mce_q", "MCE(Q)", "fraction",
                    lambda d, o: binned.mce_q(d, bins=o.bins), True, True))
register(MetricSpec("brier", "Brier score", "fraction",
                    lambda d, o: scoring.brier(d), False, False))
register(MetricSpec("log_loss", "Log loss", "nats",
                    lambda d, o: scoring.log_loss(d), False, False))
register(MetricSpec("pde", "PDE", "fraction",
                    lambda d, o: binned.pde(d, bins=o.bins), True, True))
register(MetricSpec("pc", "Probabilistic count", "count",
                    lambda d, o: scoring.pc(d), True, False))

DEFAULT_METRICS: tuple[str, ...] = ("tce", "tce_q", "ece", "ece_l2", "mce", "ace", "mce_q",
                                    "brier", "log_loss", "pde", "pc")


def resolve_metric_ids(ids: Iterable[str] | None) -> list[str]:
    """Validate metric ids (comma lists allowed); ``None`` → the defaults."""
    if ids is None:
        return [m for m in DEFAULT_METRICS if m in METRICS]
    out: list[str] = []
    for mid in split_ids(list(ids)):
        if mid == "all":
            out.extend(m for m in METRICS if m not in out)
            continue
        if mid not in METRICS:
            raise UsageError(f"unknown metric id {mid!r}; known ids: {', '.join(METRICS)}")
        if mid not in out:
            out.append(mid)
    if not out:
        raise UsageError("no metric selected")
    return out


def compute_metrics(data: Prepared, ids: Iterable[str],
                    options: MetricOptions | None = None) -> dict[str, MetricResult]:
    """Compute the metrics ``ids`` on ``data``; the sort is done once and shared."""
    opts = options or MetricOptions()
    wanted = resolve_metric_ids(ids)
    # metrics that sort go first so that uniform binning can reuse the sorted arrays
    order = sorted(wanted, key=lambda m: not METRICS[m].needs_sort)
    results = {m: METRICS[m].compute(data, opts) for m in order}
    return {m: results[m] for m in wanted}


# ---------------------------------------------------------------------------------------------
# multiclass (SPEC §4): own metrics, plus any binary id computed on the top-label view


@dataclass(frozen=True, slots=True)
class MulticlassSpec:
    """A multiclass registry entry."""

    id: str
    title: str
    unit: str
    compute: Callable[[MulticlassPrepared, MetricOptions], MetricResult]


def _on_top(binary_id: str, new_id: str) -> Callable[[MulticlassPrepared, MetricOptions],
                                                     MetricResult]:
    def compute(d: MulticlassPrepared, o: MetricOptions) -> MetricResult:
        res = METRICS[binary_id].compute(d.top, o)
        return replace(res, id=new_id, settings={**res.settings, "view": "top-label"})
    return compute


MULTICLASS_METRICS: dict[str, MulticlassSpec] = {
    "ece_top": MulticlassSpec("ece_top", "top-label ECE", "fraction", _on_top("ece", "ece_top")),
    "mce_top": MulticlassSpec("mce_top", "top-label MCE", "fraction", _on_top("mce", "mce_top")),
    "ace_top": MulticlassSpec("ace_top", "top-label ACE", "fraction", _on_top("ace", "ace_top")),
    "sce": MulticlassSpec("sce", "SCE", "fraction",
                          lambda d, o: multiclass.sce(d, bins=o.bins)),
    "ace_cw": MulticlassSpec("ace_cw", "ACE (classwise)", "fraction",
                             lambda d, o: multiclass.ace_cw(d, bins=o.bins)),
    "tace": MulticlassSpec("tace", "TACE", "fraction",
                           lambda d, o: multiclass.tace(d, bins=o.bins,
                                                        threshold=o.tace_threshold)),
    "tce_cw": MulticlassSpec("tce_cw", "TCE (classwise)", "percent",
                             lambda d, o: multiclass.tce_cw(d, alpha=o.alpha, test=o.test,
                                                            n_min=o.tce_nmin, n_max=o.tce_nmax)),
}
DEFAULT_MULTICLASS_METRICS: tuple[str, ...] = ("ece_top", "mce_top", "ace_top", "sce", "ace_cw",
                                               "tace", "tce_cw")


def resolve_multiclass_ids(ids: Iterable[str] | None) -> list[str]:
    """Validate metric ids for multiclass input: its own ids, or binary ids (top-label view)."""
    if ids is None:
        return list(DEFAULT_MULTICLASS_METRICS)
    out: list[str] = []
    for mid in split_ids(list(ids)):
        if mid == "all":
            out.extend(m for m in MULTICLASS_METRICS if m not in out)
        elif mid in MULTICLASS_METRICS or mid in METRICS:
            if mid not in out:
                out.append(mid)
        else:
            raise UsageError(f"unknown metric id {mid!r}; multiclass ids: "
                             f"{', '.join(MULTICLASS_METRICS)} (or a binary id, computed on "
                             "the top-label view)")
    if not out:
        raise UsageError("no metric selected")
    return out


def compute_multiclass_metrics(data: MulticlassPrepared, ids: Iterable[str],
                               options: MetricOptions | None = None) -> dict[str, MetricResult]:
    """Compute multiclass metrics; binary ids are computed on the top-label view."""
    opts = options or MetricOptions(bins=15)
    out: dict[str, MetricResult] = {}
    for mid in resolve_multiclass_ids(ids):
        if opts.compat == "nixon" and mid in nixon.NIXON:
            out[mid] = nixon.nixon_metric(mid, data, bins=opts.bins,
                                          tace_threshold=opts.tace_threshold)
        elif mid in MULTICLASS_METRICS:
            out[mid] = MULTICLASS_METRICS[mid].compute(data, opts)
        else:
            res = METRICS[mid].compute(data.top, opts)
            out[mid] = replace(res, settings={**res.settings, "view": "top-label"})
    return out
