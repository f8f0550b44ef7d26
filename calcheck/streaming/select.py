"""Exact order statistics of a streamed dataset: the rows (or values) at given ranks.

Equal-mass bins (ACE, MCE(Q), TCE(Q), PDE, Hosmer–Lemeshow) cut the rows, stably sorted by
score, at ranks ``(linspace(0, 1, B+1)·n).astype(int)`` (docs/metrics.md).  Streaming, the first pass is
the :class:`~calcheck.streaming.states.StreamState` grid: its per-cell counts place every rank
in one grid cell.  Further passes narrow each rank down to a single row — exactly, with no
sketch error — by a radix search over the stable-sort key::

    key = (bits of the float64 score, row id)

The score's bit pattern orders non-negative floats like the floats themselves; the row id is
the row's position in the stream (its order in the in-memory engine's table), so ties are
broken as the stable sort breaks them.  Each pass either **collects** the rows of a narrowed key
range (when it holds few rows) or **histograms** it into 2^16 sub-ranges and keeps the one
holding the rank.  Continuous scores need one extra pass; a heavy tie (many rows with one
score) needs a few more, over the row id.  Every pass is a mergeable state, so the same code
runs on the streaming and the Dask engine, and the result does not depend on partitioning.

A resolved rank gives the score of that row and the exact count, positives and Σ score of the
rows of its grid cell that sort before it; with the grid's per-cell sums that is every
equal-mass bin's count, positives and Σ score.

With shared ties (``by_value=True``, the default of the engines) the row id does not matter:
a rank is resolved as soon as its key range holds a single score v, with the count and
positives of *all* the rows scoring v (its tie group), which is what a shared cut needs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import distinct
from calcheck.streaming.grid import Grid, flagged_rows
from calcheck.tuning import DEFAULT, Tuning

# The search's budgets are knobs of calcheck.tuning: a pass collects ranges outright while they
# hold at most Tuning.collect_rows rows in all (~45 B a row at the sort that reads them: ≤ ~0.1
# GB), or with shared ties Tuning.collect_keys rows kept as packed 8-byte keys (16 B a row while
# joined: ≤ ~0.13 GB; 10^8 rows' 4,096 PAVA blocks, ~6.3·10^6 rows in their cells, in one
# pass); it splits the other ranges into at most Tuning.hist_buckets histogram sub-ranges in
# all (25 MB); collected keys are unpacked Tuning.tie_rows (or one task's) at a time.
SUB_BITS = 16                 # a histogram pass splits a key range into ≤ 2^16 sub-ranges,
MIN_SUB_BITS = 4              # ... but always ≥ 2^4 each
SMALL_RANGE = 64              # a range of at most this many rows is always collected
NEAR_SHIFT = 40               # score bits >> this: 2^12 buckets a binade, ~4·10^6 in [0, 1]
ONE_BITS = int(np.float64(1.0).view(np.uint64))
U_MAX = np.iinfo(np.uint64).max


def row_ids(start: int | IntArray, sel: IntArray) -> IntArray:
    """Row ids of the rows ``sel`` of a batch: ``start`` is the id of the batch's first row
    (ids are consecutive) or, for a sub-stream (:mod:`calcheck.streaming.views`), the id of
    every row of the batch."""
    if isinstance(start, np.ndarray):
        return start[sel]
    return sel.astype(np.int64) + start


def bits_to_score(u: int) -> float:
    return float(np.uint64(u).view(np.float64))


@dataclass(frozen=True)
class Task:
    """One key range of a pass: rows with score bits in [u_lo, u_hi) and row id in
    [id_lo, id_hi), either collected or histogrammed (by score bits, or by row id when the
    range is a single score)."""

    cell: int
    u_lo: int
    u_hi: int
    id_lo: int
    id_hi: int
    collect: bool
    shift: int = 0

    @property
    def by_id(self) -> bool:
        return self.u_hi - self.u_lo == 1

    @property
    def buckets(self) -> int:
        width = (self.id_hi - self.id_lo) if self.by_id else (self.u_hi - self.u_lo)
        return ((width - 1) >> self.shift) + 1


@dataclass(frozen=True)
class SelectSpec:
    """A picklable description of one search pass (Dask workers build identical states)."""

    grid: Grid
    tasks: tuple[Task, ...]
    by_value: bool = False            # shared ties: keep each sub-range's key extremes, and
                                      # collected rows as packed (u, y) keys

    def new(self) -> SelectState:
        return SelectState(self)


@dataclass
class SelectState:
    """The rows of the collect tasks and the sub-range sums of the histogram tasks of one pass.

    Histogram sums live in flat arrays (task i owns ``offsets[i]:offsets[i+1]``), so a batch
    costs one ``bincount`` whatever the number of tasks."""

    spec: SelectSpec
    rows: list[Any] = field(default_factory=list)   # (task, u, id, y), or packed keys
    count: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    positives: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    score: FloatArray = field(default_factory=lambda: np.zeros(0))
    # the smallest and largest key of each sub-range: equal when its rows share one score, so a
    # tie group is resolved by the pass that first isolates it, not bits-per-pass later
    key_min: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    key_max: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    n: int = 0

    def __post_init__(self) -> None:
        total = int(self.offsets[-1])
        if self.count.shape[0] != total:
            self.count = np.zeros(total, dtype=np.int64)
            self.positives = np.zeros(total, dtype=np.int64)
            self.score = np.zeros(total)
            if self.spec.by_value:
                self.key_min = np.full(total, U_MAX, dtype=np.uint64)
                self.key_max = np.zeros(total, dtype=np.uint64)

    @functools.cached_property
    def offsets(self) -> IntArray:
        sizes = [0 if t.collect else t.buckets for t in self.spec.tasks]
        return np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).astype(np.int64)

    @functools.cached_property
    def _table(self) -> dict[str, Any]:
        tasks = self.spec.tasks
        size = self.spec.grid.n_cells
        task_cells = np.array([t.cell for t in tasks], dtype=np.int64)
        cells = np.zeros(size, dtype=bool)
        cells[task_cells] = True
        # tasks are sorted by key range, so a cell's tasks are consecutive: its first task
        # and how many (a row of a one-task cell needs no search)
        first = np.full(size, -1, dtype=np.int64)
        uniq, at = np.unique(task_cells, return_index=True)
        first[uniq] = at
        ntask = np.bincount(task_cells, minlength=size)
        lo = np.array([t.u_lo for t in tasks], dtype=np.uint64)
        hi = np.array([t.u_hi for t in tasks], dtype=np.uint64)
        # in cells of several tasks: the buckets of score bits >> NEAR_SHIFT that some task
        # meets — a row in no such bucket belongs to no task, without a search
        near = None
        several = ntask[task_cells] > 1
        if several.any():
            a = (lo[several] >> np.uint64(NEAR_SHIFT)).astype(np.int64)
            b = ((hi[several] - np.uint64(1)) >> np.uint64(NEAR_SHIFT)).astype(np.int64)
            mark = np.zeros((ONE_BITS >> NEAR_SHIFT) + 2, dtype=np.int32)
            np.add.at(mark, a, 1)
            np.add.at(mark, b + 1, -1)
            near = np.cumsum(mark, out=mark) > 0
        return {"cells": cells, "first": first, "near": near,
                "ntask": ntask, "lo": lo, "hi": hi,
                "id_lo": np.array([t.id_lo for t in tasks], dtype=np.int64),
                "shift": np.array([t.shift for t in tasks], dtype=np.int64),
                "collect": np.array([t.collect for t in tasks], dtype=bool),
                "by_id": np.array([t.by_id for t in tasks], dtype=bool),
                "any_by_id": any(t.by_id for t in tasks)}

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("_table", None)
        d.pop("offsets", None)
        return d

    def __setstate__(self, d: dict[str, Any]) -> None:
        self.__dict__.update(d)

    def update(self, scores: FloatArray, labels: IntArray,
               start: int | IntArray = 0) -> SelectState:
        """Add a batch whose first row has row id ``start`` (or whose rows have the ids
        ``start``, see :func:`row_ids`)."""
        s = np.asarray(scores, dtype=np.float64)
        self.n += int(s.shape[0])
        if not self.spec.tasks or s.shape[0] == 0:
            return self
        tb = self._table
        cell = self.spec.grid.cells(s)
        sel = flagged_rows(tb["cells"], cell)
        if sel.shape[0] == 0:
            return self
        ss = s[sel] + 0.0                                   # −0.0 → +0.0 before taking bits
        u = ss.view(np.uint64)
        ids = row_ids(start, sel)
        yy = np.asarray(labels)[sel]
        owner = self._owner(u, ids, cell[sel])
        mine = owner >= 0
        coll = mine & tb["collect"][np.maximum(owner, 0)]
        take = np.flatnonzero(coll)
        if take.shape[0]:
            if self.spec.by_value:              # (u, y) packed: a row's task follows from u
                key = np.left_shift(u[take], np.uint64(1))
                key |= yy[take].astype(np.uint64)
                self.rows.append(key)
            else:
                self.rows.append((owner[take].astype(np.int32), u[take], ids[take],
                                  yy[take].astype(np.int8)))
        hist = np.flatnonzero(mine & ~coll)
        if hist.shape[0]:
            o = owner[hist]
            shift = tb["shift"][o]
            uh = u[hist]
            bucket = (uh - tb["lo"][o]).view(np.int64)      # < 2^62: the same bits either way
            bucket >>= shift
            if tb["any_by_id"]:
                by_id = np.flatnonzero(tb["by_id"][o])
                bucket[by_id] = (ids[hist[by_id]] - tb["id_lo"][o[by_id]]) >> shift[by_id]
            key = bucket
            key += self.offsets[o]
            size = self.count.shape[0]
            self.count += np.bincount(key, minlength=size)
            self.positives += np.bincount(key[yy[hist] != 0], minlength=size)
            self.score += np.bincount(key, weights=ss[hist], minlength=size)
            if self.spec.by_value:
                np.minimum.at(self.key_min, key, uh)
                np.maximum.at(self.key_max, key, uh)
        return self

    def _owner(self, u: Any, ids: IntArray, cell: IntArray) -> IntArray:
        """The task holding each row (in grid cell ``cell``), or −1.  Tasks are disjoint key
        ranges sorted by (u_lo, id_lo), each inside one cell; several tasks share a u range only
        when it is a single score (by id)."""
        tasks = self.spec.tasks
        tb = self._table
        j = tb["first"][cell]
        multi = np.flatnonzero(tb["ntask"][cell] > 1)
        if multi.shape[0]:
            j[multi] = -1
            multi = multi[tb["near"].take((u[multi] >> np.uint64(NEAR_SHIFT)).astype(np.intp))]
            j[multi] = np.searchsorted(tb["lo"], u[multi], side="right").astype(np.int64) - 1
        ok = j >= 0
        jj = np.where(ok, j, 0)
        ok &= (u >= tb["lo"][jj]) & (u < tb["hi"][jj])
        owner = np.where(ok, jj, -1)
        by_id = np.flatnonzero(tb["by_id"])
        if by_id.shape[0]:
            for v in np.unique(tb["lo"][by_id]).tolist():
                group = [i for i in by_id.tolist() if tasks[i].u_lo == v]
                rows = np.flatnonzero(u == np.uint64(v))
                if rows.shape[0] == 0:
                    continue
                id_lo = np.array([tasks[i].id_lo for i in group], dtype=np.int64)
                id_hi = np.array([tasks[i].id_hi for i in group], dtype=np.int64)
                k = np.searchsorted(id_lo, ids[rows], side="right") - 1
                kk = np.maximum(k, 0)
                inside = (k >= 0) & (ids[rows] < id_hi[kk])
                owner[rows] = np.where(inside, np.asarray(group)[kk], -1)
        return owner

    def merge(self, other: SelectState) -> SelectState:
        if self.spec != other.spec:
            raise ValueError("cannot merge search passes with different specs")
        self.rows.extend(other.rows)
        self.count += other.count
        self.positives += other.positives
        self.score += other.score
        if self.spec.by_value:
            np.minimum(self.key_min, other.key_min, out=self.key_min)
            np.maximum(self.key_max, other.key_max, out=self.key_max)
        self.n += other.n
        return self

    def collected_keys(self) -> tuple[np.ndarray, dict[int, tuple[int, int]]]:
        """With shared ties only the scores of a collect task's rows, in order, matter (a rank
        resolves to its score's whole tie group, and its row id is not used): the rows' keys
        (u, y) packed into a uint64 (u·2 + y; u < 2^62 for scores in [0, 1]), sorted — one
        sort of the keys the pass kept (8 bytes a row; a fifth of the argsort of
        :meth:`collected`) — and task → its slice [a, b) of them.  The tasks are disjoint
        score ranges (a one-score range is resolved without a pass), so each task's rows are
        the sorted keys between its bounds."""
        parts = [r for r in self.rows if r.shape[0]]
        self.rows = []
        if not parts:
            return np.zeros(0, np.uint64), {}
        key = np.concatenate(parts) if len(parts) > 1 else parts[0]
        del parts
        key.sort()
        tb = self._table
        has = np.flatnonzero(tb["collect"])
        a = np.searchsorted(key, tb["lo"][has] << np.uint64(1))
        b = np.searchsorted(key, tb["hi"][has] << np.uint64(1))
        if int((b - a).sum()) != key.shape[0]:
            raise RuntimeError("search pass: collected rows outside their ranges")
        return key, {i: (x, z) for i, x, z in zip(has.tolist(), a.tolist(), b.tolist()) if z > x}

    def collected(self) -> dict[int, tuple[Any, Any, Any]]:
        """Rows of each collect task, stably sorted: task → (u, id, y)."""
        rows = [r for r in self.rows if r[0].shape[0]]
        self.rows = []
        if not rows:
            return {}
        fields = []
        for j in range(4):                         # each field's batches freed once joined
            fields.append(np.concatenate([r[j] for r in rows]))
            rows = [(*r[:j], None, *r[j + 1:]) for r in rows]
        del rows
        # the (score, row id) order, which is the order of the tasks too (disjoint key ranges
        # sorted by (u_lo, id_lo)): numpy's quick argsort by score bits (3x a stable one),
        # then the rows of equal scores by row id
        u, ids = fields[1], fields[2]
        order = np.argsort(u, kind="quicksort")
        us = u[order]
        tie = us[1:] == us[:-1]
        del us
        if tie.any():
            pos = np.flatnonzero(np.concatenate(([False], tie)) | np.concatenate((tie, [False])))
            sub = order[pos]
            order[pos] = sub[by_group_then_id(u[sub], ids[sub])]
        for j in range(4):                         # one reordered copy at a time
            fields[j] = fields[j][order]
        del order
        task, u, ids, y = fields
        if task.shape[0] > 1 and (np.any(task[1:] < task[:-1]) or np.any(
                (u[1:] == u[:-1]) & (ids[1:] < ids[:-1]))):
            raise RuntimeError("search pass: collected rows out of (score, row id) order")
        starts = np.flatnonzero(np.concatenate(([True], task[1:] != task[:-1])))
        ends = np.append(starts[1:], task.shape[0])
        return {int(task[a]): (u[a:b], ids[a:b], y[a:b]) for a, b in zip(starts, ends)}


def _ones_before(keys: np.ndarray, where: IntArray, chunk: int = 1 << 16) -> IntArray:
    """How many of ``keys[:p]`` are odd (positive labels) for each p of ``where`` (ascending,
    in [0, len]): a cumulative count read a chunk at a time, never a count per key."""
    out = np.zeros(where.shape[0], dtype=np.int64)
    run = 0
    one = np.uint64(1)
    m = keys.shape[0]
    for c in range(0, m, chunk):
        e = min(c + chunk, m)
        a, b = np.searchsorted(where, [c + 1, e + 1])          # the p in (c, e]
        cum = np.cumsum(keys[c:e] & one, dtype=np.int64)
        out[a:b] = run + cum[where[a:b] - c - 1]
        run += int(cum[-1])
    return out


def task_groups(first: IntArray, last: IntArray, limit: int) -> list[IntArray]:
    """The entries [first_j, last_j) — ranks, in the disjoint key ranges of their collect tasks
    (the ranks of one task share its range) — in groups of whole tasks, by range, each group
    spanning at most ``limit`` keys unless it is one task: what :meth:`Search._tie_groups`
    unpacks at a time."""
    order = np.argsort(first, kind="stable")
    groups = []
    j = 0
    while j < order.shape[0]:
        z = j + 1
        while z < order.shape[0] and (first[order[z]] == first[order[z - 1]] or
                                      last[order[z]] - first[order[j]] <= limit):
            z += 1
        groups.append(order[j:z])
        j = z
    return groups


def by_group_then_id(u: np.ndarray, ids: IntArray) -> IntArray:
    """The order of rows by (u, id), for ``u`` already grouped in ascending order (the tie
    groups of a sort by score) and unique ``ids``: one quick argsort of (group number, id)
    packed into an int64 — a lexsort of 2·10^6 tied rows took 1 s — or that lexsort when the
    packed key would not fit."""
    group = np.cumsum(np.concatenate(([0], u[1:] != u[:-1])))
    low = int(ids.min())
    span = int(ids.max()) - low + 1
    if (int(group[-1]) + 1) > (1 << 62) // span:
        return np.lexsort((ids, u))
    return np.argsort(group * span + (ids - low), kind="quicksort")


@dataclass
class Target:
    """One rank being searched: its current key range, the rank within it, and the exact sums
    of the rows of its grid cell that sort before that range."""

    rank: int
    cell: int
    within: int                       # rank inside the current range
    range_rows: int                   # rows in the current range
    u_lo: int
    u_hi: int
    id_lo: int = 0
    id_hi: int = 0
    before_n: int = 0
    before_pos: int = 0
    before_score: float = 0.0
    value: float | None = None
    done: bool = False
    range_pos: int = 0                # positives in the current range (by value)


@dataclass
class Resolved:
    """A rank's row: its score and the sums of the rows of its grid cell sorted before it
    (by value: the rows scoring less than it), and, by value, the rows of its tie group."""

    rank: int
    cell: int
    value: float
    row_id: int                       # rows with this score and a smaller id sort before it
                                      # (by row id only: 0 with shared ties)
    before_n: int
    before_pos: int
    before_score: float
    eq_n: int = 0                     # by value: rows scoring exactly ``value`` ...
    eq_pos: int = 0                   # ... and their positives


class Search:
    """Drive the passes that resolve ``ranks`` (0-based positions in the stable sort).

    ``cell_counts`` are the grid's per-cell row counts (all 2^G + 1 cells); ``id_bound`` bounds
    the row ids the engine assigns; ``cell_values`` (optional) the one score of each cell whose
    rows share one, else NaN.  With ``by_value`` (shared ties) a rank in such a cell is
    resolved without a pass (as in the cell s = 1.0), and a histogram sub-range whose rows
    share one score resolves its rank at once.  By row id (``--ties order``) the search keeps
    its own course, so its float sums keep their order.  ``collect_rows`` bounds the rows a
    pass collects with their row ids; by value, which keeps 8-byte keys instead, the bound is
    ``tuning.collect_keys / tuning.collect_rows`` times larger (the same memory).

    Use: ``while (spec := search.next_spec()) is not None: search.absorb(run_pass(spec))``;
    then :meth:`result`.
    """

    def __init__(self, ranks: IntArray, cell_counts: IntArray, grid: Grid, id_bound: int,
                 collect_rows: int | None = None, *, by_value: bool = False,
                 cell_positives: IntArray | None = None,
                 cell_values: FloatArray | None = None, tuning: Tuning = DEFAULT) -> None:
        self.grid = grid
        self.id_bound = max(int(id_bound), 1)
        self.tuning = tuning
        rows = tuning.collect_rows if collect_rows is None else collect_rows
        self.collect_rows = rows * (tuning.key_share if by_value else 1)
        self.by_value = by_value
        cum = np.cumsum(cell_counts)
        self.targets: dict[int, Target] = {}
        rs = distinct(np.asarray(ranks, dtype=np.int64))
        bad = rs[(rs < 0) | (rs >= int(cum[-1]))] if rs.shape[0] else rs
        if bad.shape[0]:
            raise ValueError(f"rank {int(bad[0])} outside 0..{int(cum[-1]) - 1}")
        # every rank's cell, its rows before the rank and its key range, for all ranks at once
        # (with shared ties, a one-score cell's range is its score)
        cs = np.searchsorted(cum, rs, side="right")
        counts = np.asarray(cell_counts, dtype=np.int64)[cs]
        first = cum[cs] - counts
        lo, hi = grid.key_range(cs)
        if by_value and cell_values is not None:
            one = np.asarray(cell_values, dtype=np.float64)[cs]
            known = ~np.isnan(one)
            lo = np.where(known, one.view(np.uint64).astype(np.int64), lo)
            hi = np.where(known, lo + 1, hi)
        pos = np.zeros_like(cs) if cell_positives is None else \
            np.asarray(cell_positives, dtype=np.int64)[cs]
        for r, c, f, m, a, b, p in zip(rs.tolist(), cs.tolist(), first.tolist(),
                                       counts.tolist(), lo.tolist(), hi.tolist(), pos.tolist()):
            t = Target(rank=r, cell=c, within=r - f, range_rows=m, u_lo=a, u_hi=b, id_lo=0,
                       id_hi=self.id_bound, range_pos=p)
            if by_value and b - a == 1:                # a one-score cell: its tie group
                t.value, t.done = bits_to_score(a), True
            self.targets[r] = t
        self._tasks: tuple[Task, ...] = ()

    def _key(self, t: Target) -> tuple[int, int, int, int]:
        return (t.u_lo, t.u_hi, t.id_lo, t.id_hi)

    def next_spec(self) -> SelectSpec | None:
        """The next pass, or None when every rank is resolved."""
        open_ = [t for t in self.targets.values() if not t.done]
        if not open_:
            return None
        ranges: dict[tuple[int, int, int, int], Target] = {}
        for t in open_:
            ranges.setdefault(self._key(t), t)
        budget = self.collect_rows
        plan = []
        for key, t in sorted(ranges.items(), key=lambda kv: kv[1].range_rows):
            collect = t.range_rows <= max(budget, SMALL_RANGE)
            if collect:
                budget -= t.range_rows
            plan.append((key, t, collect))
        n_hist = sum(1 for _, _, c in plan if not c)
        # at most tuning.hist_buckets sub-ranges in all: many open ranges get fewer bits each
        sub_bits = max(MIN_SUB_BITS, min(SUB_BITS, (self.tuning.hist_buckets // max(n_hist, 1))
                                         .bit_length() - 1))
        tasks = []
        for key, t, collect in plan:
            by_id = t.u_hi - t.u_lo == 1
            width = (t.id_hi - t.id_lo) if by_id else (t.u_hi - t.u_lo)
            shift = max(0, (width - 1).bit_length() - sub_bits)
            tasks.append(Task(cell=t.cell, u_lo=key[0], u_hi=key[1], id_lo=key[2], id_hi=key[3],
                              collect=collect, shift=shift))
        self._tasks = tuple(sorted(tasks, key=lambda x: (x.u_lo, x.id_lo)))
        return SelectSpec(self.grid, self._tasks, self.by_value)

    def absorb(self, state: SelectState) -> None:
        """Narrow every open rank with the result of the pass built by :meth:`next_spec`."""
        index = {(t.u_lo, t.u_hi, t.id_lo, t.id_hi): i for i, t in enumerate(self._tasks)}
        open_ = [(t, index[self._key(t)]) for t in self.targets.values() if not t.done]
        # with shared ties a collected rank resolves to its score's tie group: every such rank
        # at once (:meth:`_tie_groups`); by row id, task → its rows (u, id, y) stably sorted
        groups = self._tie_groups(state, open_) if self.by_value else {}
        collected: dict[int, Any] = {} if self.by_value else state.collected()
        empty = (np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int8))
        off = state.offsets
        for t, i in open_:
            task = self._tasks[i]
            if task.collect:
                if self.by_value:
                    k, end, tied_pos, before_pos, before_score, value = groups[t.rank]
                    t.range_rows, t.range_pos = end - k, tied_pos
                    t.before_n += k
                    t.before_pos += before_pos
                    t.before_score += before_score
                    t.value = value
                    t.done = True
                    continue
                u, ids, y = collected.get(i, empty)
                if u.shape[0] != t.range_rows:
                    raise RuntimeError(f"search pass found {u.shape[0]} rows in a range of "
                                       f"{t.range_rows}: the data changed between passes")
                k = t.within
                t.id_lo = int(ids[k])
                t.before_n += k
                t.before_pos += int(y[:k].sum())
                t.before_score += float(np.sum(u[:k].view(np.float64)))
                t.value = bits_to_score(int(u[k]))
                t.done = True
                continue
            cnt = state.count[off[i]:off[i + 1]]
            pos = state.positives[off[i]:off[i + 1]]
            sc = state.score[off[i]:off[i + 1]]
            if int(cnt.sum()) != t.range_rows:
                raise RuntimeError(f"search pass found {int(cnt.sum())} rows in a range of "
                                   f"{t.range_rows}: the data changed between passes")
            cum = np.cumsum(cnt)
            b = int(np.searchsorted(cum, t.within, side="right"))
            first = int(cum[b] - cnt[b])
            t.before_n += first
            t.before_pos += int(pos[:b].sum())
            t.before_score += float(np.sum(sc[:b]))
            t.within -= first
            t.range_rows = int(cnt[b])
            t.range_pos = int(pos[b])
            if task.by_id:
                t.id_lo = task.id_lo + (b << task.shift)
                t.id_hi = min(task.id_hi, t.id_lo + (1 << task.shift))
            else:
                t.u_lo = task.u_lo + (b << task.shift)
                t.u_hi = min(task.u_hi, t.u_lo + (1 << task.shift))
                if self.by_value and state.key_min[off[i] + b] == state.key_max[off[i] + b]:
                    t.u_lo = int(state.key_min[off[i] + b])    # one score: its tie group
                    t.u_hi = t.u_lo + 1
                if t.u_hi - t.u_lo == 1:
                    t.value = bits_to_score(t.u_lo)
            if t.value is not None and (t.range_rows == 1 or self.by_value):
                t.done = True

    def _tie_groups(self, state: SelectState, open_: list[tuple[Target, int]]
                    ) -> dict[int, tuple[int, int, int, int, float, float]]:
        """By value, each open rank of a collect task → (k, end, positives in [k, end),
        positives before k, Σ score before k, score): [k, end) is the tie group of the rank's
        score within its task's sorted rows.  Positions and positive counts for every rank at
        once (the tasks are disjoint score ranges, so a tie group never leaves its task);
        the score sum of each rank's rows before k is ``numpy.sum`` of those rows, as a task's
        own array would give it."""
        keys, spans = state.collected_keys()
        todo = [(t, i) for t, i in open_ if self._tasks[i].collect]
        if not todo:
            return {}
        first = np.empty(len(todo), dtype=np.int64)
        last = np.empty(len(todo), dtype=np.int64)
        for j, (t, i) in enumerate(todo):
            a, b = spans.get(i, (0, 0))
            if b - a != t.range_rows:
                raise RuntimeError(f"search pass found {b - a} rows in a range of "
                                   f"{t.range_rows}: the data changed between passes")
            first[j], last[j] = a, b
        within = np.array([t.within for t, _ in todo], dtype=np.int64)
        total = np.add.reduce            # what numpy.sum runs on a 1-D array: the same bits
        out = {}
        one = np.uint64(1)
        for grp in task_groups(first, last, self.tuning.tie_rows):
            base, end = int(first[grp].min()), int(last[grp].max())
            seg = keys[base:end]                     # (u, y) keys, sorted
            f = first[grp] - base
            at = seg[f + within[grp]] >> one         # each rank's score bits
            lo = np.searchsorted(seg, at << one, side="left")            # its tie group
            hi = np.searchsorted(seg, (at << one) | one, side="right")
            where = distinct(np.concatenate((f, lo, hi)))
            ones = _ones_before(seg, where)
            tied_pos = (ones[np.searchsorted(where, hi)] - ones[np.searchsorted(where, lo)])
            before_pos = (ones[np.searchsorted(where, lo)] - ones[np.searchsorted(where, f)])
            np.right_shift(seg, one, out=seg)        # the keys become the scores' bits, in place
            scores = seg.view(np.float64)            # (the keys are not used again)
            for g, a, k, e, tp, bp, v in zip(grp.tolist(), f.tolist(), lo.tolist(), hi.tolist(),
                                             tied_pos.tolist(), before_pos.tolist(),
                                             at.view(np.float64).tolist()):
                out[todo[g][0].rank] = (k - a, e - a, tp, bp, float(total(scores[a:k])), v)
        return out

    def result(self) -> dict[int, Resolved]:
        out = {}
        for r, t in self.targets.items():
            if not t.done or t.value is None:
                raise RuntimeError(f"rank {r} is not resolved yet")
            out[r] = Resolved(rank=r, cell=t.cell, value=t.value, row_id=t.id_lo,
                              before_n=t.before_n, before_pos=t.before_pos,
                              before_score=t.before_score,
                              eq_n=t.range_rows if self.by_value else 0,
                              eq_pos=t.range_pos if self.by_value else 0)
        return out
