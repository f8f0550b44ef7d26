"""The engines, behind one protocol (:mod:`calcheck.engines.base`): ``memory`` computes on
predictions held in memory, ``stream`` from passes over a Parquet dataset in this process, and
``dask`` from the same passes on a Dask cluster.  :func:`open_engine` opens the one a run asks
for on its input — the pipeline (:mod:`calcheck.api`) and ``compare`` (:mod:`calcheck.comparison`)
both start there.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from calcheck.data import Predictions
from calcheck.engines.base import (
    Capabilities,
    Progress,
    ReadOptions,
    capabilities,
    extra_columns,
    read_options,
)
from calcheck.errors import UsageError

if TYPE_CHECKING:
    from calcheck.engines.base import Engine

__all__ = ["Capabilities", "Progress", "ReadOptions", "capabilities", "check_held",
           "extra_columns", "open_engine", "read_options", "source_of"]


def source_of(source: Any, input_format: str | None = None) -> Any:
    """An io Source for a path, ``"-"`` or an in-memory table."""
    from calcheck.io.source import from_table, open_source

    if isinstance(source, (str, os.PathLike)):
        return open_source(os.fspath(source), input_format)
    kind = type(source).__module__.split(".")[0]
    name = {"pandas": "<DataFrame>", "polars": "<DataFrame>", "pyarrow": "<Table>"}.get(
        kind, f"<{type(source).__name__}>")
    return from_table(source, name)


def open_engine(source: Any, read: ReadOptions, *, progress: Progress | None = None) -> Engine:
    """The engine ``read.engine`` on ``source`` (a path, a table or :class:`Predictions`),
    reading it as ``read`` says (:func:`calcheck.engines.base.read_options` makes one from a
    run's options)."""
    from calcheck.engines.memory import MemoryEngine

    if isinstance(source, Predictions):
        if read.engine != "memory":
            raise UsageError(f"{read.name_of('engine')} {read.engine} reads files or tables; "
                             "Predictions are already in memory (engine='memory')")
        from calcheck.data import check_columns_exist

        weighting = read.weighting
        check_columns_exist(list(source.columns), [*read.numeric, *read.raw,
                                                   *([weighting[0]] if weighting else [])],
                            source.provenance.path,
                            {**read.flags, **({weighting[0]: read.name_of(weighting[1])}
                                              if weighting else {})})
        if weighting:
            source = source.with_weights(source.column(weighting[0]), weighting[1],
                                         weighting[0], read.weight_null)
        return MemoryEngine(source, progress=progress)
    src = source_of(source, read.input_format)
    if read.engine == "memory":
        return MemoryEngine(_read(src, read, progress), progress=progress)
    if read.weighting and check_held(src, read):
        from calcheck.engines.held import HeldEngine  # held in memory

        return HeldEngine(_read(src, read, progress), read.engine,
                          read.tuning.hold_weighted_rows, progress=progress)
    if read.weighting and (read.weighting[1] == "weight" or read.passes or
                           read.passes_multiclass):          # beyond: the weighted passes
        passes = _weighted_stream(src, read, progress)
        if passes is not None:
            return passes
    count = read.weighting[0] if read.weighting else None    # beyond: streamed expanded
    from calcheck.engines.stream import StreamEngine
    from calcheck.streaming.engine import StreamSource

    stream = StreamSource(
        src, read.engine, read.score, read.label, read.pos_label, read.where, read.batch_rows,
        read.drop_invalid, read.scheduler, read.probs, read.renormalize,
        extra_columns={**read.flags, **({count: read.name_of("count")} if count else {})},
        pair_as_binary=read.pair_as_binary, progress=progress, tuning=read.tuning, count=count)
    engine: type[StreamEngine] = StreamEngine
    if read.engine == "dask":
        from calcheck.engines.dask import DaskEngine

        engine = DaskEngine
    return engine(stream)


def check_held(src: Any, read: ReadOptions) -> bool:
    """Whether a weighted run on a streaming engine holds its rows
    (:mod:`calcheck.engines.held`): yes within the budget; beyond it (False) counts are
    streamed expanded or by the weighted passes, and sampling weights by their weighted passes
    (:mod:`calcheck.engines.weighted`, without the extra columns other than ``--by``,
    ``--time`` and ``--var``'s: any other is refused before anything is read)."""
    from calcheck.io.source import source_rows
    from calcheck.io.stream import DASK_NEEDS_FILES, check_streamable

    assert read.weighting is not None
    check_streamable(src)
    if read.engine == "dask" and src.table is not None:
        raise UsageError(DASK_NEEDS_FILES)
    rows = source_rows(src)
    if rows is not None and rows <= read.tuning.hold_weighted_rows:
        return True
    if read.weighting[1] == "weight":
        from calcheck.engines.weighted import limits

        correct = read.name_of("correct_from") if read.numeric else None   # (--var's passes)
        extra = [read.flags.get(c, c) for c in read.raw
                 if c not in read.grouped and read.flags.get(c) != correct]
        if extra:
            held = f"{rows:,} rows" if rows is not None else "rows its footers do not count"
            raise UsageError(f"{', '.join(dict.fromkeys(extra))}: {src.name} holds {held}; "
                             f"{limits(read.engine, read.tuning)}")
    return False


def _weighted_stream(src: Any, read: ReadOptions, progress: Progress | None) -> Engine | None:
    """The weighted passes' engine (:mod:`calcheck.engines.weighted`) over ``src``; None for
    counts of a run that asks for more than the passes compute (multiclass input: the
    passes' own, :attr:`ReadOptions.passes_multiclass`), or that needs its rows held (metrics
    beyond the passes', ``--var``) beyond ``Tuning.exact_pava_rows`` rows (streamed expanded
    instead).  Within that budget the engine holds binary rows for what the passes lack,
    when asked."""
    from calcheck.engines.weighted import WeightedStreamEngine
    from calcheck.streaming.engine import StreamSource

    assert read.weighting is not None
    column, kind = read.weighting
    stream = StreamSource(
        src, read.engine, read.score, read.label, read.pos_label, read.where, read.batch_rows,
        read.drop_invalid, read.scheduler, read.probs, read.renormalize,
        extra_columns={**read.flags, column: read.name_of(kind)},
        pair_as_binary=read.pair_as_binary, progress=progress, tuning=read.tuning,
        weight=column, weight_kind=kind)
    from calcheck.io.source import source_rows

    rows = source_rows(src)                 # what the passes lack, from the rows held
    held = rows is not None and rows <= read.tuning.exact_pava_rows
    if kind == "count":              # counts take the passes only when they serve the run
        serves = read.passes_multiclass if stream.plan.multiclass else \
            read.passes and (held or not read.held)
        if not serves:
            return None
    if stream.plan.multiclass:      # the passes' own only: no rows held (a matrix)
        held = False
    return WeightedStreamEngine(stream, read.weight_null, held=held, numeric=read.numeric)


def _read(src: Any, read: ReadOptions, progress: Progress | None) -> Predictions:
    """The rows of ``src`` in memory, as ``read`` says (the in-memory reader)."""
    from calcheck.engines.memory import read_fold
    from calcheck.io.tabular import load_predictions

    data = load_predictions(src, score=read.score, label=read.label,
                            pos_label=read.pos_label,
                            probs=list(read.probs) if read.probs else None,
                            renormalize=read.renormalize, drop_invalid=read.drop_invalid,
                            where=read.where, numeric=list(read.numeric), raw=list(read.raw),
                            flags=read.flags,
                            progress=progress(f"reading {src.name}") if progress else None,
                            fold=read_fold(read.fold_bins), pair_as_binary=read.pair_as_binary,
                            tuning=read.tuning, weight=read.weighting)
    if data.weights is not None:
        data.weights = dataclasses.replace(data.weights, null=read.weight_null)
    return data
