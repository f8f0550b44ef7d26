"""``calcheck compare``: is the new model better or worse calibrated than the old one?

Two models' predictions of the **same rows** — two files matched by ``--id`` (or by position),
or two score (``--score A --score B``) or probability (``--probs P --probs Q``) column sets of
one file — are scored with the same metrics, and each metric's change Δ = new − old gets a
paired bootstrap interval (:mod:`calcheck.paired`; on the streaming engines the paired Poisson
bootstrap of :func:`calcheck.paired.paired_intervals`).  The interval decides the verdict:

* ``"worse"`` when its lower end is above 0 (the new model's error is larger),
* ``"better"`` when its upper end is below 0,
* ``"no detectable difference"`` otherwise;

metrics without an interval get no verdict; an equal-width binned error's verdict comes from
the sharper test of its squared error (:mod:`calcheck.paired`).  The headline's verdict reads
the calibration errors only, their p-values adjusted for the family (``--family``, Holm by
default); the Brier score and log loss, which measure sharpness too, get a line of their own.
``--fail-if-worse METRIC`` exits 1 when the metric's verdict is "worse";
``--fail-if-worse METRIC:MARGIN`` when its interval lies above MARGIN: the new model is worse
calibrated by more than MARGIN with confidence ``--ci-level`` (one-sided level (1 + level)/2).
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck import registry
from calcheck.data import Predictions
from calcheck.errors import InputError, UsageError
from calcheck.gates import WorseGate, parse_worse_gate
from calcheck.options import Options

VERDICTS = ("worse", "better", "no detectable difference")


def verdict_of(ci: dict[str, Any] | None, error: bool = True) -> str | None:
    """The verdict of one metric's change from its interval (None without one)."""
    if not error or not ci or ci.get("low") is None or ci.get("high") is None:
        return None
    if ci["low"] > 0:
        return "worse"
    if ci["high"] < 0:
        return "better"
    return "no detectable difference"


# ---------------------------------------------------------------------------------------------
# the pair of inputs


@dataclass
class Pair:
    """What ``compare`` reads: (source, score column, probability columns) of each model and
    how their rows are matched."""

    old: tuple[Any, str | None, list[str] | None]
    new: tuple[Any, str | None, list[str] | None]
    id: str | None
    same_file: bool


def resolve_pair(sources: list[Any], opts: Options) -> Pair:
    """The two models from one or two sources and ``--score``/``--probs`` given once or twice."""
    lab = opts.name_of
    scores, probs = list(opts.score_list), list(opts.probs_groups)
    if scores and probs:
        raise UsageError(f"{lab('score')} and {lab('probs')} exclude each other")
    if len(sources) not in (1, 2):
        raise UsageError(f"compare takes OLD NEW (two files) or one FILE with {lab('score')} "
                         f"given twice; got {len(sources)} input(s)")
    if len(scores) > 2 or len(probs) > 2:
        raise UsageError(f"compare compares two models: give {lab('score')} (or "
                         f"{lab('probs')}) at most twice")
    if len(sources) == 1:
        if max(len(scores), len(probs)) != 2:
            raise UsageError(f"one input: name the two models' columns, {lab('score')} A "
                             f"{lab('score')} B (binary) or {lab('probs')} P {lab('probs')} Q "
                             f"(multiclass), or give two files OLD NEW")
        if opts.id is not None:
            raise UsageError(f"{lab('id')} matches the rows of two files; one file's columns "
                             "are already on the same rows")
        a: list[Any] = scores or [None, None]
        b: list[Any] = [[p] for p in probs] or [None, None]
        return Pair((sources[0], a[0], b[0]), (sources[0], a[1], b[1]), None, True)
    sa = scores if scores else [None]
    pb = [[p] for p in probs] if probs else [None]
    return Pair((sources[0], sa[0], pb[0]), (sources[1], sa[-1], pb[-1]), opts.id, False)


def _keys(values: np.ndarray, name: str, column: str) -> np.ndarray:
    """Id values as one comparable array (integers as int64, anything else as text); a
    missing id is an error naming its row."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise InputError(f"{name}: --id {column}: row {bad[0] + 1} has no id (missing)",
                             column=column)
        if np.all(arr == np.round(arr)):
            return arr.astype(np.int64)
        return arr
    missing = np.flatnonzero(np.array([v is None for v in arr.tolist()], dtype=bool))
    if missing.size:
        raise InputError(f"{name}: --id {column}: row {missing[0] + 1} has no id (missing)",
                         column=column)
    return np.array([str(v) for v in arr.tolist()], dtype=str)


def _show(v: Any) -> str:
    return repr(v.item() if hasattr(v, "item") else v)


def _unique(keys: np.ndarray, name: str, column: str) -> None:
    order = np.argsort(keys, kind="stable")
    s = keys[order]
    dup = np.flatnonzero(s[1:] == s[:-1])
    if dup.size:
        raise InputError(f"{name}: --id {column}: {dup.size:,} repeated id(s), first "
                         f"{_show(s[dup[0]])}; ids must name one row each", column=column)


def match_rows(old_keys: np.ndarray, new_keys: np.ndarray, names: tuple[str, str],
               column: str) -> np.ndarray:
    """For every row of OLD, the row of NEW with the same id (exit 2 naming how many ids
    are in one file only, and the first of them)."""
    if old_keys.dtype.kind != new_keys.dtype.kind:
        old_keys, new_keys = old_keys.astype(str), new_keys.astype(str)
    for k, n in zip((old_keys, new_keys), names):
        _unique(k, n, column)
    sorter = np.argsort(new_keys, kind="stable")
    sorted_new = new_keys[sorter]
    pos = np.minimum(np.searchsorted(sorted_new, old_keys), max(len(sorted_new) - 1, 0))
    found = sorted_new[pos] == old_keys if len(sorted_new) else np.zeros(len(old_keys), bool)
    only_old = np.flatnonzero(~found)
    only_new = np.setdiff1d(new_keys, old_keys[found]) if only_old.size or \
        len(new_keys) != len(old_keys) else np.array([], dtype=new_keys.dtype)
    if only_old.size or only_new.size:
        parts = []
        if only_old.size:
            parts.append(f"{only_old.size:,} id(s) of {names[0]} are not in {names[1]} "
                         f"(first {_show(old_keys[only_old[0]])})")
        if only_new.size:
            parts.append(f"{only_new.size:,} id(s) of {names[1]} are not in {names[0]} "
                         f"(first {_show(only_new[0])})")
        raise InputError(f"--id {column}: the files do not hold the same examples: "
                         + "; ".join(parts), column=column)
    return sorter[pos]


def check_labels(old: Predictions, new: Predictions, ids: np.ndarray | None,
                 names: tuple[str, str], id_column: str | None) -> None:
    """The two models must be scored against the same labels (and classes)."""
    if old.multiclass != new.multiclass:
        raise InputError(f"{names[0]} is {old.kind} and {names[1]} {new.kind}: compare two "
                         "models of the same task")
    if old.multiclass and list(old.class_names or []) != list(new.class_names or []):
        raise InputError(f"{names[0]} and {names[1]} have different classes "
                         f"({old.class_names} vs {new.class_names})")
    differ = np.flatnonzero(np.asarray(old.labels) != np.asarray(new.labels))
    if differ.size:
        first = differ[0]
        where = f"id {_show(ids[first])}" if ids is not None else f"row {first + 1}"
        raise InputError(f"the labels differ between {names[0]} and {names[1]} on "
                         f"{differ.size:,} of {old.n:,} matched rows (first: {where}"
                         f"{' of --id ' + id_column if id_column else ''}); both models must "
                         "be scored on the same examples with the same labels")


# ---------------------------------------------------------------------------------------------
# reading (in memory)


def _load(src: Any, score: str | None, probs: list[str] | None, raw: list[str],
          opts: Options, weight: tuple[str, str] | None = None) -> Predictions:
    from calcheck.io.tabular import load_predictions

    flags = {c: opts.name_of(n) for n in ("by", "id") if (c := getattr(opts, n))}
    data = load_predictions(src, score=score, label=opts.label, pos_label=opts.pos_label,
                            probs=probs, renormalize=opts.renormalize, where=opts.where,
                            raw=raw, flags=flags, pair_as_binary=not opts.asks_multiclass,
                            weight=weight)
    if data.weights is not None:
        from dataclasses import replace

        data.weights = replace(data.weights, null=opts.weight_null)
    return data


def _same_weights(old: Predictions, new: Predictions, names: tuple[str, str]) -> None:
    """Both models' rows carry OLD's weights: NEW's own column (when it has one) must agree
    with them row by row, matched; NEW then takes OLD's."""
    assert old.weights is not None
    if new.weights is not None:
        differ = new.weights.values != old.weights.values
        if differ.any():
            from calcheck.validation import describe_rows

            raise InputError(f"{names[1]}: its {old.weights.kind} column "
                             f"{old.weights.column!r} differs from {names[0]}'s on "
                             f"{int(differ.sum()):,} matched row(s), "
                             f"{describe_rows(differ, new.weights.values, row_base=0)}: both "
                             "models' rows must carry the same weight", column=old.weights.column)
    new.weights = old.weights


def load_pair(sources: list[Any], opts: Options
              ) -> tuple[Predictions, Predictions, dict[str, Any]]:
    """Both models' predictions on the same rows in OLD's order, and how they were
    matched."""
    from calcheck.engines import source_of

    pair = resolve_pair(sources, opts)
    src_old = source_of(pair.old[0], opts.input_format)
    src_new = src_old if pair.same_file else source_of(pair.new[0], opts.input_format)
    names = (f"OLD ({src_old.name})", f"NEW ({src_new.name})") if not pair.same_file else \
        (f"OLD ({pair.old[1] or ','.join(pair.old[2] or [])})",
         f"NEW ({pair.new[1] or ','.join(pair.new[2] or [])})")
    raw_old = [c for c in (pair.id, opts.by) if c]
    old = _load(src_old, pair.old[1], pair.old[2], raw_old, opts, opts.weighting)
    from calcheck.io.source import column_names

    new_weight = opts.weighting if opts.weighting and not pair.same_file and \
        opts.weighting[0] in column_names(src_new) else None
    new = _load(src_new, pair.new[1], pair.new[2], [pair.id] if pair.id else [], opts,
                new_weight)
    ids = None
    if pair.id is not None:
        ko = _keys(old.column(pair.id), src_old.name, pair.id)
        kn = _keys(new.column(pair.id), src_new.name, pair.id)
        new = new.subset(match_rows(ko, kn, names, pair.id))
        ids = ko
        matched = f"id column {pair.id}"
    elif old.n != new.n:
        raise InputError(f"{names[0]} has {old.n:,} rows and {names[1]} {new.n:,}: rows are "
                         f"matched by position only when the counts agree; give "
                         f"{opts.name_of('id')} COLUMN to match them by id")
    else:
        matched = "same file" if pair.same_file else "position"
    check_labels(old, new, ids, names, pair.id)
    if old.weights is not None:
        _same_weights(old, new, names)
    info: dict[str, Any] = {"old": old.input_info(), "new": new.input_info(), "rows_used": old.n,
            "matched_by": matched}
    if pair.same_file:
        for side, p in (("old", pair.old), ("new", pair.new)):
            info[side]["model_columns"] = [p[1]] if p[1] else list(p[2] or [])
    return old, new, info


# ---------------------------------------------------------------------------------------------
# computing (in memory)


def _metric_values(eng: Any, ids: list[str], mopts: Any
                   ) -> tuple[dict[str, Any], dict[str, str]]:
    """Every metric of one model's engine; a metric that cannot be computed is left out with
    why."""
    from calcheck.errors import CalcheckError

    try:
        return dict(eng.metrics(ids, mopts).values), {}
    except CalcheckError:
        out, errors = {}, {}
        for mid in ids:
            try:
                out.update(eng.metrics([mid], mopts).values)
            except CalcheckError as exc:
                errors[mid] = str(exc)
        return out, errors


SCORES = ("brier", "log_loss")        # proper scores: they measure sharpness too


def entry(mid: str, old: float, new: float, change: Any = None) -> dict[str, Any]:
    """One metric's row of the comparison: values, change, its paired interval, the p-value
    of "no change" and the per-metric verdict — from the sharper squared-error test where the
    metric has one (:mod:`calcheck.paired`), else from the interval."""
    spec = registry.METRICS[mid]
    ci = change.ci.to_dict() if change is not None else None
    test = change.test if change is not None else None
    verdict = test["verdict"] if test is not None and spec.error else verdict_of(ci, spec.error)
    return {"title": spec.title, "unit": spec.unit, "old": old, "new": new,
            "delta": new - old, "ci": ci,
            "pvalue": (test["pvalue"] if test is not None else change.pvalue)
            if change is not None else None,
            **({"test": test} if test is not None else {}), "verdict": verdict,
            "verdict_scope": "this metric alone"}


def compare_memory(old: Predictions, new: Predictions, ids: list[str], opts: Options, *,
                   progress: Any = None) -> tuple[dict[str, Any], list[str]]:
    """The comparison entries of ``ids`` (metric id → entry) and notes: each model's metrics
    from its in-memory engine, the changes' intervals from the paired bootstrap of both
    models' rows (:func:`calcheck.paired.paired_bootstrap`, resampling the rows jointly)."""
    from calcheck.engines.base import metric_options
    from calcheck.engines.memory import MemoryEngine, compute
    from calcheck.paired import paired_bootstrap

    mopts = metric_options(opts, old.multiclass)
    a, ea = _metric_values(MemoryEngine(old), ids, mopts)
    b, eb = _metric_values(MemoryEngine(new), ids, mopts)
    notes = [f"{m}: not compared ({ea.get(m) or eb.get(m)})" for m in ids if m in ea or m in eb]
    done = [m for m in ids if m in a and m in b]
    cis = paired_bootstrap(old, new, done, mopts, compute, reps=opts.ci_reps,
                           level=opts.ci_level, seed=opts.seed, progress=progress)
    out = {m: entry(m, a[m].value, b[m].value, cis.get(m)) for m in done}
    return out, notes


# ---------------------------------------------------------------------------------------------
# the run


def plan(opts: Options, multiclass: bool, engine: str) -> tuple[list[str], list[WorseGate]]:
    """The metric ids compared (``-m``, default the ``score`` default set, plus the gated
    ones) and the parsed ``--fail-if-worse`` gates; a gate on a metric without an interval is
    refused before any work."""
    from calcheck.engines import capabilities
    from calcheck.metrics import resolve_metric_ids

    caps = capabilities(engine)
    can = caps.metrics(multiclass)
    label = opts.name_of("metrics")
    if opts.weighting:                  # the ids that take these weights (docs/weights.md)
        kind = opts.weighting[1]
        for mid in registry.split_ids(opts.metrics or []):
            why = registry.weight_refusal(mid, kind) if mid in registry.METRICS else None
            if why:
                raise UsageError(f"{opts.name_of(kind)}: {why}")
        can = [m for m in can if not registry.weight_refusal(m, kind)]
    if opts.metrics is None:
        ids = [m for m in registry.default_ids(multiclass) if m in can]
    else:
        ids = resolve_metric_ids(opts.metrics, multiclass=multiclass, name=label, allowed=can)
    gates = []
    for text in opts.fail_if_worse or []:
        g = parse_worse_gate(text, opts.name_of("fail_if_worse"))
        mid = resolve_metric_ids([g.metric], multiclass=multiclass,
                                 name=opts.name_of("fail_if_worse"), allowed=can)[0]
        spec = registry.METRICS[mid]
        if not caps.interval(mid) or not spec.error:
            raise UsageError(f"{opts.name_of('fail_if_worse')} {text}: {mid} has no interval "
                             f"for its change{' on --engine ' + engine if not caps.rows else ''}"
                             "; gate on a metric with one (e.g. ece, ace, brier)")
        gates.append(WorseGate(g.text, mid, g.margin))
        if mid not in ids:
            ids.append(mid)
    return ids, gates


def evaluate(gates: list[WorseGate], metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Each ``--fail-if-worse`` gate: without a margin it trips when the metric's verdict is
    "worse" (for the equal-width binned errors, the sharper squared-error test); with a
    margin, when the lower end of the change's interval is above it (a claim in the metric's
    own units)."""
    out = []
    for g in gates:
        e = metrics.get(g.metric) or {}
        ci = e.get("ci") or {}
        low = ci.get("low")
        if low is None:
            raise UsageError(f"--fail-if-worse {g.text}: {g.metric}'s change has no interval on "
                             "these data; the gate cannot be evaluated")
        by_test = g.margin == 0 and e.get("test") is not None
        failed = e["verdict"] == "worse" if by_test else bool(low > g.margin)
        out.append({"condition": g.text, "metric": g.metric, "margin": g.margin,
                    "delta": e["delta"], "low": low, "failed": bool(failed),
                    "decided_by": "squared-error test" if by_test else "interval"})
    return out


def _family_verdict(metrics: dict[str, Any], ids: list[str], level: float,
                    family: str) -> tuple[str, list[str], list[str], dict[str, Any]]:
    """The verdict over ``ids`` read together: each metric's p-value adjusted for the family
    (``pvalue_adjusted``), "worse" when one rejects at 1 − level with NEW's error larger,
    "better" when one rejects with it smaller (and none worse)."""
    from calcheck.hypotests.family import DESCRIPTION, adjust, family_size

    alpha = 1.0 - level
    # metrics decided by one test (ECE and ECE-l2 share the squared-error test of their bins)
    # are one hypothesis of the family, not two
    keys = {m: ("squared", metrics[m]["test"]["statistic"]) if metrics[m].get("test") else m
            for m in ids}
    unique = list(dict.fromkeys(keys.values()))
    first = {k: next(m for m in ids if keys[m] == k) for k in unique}
    ps = [metrics[first[k]].get("pvalue") for k in unique]
    adjusted = dict(zip(unique, adjust(ps, family)))
    adj = [adjusted[keys[m]] for m in ids]
    worse: list[str] = []
    better: list[str] = []
    for m, q in zip(ids, adj):
        metrics[m]["pvalue_adjusted"] = q
        if q is None or q > alpha:
            continue
        direction = metrics[m]["verdict"] if metrics[m]["verdict"] in ("worse", "better") \
            else ("worse" if metrics[m]["delta"] > 0 else "better")
        (worse if direction == "worse" else better).append(m)
    v = "worse" if worse else "better" if better else "no detectable difference"
    return v, worse, better, {"method": family, "alpha": alpha, "size": family_size(ps),
                              "metrics": ids, "description": DESCRIPTION[family]}


def _parts(metrics: dict[str, Any], shown: list[str]) -> str:
    from calcheck.report.comparison import signed

    out = []
    for m in shown:
        e = metrics[m]
        ci = e["ci"] or {}
        span = (f" [{signed(ci['low'], e['unit'])}, {signed(ci['high'], e['unit'])}]"
                if ci.get("low") is not None else "")
        out.append(f"{e['title']} {signed(e['delta'], e['unit'])}{span}")
    return "; ".join(out)


def summary(metrics: dict[str, Any], level: float, family: str = "holm") -> dict[str, Any]:
    """The comparison's headline: ``verdict`` reads the calibration errors only — every error
    metric with a p-value but the Brier score and log loss — with the family-wise error
    controlled over them (``--family``); ``scores`` reads the Brier score and log loss, which
    also measure sharpness, on a line of their own."""
    calib = [m for m, e in metrics.items() if registry.METRICS[m].error and m not in SCORES
             and e.get("pvalue") is not None]
    v, worse, better, fam = _family_verdict(metrics, calib, level, family)
    shown = (worse or better or calib)[:3]
    head = {"worse": "NEW is worse calibrated than OLD",
            "better": "NEW is better calibrated than OLD",
            "no detectable difference": "no detectable difference in calibration between OLD "
                                        "and NEW"}[v]
    how = f"{family} over {fam['size']} calibration errors" if family != "none" and \
        fam["size"] > 1 else "each calibration error on its own" if family == "none" else ""
    text = head + (": " + _parts(metrics, shown) if shown else "") + \
        f" (change new - old, {level:.0%} paired bootstrap interval" + \
        (f"; {how}" if how else "") + ")"
    out: dict[str, Any] = {"verdict": v, "text": text, "worse": worse, "better": better,
                           "family": fam}
    sc = [m for m in SCORES if m in metrics and metrics[m].get("pvalue") is not None]
    if sc:
        sv, sw, sb, sfam = _family_verdict(metrics, sc, level, family)
        words = {"worse": "NEW scores worse overall than OLD",
                 "better": "NEW scores better overall than OLD",
                 "no detectable difference": "no detectable difference in overall score "
                                             "between OLD and NEW"}[sv]
        out["scores"] = {"verdict": sv, "worse": sw, "better": sb, "family": sfam,
                         "text": f"{words}: {_parts(metrics, (sw or sb or sc)[:2])} (the Brier "
                                 "score and log loss measure sharpness as well as calibration)"}
        out["scores_text"] = out["scores"]["text"]
    return out


def run_compare(sources: list[Any], opts: Options, *, progress: Any = None) -> Any:
    """``calcheck compare`` with validated options: the comparison :class:`Report`."""
    from calcheck.engines import capabilities
    from calcheck.report.build import group_names

    streamed = _streamed(sources, opts) if not capabilities(opts.engine).rows and \
        opts.weighting is not None else None
    held = not capabilities(opts.engine).rows and opts.weighting is not None and not streamed
    if not capabilities(opts.engine).rows and not held:
        return compare_stream(sources, opts, progress=progress, passes=streamed == "passes")
    old, new, info = load_pair(sources, opts)
    ids, gates = plan(opts, old.multiclass, opts.engine)
    bar = progress("paired bootstrap") if progress else None
    metrics, notes = compare_memory(old, new, ids, opts, progress=bar)
    groups = None
    if opts.by:
        from calcheck.engines.memory import group_keys

        keys, codes = group_keys(old.column(opts.by))
        if len(keys) > opts.max_groups:
            raise UsageError(f"{opts.name_of('by')} {opts.by}: {len(keys):,} distinct values, "
                             f"more than {opts.name_of('max_groups')} {opts.max_groups:,}")
        names = group_names(keys)
        groups = {}
        w = old.weights
        for j, key in enumerate(keys):
            mask = codes == j
            n = round(float(w.values[mask].sum())) if w is not None and w.frequency else \
                int(mask.sum())
            entries, gnotes = compare_memory(old.subset(mask), new.subset(mask), list(metrics),
                                             opts)
            groups[names[key]] = {"n": n, "flagged": n < opts.min_group_size,
                                  "metrics": entries, "errors": gnotes}
    engine_settings = None
    if held:                            # weighted rows a streaming engine held in memory
        from calcheck.engines.held import HELD_NOTE, held_settings

        engine_settings = {"held": held_settings(old.n, opts.tuning.hold_weighted_rows)}
        notes = [*notes, f"--engine {opts.engine}: {HELD_NOTE}"]
    rep = build(info, opts, metrics, notes, groups, gates, engine=opts.engine,
                engine_settings=engine_settings)
    if wants_figure(opts):
        from calcheck.engines.base import metric_options
        from calcheck.engines.memory import MemoryEngine

        mid = "ece_top" if old.multiclass else "ece"
        mopts = metric_options(opts, old.multiclass)
        tables = [(label, MemoryEngine(d).metrics([mid], mopts).values[mid]
                   .to_dict(bins=True)["bins"]) for label, d in (("OLD", old), ("NEW", new))]
        rep = with_figure(rep, tables, old.multiclass)
    return rep


def _streamed(sources: list[Any], opts: Options) -> str | None:
    """How a streaming engine's ``compare`` reads weighted or counted rows: None when every
    input fits ``Tuning.hold_weighted_rows`` (held in memory); beyond it ``"expanded"`` for
    counts of one file holding both models' scores (both sides expand the same rows by the
    same counts), else ``"passes"``: each model's metrics from its weighted passes and the
    paired units of both in step, NEW's weights checked against OLD's row by row."""
    from calcheck.engines import check_held, read_options, source_of

    assert opts.weighting is not None
    pair = resolve_pair(sources, opts)
    read = read_options(opts)
    srcs = [source_of(pair.old[0], opts.input_format)]
    if not pair.same_file:
        srcs.append(source_of(pair.new[0], opts.input_format))
    if all(check_held(src, read) for src in srcs):
        return None
    return "expanded" if opts.weighting[1] == "count" and pair.same_file else "passes"


def wants_figure(opts: Options) -> bool:
    return bool(opts.output and opts.output.lower().endswith((".html", ".htm")))


def with_figure(rep: Any, tables: list[tuple[str, list[dict[str, Any]]]], top: bool) -> Any:
    """The report with both models' reliability diagrams overlaid (for the HTML page)."""
    from dataclasses import replace

    from calcheck.figures import draw

    fig = draw.overlay_figure(tables, title="Reliability diagrams: OLD and NEW", top_label=top)
    caption = "Reliability diagrams of OLD and NEW overlaid (equal-width bins, 95% intervals)"
    return replace(rep, figures=((caption, draw.to_png_bytes(fig)),))


def build(info: dict[str, Any], opts: Options, metrics: dict[str, Any], notes: list[str],
          groups: dict[str, Any] | None, gates: list[WorseGate], *, engine: str,
          engine_settings: dict[str, Any] | None = None) -> Any:
    """The comparison report (JSON document and :class:`Report`)."""
    from calcheck import __version__
    from calcheck._json import jsonable
    from calcheck._version import SCHEMA_VERSION
    from calcheck.report.build import settings_of
    from calcheck.report.model import Report

    ids = list(metrics)
    mc = bool(info["old"].get("classes"))
    settings = settings_of("compare", opts, multiclass=mc, ids=ids, engine=engine_settings or {},
                           extra={"ci": {"reps": opts.ci_reps, "level": opts.ci_level,
                                         "seed": opts.seed,
                                         "method": "paired norm bootstrap (binned errors), "
                                                   "paired percentile bootstrap (the others)"}})
    settings["engine"] = engine
    no_ci = [m for m, e in metrics.items() if e["verdict"] is None and
             not (registry.METRICS[m].ci and registry.METRICS[m].error)]
    if no_ci:
        notes = [*notes, f"{', '.join(no_ci)}: no interval for the change (a maximum, a "
                         "count, or a biased estimator whose bootstrap does not cover: "
                         "docs/uncertainty.md), so no verdict"]
    data: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "calcheck_version": __version__,
                            "command": "compare", "input": info, "settings": settings,
                            "summary": summary(metrics, opts.ci_level, opts.family),
                            "metrics": metrics}
    if groups is not None:
        data["groups"] = groups
    data["notes"] = notes
    if gates:
        data["gates"] = evaluate(gates, metrics)
    return Report(jsonable(data))


def _add_units(units: Any, so: Any, sn: Any, y: Any, multiclass: bool,
               w: Any = None) -> None:
    """One batch of both models' rows in step into the paired units (multiclass: each
    model's top-label view; ``w``: the rows' weights)."""
    if multiclass:
        from calcheck.data import top_label_view

        (so, yo), (sn, yn) = top_label_view(so, y), top_label_view(sn, y)
        units.update(so, sn, np.asarray(yo, dtype=np.float64), np.asarray(yn, dtype=np.float64),
                     w)
    else:
        yf = np.asarray(y, dtype=np.float64)
        units.update(so, sn, yf, yf, w)


def _check_weight_column(pair: Pair, opts: Options) -> None:
    """Two files compared by the weighted passes both carry the weight column: NEW's
    metrics need its rows' weights, which the pass in step checks against OLD's."""
    from calcheck.engines import source_of
    from calcheck.io.source import column_names

    assert opts.weighting is not None
    col, kind = opts.weighting
    src = source_of(pair.new[0], opts.input_format)
    if col not in column_names(src):
        raise UsageError(f"{opts.name_of(kind)} {col}: NEW ({src.name}) has no such column; "
                         f"beyond {opts.tuning.hold_weighted_rows:,} rows "
                         "(Tuning.hold_weighted_rows) --engine "
                         f"{opts.engine} computes each model's metrics from its own file's "
                         "weighted passes, so both files carry the weight column (NEW's is "
                         "checked against OLD's row by row); or use --engine memory, where NEW "
                         "takes OLD's weights")


def _passes_ids(eng: Any, ids: list[str], opts: Options, notes: list[str],
                gates: list[WorseGate]) -> list[str]:
    """The metrics a compare on the weighted passes compares: those named or gated (a metric
    the passes lack is refused by the engine), or the default set's that the passes compute,
    with a note naming the others."""
    caps = eng.capabilities
    if opts.metrics is not None or caps.only is None:
        return ids
    gated = {g.metric for g in gates}
    keep = [m for m in ids if (m in caps.only and m not in caps.named_only) or m in gated]
    left = [m for m in ids if m not in keep]
    if left:
        notes.append(f"{', '.join(left)} not compared on --engine {eng.name} ({caps.why})")
    return keep


def compare_stream(sources: list[Any], opts: Options, *, progress: Any = None,
                   passes: bool = False) -> Any:
    """``compare`` with ``--engine stream`` or ``dask`` (``passes``: weighted or counted rows
    beyond the held budget, each model's metrics from its weighted passes)."""
    from calcheck.engines import open_engine, read_options
    from calcheck.engines.base import metric_options
    from calcheck.metrics._result import MetricResult
    from calcheck.paired import PairedUnits, in_step, paired_intervals

    lab = opts.name_of
    if opts.id is not None:
        raise UsageError(f"{lab('id')} matches rows by id with {lab('engine')} memory; the "
                         f"streaming engines match them by position")
    if opts.by is not None:
        raise UsageError(f"{lab('by')} with compare needs {lab('engine')} memory")
    pair = resolve_pair(sources, opts)
    if passes and not pair.same_file:
        _check_weight_column(pair, opts)
    sides = []
    for src, score, probs in (pair.old, pair.new):
        o = opts.replace(score=score, probs=probs, command="score", id=None)
        sides.append((src, o))
    results: list[dict[str, MetricResult]] = []
    infos: list[dict[str, Any]] = []
    notes: list[str] = []
    engines_settings: dict[str, Any] = {}
    ids: list[str] = []
    tables = []
    with contextlib.ExitStack() as stack:
        # (counts of one file stream expanded: the paired pass reads both sides' rows in
        # step; beyond the budget otherwise, the weighted passes)
        engines = [stack.enter_context(open_engine(src, dataclasses.replace(
            read_options(o), passes=passes, passes_multiclass=passes, held=False)))
            for src, o in sides]
        for j, ((_, o), eng) in enumerate(zip(sides, engines)):
            if j == 0:
                ids, gates = plan(opts, eng.multiclass, eng.name)
                multiclass = eng.multiclass
                if passes:
                    ids = _passes_ids(eng, ids, opts, notes, gates)
                    notes.append(f"--engine {eng.name}: {getattr(eng, 'note', '')}; the "
                                 "paired units carry the weights")
            mopts = metric_options(o, eng.multiclass)
            out = eng.metrics(ids, mopts, by=o.by)
            results.append(dict(out.values))
            infos.append(eng.input_info())
            notes += out.notes
            engines_settings = eng.settings()
            if wants_figure(opts):
                mid = "ece_top" if multiclass else "ece"
                r = out.values.get(mid) or eng.metrics([mid], mopts, by=o.by).values[mid]
                tables.append(("OLD" if j == 0 else "NEW", r.to_dict(bins=True)["bins"]))
        names = ("OLD", "NEW")
        mopt_bins = opts.bins if opts.bins is not None else (15 if multiclass else 10)
        units = PairedUnits(mopt_bins, opts.weighting[1] if passes and opts.weighting else None)
        view = "classes" if multiclass else "top"
        for so, sn, y, w in in_step(engines[0].rows(view), engines[1].rows(view), names,
                                    opts.weighting[0] if opts.weighting else ""):
            _add_units(units, so, sn, y, multiclass, w)
    base = {m: registry.binary_of(m) or m for m in ids}
    cis, ci_settings = paired_intervals(units, list(dict.fromkeys(base.values())),
                                        reps=opts.ci_reps, level=opts.ci_level, seed=opts.seed)
    done = [m for m in ids if m in results[0] and m in results[1]]
    metrics = {m: entry(m, results[0][m].value, results[1][m].value, cis.get(base[m]))
               for m in done}
    left = [m for m in done if metrics[m]["ci"] is None and registry.METRICS[m].ci]
    if left:
        notes.append(f"{', '.join(left)}: no interval for the change on --engine {opts.engine} "
                     "(the paired Poisson bootstrap covers ECE, ECE-l2, ACE, Brier and log loss; "
                     "--engine memory has the others)")
    info = {"old": infos[0], "new": infos[1], "rows_used": infos[0].get("rows_used"),
            "matched_by": "same file" if pair.same_file else "position"}
    rep = build(info, opts, metrics, notes, None, gates, engine=opts.engine,
                engine_settings={**engines_settings, "paired_units": ci_settings})
    if tables:
        rep = with_figure(rep, tables, multiclass)
    return rep
