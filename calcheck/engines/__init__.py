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
from calcheck.engines.base import Capabilities, Progress, capabilities
from calcheck.errors import UsageError
from calcheck.options import Options

if TYPE_CHECKING:
    from calcheck.engines.base import Engine

__all__ = ["Capabilities", "Progress", "capabilities", "check_held", "extra_columns",
           "open_engine", "source_of"]


def source_of(source: Any, opts: Options) -> Any:
    """An io Source for a path, ``"-"`` or an in-memory table."""
    from calcheck.io.source import from_table, open_source

    if isinstance(source, (str, os.PathLike)):
        return open_source(os.fspath(source), opts.input_format)
    kind = type(source).__module__.split(".")[0]
    name = {"pandas": "<DataFrame>", "polars": "<DataFrame>", "pyarrow": "<Table>"}.get(
        kind, f"<{type(source).__name__}>")
    return from_table(source, name)


def extra_columns(opts: Options) -> tuple[list[str], list[str], dict[str, str]]:
    """The extra columns a run reads: numeric (``--var``) and raw (``--by``, ``--time``,
    ``--correct-from``, ``--segment``, ``--audit``), and the option naming each."""
    numeric = opts.variable_list
    segments = list(dict.fromkeys([*(opts.segments or []), *(opts.audit or [])]))
    raw = list(dict.fromkeys([c for c in (opts.by, opts.time, opts.correct_from) if c]
                             + segments))
    flags = {c: opts.name_of("variables") for c in numeric}
    flags.update({c: opts.name_of("segments" if opts.segments else "audit") for c in segments})
    flags.update({c: opts.name_of(n) for n in ("by", "time", "correct_from")
                  if (c := getattr(opts, n))})
    return numeric, raw, flags


def open_engine(source: Any, opts: Options, *, progress: Progress | None = None) -> Engine:
    """The engine ``opts.engine`` on ``source``."""
    from calcheck.engines.memory import MemoryEngine

    numeric, raw, flags = extra_columns(opts)
    if isinstance(source, Predictions):
        if opts.engine != "memory":
            raise UsageError(f"{opts.name_of('engine')} {opts.engine} reads files or tables; "
                             "Predictions are already in memory (engine='memory')")
        from calcheck.data import check_columns_exist

        weighting = opts.weighting
        check_columns_exist(list(source.columns), [*numeric, *raw,
                                                   *([weighting[0]] if weighting else [])],
                            source.provenance.path,
                            {**flags, **({weighting[0]: opts.name_of(weighting[1])}
                                         if weighting else {})})
        if weighting:
            source = source.with_weights(source.column(weighting[0]), weighting[1],
                                         weighting[0], opts.weight_null)
        return MemoryEngine(source, progress=progress)
    src = source_of(source, opts)
    if opts.engine == "memory":
        return MemoryEngine(_read(src, opts, numeric, raw, flags, progress), progress=progress)
    if opts.weighting:                  # held in memory (calcheck.engines.held)
        from calcheck.engines.held import HeldEngine

        check_held(src, opts)
        return HeldEngine(_read(src, opts, numeric, raw, flags, progress), opts.engine,
                          opts.tuning.hold_weighted_rows, progress=progress)
    from calcheck.engines.stream import StreamEngine
    from calcheck.streaming.engine import StreamSource

    stream = StreamSource(
        src, opts.engine, opts.score, opts.label, opts.pos_label, opts.where, opts.batch_rows,
        opts.drop_invalid, opts.scheduler, tuple(opts.probs) if opts.probs else None,
        opts.renormalize, extra_columns=flags, pair_as_binary=not opts.asks_multiclass,
        progress=progress, tuning=opts.tuning)
    engine: type[StreamEngine] = StreamEngine
    if opts.engine == "dask":
        from calcheck.engines.dask import DaskEngine

        engine = DaskEngine
    return engine(stream)


def check_held(src: Any, opts: Options) -> None:
    """A weighted run on a streaming engine holds its rows (:mod:`calcheck.engines.held`):
    refuse an input larger than the budget before anything is read."""
    from calcheck.engines.held import check_held_rows
    from calcheck.io.source import source_rows
    from calcheck.io.stream import DASK_NEEDS_FILES, check_streamable

    assert opts.weighting is not None
    check_streamable(src)
    if opts.engine == "dask" and src.table is not None:
        raise UsageError(DASK_NEEDS_FILES)
    check_held_rows(source_rows(src), src.name, opts.name_of(opts.weighting[1]), opts.engine,
                    opts.tuning)


def _read(src: Any, opts: Options, numeric: list[str], raw: list[str], flags: dict[str, str],
          progress: Progress | None) -> Predictions:
    """The rows of ``src`` in memory, as ``opts`` read them (the in-memory reader)."""
    from calcheck.engines.memory import read_fold
    from calcheck.io.tabular import load_predictions

    data = load_predictions(src, score=opts.score, label=opts.label,
                            pos_label=opts.pos_label, probs=opts.probs,
                            renormalize=opts.renormalize, drop_invalid=opts.drop_invalid,
                            where=opts.where, numeric=numeric, raw=raw, flags=flags,
                            progress=progress(f"reading {src.name}") if progress else None,
                            fold=read_fold(opts), pair_as_binary=not opts.asks_multiclass,
                            tuning=opts.tuning, weight=opts.weighting)
    if data.weights is not None:
        data.weights = dataclasses.replace(data.weights, null=opts.weight_null)
    return data
