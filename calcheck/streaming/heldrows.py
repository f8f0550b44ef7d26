"""Rows held in memory for the positional passes.

Exact PAVA's pass keeps every row's (score, label) sorted (:class:`SortedRowsSpec`); kept as
:class:`SortedKept`, they serve the computation's later passes (:func:`replay`: the rows of the
cells a pass reads, in the batches the file would give) instead of the file — the runner
(:mod:`calcheck.streaming.runner`) decides (invariant 4 of docs/streaming.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import (
    binary_keys,
    range_positions,
    unpack_keys,
)
from calcheck.streaming.rowpass import RowPassSpec
from calcheck.streaming.select import (
    SelectSpec,
    SelectState,
    by_group_then_id,
    row_ids,
)
from calcheck.tuning import DEFAULT


@dataclass(frozen=True)
class SortedKept:
    """Every row of a stream, sorted by (score, row id): they serve any pass over it
    (:func:`replay`, ``batch`` rows at a time)."""

    scores: FloatArray
    labels: np.ndarray
    batch: int = DEFAULT.replay_rows

    def serves(self, spec: Any) -> bool:
        return True

    def state(self, spec: Any) -> Any:
        return replay(spec, self.scores, self.labels, self.batch)


def replay(spec: Any, scores: FloatArray, labels: np.ndarray,
           batch: int = DEFAULT.replay_rows) -> Any:
    """The state of a pass of ``spec`` over rows held in memory, in batches of ``batch`` rows
    (``Tuning.replay_rows``), numbered by their position.  The held rows of exact PAVA are sorted by
    (score, row id): positions order every tie group as the row ids do, so a search or row pass
    by row id (``--ties order``) resolves the same rows — only the order of float sums
    differs (PDE's Σ|s − P̂_b| in the last bits).

    A row pass or a search reads the rows of a few grid cells only (:func:`cells_read`); the
    rows being sorted, each cell's rows are one slice, found by two binary searches, and each
    batch hands the state only its rows in those slices (ids: their positions) — the rows it
    would have picked itself, in the same order and the same batches, so the same state,
    without computing every held row's cell.  The parts of a one-pass
    :class:`~calcheck.streaming.views.ViewsSpec` over the whole stream replay one by one."""
    from calcheck.streaming.views import ViewsState

    if _whole_stream_views(spec):
        return ViewsState(spec, [replay(part, scores, labels, batch)
                                 for _, part in spec.parts])
    state = spec.new()
    n = int(scores.shape[0])
    cells = cells_read(spec)
    if cells is None:
        for a in range(0, n, batch):
            state.update(scores[a:a + batch], labels[a:a + batch], a)
        return state
    lo, hi = spec.grid.key_range(cells)
    bits = scores.view(np.uint64)
    first = np.searchsorted(bits, lo.astype(np.uint64), side="left")
    end = np.searchsorted(bits, hi.astype(np.uint64), side="left")
    for a in range(0, n, batch):
        z = min(a + batch, n)
        f, e = np.clip(first, a, z), np.clip(end, a, z)
        width = e - f
        some = width > 0
        f, width = f[some], width[some]
        if f.shape[0] == 0:
            continue
        rows = range_positions(f, width)
        state.update(scores[rows], labels[rows], rows)
    if isinstance(state, SelectState):
        state.n = n                              # the rows seen, as a full replay counts them
    return state


def _whole_stream_views(spec: Any) -> bool:
    """Whether ``spec`` is a one-pass ViewsSpec whose parts all see the whole stream (no class
    view, group or score floor): its parts can then run one by one over any rows."""
    from calcheck.streaming.views import ALL, ViewsSpec

    return isinstance(spec, ViewsSpec) and all(
        sub.cls is None and sub.group is ALL and sub.min_score is None for sub, _ in spec.parts)


def cells_read(spec: Any) -> IntArray | None:
    """The grid cells, ascending, outside which a row changes nothing in a state of ``spec``
    but the count of rows seen: a row pass's (its binnings' cells), a search's (its tasks'
    cells), those of the parts of a one-pass ViewsSpec over the whole stream; None for any
    other pass."""
    if isinstance(spec, RowPassSpec):
        cells = {c for b in spec.binnings for c in b.cells}
    elif isinstance(spec, SelectSpec):
        cells = {t.cell for t in spec.tasks}
    elif _whole_stream_views(spec):
        parts = [cells_read(part) for _, part in spec.parts]
        if any(p is None for p in parts):
            return None
        cells = {c for p in parts if p is not None for c in p.tolist()}
    else:
        return None
    return np.array(sorted(cells), dtype=np.int64)


def bound_ranks(bounds: IntArray, n: int) -> list[int]:
    """The ranks a binning's statistics and edges need: b and b − 1 of its inner bounds."""
    out: set[int] = set()
    for b in bounds.tolist():
        if 0 < b < n:
            out.update((b - 1, b))
    return sorted(out)


# ---------------------------------------------------------------------------------------------
# the passes besides the rank search: every row (exact PAVA), and the row pass


@dataclass(frozen=True)
class SortedRowsSpec:
    """A pass that keeps every row's (score bits, label): the exact sort of a dataset small
    enough to hold (9 bytes a row; 8 with ``packed``).  ``rows``: the rows the pass will see
    (the grid pass counted them), so packed keys go straight into one buffer of that size."""

    packed: bool = False            # shared ties: the order inside a tie group is not used
    rows: int = 0                   # 0: not known (the buffer grows)
    tied: bool = False              # the grid saw tied scores (see SortedRowsState.sorted_rows)
    holds_rows = True               # drive_lockstep counts its rows against a budget

    def new(self) -> SortedRowsState:
        return SortedRowsState(packed=self.packed, rows=self.rows, tied=self.tied)


@dataclass
class SortedRowsState:
    """Each batch's (first row id, score bits, labels).  A batch's rows have ascending ids and
    batches do not interleave, so the parts ordered by first id list the rows in id order, and
    a stable sort by score alone is the (score, row id) order.

    ``packed`` (shared ties, where rows of one score are pooled): each row is one 64-bit key
    (score bits << 1) | label — the bits of a score in [0, 1] order like the score and leave
    the top bit free — written into one buffer (``keys``, its first ``filled`` entries; no
    parts to join, so no second copy) and sorted in place, so ties are ordered by label
    instead of row id: half the memory and a fraction of the time of a stable argsort."""

    parts: list[tuple[int, Any, Any]] = field(default_factory=list)
    packed: bool = False
    rows: int = 0
    tied: bool = False
    keys: np.ndarray | None = None
    filled: int = 0

    def update(self, scores: FloatArray, labels: IntArray,
               start: int | IntArray = 0) -> SortedRowsState:
        s = np.asarray(scores, dtype=np.float64)
        m = int(s.shape[0])
        if m and self.packed:                # the shift drops −0.0's sign bit: no copy first
            binary_keys(s, labels, out=self._room(m))
            self.filled += m
        elif m:                              # a copy with −0.0 → +0.0 before taking bits
            first = int(row_ids(start, np.zeros(1, dtype=np.int64))[0])
            self.parts.append((first, (s + 0.0).view(np.uint64),
                               np.asarray(labels).astype(np.int8)))
        return self

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a Dask worker's state) with the filled keys only."""
        out = dict(self.__dict__)
        if self.keys is not None:
            out["keys"] = self.keys[:self.filled]
        return out

    def _room(self, m: int) -> np.ndarray:
        """The next ``m`` free keys of the buffer (grown, by doubling, past ``rows``)."""
        need = self.filled + m
        if self.keys is None or need > self.keys.shape[0]:
            size = max(self.rows, need) if self.keys is None else max(need, 2 * self.filled)
            grown = np.empty(size, dtype=np.uint64)
            if self.keys is not None:
                grown[:self.filled] = self.keys[:self.filled]
            self.keys = grown
        return self.keys[self.filled:need]

    def merge(self, other: SortedRowsState) -> SortedRowsState:
        self.parts.extend(other.parts)
        if other.filled:
            assert other.keys is not None
            self._room(other.filled)[:] = other.keys[:other.filled]
            self.filled += other.filled
        return self

    def sorted_rows(self) -> tuple[FloatArray, np.ndarray]:
        """(scores, labels) in the (score, row id) order (packed: (score, label))."""
        if self.packed:
            key = np.zeros(0, dtype=np.uint64) if self.keys is None else \
                self.keys[:self.filled]
            self.keys, self.filled = None, 0
            key.sort()
            return unpack_keys(key)
        if not self.parts:
            return np.zeros(0), np.zeros(0, dtype=np.int8)
        self.parts.sort(key=lambda p: p[0])
        parts, self.parts = self.parts, []
        u = np.concatenate([p[1] for p in parts])
        y = np.concatenate([p[2] for p in parts])
        del parts                                    # (each batch's copy freed once joined)
        # the (score, row id) order: a stable argsort where the grid saw tied scores; else
        # numpy's quick argsort (half the time, no merge buffer), then the few tie groups in
        # row-id order, as the search's collected rows are put
        order = np.argsort(u, kind="stable" if self.tied else "quicksort")
        u.sort()              # equal scores are equal bits: any sort gives the same array, in
        if not self.tied:     # place (no gathered copy)
            tie = u[1:] == u[:-1]
            if tie.any():
                pos = np.flatnonzero(np.concatenate(([False], tie)) |
                                     np.concatenate((tie, [False])))
                sub = order[pos]
                order[pos] = sub[by_group_then_id(u[pos], sub)]
            del tie
        y = y[order]
        return u.view(np.float64), y
