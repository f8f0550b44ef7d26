"""Multiclass input on the weighted passes' engine
(:class:`calcheck.engines.weighted.WeightedStreamEngine`), as the in-memory engine computes it
(docs/weights.md, "Definitions"; docs/multiclass.md):

* the top-label ids (``ece_top``, ``mce_top``, ``ace_top``) and every binary id are the binary
  metrics of the top-label view (confidence, correct), each row keeping its weight: the
  engine's own passes, which read that view of multiclass input;
* SCE, classwise ACE and TACE are the mean over classes of the binary ECE or ACE of each
  class's one-vs-rest view (p_ik, 1[c_i = k]) with the rows' weights — TACE's of the rows
  with p_ik >= ε only, a class whose kept rows weigh nothing adding 0.  Every class (and
  threshold) is a program of weighted passes of its own — a first pass, then the mass search
  and bins passes ACE needs — over a class sub-stream
  (:class:`~calcheck.streaming.views.SubStream`), all of them in lockstep
  (:func:`calcheck.streaming.runner.drive_lockstep`), one pass over the file per round for
  every class, as many at a time as :data:`calcheck.streaming.views.CHUNK`; per ``--by``
  group or ``--time`` window, each group's classes."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace
from typing import Any, cast

import numpy as np

from calcheck import registry
from calcheck._typing import Passes
from calcheck.engines.weighted_rows import WeightedRows
from calcheck.errors import CalcheckError
from calcheck.metrics._data import MetricOptions
from calcheck.metrics._result import MetricResult
from calcheck.streaming.runner import drive_lockstep, one_pass
from calcheck.streaming.views import ALL, SubStream
from calcheck.streaming.weighted import FirstSpec

# the classwise metrics of the passes (engines.base.PASSES_CLASSWISE): the binary metric of
# each class's view they average
CLASSWISE = {"sce": "ece", "ace_cw": "ace", "tace": "ace"}


def top_metrics(rows: WeightedRows, ids: list[str], b: int, sigma: float | None = None
                ) -> Passes[dict[str, MetricResult]]:
    """The top-label view's metrics ``ids`` (binary or ``*_top``) of ``rows`` (a first pass
    of that view), each reported as the in-memory engine does: its own id, ``view:
    top-label``."""
    binary = {m: registry.binary_of(m) or m for m in ids}
    res = yield from rows.metrics(list(dict.fromkeys(binary.values())), b, sigma)
    return {m: replace(res[binary[m]], id=m,
                       settings={**res[binary[m]].settings, "view": "top-label"})
            for m in ids}


def class_program(eng: Any, b: int, binary: list[str]
                  ) -> Passes[tuple[float, dict[str, float]]]:
    """One class sub-stream's (mass, {binary metric: value}): its first pass, then the
    metrics' passes (none when its rows weigh nothing)."""
    first = yield from one_pass(FirstSpec((b,)))
    mass = first.scalar("mass")
    if not mass > 0:
        return mass, {}
    rows = eng.rows_of(first)
    res = yield from rows.metrics(binary, b)
    return mass, {m: r.value for m, r in res.items()}


def classwise_metrics(eng: Any, ids: list[str], mopts: MetricOptions,
                      sizes: dict[Hashable, int], by: str | None = None
                      ) -> dict[Hashable, dict[str, MetricResult] | CalcheckError]:
    """SCE, classwise ACE and TACE among ``ids`` of every group in ``sizes`` (its results'
    ``n``; :data:`~calcheck.streaming.views.ALL`: the file's rows), by group: the classes'
    programs in lockstep (a group's error, when one of its classes raised one)."""
    from calcheck.metrics.multiclass import classwise_settings, weighted_classwise_result

    wanted = [m for m in ids if m in CLASSWISE]
    b, cut = mopts.bins, mopts.tace_threshold
    views: dict[float | None, list[str]] = {}
    for m in wanted:                     # SCE and classwise ACE share each class's view
        views.setdefault(cut if m == "tace" else None, []).append(CLASSWISE[m])
    runs = {(g, at, k): (SubStream(cls=k, group=g, min_score=at),
                         class_program(eng, b, list(dict.fromkeys(binary))))
            for g in sizes for at, binary in views.items() for k in range(eng.classes)}
    done = drive_lockstep(eng.source, runs, view="columns", by=by) if runs else {}
    out: dict[Hashable, dict[str, MetricResult] | CalcheckError] = {}
    for g, n in sizes.items():
        got = {(at, k): done[(g, at, k)] for at in views for k in range(eng.classes)}
        bad = next((r for r in got.values() if isinstance(r, CalcheckError)), None)
        if bad is not None:
            out[g] = bad
            continue
        res: dict[str, MetricResult] = {}
        for m in wanted:
            at = cut if m == "tace" else None
            per = [cast(tuple[float, dict[str, float]], got[(at, k)])
                   for k in range(eng.classes)]
            errs = np.array([v.get(CLASSWISE[m], 0.0) for _, v in per])
            kept = np.array([mass for mass, _ in per]) if m == "tace" else None
            res[m] = weighted_classwise_result(
                m, errs, kept, n, classwise_settings(m, b, eng.classes, mopts.ties, cut),
                eng.frequency)
        out[g] = res
    return out


def file_metrics(eng: Any, ids: list[str], mopts: MetricOptions
                 ) -> dict[str, MetricResult]:
    """The file's multiclass metrics ``ids`` (of the passes')."""
    b = mopts.bins
    top = [m for m in ids if m not in CLASSWISE]
    out = eng.drive(top_metrics(eng.all_rows, top, b, mopts.smece_sigma)) if top else {}
    whole = classwise_metrics(eng, ids, mopts, {ALL: eng.all_rows.n})[ALL]
    if isinstance(whole, CalcheckError):
        raise whole
    return {**out, **whole}

