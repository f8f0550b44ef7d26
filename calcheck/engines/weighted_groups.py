"""``--by`` groups and ``--time`` windows on the weighted passes' engine
(:class:`calcheck.engines.weighted.WeightedStreamEngine`): one grouped first pass gives every
group's rows (:class:`~calcheck.engines.weighted_rows.WeightedRows`), then every group's
programs of passes — its metrics (:meth:`~calcheck.engines.weighted_rows.WeightedRows.
metrics`) or its tests (:func:`calcheck.engines.weighted_tests.tests_program`) — run in
lockstep (:func:`calcheck.streaming.runner.drive_lockstep`), one pass over the file per round
for every group, so the groups cost the passes of one set of rows."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from calcheck.engines.base import PASSES_METHODS, GroupOptions, Outcome
from calcheck.engines.weighted_rows import WeightedRows
from calcheck.metrics._data import MetricOptions
from calcheck.streaming.runner import drive_lockstep
from calcheck.streaming.views import SubStream
from calcheck.streaming.weighted import FirstSpec
from calcheck.weights import ZERO_MASS

if TYPE_CHECKING:
    from calcheck.hypotests import TestOptions

# ``eng`` below: the weighted passes' engine (calcheck.engines.weighted.WeightedStreamEngine,
# which imports this module: so typed Any here)


def grouped_rows(eng: Any, spec: FirstSpec, grouping: GroupOptions) -> dict[Any, WeightedRows]:
    """Every group's (window's) rows from one grouped first pass of ``spec``, by key in the
    in-memory engine's order."""
    from calcheck.streaming.weighted import GroupedFirstSpec

    grouped, _ = eng.source.run(GroupedFirstSpec(spec, grouping.by))
    keys = sorted(grouped.groups, key=lambda k: (k is None, k or ""))
    return {k: eng.rows_of(grouped.groups[k]) for k in keys}


def group_metrics(eng: Any, ids: list[str], mopts: MetricOptions, ci: Any,
                  grouping: GroupOptions) -> Outcome:
    """Every group's metrics ``ids`` with ``mopts``' bins (``ci``: their intervals,
    simultaneous over ``--time`` windows as in memory); multiclass input's classwise metrics
    from every group's classes in lockstep (:mod:`calcheck.engines.weighted_classes`); the
    metrics from the rows held are the whole file's only, and each group says so."""
    from calcheck.engines.weighted_classes import CLASSWISE, classwise_metrics, top_metrics
    from calcheck.metrics._result import GroupResult
    from calcheck.uncertainty import simultaneous_level

    b = mopts.bins
    has = eng.passes_ids()
    whole = [m for m in ids if m not in has]     # held: the whole file's only
    why = (f"computed for the whole file only on --engine {eng.name} beyond "
           "Tuning.hold_weighted_rows (from the rows held); per group: --engine memory")
    rows = grouped_rows(eng, FirstSpec(tuple(sorted({b, 10})), b if ci is not None else 0),
                        grouping)
    keys = list(rows)
    live = [k for k in keys if rows[k].first.scalar("mass") > 0]
    passed = [m for m in ids if m in has and m not in CLASSWISE]
    sigma = mopts.smece_sigma
    results = drive_lockstep(eng.source, {k: (SubStream(group=k), top_metrics(
        rows[k], passed, b, sigma) if eng.multiclass else rows[k].metrics(passed, b, sigma))
        for k in live}, by=grouping.by)
    classwise = classwise_metrics(eng, ids, mopts, {k: rows[k].n for k in live},
                                  by=grouping.by) if eng.multiclass else {}
    if ci is not None and grouping.windows:
        ci = replace(ci, level=simultaneous_level(ci.level, len(keys), grouping.family))
    with_ci = [m for m in passed if eng.capabilities.interval(m)]
    out = Outcome(settings={"group_metrics": ids},
                  notes=[f"{', '.join(whole)}: {why}"] if whole else [])
    for k in keys:
        res = results.get(k)
        errors = dict.fromkeys(whole, why)
        if res is None:
            res, errors = {}, dict.fromkeys(ids, ZERO_MASS)
        elif isinstance(res, Exception):
            res, errors = {}, {m: str(res) for m in ids}
        elif ci is not None:
            res = rows[k].intervals(res, with_ci, b, ci)[0]
        cw = classwise.get(k, {})
        if isinstance(cw, Exception):
            errors.update({m: str(cw) for m in ids if m in CLASSWISE})
        else:
            res = {**res, **cw}
        n = rows[k].n
        out.values[k] = GroupResult(value=k, n=n, flagged=n < grouping.min_group_size,
                                    metrics=dict(res), errors=errors)
    return out


def group_tests(eng: Any, methods: list[str], topts: TestOptions,
                grouping: GroupOptions) -> Outcome:
    """The T-Cal, Hosmer–Lemeshow, Spiegelhalter and Cox tests of every group, each the
    in-memory engine's test of the group (values: key → (rows, flagged, Outcome)); groups
    under ``--min-group-size`` are flagged and not tested, a group whose weights are all zero
    is not tested, and the Monte Carlo trials count every tested group's tests in the family,
    as in memory.  KS, Kuiper and SKCE (from the rows held, for the whole file) are refused."""
    from calcheck.engines.weighted_tests import tests_program

    whole = [m for m in methods if m not in PASSES_METHODS]
    if whole:
        per = grouping.name_of("time" if grouping.windows else "by")
        raise eng.refuse(f"--method {', '.join(whole)} per {per} group")
    rows = grouped_rows(eng, FirstSpec((10,)), grouping)
    sized = {k: (r.n, r.n < grouping.min_group_size, r.first.scalar("mass") <= 0)
             for k, r in rows.items()}
    live = [k for k, (n, flagged, empty) in sized.items() if not flagged and not empty]
    each = replace(topts, family_groups=1 + len(live))
    results = drive_lockstep(eng.source, {k: (SubStream(group=k), tests_program(
        rows[k], methods, each, eng.name)) for k in live}, by=grouping.by)
    out = Outcome()
    for k, (n, flagged, _) in sized.items():
        res = results.get(k)
        if isinstance(res, Exception):
            raise res
        out.values[k] = (n, flagged, res[0] if res is not None else Outcome())
    return out
