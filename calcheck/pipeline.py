"""The pipeline behind every command: open the engine, plan the metrics and tests, compute,
and build the report (``run_score``, ``run_test``, ``run_figure``, ``run_report``;
``run_compare`` hands over to :mod:`calcheck.comparison`).  The public functions of
:mod:`calcheck.api` and the command line both call these with validated
:class:`~calcheck.options.Options`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from calcheck import registry
from calcheck.engines import Progress, capabilities, open_engine, read_options
from calcheck.engines.base import (
    Capabilities,
    Engine,
    Outcome,
    figure_options,
    group_options,
    interval_options,
    metric_options,
    test_options,
    variable_options,
)
from calcheck.errors import TooFewRows, UsageError
from calcheck.figures import require_matplotlib
from calcheck.option_checks import parse
from calcheck.options import Options, score_fold_bins
from calcheck.report.build import build_report, group_names, settings_of
from calcheck.report.files import report_kind
from calcheck.report.model import Report

FIGURES = (("tce", "uniform", "Test-based reliability diagram (TCE, PAVA-BC bins)"),
           ("reliability", "uniform", "Reliability diagram, equal-width bins (ECE)"),
           ("reliability", "quantile", "Reliability diagram, equal-mass bins (ACE)"))


def run_compare(sources: list[Any], opts: Options, *, progress: Progress | None = None) -> Report:
    from calcheck.comparison import run_compare as _run

    rep: Report = _run(sources, opts, progress=progress)
    return rep


# ---------------------------------------------------------------------------------------------
# engines


@contextlib.contextmanager
def _engine(source: Any, opts: Options, progress: Progress | None,
            fold: tuple[int, ...] = ()) -> Iterator[Engine]:
    with open_engine(source, read_options(opts, fold), progress=progress) as eng:
        if eng.capabilities.rows:
            check_bins_against_rows(opts, eng.input_info().get("rows_used") or 0)
        yield eng


MIN_BIN_CEILING = 1000         # --bins up to this is always accepted (peers' conventions)


def check_bins_against_rows(opts: Options, n: int) -> None:
    """An explicit ``--bins`` larger than the rows is refused before any work: more bins than
    rows leaves bins empty (equal-mass ones by construction) and only costs memory."""
    most = max(n, MIN_BIN_CEILING)
    if "bins" in opts.given and opts.bins is not None and n and opts.bins > most:
        raise UsageError(f"{opts.name_of('bins')} {opts.bins:,}: at most {most:,} bins make "
                         f"sense for {n:,} rows (more bins than rows leaves them empty and only "
                         "costs memory)")


def _settings(eng: Engine) -> dict[str, Any]:
    return dict(getattr(eng, "settings", dict)())


# ---------------------------------------------------------------------------------------------
# score


def plan_metrics(opts: Options, multiclass: bool, caps: Capabilities) -> tuple[list[str],
                                                                               list[str],
                                                                               list[str]]:
    """The metric ids a ``score`` run computes, the ids whose bin tables it shows, and
    messages: ``metrics`` (default: the input kind's default set), plus the ``--fail-if`` and
    ``--bins-table`` metrics, plus ECE for ``--plot``.  On the streaming engines ``all`` is
    every id they compute; any other id they cannot compute is an error naming it."""
    from calcheck.metrics import resolve_metric_ids

    label = opts.name_of("metrics")
    engine = caps.name
    streamed = not caps.rows
    can = caps.metrics(multiclass)
    messages: list[str] = []
    if opts.compat:
        ids, can = compat_ids(opts, multiclass)
    elif opts.metrics is None:
        ids, messages = caps.default_set(multiclass, opts.weighting[1] if opts.weighting
                                         else None, label)     # (weights' refusals: below)
    else:
        ids = resolve_metric_ids(opts.metrics, multiclass=multiclass, name=label, allowed=can)
        if streamed and "all" in registry.split_ids(opts.metrics):
            left = [m for m in registry.selectable(multiclass) if m not in can]
            if opts.weighting:     # those the weights refuse: left out below, saying why
                refused = [m for m in left if registry.weight_refusal(m, opts.weighting[1])]
                ids += refused
                left = [m for m in left if m not in refused]
            if left:
                messages.append(f"{label} all on --engine {engine}: every metric it computes; "
                                f"{', '.join(left)} need(s) --engine memory")

    def resolve(raw: str, name: str) -> list[str]:
        return resolve_metric_ids([raw], multiclass=multiclass, name=name)

    for g in opts.fail_if or []:
        from calcheck.gates import parse_gate

        ids += [m for m in resolve(parse_gate(g).metric, opts.name_of("fail_if")) if m not in ids]
    bins_for: list[str] = []
    for raw in opts.bins_table or []:
        everything = raw.strip().lower() == "all"
        for mid in (ids if everything else resolve(raw, opts.name_of("bins_table"))):
            if not registry.METRICS[mid].binned:
                if everything:
                    continue
                raise UsageError(f"{opts.name_of('bins_table')} {mid}: {mid} is not a binned "
                                 "metric")
            if mid not in ids:
                ids.append(mid)
            if mid not in bins_for:
                bins_for.append(mid)
    if opts.plot:
        plot_id = "ece_top" if multiclass else "ece"
        if plot_id not in ids:
            ids.append(plot_id)
        if plot_id not in bins_for:
            bins_for.append(plot_id)
    if opts.weighting:                    # (--bins-table all names no metric)
        named = [m for r in opts.bins_table or [] if r.strip().lower() != "all"
                 for m in resolve(r, opts.name_of("bins_table"))]
        ids = _weighted_ids(opts, ids, named, messages)
        bins_for = [m for m in bins_for if m in ids]
    bad = [m for m in ids if m not in can]
    if bad and opts.compat:
        from calcheck import compat

        compat.check_ids(opts.compat, bad, multiclass, opts.name_of("compat"))
    if bad:
        raise UsageError(f"--engine {engine} computes {', '.join(can)}; {', '.join(bad)} "
                         "need(s) --engine memory")
    return ids, bins_for, messages


def _weighted_ids(opts: Options, ids: list[str], named: list[str],
                  messages: list[str]) -> list[str]:
    """The ids of a ``--weight`` / ``--count`` run: an id named explicitly (``-m``,
    ``--fail-if``, ``--bins-table``) that takes no weighted rows is an error saying why; the
    default set and ``-m all`` leave such ids out, with a message."""
    assert opts.weighting is not None
    kind = opts.weighting[1]
    explicit = set(registry.split_ids(opts.metrics or [])) - {"all"} | set(named)
    for g in opts.fail_if or []:
        from calcheck.gates import parse_gate

        explicit.add(parse_gate(g).metric)
    if opts.compat:                       # the library's own weighted functions, or none
        from calcheck import compat

        compat.check_weighted(opts.compat, [m for m in ids if m in explicit],
                              opts.name_of(kind), opts.name_of("compat"))
        left = [m for m in ids if m not in compat.mode(opts.compat).weighted]
        if left:
            messages.append(f"{opts.name_of(kind)}: {', '.join(left)} left out ("
                            f"{compat.mode(opts.compat).library} takes no row weights there)")
        return [m for m in ids if m not in left]
    return _weighted_only(opts, ids, explicit, messages, "computed")


def _weighted_only(opts: Options, ids: list[str], explicit: set[str], messages: list[str],
                   verb: str) -> list[str]:
    """``ids`` without those that take no rows of this run's weights: one named in
    ``explicit`` is a usage error saying why, the others are left out with a message."""
    assert opts.weighting is not None
    kind = opts.weighting[1]
    left = []
    for mid in ids:
        why = registry.weight_refusal(mid, kind)
        if why and mid in explicit:
            raise UsageError(f"{opts.name_of(kind)}: {why}")
        if why:
            left.append(mid)
    if left:
        messages.append(f"{opts.name_of(kind)}: {', '.join(left)} left out (not {verb} on "
                        "weighted or aggregated rows; docs/weights.md says why)")
    return [m for m in ids if m not in left]


def _summary_bins(eng: Engine, opts: Options,
                  results: dict[str, Any]) -> tuple[str, list[dict[str, Any]]] | None:
    """The bin table behind the summary: the first of ECE, ACE, … the run computed, else the
    engine's equal-width bins when they come without another pass."""
    from calcheck.report.summary import BIN_SOURCES

    for mid in BIN_SOURCES:
        r = results.get(mid)
        if r is not None and getattr(r, "bins", None) is not None:
            return mid, _with_ranges(eng, r.bin_rows())
    rows = eng.summary_bins(opts.ties)
    if not rows:
        return None
    quantile = eng.capabilities.rows
    return ("ace_top" if eng.multiclass else "ace") if quantile else \
        ("ece_top" if eng.multiclass else "ece"), _with_ranges(eng, rows)


def _ties_of(eng: Engine, sb: tuple[str, list[dict[str, Any]]] | None,
             opts: Options) -> list[Any]:
    """The tie groups the summary's bins share, for its consistency resampling."""
    return eng.summary_ties(sb[0], sb[1], opts.ties) if sb else []


def _with_ranges(eng: Engine, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """In memory, when the metrics sorted the scores, each bin row with the smallest and
    largest score inside its edges, so the summary names the scores a bin really holds
    (all-equal scores: one value, not 0–0.3).  Without a sort the summary asks the engine
    for the one bin it names (``score_range``), rather than sort every score for it."""
    sorted_scores = getattr(eng, "sorted_scores", None)
    if sorted_scores is None or not rows:
        return rows
    import numpy as np

    s = sorted_scores(sort=False)
    if s is None:
        return rows
    out = []
    for r in rows:
        lo = int(np.searchsorted(s, r["lower"], side="left"))
        hi = int(np.searchsorted(s, r["upper"], side="right")) - 1
        out.append({**r, "min_score": float(s[lo]), "max_score": float(s[hi])}
                   if r.get("n") and lo <= hi else r)
    return out


def direction_fit(eng: Engine, opts: Options, tests: Mapping[str, Any],
                  summary_bins: tuple[str, list[dict[str, Any]]] | None,
                  sections: Mapping[str, Any] | None = None) -> Any:
    """Cox's fit behind the headline's direction (its JSON entry), made only when the verdict
    will claim one (miscalibrated or inconclusive) and the tests did not fit it already;
    ``sections``: the report's ``groups`` or ``windows`` whose verdicts the headline reads too."""
    import copy

    from calcheck.report.build import apply_family
    from calcheck.report.summary import NEEDS_DIRECTION, verdict

    if "cox" in tests and not opts.compat:
        return None                              # the summary reads the cox test itself
    rows = summary_bins[1] if summary_bins else []
    fragment: dict[str, Any] = {"tests": {k: t.to_dict() for k, t in tests.items()},
                                "settings": {"family": opts.family, "by": opts.by},
                                **copy.deepcopy({k: v for k, v in (sections or {}).items()
                                                 if v is not None})}
    apply_family(fragment, opts.family, opts.alpha)
    got, _, _ = verdict(fragment, rows, alpha=opts.alpha, seed=opts.seed,
                        ties=_ties_of(eng, summary_bins, opts))
    if got not in NEEDS_DIRECTION:
        return None
    return eng.recalibration(opts.alpha, opts.ci_level).to_dict()


def plan_tolerance(opts: Options, multiclass: bool, caps: Capabilities) -> list[Any]:
    """The ``--tolerance`` bounds, each on a metric whose interval covers its population
    value on this engine (refused before any work otherwise)."""
    from calcheck.gates import parse_tolerance
    from calcheck.metrics import resolve_metric_ids
    from calcheck.uncertainty import covers_population

    label = opts.name_of("tolerance")
    out = []
    for text in opts.tolerance or []:
        t = parse_tolerance(text, label)
        mid = resolve_metric_ids([t.metric], multiclass=multiclass, name=label)[0]
        if not covers_population(mid):
            raise UsageError(f"{label} {text}: {mid} has no interval that covers its population "
                             "value (docs/uncertainty.md), so no equivalence verdict; use ece, "
                             "ece_l2, ace (or their debiased forms), sce, brier or log_loss")
        if not caps.interval(mid):
            raise UsageError(f"{label} {text}: {mid} has no interval on --engine {caps.name}; " +
                             (caps.why or "use --engine memory or ece, ece_l2, ace, brier, log_loss"))
        out.append((mid, t.value))
    return out


def tolerance_checks(eng: Engine, opts: Options, bounds: list[Any],
                     results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The equivalence verdicts of ``bounds`` (:func:`plan_tolerance`) from each metric's
    covering interval — the run's own ``--ci`` interval, else one computed for it alone."""
    from calcheck.report.summary import tolerance_verdict

    if not bounds:
        return []
    have = {m: r.extra["ci"] for m, r in results.items() if r.extra.get("ci")}
    need = [m for m, _ in bounds if m not in have]
    if need:
        mopts = metric_options(opts.replace(bins=opts.bins if opts.command != "test" else None),
                               eng.multiclass)
        extra = eng.metrics(list(dict.fromkeys(need)), mopts,
                            ci=interval_options(opts.replace(ci=True)), by=opts.by)
        have.update({m: r.extra["ci"] for m, r in extra.values.items() if r.extra.get("ci")})
    return [tolerance_verdict(m, v, have.get(m)) for m, v in bounds]


def compat_ids(opts: Options, multiclass: bool) -> tuple[list[str], list[str]]:
    """Under ``compat``: the ids to compute (default and ``all``: every id the library has)
    and the ids it can compute; an id it has not, or a library without a metric for this kind
    of input, is a usage error naming what it has."""
    from calcheck import compat

    assert opts.compat is not None
    m = compat.mode(opts.compat)
    can = m.ids(multiclass)
    label = opts.name_of("compat")
    if not can:
        raise UsageError(f"{label} {opts.compat}: {m.what_it_has(multiclass)}")
    if opts.metrics is None:
        return list(can), can
    ids: list[str] = []
    for mid in registry.split_ids(opts.metrics):
        for x in (can if mid == "all" else [mid]):
            if x not in ids:
                ids.append(x)
    compat.check_ids(opts.compat, ids, multiclass, label)
    return ids, can


def check_dropped(eng: Engine, opts: Options) -> None:
    """No verdict on what is left when more than ``--max-dropped`` of the rows were dropped."""
    info = eng.input_info()
    read, dropped = info.get("rows_read"), info.get("rows_dropped") or 0
    if read and dropped / read > opts.max_dropped:
        from calcheck.errors import InputError

        reasons = ", ".join(f"{k}={v:,}" for k, v in (info.get("dropped_by_reason") or {}).items())
        raise InputError(f"{opts.name_of('drop_invalid')} dropped {dropped:,} of {read:,} rows "
                         f"({dropped / read:.1%}: {reasons}), more than "
                         f"{opts.name_of('max_dropped')} {opts.max_dropped:g}; what is left says "
                         "little about the model: fix the input (see the first invalid rows "
                         f"without {opts.name_of('drop_invalid')}) or raise "
                         f"{opts.name_of('max_dropped')}")


def _windows(opts: Options) -> tuple[Any, Options]:
    """``--time``/``--window``: the window, and the options whose ``by`` keys every row by its
    window's start (windows are groups)."""
    if not opts.time:
        return None, opts
    from calcheck.io.windows import WindowColumn, parse_window

    window = parse_window(opts.window or "", opts.tz, opts.name_of("window"))
    return window, opts.replace(by=WindowColumn(opts.time, window))


def _group_test_sections(g: Outcome, window: Any, opts: Options) -> dict[str, Any]:
    """The report's ``groups`` (``--by``) or ``windows`` (``--time``) of a ``test`` run: each
    group's rows, whether it is flagged small, and its tests."""
    entries = {key: {"n": n, "flagged": flagged,
                     "tests": {tid: r.to_dict() for tid, r in out.values.items()}}
               for key, (n, flagged, out) in g.values.items()}
    if window is not None:
        from calcheck.io.windows import assemble

        return {"windows": assemble(window, entries, "tests")}
    names = group_names(entries)
    return {"groups": {names[k]: e for k, e in entries.items()}}


def window_intervals(opts: Options, k: int) -> dict[str, Any]:
    """What the ``--time`` windows' ``--ci`` intervals are: simultaneous (Bonferroni over the
    k windows with rows: all cover at once with probability at least the level) unless
    ``--family none`` (each covers on its own)."""
    from calcheck.uncertainty import simultaneous_level

    each = simultaneous_level(opts.ci_level, k, opts.family)
    out: dict[str, Any] = {
        "kind": "marginal" if each == opts.ci_level else "simultaneous",
        "method": "none: each window's interval at the level" if each == opts.ci_level
        else "bonferroni over the windows with rows", "windows": k,
        "level": opts.ci_level, "per_window_level": each}
    if each != opts.ci_level:
        out["coverage"] = ("approximate: far in its tails a window's interval is a normal "
                           "approximation; 30 windows of 300 calibrated rows were all covered "
                           "at once in 91 % of simulated streams at level 0.95 "
                           "(docs/validity.md); the windows' verdicts hold alpha")
    return out


def group_verdicts(g: Outcome, opts: Options) -> dict[Any, dict[str, Any]]:
    """Each ``--by`` group's (or ``--time`` window's) consistency verdict on its own bins (the
    first of ACE, ECE, … it has), for the groups not flagged small; their draws let the
    smallest p-value adjusted over the family reach α/10."""
    from calcheck.report.summary import BIN_SOURCES, consistency_draws, group_verdict

    tables = {}
    for key, gr in g.values.items():
        mid = next((m for m in BIN_SOURCES if m in gr.metrics
                    and gr.metrics[m].bins is not None), None)
        if mid is not None and not gr.flagged and gr.n:
            tables[key] = (mid, gr.metrics[mid].bin_rows())
    k = 1 + len(tables) if opts.family != "none" else 1
    draws = consistency_draws(opts.alpha, k)
    return {key: group_verdict(rows, alpha=opts.alpha, seed=opts.seed, draws=draws, metric=mid)
            for key, (mid, rows) in tables.items()}


def _report_data(eng: Engine, opts: Options, command: str, *, bounds: list[Any],
                 notes: list[str],
                 settings: Mapping[str, Any], ids: list[str] | None = None,
                 methods: list[str] | None = None, metrics: dict[str, Any] | None = None,
                 tests: Mapping[str, Any] | None = None,
                 more_settings: Mapping[str, Any] | None = None, variables: Any = None,
                 groups: Mapping[str, Any] | None = None, extra: Mapping[str, Any] | None = None,
                 bins_for: Iterable[str] = (), gates: list[dict[str, Any]] | None = None,
                 sections: Mapping[str, Any] | None = None
                 ) -> tuple[dict[str, Any], tuple[str, list[dict[str, Any]]] | None]:
    """The steps every report command ends with, in one order: the summary's bin table, the
    direction's fit (``sections``: the groups or windows the headline reads too), the
    tolerance checks, the settings (``settings``: what the run found; ``more_settings`` after
    the engine's), the report's data; and the bin table (for the text diagram).  The input
    section is the top-label view's when the command runs tests alone."""
    sb = _summary_bins(eng, opts, metrics or {})
    fit = direction_fit(eng, opts, tests or {}, sb, sections)
    tolerance = tolerance_checks(eng, opts, bounds, metrics or {})
    all_settings = settings_of(command, opts, multiclass=eng.multiclass, ids=ids, methods=methods,
                               engine=_settings(eng), extra=settings)
    all_settings.update(more_settings or {})
    data = build_report(command=command, input_info=eng.input_info(top=command == "test"),
                        settings=all_settings, metrics=metrics, tests=tests, bins_for=bins_for,
                        gates=gates, notes=notes,
                        variables=variables.to_dict() if variables is not None else None,
                        groups=groups, extra=extra, score_range=getattr(eng, "score_range", None),
                        summary_bins=sb, seed=opts.seed, direction_fit=fit, tolerance=tolerance,
                        family=opts.family, summary_ties=_ties_of(eng, sb, opts))
    return data, sb


def run_score(source: Any, opts: Options, *, progress: Progress | None = None) -> Report:
    """``calcheck score`` on ``source`` with validated options."""
    window, run_opts = _windows(opts)
    with _engine(source, opts, progress, score_fold_bins(opts)) as eng:
        mc = eng.multiclass
        ids, bins_for, messages = plan_metrics(opts, mc, eng.capabilities)
        bounds = plan_tolerance(opts, mc, eng.capabilities)
        m = _metrics(eng, ids, run_opts, optional_tce=opts.metrics is None and not opts.compat)
        ids = [i for i in ids if i in m.values]
        v = eng.variables(opts.variable_list, variable_options(opts)) if opts.variables else Outcome()
        g = eng.groups(ids, metric_options(run_opts, mc), interval_options(run_opts),
                       group_options(run_opts)) if run_opts.by else None
        check_dropped(eng, opts)
        reading = eng.reading()
        gates = None
        if opts.fail_if:
            from calcheck.gates import evaluate_gates, parse_gate

            conditions = [parse_gate(x) for x in opts.fail_if]
            values = {k: r.value for k, r in m.values.items()}
            for c in conditions:                      # a gate gates or refuses, never passes
                got = values.get(c.metric)            # on a metric that was not computed
                if got is None or got != got:
                    why = next((n for n in m.notes if n.startswith(f"{c.metric} ")), "")
                    raise UsageError(f"{opts.name_of('fail_if')} {c.text}: {c.metric} was not "
                                     "computed" + (f" ({why})" if why else "") + "; the gate "
                                     "cannot be evaluated")
            gates = evaluate_gates(conditions, values)
            if opts.gate_groups and g is not None:
                names = group_names(g.values)
                skipped = []
                for key, gr in g.values.items():
                    if gr.flagged:
                        skipped.append(names[key])
                        continue
                    for entry in evaluate_gates(conditions, {k: r.value for k, r in
                                                            gr.metrics.items()}):
                        gates.append({**entry, "group": names[key]})
                if skipped:
                    messages.append(f"{opts.name_of('gate_groups')}: {len(skipped)} group(s) "
                                    f"under {opts.name_of('min_group_size')} "
                                    f"{opts.min_group_size} not gated: "
                                    + ", ".join(skipped[:10]) + (" …" if len(skipped) > 10
                                                                 else ""))
        groups = None
        extra = None
        verdicts = group_verdicts(g, opts) if g is not None else {}
        entries = {k: {**gr.to_dict(), **({"verdict": verdicts[k]} if k in verdicts else {})}
                   for k, gr in (g.values.items() if g is not None else ())}
        if window is not None and g is not None:
            from calcheck.io.windows import assemble

            extra = {"windows": assemble(window, entries)}
        elif g is not None:
            names = group_names(g.values)
            groups = {names[k]: e for k, e in entries.items()}
        data, sb = _report_data(
            eng, opts, "score", ids=ids, metrics=m.values, bounds=bounds,
            notes=reading.notes + m.notes + v.notes,
            settings={**m.settings, **v.settings, **(g.settings if g else {})},
            more_settings={"window_intervals": window_intervals(opts, len(g.values))}
            if window is not None and g is not None and opts.ci else {},
            variables=v.values.get("result"), groups=groups, extra=extra, bins_for=bins_for,
            gates=gates, sections={"groups": groups, **(extra or {})})
    plot_id = ("ece_top" if mc else "ece") if opts.plot else None
    return Report(data, bins_for=tuple(b for b in bins_for if b != plot_id),
                  messages=tuple(reading.messages + messages + m.messages),
                  text_plot=plot_id, per_class=opts.per_class, diagram=sb,
                  fail_if_beyond=opts.fail_if_beyond)


# ---------------------------------------------------------------------------------------------
# tests


def resolve_methods(methods: list[str] | None, label: str = "methods",
                    compat: str | None = None,
                    engine: Capabilities | str = "memory") -> list[str]:
    """Validate ``--method`` values (comma lists allowed; ``all``); default ``tcal`` (or,
    on an engine that cannot, every test it runs) — under ``compat``, every test the library
    has (an unknown one is an error naming them).  On a streaming engine ``all`` is every test
    it runs; naming one it cannot run is an error."""
    caps = engine if isinstance(engine, Capabilities) else capabilities(engine)
    if compat:
        from calcheck import compat as peers

        known = list(peers.mode(compat).tests)
        if not known:
            raise UsageError(f"--compat {compat}: {peers.mode(compat).library} has no "
                             "calibration test")
    else:
        known = registry.methods()
    if not methods:
        return list(known) if compat else ["tcal"] if "tcal" in caps.methods() else \
            caps.methods()
    out: list[str] = []
    for m in registry.split_ids(methods):
        if m == "all":
            out.extend(x for x in known if x not in out)
        elif m in known:
            if m not in out:
                out.append(m)
        elif compat:
            from calcheck import compat as peers

            peers.check_methods(compat, [m])
        else:
            raise UsageError(f"unknown {label} {m!r}; use one of {', '.join(known)}, all")
    if not out:
        raise UsageError(f"{label}: no test method selected")
    if not caps.rows and not compat:
        runs = caps.methods()
        if "all" in registry.split_ids(methods):
            out = [m for m in out if m in runs]
        bad = [m for m in out if m not in runs]
        if bad:
            raise UsageError(f"--engine {caps.name} runs {', '.join(runs)}; {', '.join(bad)} "
                             "need(s) --engine memory" + (f" ({caps.why})" if caps.why else ""))
    return out


def run_test(source: Any, opts: Options, *, progress: Progress | None = None) -> Report:
    """``calcheck test`` on ``source`` with validated options."""
    # (weighted rows: the engine opened says what it runs — rows held run every test)
    resolve_methods(opts.methods, opts.name_of("methods"), opts.compat,
                    "memory" if opts.weighting else opts.engine)
    window, run_opts = _windows(opts)
    with _engine(source, opts, progress) as eng:
        caps = eng.capabilities
        methods = resolve_methods(opts.methods, opts.name_of("methods"), opts.compat, caps)
        messages = [] if opts.compat else caps.left_out(opts.methods, methods,
                                                        opts.name_of("methods"))
        if not opts.methods and not opts.compat and eng.multiclass and eng.capabilities.rows \
                and not opts.weighting:
            methods = ["tcal", "skce"]           # T-Cal sees the top label; SKCE every class
        if opts.weighting:
            methods = _weighted_methods(opts, methods, messages)
        bounds = plan_tolerance(opts, eng.multiclass, eng.capabilities)
        g = eng.group_tests(methods, test_options(opts, bins=opts.bins),
                            group_options(run_opts)) if run_opts.by else None
        tested = sum(1 for _, flagged, _ in (g.values.values() if g else []) if not flagged)
        t = eng.tests(methods, test_options(opts, groups=1 + tested, bins=opts.bins))
        extra = _group_test_sections(g, window, run_opts) if g is not None else None
        check_dropped(eng, opts)
        reading = eng.reading()
        data, sb = _report_data(eng, opts, "test", methods=methods, tests=t.values,
                                bounds=bounds,
                                notes=reading.notes + t.notes, settings=t.settings,
                                extra=extra)
    return Report(data, messages=tuple(reading.messages + messages + t.messages),
                  fail_on_reject=opts.fail_on_reject, diagram=sb,
                  fail_if_beyond=opts.fail_if_beyond)


def _weighted_methods(opts: Options, methods: list[str], messages: list[str]) -> list[str]:
    """The tests of a ``--weight`` / ``--count`` run: a method named that takes no weighted
    rows is an error saying why; ``all`` leaves those out, with a message."""
    named = set(registry.split_ids(opts.methods or [])) - {"all"}
    return _weighted_only(opts, methods, named, messages, "run")


TCE_SKIPPED = "tce not computed: "


def _metrics(eng: Engine, ids: list[str], opts: Options, *, optional_tce: bool) -> Outcome:
    """``eng.metrics``; when TCE is only there by default (``optional_tce``) and the input is
    too small for PAVA-BC bins, the other metrics with a note saying why TCE is missing."""
    mopts, ci = metric_options(opts, eng.multiclass), interval_options(opts)
    try:
        return eng.metrics(ids, mopts, ci=ci, by=opts.by)
    except TooFewRows as exc:
        pava_bc = [m for m in ids if m in ("tce", "tce_cw")]
        if not optional_tce or not pava_bc:
            raise
        reason = str(exc).split(";")[0]
        out = eng.metrics([m for m in ids if m not in pava_bc], mopts, ci=ci, by=opts.by)
        out.notes.insert(0, f"{TCE_SKIPPED}{reason}; the other metrics are computed "
                            f"({', '.join(pava_bc)} omitted; set --tce-nmin/--tce-nmax to "
                            "compute it anyway)")
        return out


# ---------------------------------------------------------------------------------------------
# figures and the HTML report


def run_figure(source: Any, opts: Options, *, progress: Progress | None = None,
               ax: Any = None) -> Outcome:
    """``calcheck plot``: the figure (``values["figure"]``; with ``ax``, that Axes drawn
    into) and its notes."""
    require_matplotlib()
    if opts.kind == "drift":
        return _drift_figure(source, opts, progress, ax)
    if opts.kind == "monitor":
        return _monitor_figure(source, opts, progress, ax)
    with _engine(source, opts, progress) as eng:
        if opts.by:
            out = _groups_figure(eng, opts, ax)
        else:
            out = eng.figure(opts.kind, figure_options(opts), ax=ax)
        check_dropped(eng, opts)
        out.messages = eng.reading().messages + out.messages
    return out


def _groups_figure(eng: Engine, opts: Options, ax: Any = None) -> Outcome:
    """The ``--by`` groups' reliability diagrams (equal-width bins) overlaid, with a legend:
    the :data:`MAX_OVERLAY` largest groups."""
    from calcheck.figures import draw

    mid = "ece_top" if eng.multiclass else "ece"
    g = eng.groups([mid], metric_options(opts, eng.multiclass), None, group_options(opts))
    names = group_names(g.values)
    ranked = sorted(((gr.n, names[k], gr) for k, gr in g.values.items() if mid in gr.metrics),
                    key=lambda t: -t[0])
    shown = ranked[:draw.MAX_OVERLAY]
    tables = [(f"{name} (n={n:,})", gr.metrics[mid].to_dict(bins=True)["bins"])
              for n, name, gr in shown]
    left = len(ranked) - len(shown)
    title = f"Reliability diagrams by {opts.by}" + (f" — the {len(shown)} largest of "
                                                      f"{len(ranked)} groups" if left else "")
    fig = draw.overlay_figure(tables, title=title, top_label=eng.multiclass, ax=ax)
    notes = [f"the overlay draws the {len(shown)} largest of {len(ranked)} groups of "
             f"{opts.name_of('by')} {opts.by}"] if left else []
    return Outcome(values={"figure": fig, "groups": [name for _, name, _ in shown]},
                   notes=notes)


def _drift_figure(source: Any, opts: Options, progress: Progress | None,
                  ax: Any = None) -> Outcome:
    """``plot --kind drift``: one metric per ``--time`` window with its bootstrap interval."""
    from calcheck.figures import draw

    sopts = opts.replace(command="score", ci=True, kind="tce", metrics=opts.metrics or ["ece"])
    rep = run_score(source, sopts, progress=progress)
    mid = next(iter(rep.metrics))
    fig = draw.drift_figure(rep.data["windows"], mid, registry.title(mid),
                             window=f"{opts.window} windows of {opts.time} ({opts.tz})", ax=ax)
    return Outcome(values={"figure": fig}, notes=list(rep.notes), messages=list(rep.messages))


def _monitor_figure(source: Any, opts: Options, progress: Progress | None,
                    ax: Any = None) -> Outcome:
    """``plot --kind monitor``: the e-value path and the offset's confidence sequence."""
    from calcheck.figures.watch import monitor_figure
    from calcheck.monitoring import run_monitor

    mopts = parse("monitor", {"time": opts.time, "window": opts.window, "tz": opts.tz,
                              "score": opts.score, "label": opts.label,
                              "pos_label": opts.pos_label, "probs": opts.probs,
                              "where": opts.where, "drop_invalid": opts.drop_invalid,
                              "input_format": opts.input_format, "count": opts.count},
                  style=opts.style)
    rep = run_monitor(source, mopts, progress=progress)
    fig = monitor_figure(rep.data["windows"], alpha=rep.data["settings"]["alpha"], ax=ax)
    return Outcome(values={"figure": fig}, notes=list(rep.notes), messages=list(rep.messages))


def _report_figures(eng: Engine, opts: Options, *, tce_skipped: bool, grouped: bool,
                    variables: Any, notes: list[str]) -> list[tuple[str, Any]]:
    """The report's figures (caption, figure), in order; what an engine cannot draw is said in
    ``notes`` (appended to)."""
    mc = eng.multiclass
    figs: list[tuple[str, Any]] = []
    # counted rows draw every figure (the expanded file's); sampling weights all but the
    # test-based one (TCE takes counts)
    sampled = opts.weighting is not None and opts.weighting[1] == "weight"
    if sampled:
        notes.append(f"{opts.name_of('weight')}: the test-based diagram is not drawn from "
                     "sampling-weighted rows (TCE takes counts, not weights)")
    for kind, binning, caption in FIGURES:
        if kind == "tce" and (tce_skipped or sampled):
            continue
        fopts = opts.replace(binning=binning, yscale="auto")
        figs.append((caption, eng.figure(kind, figure_options(fopts)).values["figure"]))
    if grouped:
        over = _groups_figure(eng, opts)
        figs.append((f"Reliability diagrams by {opts.by}, overlaid (equal-width bins, "
                     "95% intervals)", over.values["figure"]))
        notes += over.notes
    if eng.capabilities.rows and mc:
        figs.append(("Per-class reliability diagrams (one-vs-rest)",
                     eng.figure("reliability", figure_options(opts.replace(
                         per_class=True, bins=None, binning="uniform"))).values["figure"]))
    elif mc:
        notes.append(f"the per-class diagrams need --engine memory; not drawn on --engine "
                     f"{eng.name}")
    if eng.capabilities.rows or eng.capabilities.held:
        figs.append((f"CORP reliability diagram: PAV recalibration with its "
                     f"{opts.band_level:.0%} consistency band and the score decomposition",
                     eng.figure("corp", figure_options(opts)).values["figure"]))
    else:
        notes.append(f"the CORP diagram needs --engine memory (PAV over every distinct "
                     f"score); not drawn on --engine {eng.name}")
    for name in opts.variable_list:
        fopts = opts.replace(variables=[name])
        figs.append((f"Variable-based calibration along {name}",
                     eng.figure("variable", figure_options(fopts),
                                variables=variables).values["figure"]))
    return figs


def run_report(source: Any, opts: Options, *, progress: Progress | None = None) -> Report:
    """``calcheck report``: the default metrics, the tests, the variables and every figure."""
    from calcheck.figures import draw

    require_matplotlib()
    methods = (["tcal"] if opts.adaptive else []) + ["hl", "spiegelhalter", "cox"]
    with _engine(source, opts, progress) as eng:
        mc = eng.multiclass
        ids, _, planned = plan_metrics(opts, mc, eng.capabilities)
        bounds = plan_tolerance(opts, mc, eng.capabilities)
        m = _metrics(eng, ids, opts, optional_tce=opts.metrics is None)
        ids = [i for i in ids if i in m.values]
        tce_skipped = any(n.startswith(TCE_SKIPPED) for n in m.notes) or \
            not any(i in ids for i in ("tce", "tce_top"))
        if mc and eng.capabilities.rows and not opts.weighting:
            methods.append("skce")                   # every class, not only the top label
        t = eng.tests(methods, test_options(opts))
        notes = planned + m.notes + t.notes
        g = eng.groups(ids, metric_options(opts, mc), interval_options(opts),
                       group_options(opts)) if opts.by else None
        groups = None
        if g is not None:
            names = group_names(g.values)
            groups = {names[k]: gr.to_dict() for k, gr in g.values.items()}
        var = None
        if opts.variables:
            v = eng.variables(opts.variable_list, variable_options(opts))
            var, notes = v.values["result"], notes + v.notes
        figs = _report_figures(eng, opts, tce_skipped=tce_skipped, grouped=g is not None,
                               variables=var, notes=notes)
        extra = None
        if opts.audit:
            from calcheck.auditing import audit_section, segment_options
            from calcheck.figures.watch import segments_figure

            aopts = opts.replace(segments=opts.audit)
            section = audit_section(eng.segment_table(list(dict.fromkeys(opts.audit)),
                                                      segment_options(aopts)),
                                    aopts)
            extra = {"audit": section}
            figs.append(("The worst segments: observed rate − mean score (red: miscalibrated "
                         "after adjusting for every segment searched)",
                         segments_figure(section["segments"], alpha=opts.alpha)))
        check_dropped(eng, opts)
        reading = eng.reading()
        data, sb = _report_data(
            eng, opts, "report", ids=ids, metrics=m.values, tests=t.values, bounds=bounds,
            notes=reading.notes + notes,
            settings={**m.settings, **t.settings, **(g.settings if g else {})},
            variables=var, groups=groups, extra=extra)
    pngs = tuple((cap, draw.to_png_bytes(f)) for cap, f in figs) if report_kind(opts) == "html" \
        else tuple(figs)
    return Report(data, messages=tuple(reading.messages + m.messages + t.messages),
                  figures=pngs, diagram=sb)
