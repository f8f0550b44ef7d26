"""The metrics engine: calibration metrics of binary and multiclass classifiers.

Every metric here is an *error*: lower is better, 0 is perfect calibration (the probabilistic
count ``pc`` is a count, reported for context).  Each metric is a pure function of a
:class:`~calcheck.metrics._data.Prepared` (validated arrays with a shared stable sort) or a
:class:`~calcheck.metrics.multiclass.MulticlassPrepared` and returns a
:class:`~calcheck.metrics._result.MetricResult`.  Which metrics exist, their titles, units and
kernels are listed once, in :mod:`calcheck.registry`; this module dispatches on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from calcheck import registry
from calcheck.errors import UsageError
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics._result import MetricResult
from calcheck.metrics.multiclass import MulticlassPrepared
from calcheck.weights import Weights

__all__ = ["MetricOptions", "MetricResult", "MulticlassPrepared", "Prepared",
           "compute_metrics", "compute_multiclass_metrics", "resolve_metric_ids"]

# the metrics that sort the scores (their kernels share the Prepared's cached sort)
_SORTING = {"positional", None}


def resolve_metric_ids(ids: Iterable[str] | None, *, multiclass: bool = False,
                       name: str = "metrics", allowed: list[str] | None = None) -> list[str]:
    """Validate metric ids (comma lists allowed; ``all``: every id of ``allowed``, by default
    every id this input kind has); ``None`` → the defaults.  Errors name the option ``name``."""
    known = registry.selectable(multiclass)
    if ids is None:
        return registry.default_ids(multiclass)
    out: list[str] = []
    for mid in registry.split_ids(list(ids)):
        if mid == "all":
            out.extend(m for m in (allowed if allowed is not None else known) if m not in out)
            continue
        if mid not in known:
            kind = "multiclass ids" if multiclass else "known ids"
            extra = (" (or a binary id, computed on the top-label view)" if multiclass else "")
            raise UsageError(f"{name}: unknown metric id {mid!r}; {kind}: "
                             f"{', '.join(known)}{extra}")
        if mid not in out:
            out.append(mid)
    if not out:
        raise UsageError(f"{name}: no metric selected")
    return out


def compute_metrics(data: Prepared, ids: Iterable[str],
                    options: MetricOptions | None = None,
                    progress: Callable[[int, int], None] | None = None,
                    ) -> dict[str, MetricResult]:
    """Compute the binary metrics ``ids`` on ``data``; the sort is done once and shared.
    ``progress`` (metrics done, metrics in all) is told after each metric."""
    opts = options or MetricOptions()
    wanted = resolve_metric_ids(ids)
    _check_weights(data.weights, wanted)
    # metrics that sort go first so that later ones can reuse the sorted arrays
    order = sorted(wanted, key=lambda m: registry.METRICS[m].stream not in _SORTING)
    results = {}
    if progress is not None:
        progress(0, len(order))
    for m in order:
        results[m] = registry.METRICS[m].compute(data, opts)
        if progress is not None:
            progress(len(results), len(order))
    return {m: results[m] for m in wanted}


def compute_multiclass_metrics(data: MulticlassPrepared, ids: Iterable[str],
                               options: MetricOptions | None = None,
                               progress: Callable[[int, int], None] | None = None,
                               ) -> dict[str, MetricResult]:
    """Compute multiclass metrics; binary ids (and the ``*_top`` ids) run on the top-label
    view, reported with ``view: top-label``.  ``progress`` as in :func:`compute_metrics`."""
    opts = options or MetricOptions(bins=15)
    out: dict[str, MetricResult] = {}
    wanted = resolve_metric_ids(ids, multiclass=True)
    _check_weights(data.weights, wanted)
    if progress is not None:
        progress(0, len(wanted))
    for done, mid in enumerate(wanted, 1):
        spec = registry.METRICS[mid]
        binary = registry.binary_of(mid)
        if binary is None:
            out[mid] = spec.compute(data, opts)
        else:
            res = registry.METRICS[binary].compute(data.top, opts)
            out[mid] = replace(res, id=mid, settings={**res.settings, "view": "top-label"})
        if progress is not None:
            progress(done, len(wanted))
    return out


def _check_weights(weights: Weights | None, ids: list[str]) -> None:
    """Weighted rows reach only the kernels that take them (a kernel that does not would
    silently compute the unweighted value): any other id is a usage error saying why."""
    if weights is None:
        return
    for mid in ids:
        why = registry.weight_refusal(mid, weights.kind)
        if why:
            raise UsageError(f"--{weights.kind}: {why}")
