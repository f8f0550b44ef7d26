"""``calcheck audit``: where is the model miscalibrated?  Every segment of the ``--segment``
columns and their intersections, worst first, with p-values adjusted over every segment
searched (docs/audit.md).

The engine cuts the columns and fills the cell table (:mod:`calcheck.segments`); the segments'
statistics and the max-type adjustment are kernels (:mod:`calcheck.hypotests.segments`); this
module plans the search and writes the report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from calcheck._json import jsonable
from calcheck._quiet import quiet
from calcheck._version import SCHEMA_VERSION, __version__
from calcheck.engines import Progress, open_engine, read_options
from calcheck.hypotests import segments as seg_stats
from calcheck.options import DEFAULT_BATCH_ROWS, Options
from calcheck.report.model import Report
from calcheck.segments import (
    SegmentData,
    SegmentOptions,
    SegmentSpace,
    key_levels,
    search_space,
)
from calcheck.signatures import inputs, keywords, parameters_doc

ADJUSTMENT = ("max-type (Westfall–Young min-p) over every segment searched, from joint null "
              "draws of the labels")


@keywords
@quiet
def audit(
        source: Any = None,
        *,
        scores: ArrayLike | None = None,
        labels: ArrayLike | None = None,
        segment: str | Sequence[str] | Mapping[str, ArrayLike] | None = None,
        score: str | None = None,
        label: str | None = None,
        pos_label: str | None = None,
        probs: str | Sequence[str] | ArrayLike | None = None,
        renormalize: bool = False,
        input_format: str | None = None,
        drop_invalid: bool = False,
        max_dropped: float = 0.5,
        where: str | None = None,
        weight: str | None = None,
        count: str | None = None,
        buckets: int = 4,
        depth: int = 2,
        min_size: int = 200,
        max_segments: int = 1000,
        max_levels: int = 1000,
        score_cells: int = 100,
        trials: int = 1000,
        seed: int = 0,
        alpha: float = 0.05,
        fail_on_reject: bool = False,
        top: int = 20,
        engine: str = "memory",
        scheduler: str | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Report:
    """Where is the model miscalibrated — ``calcheck audit`` as a function.

    ``segment``: the column(s) whose values (numeric: ``buckets`` quantile buckets) define
    the segments, searched with their intersections up to ``depth`` columns; with arrays
    input (``scores=``, ``labels=``), a mapping {name: array}.  Every segment's p-value is
    adjusted over all the segments searched (max-type, ``trials`` seeded null draws).  Input
    as for :func:`calcheck.score`; the :class:`Report` holds ``segments`` worst first.
    """
    values = dict(locals())
    return run_audit(*inputs("audit", values))


audit.__doc__ = (audit.__doc__ or "").rstrip() + "\n" + parameters_doc(audit, "audit")


def segment_options(opts: Options) -> SegmentOptions:
    """How the run's audit cuts its columns."""
    return SegmentOptions(buckets=opts.buckets, max_levels=opts.max_levels,
                          score_cells=opts.score_cells, label=opts.name_of("segments"))


def run_audit(source: Any, opts: Options, *, progress: Progress | None = None) -> Report:
    """``calcheck audit`` on ``source`` with validated options."""
    with open_engine(source, read_options(opts), progress=progress) as eng:
        names = list(dict.fromkeys(opts.segments or []))
        data = eng.segment_table(names, segment_options(opts))
        engine_settings = {k: v for k, v in eng.settings().items() if k in ("batch_rows",
                                                                            "passes")}
        info = eng.input_info(top=True)
        notes = list(eng.reading().notes)
        messages = list(eng.reading().messages)
        if eng.multiclass:
            notes.append(f"multiclass input ({eng.classes} classes): the audit reads the "
                         "top-label view (confidence, correct)")
    section = audit_section(data, opts, progress=progress)
    doc = {"schema_version": SCHEMA_VERSION, "calcheck_version": __version__,
           "command": "audit", "input": info,
           "settings": {**section.pop("settings"), **engine_settings},
           "summary": section.pop("summary"), **section, "notes": notes + section_notes(section)}
    return Report(jsonable(doc), messages=tuple(messages), fail_on_reject=opts.fail_on_reject)


def section_notes(section: dict[str, Any]) -> list[str]:
    s = section["search"]
    out = []
    if s["small"]:
        out.append(f"{s['small']:,} segment(s) under --min-size rows were not searched")
    if s["unsearched"]:
        out.append(f"{s['unsearched']:,} segment(s) beyond --max-segments were not searched "
                   "(the deepest and smallest); raise --max-segments to search them")
    if s["duplicates"]:
        out.append(f"{s['duplicates']:,} segment(s) hold the same rows as a shallower one and "
                   "were searched once")
    return out


def audit_section(data: SegmentData, opts: Options, *,
                  progress: Progress | None = None) -> dict[str, Any]:
    """The audit of the segments of ``data``: settings, the search, every segment's entry
    (worst first), the multicalibration error and the summary."""
    table = data.table
    atom_rows = np.round(table.cells["rows"].sum(axis=1)).astype(np.int64)
    space = search_space(data.columns, key_levels(table.keys, data.sizes), atom_rows,
                         depth=opts.depth, min_size=opts.min_size,
                         max_segments=opts.max_segments)
    member = space.membership()
    sums = seg_stats.segment_sums(member, table.cells, table.ece)
    sd = np.sqrt(sums.v)
    sd = np.where(sd > 0, sd, np.nan)
    z, kuiper, pz, pv, pmin = seg_stats.evidence(sums.residual.sum(axis=1),
                                                 seg_stats.walk_range(sums.residual), sd)
    bar = progress("null draws of the segments") if progress else None
    adj = seg_stats.adjust(member, table.cells, sd, pmin, trials=opts.trials, seed=opts.seed,
                           progress=bar)
    walks, resolution = _walks(data, space, sums.residual)
    entries = []
    for k, segment in enumerate(space.segments):
        n = int(sums.rows[k])
        rate, mean = sums.y[k] / n, sums.s[k] / n
        tested = not math.isnan(pmin[k])
        entries.append({
            "name": space.name(segment), "columns": space.describe(segment),
            "depth": segment.depth, "n": n, "positives": round(sums.y[k]),
            "mean_score": mean, "observed_rate": rate, "difference": rate - mean,
            "direction": ("under-predicting" if rate > mean else "over-predicting")
            if rate != mean else None,
            "ece": float(sums.ece[k]), "ecce": walks[k] / n,
            "ecce_sigma": walks[k] / sd[k] if tested else None,
            "z": z[k], "kuiper": kuiper[k], "pvalue_z": pz[k], "pvalue_kuiper": pv[k],
            "pvalue": adj.pvalue[k], "pvalue_adjusted": adj.pvalue_adjusted[k],
            "reject_adjusted": bool(tested and adj.pvalue_adjusted[k] <= opts.alpha),
            "_evidence": pmin[k] if tested else math.inf})
    entries.sort(key=lambda e: (e["_evidence"], -e["n"]))
    for e in entries:
        del e["_evidence"]
    return {"settings": _settings(opts, data, resolution, adj.trials),
            "search": _search(space),
            "summary": _summary(entries, space, opts),
            "multicalibration": _multicalibration(entries, sums, sd, space),
            "segments": entries}


def _walks(data: SegmentData, space: SegmentSpace, residual: Any) -> tuple[Any, str]:
    """Every segment's walk range V_k on its rows (memory) or its score cells (stream)."""
    if data.rows is None:
        return seg_stats.walk_range(residual), "score cells"
    scores, labels, keys = data.rows
    atom_of = np.searchsorted(data.table.keys, keys)
    by_score = np.argsort(scores, kind="stable")
    out = np.zeros(len(space.segments))
    combos: dict[tuple[int, ...], list[int]] = {}
    for k, segment in enumerate(space.segments):
        combos.setdefault(segment.columns, []).append(k)
    for members in combos.values():
        lookup = np.full(space.atom_rows.size, -1, dtype=np.int64)
        for j, k in enumerate(members):
            lookup[space.segments[k].atoms] = j
        ranges = seg_stats.row_walk_ranges(scores, labels, lookup[atom_of], len(members),
                                           by_score, data.counts)
        out[members] = ranges
    return out, "rows"


def _settings(opts: Options, data: SegmentData, resolution: str, trials: int) -> dict[str, Any]:
    return {"segments": [c.name for c in data.columns], "buckets": opts.buckets,
            "depth": opts.depth, "min_size": opts.min_size, "max_segments": opts.max_segments,
            "max_levels": opts.max_levels, "top": opts.top, "score_cells": data.table.score_cells,
            "ece_bins": data.table.bins, "trials": trials, "seed": opts.seed,
            "alpha": opts.alpha, "adjustment": ADJUSTMENT, "ecce": resolution,
            "engine": opts.engine, "where": opts.where, "pos_label": opts.pos_label,
            "drop_invalid": opts.drop_invalid}


def _search(space: SegmentSpace) -> dict[str, Any]:
    return {"columns": [{"name": c.name, "kind": c.kind, "levels": [lv.name for lv in c.levels],
                         "edges": list(c.edges)} for c in space.columns],
            "formed": space.formed, "searched": len(space.segments), "small": space.small,
            "duplicates": space.duplicates, "unsearched": space.unsearched}


def _multicalibration(entries: list[dict[str, Any]], sums: Any, sd: Any,
                      space: SegmentSpace) -> dict[str, Any]:
    """MCGrad's multicalibration error: the largest ECCE/σ over the segments (σ =
    √Σs(1 − s)/n), and that times the whole data's σ (back in probability units)."""
    tested = [e for e in entries if e["ecce_sigma"] is not None]
    every = next(e for e in entries if e["depth"] == 0)
    sigma0 = float(sd[0]) / float(sums.rows[0]) if not math.isnan(sd[0]) else None
    if not tested or sigma0 is None:
        return {"mce": None, "mce_sigma": None, "segment": None, "global_ecce": every["ecce"],
                "global_ecce_sigma": every["ecce_sigma"], "sigma0": sigma0}
    worst = max(tested, key=lambda e: e["ecce_sigma"])
    return {"mce": worst["ecce_sigma"] * sigma0, "mce_sigma": worst["ecce_sigma"],
            "segment": worst["name"], "global_ecce": every["ecce"],
            "global_ecce_sigma": every["ecce_sigma"], "sigma0": sigma0,
            "pvalue_adjusted": min((e["pvalue_adjusted"] for e in tested), default=None)}


def _summary(entries: list[dict[str, Any]], space: SegmentSpace, opts: Options) -> dict[str, Any]:
    searched = len(space.segments)
    rejected = [e for e in entries if e["reject_adjusted"]]
    fam = {"method": "max-type", "alpha": opts.alpha, "size": searched,
           "description": ADJUSTMENT}
    if not rejected:
        best = entries[0] if entries else None
        text = (f"no segment is miscalibrated after adjusting for {searched:,} segments "
                f"(smallest adjusted p = {best['pvalue_adjusted']:.3g}: {best['name']})"
                if best and best["pvalue_adjusted"] is not None and
                not math.isnan(best["pvalue_adjusted"])
                else f"no segment is miscalibrated after adjusting for {searched:,} segments")
        return {"verdict": "calibrated", "text": text, "rejected": [], "family": fam}
    worst = rejected[0]
    gap = 100 * abs(worst["difference"])
    text = (f"{len(rejected)} of {searched:,} segments miscalibrated after adjustment; worst: "
            f"{worst['name']} (n = {worst['n']:,}, {worst['direction']} by {gap:.2g} points, "
            f"adjusted p = {worst['pvalue_adjusted']:.3g})")
    return {"verdict": "miscalibrated", "text": text,
            "rejected": [e["name"] for e in rejected], "family": fam}
