"""The streaming engine: fold validated batches into one :class:`StreamState` and turn it into
the in-memory engine's result objects."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from calcheck import registry
from calcheck._threads import one_blas_thread
from calcheck._typing import FloatArray, IntArray, PassSpec, S
from calcheck.binning import BinStats, uniform_edges
from calcheck.errors import InputError
from calcheck.metrics._result import MetricResult
from calcheck.options import DEFAULT_BATCH_ROWS
from calcheck.streaming.grid import CROWDED, CROWDED_HELD, ScoreGrid, crowded_grid
from calcheck.streaming.states import GRID_BITS, GRID_METRICS, StreamState, grid_cells, residuals
from calcheck.tuning import DEFAULT, Tuning

if TYPE_CHECKING:
    from calcheck.io.stream import StreamStats

_SETTINGS = {"ece": "l1", "ece_l2": "l2", "mce": "max"}


@dataclass(frozen=True)
class StateSpec:
    """What a partial state keeps; picklable, so Dask workers build identical empty states."""

    bins: int = 10
    tcal_m: int | None = None
    log_loss: bool = True
    spiegelhalter: bool = False
    grid_bits: int = GRID_BITS
    ci: bool = False
    pos_grid: ScoreGrid | None = None
    threaded = True                 # fold() runs this pass on two threads

    def new(self) -> StreamState:
        return StreamState(bins=self.bins, tcal_m=self.tcal_m, log_loss=self.log_loss,
                           spiegelhalter=self.spiegelhalter, grid_bits=self.grid_bits,
                           ci=self.ci, pos_grid=self.pos_grid)

    def prepared(self, scores: FloatArray, rows: int | None = None,
                 tuning: Tuning = DEFAULT) -> StateSpec:
        """This spec with finer cells for the positional passes when the first batch's
        ``scores`` crowd the grid (:func:`~calcheck.streaming.grid.crowded_grid`): decided
        once, before the pass, so every partial state keeps the same cells.  A source of at
        most ``tuning.exact_pava_rows`` rows (when ``rows`` says so) is held in memory for the
        positional passes, which a moderately crowded grid does not slow: there only heavy
        crowding (``CROWDED_HELD``) pays for the finer cells' cost in the grid pass."""
        if self.pos_grid is not None:
            return self
        held = rows is not None and rows <= tuning.exact_pava_rows
        least = CROWDED_HELD if held else CROWDED
        grid = crowded_grid(scores, self.grid_bits, least=least)
        return self if grid is None else dataclasses.replace(self, pos_grid=grid)


def fold(batches: Iterable[tuple[Any, ...]], spec: PassSpec[S], *,
         threads: int | None = None, rows: int | None = None,
         tuning: Tuning = DEFAULT) -> S:
    """One pass: every batch into a fresh state (``spec.new()``), with the row id of each
    batch's first row (rows are numbered 0, 1, … in stream order).

    With ``threads`` > 1, batch i goes to worker i mod threads (each with its own state, merged
    at the end), so the result does not depend on thread timing; numpy releases the GIL in most
    of the per-batch work.  By default two workers for the passes whose spec sets ``threaded``
    (the grid, classwise and variable passes) on a machine with two or more cores — measured
    at 10^8 rows on 2 cores: 1.47 s → 1.21 s for the fixed-bin sums, 1.70 s → 1.46 s with log
    loss (``np.bincount`` holds the GIL, but the ufuncs around it do not) — and one for the
    positional passes.
    """
    if hasattr(spec, "prepared"):           # a spec that looks at the first batch first
        it = iter(batches)
        head = next(it, None)
        if head is not None:
            spec = spec.prepared(np.asarray(head[0], dtype=np.float64), rows, tuning)
        batches = itertools.chain((head,) if head is not None else (), it)
        del head                            # (the first batch is freed once folded)
    if threads is None:
        threads = 2 if getattr(spec, "threaded", False) and (os.cpu_count() or 1) >= 2 else 1
    if threads <= 1:
        state = spec.new()
        start = 0
        for b in batches:                   # (scores, labels[, group codes])
            state.update(b[0], b[1], start, *b[2:])
            start += int(b[1].shape[0])
        return state
    states = [spec.new() for _ in range(threads)]
    queues: list[queue.Queue[Any]] = [queue.Queue(maxsize=1) for _ in range(threads)]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        while True:
            item = queues[i].get()
            if item is None:
                return
            if not errors:
                try:
                    states[i].update(*item)   # (scores, labels, first row id[, groups])
                except BaseException as exc:        # re-raised in the caller's thread
                    errors.append(exc)

    workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    with one_blas_thread():                 # our threads, not BLAS's, share the cores
        try:
            start = 0
            for j, b in enumerate(batches):
                if errors:
                    break
                queues[j % threads].put((b[0], b[1], start, *b[2:]))
                start += int(b[1].shape[0])
        finally:
            for q in queues:
                q.put(None)
            for w in workers:
                w.join()
    if errors:
        raise errors[0]
    for other in states[1:]:
        states[0].merge(other)
    return states[0]


def no_rows_error(name: str, where: str | None) -> InputError:
    """Nothing left to compute on: name the ``--where`` filter when there is one."""
    if where:
        return InputError(f"{name}: no rows match --where {where!r}")
    return InputError(f"{name}: no rows to compute on (every row was dropped)")


def metric_results(state: StreamState, ids: list[str],
                   smece_sigma: float | None = None) -> dict[str, MetricResult]:
    """The grid metrics among ``ids`` of a finished state, in the in-memory engine's form (the
    smooth ECE from the grid's cells, which are the cells its kernel sums)."""
    ids = [m for m in ids if m in GRID_METRICS]
    if state.n == 0:
        raise InputError("no rows to compute on (after the --where filter and dropped rows)")
    out = state.finalize()
    bins = state.bins
    e = uniform_edges(bins)
    stats = BinStats(kind="uniform", lower=e[:-1].copy(), upper=e[1:].copy(),
                     count=out["bins"]["count"], sum_score=out["bins"]["sum_score"],
                     sum_label=out["bins"]["positives"], params={"bins": bins})
    results = {}
    for mid in ids:
        if mid == "smece":
            from calcheck.metrics.smooth import cells, smece_of

            c = grid_cells(state)
            results[mid] = smece_of(cells(c["n"] * 1.0, c["sum_score"],
                                          c["sum_score"] - c["positives"]), smece_sigma)
            continue
        if mid in ("ece_debiased", "ece_l2_debiased"):
            from calcheck.metrics import debiased

            br = residuals(state, "ece")
            l1 = mid == "ece_debiased"
            value = debiased.debiased_l1(br) if l1 else debiased.debiased_l2(br)
            results[mid] = debiased.result(mid, value, "uniform", bins, "l1" if l1 else "l2",
                                            int(out["n"]))
            continue
        if mid in _SETTINGS:
            settings: dict[str, Any] = {"binning": "uniform", "bins": bins, "norm": _SETTINGS[mid]}
        else:
            settings = {"clip": 1e-15} if mid == "log_loss" else {}
        results[mid] = MetricResult(id=mid, value=float(out[mid]), unit=registry.unit(mid),
                                    settings=settings, n_samples=int(out["n"]),
                                    bins=stats if mid in _SETTINGS else None)
    return results


@dataclass(eq=False)
class StreamSource:
    """A Parquet file or dataset (or an in-memory table, batch by batch) read by ``engine``
    ``stream`` (this process) or ``dask``; every :meth:`run` is one pass over it with the same
    row order and row ids.  Multiclass input reaches a state as its top-label view unless the
    spec asks for ``view="columns"`` (or ``"classes"``).  ``client`` is the run's Dask client
    (one per run)."""

    source: Any                               # calcheck.io.Source
    engine: str = "stream"                   # the engine's name, for messages
    score: str | None = None
    label: str | None = None
    pos_label: str | None = None
    where: str | None = None
    batch_rows: int = DEFAULT_BATCH_ROWS
    drop_invalid: bool = False
    scheduler: str | None = None
    probs: tuple[str, ...] | None = None     # multiclass: --probs (else auto-detected)
    renormalize: bool = False
    extra_columns: dict[str, str] = field(default_factory=dict)   # column → option, checked
    pair_as_binary: bool = True     # prob_0, prob_1 read as a binary score (io.stream)
    count: str | None = None        # --count: every row read as that many rows (io.stream)
    weight: str | None = None       # --weight: every batch carries the rows' weights, last
    weight_kind: str = "weight"     # ... or, "count", --count's counts (not expanded)
    client: Any = None
    passes: Any = None          # another executor of the passes (the Dask engine's), or this process
    progress: Any = None        # label → callback(rows done, rows in total), or None
    # the passes over the data so far: every pass of a run is one :meth:`run` (invariant 12 of
    # docs/streaming.md), so this counter is the run's pass count
    file_passes: int = 0
    _clean: bool = False        # a pass validated every multiclass row: none dropped or changed
    tuning: Tuning = DEFAULT    # the performance knobs of every pass (calcheck.tuning)

    def __post_init__(self) -> None:
        if isinstance(self.source, str):
            from calcheck.io.source import open_source

            self.source = open_source(self.source, "parquet")

    @property
    def path(self) -> str:
        return str(self.source.name)

    @functools.cached_property
    def plan(self) -> Any:
        from calcheck.io.stream import plan_stream

        return plan_stream(self.source, score=self.score, label=self.label, where=self.where,
                           probs=list(self.probs) if self.probs else None,
                           renormalize=self.renormalize, extra_columns=self.extra_columns,
                           pair_as_binary=self.pair_as_binary, count=self.count,
                           weight=self.weight, weight_kind=self.weight_kind)

    def run(self, spec: PassSpec[S], labels: IntArray | None = None) -> tuple[S, StreamStats]:
        """One pass: the merged state of ``spec`` and the read statistics.  ``labels``: every
        row's class index in stream order, kept by a first pass (multiclass) — a pass of
        class sub-streams then reads the probability columns alone (:meth:`_trusted`)."""
        from calcheck.io.stream import BatchExtras, StreamStats, plan_rows, stream_batches

        plan = self.plan
        self.file_passes += 1
        if self.passes is not None:
            return self.passes.run(self, spec)  # type: ignore[no-any-return]
        stats = StreamStats()
        trusted = self._trusted(spec)
        view = getattr(spec, "view", "top")
        batches = stream_batches(plan, pos_label=self.pos_label, batch_rows=self.batch_rows,
                                 drop_invalid=self.drop_invalid, stats=stats,
                                 extras=BatchExtras.of(spec), view=view, trusted=trusted,
                                 labels=labels if trusted is not None and view != "top"
                                 else None)
        rows = plan_rows(plan) if hasattr(spec, "prepared") else None    # (Parquet footers)
        state = fold(self._reported(batches), spec, rows=rows, tuning=self.tuning)
        if plan.multiclass and trusted is None:
            self._clean = stats.rows_dropped == 0 and stats.rows_renormalized == 0
        return state, stats

    def _trusted(self, spec: Any) -> tuple[int, ...] | None:
        """How a pass may read multiclass input that an earlier pass found valid throughout —
        nothing dropped or renormalized, so its values need no row sums: a pass of class
        sub-streams only (``ViewsSpec`` of view "columns") reads the columns of its classes
        alone (the classwise passes of K = 10 classes read 3 of 11 columns), a top-label pass
        every column without the row checks; the classes to read (all of them for the
        top-label view; the weighted passes' weights come last).  None (also with ``--by`` or
        other extra columns, or ``--count`` expanded): read and validate every column."""
        from calcheck.io.stream import BatchExtras
        from calcheck.streaming.views import ALL

        plan = self.plan
        if not (self._clean and plan.multiclass) or BatchExtras.of(spec).columns or \
                plan.count_column:
            return None                                   # (--by is among the extra columns)
        view = getattr(spec, "view", "top")
        if view == "top":
            return tuple(range(len(plan.prob_columns)))
        parts = getattr(spec, "parts", None)
        if view not in ("classes", "columns") or not parts:
            return None
        if any(sub.cls is None or sub.group is not ALL for sub, _ in parts):
            return None
        return tuple(sorted({sub.cls for sub, _ in parts}))

    def rows_bar(self) -> Callable[[int], None] | None:
        """This pass's progress bar as ``report(rows)``, adding the rows just read (safe to
        call from several threads), or None without a bar."""
        bar = self.progress(f"pass {self.file_passes} over {self.path}") if self.progress else None
        if bar is None:
            return None
        from calcheck.io.stream import plan_rows

        total, lock, done = plan_rows(self.plan), threading.Lock(), [0]

        def report(rows: int) -> None:
            with lock:
                done[0] += rows
                bar(done[0], max(total or done[0], done[0]))

        return report

    def _reported(self, batches: Any) -> Any:
        """The batches, reporting the rows read to the progress bar of this pass."""
        report = self.rows_bar()
        if report is None:
            yield from batches
            return
        for batch in batches:
            report(int(batch[1].shape[0]))
            yield batch

    def id_bound(self, n: int) -> int:
        """An upper bound of the row ids of a pass over ``n`` rows."""
        if self.passes is not None:
            return self.passes.id_bound(self, n)  # type: ignore[no-any-return]
        return n


@dataclass(frozen=True)
class BatchesKept:
    """Batches a first pass kept in memory — the top-label view of multiclass input not larger
    than ``tuning.hold_top_rows`` rows: they serve any pass of that view
    (:mod:`calcheck.streaming.runner`), folded as :meth:`StreamSource.run` folds the file's
    batches — the same batches in the same order, so every state is the one a pass over the
    file gives."""

    batches: list[tuple[FloatArray, IntArray]]
    tuning: Tuning = DEFAULT

    def serves(self, spec: Any) -> bool:
        return getattr(spec, "view", "top") == "top"

    def state(self, spec: Any) -> Any:
        return fold(iter(self.batches), spec, tuning=self.tuning)

