"""One builder for every report: its ``settings``, ``notes`` and ``gates``, and the versioned
JSON document (schema 1) they form.

The document's top level is ``schema_version``, ``calcheck_version``, ``command``, ``input``,
``settings``, then ``metrics`` / ``tests`` / ``variables`` / ``groups`` as the command
computed them, ``notes`` and ``gates``.  Every engine's report goes through :func:`settings_of`,
so the in-memory and streamed reports of one command carry the same settings keys (the
streaming engines add their own: batch size, passes, the grid).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from calcheck._json import jsonable
from calcheck._version import SCHEMA_VERSION, __version__
from calcheck.options import Options

MISSING_GROUP = "(missing)"


def settings_of(command: str, opts: Options, *, multiclass: bool,
                ids: list[str] | None = None, methods: list[str] | None = None,
                engine: Mapping[str, Any] | None = None,
                extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The report's ``settings`` for ``command`` (the command building the report says which):
    every option in force for it (:data:`COMMAND_SETTINGS`), then what the engine adds
    (``engine``) and what the run found (``extra``: intervals, passes of the variables)."""
    out = COMMAND_SETTINGS[command](opts, "multiclass" if multiclass else "binary", ids, methods)
    out.update(engine or {})
    out.update(extra or {})
    return out


def _score_settings(opts: Options, kind: str, ids: list[str] | None,
                    methods: list[str] | None) -> dict[str, Any]:
    multiclass = kind == "multiclass"
    out = {"metrics": ids, "bins": opts.bins if opts.bins is not None else
           (15 if multiclass else 10), "alpha": opts.alpha, "test": opts.test,
           "tce_nmin": opts.tce_nmin, "tce_nmax": opts.tce_nmax, "pos_label": opts.pos_label,
           "drop_invalid": opts.drop_invalid, "input": kind, "engine": opts.engine,
           "where": opts.where, "ties": _ties(opts), "compat": opts.compat}
    if opts.compat:
        out["bins"] = _bins(opts, multiclass)
    if multiclass:
        out.update({"tace_threshold": opts.tace_threshold,
                    "convention": opts.compat or "calcheck"})
    if opts.variables:
        out.update({"variables": opts.variable_list, "vece_bins": 10,
                    "loess_span": opts.loess_span, "correct_from": opts.correct_from})
    if opts.by:
        out.update({"by": opts.by, "min_group_size": opts.min_group_size})
    if opts.time:
        out.update({"time": opts.time, "window": opts.window, "tz": opts.tz,
                    "min_group_size": opts.min_group_size})
    if opts.by or opts.time:
        out["family"] = opts.family
    return out


def _test_settings(opts: Options, kind: str, ids: list[str] | None,
                   methods: list[str] | None) -> dict[str, Any]:
    out = {"methods": methods, "alpha": opts.alpha,
           "tcal": "fixed" if opts.bins is not None else "adaptive", "bins": opts.bins,
           "trials": opts.trials, "resample": opts.resample, "seed": opts.seed,
           "discrete_max": opts.discrete_max, "pos_label": opts.pos_label,
           "drop_invalid": opts.drop_invalid, "engine": opts.engine, "where": opts.where,
           "ties": _ties(opts), "compat": opts.compat, "family": opts.family}
    if opts.compat:
        out.update({"tcal": None, "bins": _bins(opts, kind == "multiclass")})
    if opts.by:
        out.update({"by": opts.by, "min_group_size": opts.min_group_size})
    if opts.time:
        out.update({"time": opts.time, "window": opts.window, "tz": opts.tz,
                    "min_group_size": opts.min_group_size})
    return out


def _compare_settings(opts: Options, kind: str, ids: list[str] | None,
                      methods: list[str] | None) -> dict[str, Any]:
    out = {"metrics": ids, "bins": _bins(opts, kind == "multiclass"), "alpha": opts.alpha,
           "test": opts.test, "tce_nmin": opts.tce_nmin, "tce_nmax": opts.tce_nmax,
           "pos_label": opts.pos_label, "input": kind, "engine": opts.engine,
           "where": opts.where, "ties": _ties(opts), "id": opts.id,
           "fail_if_worse": opts.fail_if_worse}
    if opts.by:
        out.update({"by": opts.by, "min_group_size": opts.min_group_size})
    return out


def _report_settings(opts: Options, kind: str, ids: list[str] | None,
                     methods: list[str] | None) -> dict[str, Any]:
    out = {"metrics": ids, "bins": opts.bins if opts.bins is not None else
           (15 if kind == "multiclass" else 10), "alpha": opts.alpha, "trials": opts.trials,
           "seed": opts.seed, "tcal": opts.adaptive, "variables": opts.variable_list,
           "loess_span": opts.loess_span, "correct_from": opts.correct_from,
           "engine": opts.engine, "where": opts.where, "input": kind, "ties": opts.ties,
           "family": opts.family}
    if opts.by:
        out.update({"by": opts.by, "min_group_size": opts.min_group_size})
    if opts.format == "pdf" or (opts.output or "").lower().endswith(".pdf"):
        out["paper"] = opts.paper
    return out


# the options in force for each command that writes a report: (opts, input kind, metric ids,
# test methods) → its settings
COMMAND_SETTINGS: dict[str, Callable[[Options, str, list[str] | None, list[str] | None],
                                     dict[str, Any]]] = {
    "score": _score_settings, "test": _test_settings, "compare": _compare_settings,
    "report": _report_settings}


def _ties(opts: Options) -> str:
    """The tie convention in force: a compat mode keeps its library's own."""
    return f"{opts.compat}'s own" if opts.compat else opts.ties


def _bins(opts: Options, multiclass: bool) -> int:
    from calcheck.options import default_bins

    return default_bins(opts, multiclass)


def _metric_entries(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = list(report.get("metrics", {}).values())
    for g in (report.get("groups") or {}).values():
        out += list(g.get("metrics", {}).values())
    return out


def per_class_by_name(rows: list[dict[str, Any]], classes: list[str]) -> dict[str, Any]:
    """A classwise metric's per-class rows keyed by the class names of ``input.classes``."""
    out = {}
    for row in rows:
        j = row.get("class")
        name = classes[j] if isinstance(j, int) and 0 <= j < len(classes) else str(j)
        out[name] = {"index": j, **{k: v for k, v in row.items() if k != "class"}}
    return out


def group_names(keys: Iterable[str | None]) -> dict[str | None, str]:
    """The report's name of every ``--by`` group: its value, and for the rows whose value is
    missing ``(missing)`` — or ``(missing)*``, ``(missing)**``, … when a real value is spelled
    that way, so that no real value can take the missing group's name."""
    keys = list(keys)
    real = {k for k in keys if k is not None}
    missing = MISSING_GROUP
    while missing in real:
        missing += "*"
    return {k: (missing if k is None else k) for k in keys}


def family_entries(report: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every test p-value a verdict reads, as (where, entry): the tests of the whole data, of
    each ``--by`` group and of each ``--time`` window (``where`` names the group or window,
    "" for the whole data).  ``score``'s consistency verdicts of its groups are read with the
    whole data's in :func:`calcheck.report.summary.verdict`."""
    out: list[tuple[str, dict[str, Any]]] = [("", t) for t in
                                             (report.get("tests") or {}).values()]
    for name, g in (report.get("groups") or {}).items():
        out += [(str(name), t) for t in (g.get("tests") or {}).values()]
    for w in report.get("windows") or []:
        out += [(str(w["start"]), t) for t in (w.get("tests") or {}).values()]
    return out


def _group_verdict_entries(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [g["verdict"] for g in (report.get("groups") or {}).values() if g.get("verdict")] + \
        [w["verdict"] for w in report.get("windows") or [] if w.get("verdict")]


def apply_family(report: dict[str, Any], method: str, alpha: float) -> dict[str, Any] | None:
    """Adjust every p-value a verdict reads for the family they form
    (:func:`calcheck.hypotests.family.adjust`): each entry gains ``pvalue_adjusted`` and
    ``reject_adjusted`` (at α), a Monte Carlo one ``min_attainable_pvalue_adjusted`` too;
    returns the report's ``summary.family`` (None when no p-value is read)."""
    from calcheck.hypotests.family import DESCRIPTION, adjust, family_size, floor_of

    entries = family_entries(report)
    if not entries:
        return None
    ps = [e.get("pvalue") for _, e in entries]
    k = family_size(ps)
    for (_, e), q in zip(entries, adjust(ps, method)):
        e["pvalue_adjusted"] = q
        e["reject_adjusted"] = bool(q is not None and q <= alpha)
        if e.get("min_attainable_pvalue") is not None:
            e["min_attainable_pvalue_adjusted"] = floor_of(e["min_attainable_pvalue"], k, method)
    return {"method": method, "alpha": alpha, "size": k, "description": DESCRIPTION[method]}


def build_report(*, command: str, input_info: Mapping[str, Any], settings: Mapping[str, Any],
                 metrics: Mapping[str, Any] | None = None, tests: Mapping[str, Any] | None = None,
                 bins_for: Iterable[str] = (), gates: list[dict[str, Any]] | None = None,
                 notes: list[str] | None = None, variables: Mapping[str, Any] | None = None,
                 groups: Mapping[str, Any] | None = None,
                 extra: Mapping[str, Any] | None = None,
                 summary_bins: tuple[str, list[dict[str, Any]]] | None = None,
                 score_range: Callable[[float, float], tuple[float, float] | None] | None
                 = None, seed: int = 0, direction_fit: Mapping[str, Any] | None = None,
                 tolerance: list[dict[str, Any]] | None = None,
                 family: str = "holm", summary_ties: Any = ()) -> dict[str, Any]:
    """The JSON report of a run; bin tables only for the metrics in ``bins_for``.  ``extra``
    adds top-level sections (after ``groups``).  ``summary_bins`` — (metric id, its bin rows)
    — feeds the one-line ``summary`` (:mod:`calcheck.report.summary`), and ``score_range``
    gives the scores of the bin it names when the rows do not carry them; ``direction_fit``
    is Cox's fit behind the direction (when the tests do not carry it), ``tolerance`` the
    ``--tolerance`` checks (:func:`calcheck.report.summary.tolerance_verdict`), ``family``
    the adjustment of the p-values the verdict reads (:func:`apply_family`) and
    ``summary_ties`` the tie groups the summary's bins share
    (:func:`calcheck.report.summary.shared_ties`)."""
    from calcheck.report.summary import summarize

    with_bins = set(bins_for)
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "calcheck_version": __version__,
        "command": command,
        "input": dict(input_info),
        "settings": dict(settings),
        "summary": {},
    }
    if metrics is not None:
        report["metrics"] = {mid: r.to_dict(bins=mid in with_bins) for mid, r in metrics.items()}
    if tests is not None:
        report["tests"] = {tid: r.to_dict() for tid, r in tests.items()}
    if variables is not None:
        report["variables"] = dict(variables)
    if groups is not None:
        report["groups"] = dict(groups)
    report.update(extra or {})
    report["notes"] = list(notes or [])            # present on every engine, maybe empty
    if gates is not None:
        report["gates"] = gates
    report = jsonable(report)
    classes = report["input"].get("classes")
    if classes:
        for entry in _metric_entries(report):
            if isinstance(entry.get("per_class"), list):
                entry["per_class"] = per_class_by_name(entry["per_class"], classes)
    alpha = float(report["settings"].get("alpha", 0.05))
    fam = apply_family(report, family, alpha)
    of, rows = summary_bins if summary_bins is not None else (None, None)
    summary = summarize(report, bins=list(rows or []), bins_of=of, seed=seed,
                        score_range=score_range, direction_fit=jsonable(direction_fit),
                        tolerance=tolerance, ties=summary_ties)
    if fam is not None and (fam["size"] > 1 or family == "none"):
        summary["family"] = fam
    elif summary.get("pvalue_adjusted") is not None:      # score: groups' or windows' verdicts
        from calcheck.hypotests.family import DESCRIPTION

        size = 1 + sum(1 for e in _group_verdict_entries(report))
        summary["family"] = {"method": family, "alpha": alpha, "size": size,
                             "description": DESCRIPTION[family]}
    report["summary"] = jsonable(summary)
    return report
