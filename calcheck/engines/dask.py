"""``--engine dask``: the stream engine whose passes run on Dask (:class:`DaskEngine`).

Each Dask partition is a group of dataset fragments (Parquet files); a worker scans its files
file by file (``pyarrow.dataset``, ``--where`` pushed down), folds them into a
:class:`~calcheck.streaming.states.StreamState` (or a later pass's state), and the states are
merged by Dask's own tree reduction (``Bag.reduction`` with ``split_every``).  Because counts
are int64 and sums are compensated, the result does not depend on how the files are spread over workers.

Dask is an optional extra (``pip install 'calcheck[dask]'``); without it this module raises a
:class:`~calcheck.errors.UsageError` naming the install command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from calcheck._threads import one_blas_thread
from calcheck.engines.stream import StreamEngine
from calcheck.errors import CalcheckError, UsageError
from calcheck.io.stream import (
    BatchExtras,
    StreamPlan,
    StreamStats,
    fragment_batches,
    validated_batches,
)
from calcheck.options import DEFAULT_BATCH_ROWS
from calcheck.streaming.engine import StreamSource
from calcheck.tuning import DEFAULT, Tuning

INSTALL = "pip install 'calcheck[dask]'"
FILE_ID_SHIFT = 40       # row ids are file index · 2^40 + row within the file (stream order)


class DaskEngine(StreamEngine):
    """The stream engine with every pass folded by Dask: on the ``--scheduler`` cluster (a
    client opened for the run and closed after it), else on the caller's active
    ``distributed.Client``, else on local threads (which work in a plain script, a notebook
    and the CLI: no process pool re-imports the caller's module)."""

    def __init__(self, source: StreamSource) -> None:
        from calcheck.io.stream import DASK_NEEDS_FILES

        if source.plan.in_memory:               # (the workers read files)
            raise UsageError(DASK_NEEDS_FILES)
        source.passes = DaskPasses()
        super().__init__(source)

    def __enter__(self) -> DaskEngine:
        if self.source.scheduler and self.source.client is None:
            self.source.client = connect(self.source.scheduler,
                                         self.source.tuning.connect_timeout)
            self._own_client = True
        return self


class DaskPasses:
    """How a :class:`StreamSource` runs a pass on Dask."""

    def run(self, source: StreamSource, spec: Any) -> tuple[Any, StreamStats]:
        return dask_fold(source.plan, spec, batch_rows=source.batch_rows,
                         pos_label=source.pos_label, drop_invalid=source.drop_invalid,
                         client=source.client, report=rows_reporter(source),
                         tuning=source.tuning)

    def id_bound(self, source: StreamSource, n: int) -> int:
        return row_id_bound(source.plan)


def rows_reporter(source: StreamSource) -> Callable[[int], None] | None:
    """For a pass on local threads, the pass's progress bar (:meth:`StreamSource.rows_bar`);
    None on a cluster, whose workers cannot reach this process's terminal."""
    if source.client is not None or active_client() is not None:
        return None
    return source.rows_bar()


def row_id_bound(plan: StreamPlan) -> int:
    """An upper bound of the row ids :func:`partition_state` assigns."""
    return max(len(plan.fragments), 1) << FILE_ID_SHIFT


def _require_dask() -> Any:
    try:
        import dask.bag as db
    except ImportError:
        raise UsageError(f"--engine dask needs Dask, an optional extra: {INSTALL}") from None
    return db


def partition_state(fragments: Any, plan: StreamPlan, spec: Any, batch_rows: int,
                    pos_label: str | None, drop_invalid: bool,
                    report: Callable[[int], None] | None = None,
              tuning: Tuning = DEFAULT) -> tuple[Any, StreamStats]:
    """Fold the (index, file) pairs of one partition into ``spec.new()``; errors name the file
    and the row within it.  ``report(rows)`` is told the rows of each batch read."""
    state = spec.new()
    stats = StreamStats(score_column=plan.score_column, label_column=plan.label_column)
    extras = BatchExtras.of(spec)               # --by codes, --var columns, --correct-from
    for index, fr in fragments:
        file_stats = StreamStats()
        batches = validated_batches(plan, fragment_batches(plan, fr, batch_rows, extras),
                                    name=getattr(fr, "path", plan.name), pos_label=pos_label,
                                    drop_invalid=drop_invalid, stats=file_stats, extras=extras,
                                    view=getattr(spec, "view", "top"))
        start = index << FILE_ID_SHIFT                  # row id: (file index, row in the file)
        for b in batches:                               # (scores, labels[, group codes])
            state.update(b[0], b[1], start, *b[2:])
            start += int(b[0].shape[0])
            if report is not None:
                report(int(b[0].shape[0]))
        stats = stats.add(file_stats)
    return state, stats


def merge_partials(parts: Any) -> tuple[Any, StreamStats]:
    """Merge a list of (state, stats) pairs (one node of the reduction tree)."""
    parts = list(parts)
    state, stats = parts[0]
    for s, st in parts[1:]:
        state = state.merge(s)
        stats = stats.add(st)
    return state, stats


def dask_fold(plan: StreamPlan, spec: Any, *, batch_rows: int = DEFAULT_BATCH_ROWS,
              pos_label: str | None = None, drop_invalid: bool = False, client: Any = None,
              files_per_partition: int = 1, split_every: int = 8,
              report: Callable[[int], None] | None = None,
              tuning: Tuning = DEFAULT) -> tuple[Any, StreamStats]:
    """The merged state and read statistics of every file of ``plan``, computed by Dask.

    ``client`` is the run's ``distributed.Client`` (see :func:`connect`); without one the
    computation runs on the active client if there is one, else Dask's local threads.
    """
    db = _require_dask()
    if not plan.fragments:
        return spec.new(), StreamStats(score_column=plan.score_column,
                                       label_column=plan.label_column)
    if hasattr(spec, "prepared"):                  # as the stream's first batch prepares it
        spec = prepared_on_first_batch(plan, spec, batch_rows, pos_label, drop_invalid, tuning)
    client = client if client is not None else active_client()
    local = report if client is None else None      # a cluster's workers cannot report here
    nparts = max(1, -(-len(plan.fragments) // max(1, files_per_partition)))
    bag = db.from_sequence(list(enumerate(plan.fragments)), npartitions=nparts)
    total = bag.reduction(
        lambda frs: partition_state(frs, plan, spec, batch_rows, pos_label, drop_invalid, local),
        merge_partials, split_every=split_every)
    try:
        if client is None:
            # threads, not a dask.bag's default process pool: a pool re-imports the caller's
            # script (BrokenProcessPool in a plain script without a __main__ guard); given as
            # the function scheduler="threads" names, since by name dask first imports
            # distributed (~0.2 s) to look for a client.  One partition (one file) has nothing
            # to share out: it runs in this thread — no pool to start, which on a loaded
            # machine could fail to get its threads where the stream engine needs none
            from dask.local import get_sync
            from dask.threaded import get as threads

            with one_blas_thread():         # Dask's threads, not BLAS's, share the cores
                return total.compute(  # type: ignore[no-any-return]
                    scheduler=get_sync if nparts == 1 else threads)
        return client.compute(total).result()  # type: ignore[no-any-return]
    except CalcheckError:
        raise
    except Exception as exc:
        if exhausted(exc):
            raise CalcheckError(f"the Dask run could not get the threads or memory it needs "
                                f"({type(exc).__name__}: {exc}): the machine is out of them; "
                                "retry when it is less loaded, or use --engine stream (one "
                                "thread of reads)") from exc
        raise CalcheckError(f"the Dask run failed: {type(exc).__name__}: {exc}") from exc


def exhausted(exc: BaseException) -> bool:
    """A failure of the machine rather than of the data: no thread could be started, or
    memory ran out."""
    text = str(exc)
    return isinstance(exc, MemoryError) or "can't start new thread" in text or \
        "Resource temporarily unavailable" in text


def prepared_on_first_batch(plan: StreamPlan, spec: Any, batch_rows: int,
                            pos_label: str | None, drop_invalid: bool,
                            tuning: Tuning = DEFAULT) -> Any:
    """``spec`` prepared (:meth:`~calcheck.streaming.engine.StateSpec.prepared`: finer cells
    for crowded scores) on the first batch of the first file, read here once more, as the
    stream engine prepares it on its first batch — decided once, so that every partition
    keeps the same cells and the Dask engine gives the stream engine's numbers.  A batch that
    cannot be read leaves ``spec`` as it is: the pass itself then reports the error."""
    import numpy as np

    from calcheck.io.stream import plan_rows

    try:
        first = next(iter(validated_batches(
            plan, fragment_batches(plan, plan.fragments[0], batch_rows), name=plan.name,
            pos_label=pos_label, drop_invalid=drop_invalid, stats=StreamStats())), None)
    except CalcheckError:
        return spec
    if first is None:
        return spec
    return spec.prepared(np.asarray(first[0], dtype=np.float64), plan_rows(plan), tuning)


def active_client() -> Any:
    """The ``distributed.Client`` the caller has made the default, if any.  None without
    looking when ``distributed`` was never imported (no client can exist then): its import
    alone takes ~0.2 s of a local run."""
    import sys

    if "distributed" not in sys.modules:
        return None
    try:
        from distributed import get_client
    except ImportError:
        return None
    try:
        return get_client()
    except ValueError:                          # no client is active
        return None


def connect(scheduler: str, timeout: int = DEFAULT.connect_timeout) -> Any:
    """A ``distributed.Client`` on the scheduler at ``scheduler`` — one per run, closed by the
    engine when the run ends."""
    _require_dask()
    try:
        from distributed import Client
    except ImportError:
        raise UsageError(f"--scheduler needs dask.distributed: {INSTALL}") from None
    try:
        return Client(scheduler, timeout=timeout,  # type: ignore[no-untyped-call]
                      set_as_default=False)
    except OSError as exc:
        raise UsageError(f"cannot reach the Dask scheduler at {scheduler!r} ({exc})") from None
