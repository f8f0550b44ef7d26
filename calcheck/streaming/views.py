"""Sub-streams: many binary computations over one dataset, in shared passes.

The classwise metrics of multiclass input (``ace_cw``, ``tace``, ``tce_cw``) are the binary
positional metrics of each class's one-vs-rest view (p_ik, 1[c_i = k]) — TACE's of the rows
with p_ik ≥ ε only — and ``--by``'s per-group positional metrics are those of each group's
rows.  Each such computation is a :data:`~calcheck._typing.Passes` generator (a
grid pass, then the rank search and row passes of
:mod:`calcheck.streaming.positional`); :func:`calcheck.streaming.runner.drive_lockstep` runs
many of them together: every pass folds one :class:`ViewsSpec`, whose state hands each batch's
sub-streams to their own states.

A sub-stream keeps the rows' ids in the whole stream, so the stable sort of a sub-stream by
(score, row id) is the in-memory engine's stable sort of that subset, and ties break as they
do there.  Memory: each computation holds a grid (~5 MB) and at most its share of the search's
collected rows, so the computations run in chunks of :data:`CHUNK`, and the exact PAVA passes
(which keep every row of a sub-stream) take turns within a row budget.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.data import ClassColumns
from calcheck.streaming.grid import one_batch

CHUNK = 16                  # computations per lockstep run: 16 grids × 2 threads ≈ 160 MB


class _AllRows:
    """The sub-stream of every row (no ``--by`` group selected)."""

    def __repr__(self) -> str:
        return "ALL"

    def __reduce__(self) -> str:
        return "ALL"                   # one object, also after pickling to a Dask worker


ALL: Any = _AllRows()


@dataclass(frozen=True)
class SubStream:
    """Which rows and scores of a batch one computation sees.

    ``cls``: the one-vs-rest view of class ``cls`` (multiclass batches); ``group``: the rows of
    that ``--by`` group (:data:`ALL`: every row; None: the rows whose group value is missing);
    ``min_score``: only rows scoring at least this."""

    cls: int | None = None
    group: Hashable = ALL
    min_score: float | None = None


@dataclass(frozen=True)
class ViewsSpec:
    """One pass for several computations: (sub-stream, that computation's pass spec) pairs.
    ``view`` is the reader's batch form ("columns" for class sub-streams, else the binary
    (or top-label) view) and ``by`` the ``--by`` column the group sub-streams need."""

    parts: tuple[tuple[SubStream, Any], ...]
    view: str = "top"
    by: str | None = None

    @property
    def threaded(self) -> bool:
        return any(getattr(spec, "threaded", False) for _, spec in self.parts)

    def new(self) -> ViewsState:
        return ViewsState(self, [spec.new() for _, spec in self.parts])


@dataclass
class ViewsState:
    """The states of a :class:`ViewsSpec`'s parts, in order."""

    spec: ViewsSpec
    states: list[Any] = field(default_factory=list)

    def update(self, first: Any, labels: IntArray, start: int = 0,
               *extras: Any) -> ViewsState:
        """Add a batch: (scores, labels) or, for class sub-streams, (probabilities — their
        :class:`~calcheck.data.ClassColumns`, an (n, K) matrix, or {class: probabilities} of
        the classes this pass needs —, class indices); then, with ``by``, its (group keys,
        code per row); then the rows' weights when the weighted passes read it
        (:mod:`calcheck.streaming.weighted`: binary rows, weights last)."""
        groups, weights = (extras[0], extras[1:]) if self.spec.by is not None else \
            (None, extras)
        rows_of = group_rows(groups) if groups is not None else {}
        with one_batch(first):                  # the parts share the batch's grid cells
            self._update(first, labels, start, rows_of, weights)
        return self

    def _update(self, first: Any, labels: IntArray, start: int,
                rows_of: dict[Any, IntArray], weights: tuple[FloatArray, ...]) -> None:
        column: dict[int, tuple[FloatArray, IntArray]] = {}
        for (sub, _), state in zip(self.spec.parts, self.states):
            if sub.cls is None:
                s, y = first, labels
            else:
                if sub.cls not in column:
                    probs = first[sub.cls] if isinstance(first, dict) else \
                        first.columns[sub.cls] if isinstance(first, ClassColumns) else \
                        np.ascontiguousarray(first[:, sub.cls])
                    column[sub.cls] = (probs, (labels == sub.cls).astype(np.int8))
                s, y = column[sub.cls]
            rows: IntArray | None = None
            if sub.group is not ALL:
                rows = rows_of.get(sub.group)
                if rows is None:
                    continue
            if sub.min_score is not None:
                keep = s >= sub.min_score if rows is None else s[rows] >= sub.min_score
                rows = np.flatnonzero(keep) if rows is None else rows[keep]
            if rows is None:
                state.update(s, y, start, *weights)
            elif rows.shape[0]:
                state.update(s[rows], y[rows], rows.astype(np.int64) + start,
                             *(w[rows] for w in weights))

    def merge(self, other: ViewsState) -> ViewsState:
        if self.spec != other.spec:
            raise ValueError("cannot merge sub-stream passes with different specs")
        for mine, theirs in zip(self.states, other.states):
            mine.merge(theirs)
        return self


def group_rows(groups: tuple[list[str | None], IntArray]) -> dict[Any, IntArray]:
    """Row positions (ascending) of each group key of a batch."""
    keys, codes = groups
    if len(keys) == 1:
        return {keys[0]: np.arange(codes.shape[0])}
    order = np.argsort(codes, kind="stable")
    bounds = np.cumsum(np.bincount(codes, minlength=len(keys)))
    out, lo = {}, 0
    for key, hi in zip(keys, bounds.tolist()):
        if hi > lo:
            out[key] = order[lo:hi]
        lo = hi
    return out
