"""Reading a whole input into :class:`~calcheck.data.Predictions` (the in-memory engine).

:func:`load_predictions` resolves the score, label (or probability) columns, applies the
``--where`` filter, validates every row (or drops and counts the invalid ones with
``--drop-invalid``) and keeps the extra columns a run needs: ``numeric`` ones (``--var``) as
float64 with missing values as NaN, ``raw`` ones (``--by``, ``--correct-from``) as they are.
This is the last place an Arrow table exists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck.data import (
    Predictions,
    Provenance,
    binary_pair,
    binary_pair_note,
    check_columns_exist,
    class_named_columns,
    class_names_of,
    is_multiclass,
    resolve_columns,
)
from calcheck.errors import InputError
from calcheck.io.columns import (
    binary_columns,
    distinct_text,
    multiclass_columns,
    named_note,
    variable_values,
    weight_values,
)
from calcheck.io.source import Source, column_names, read_columns, to_expression
from calcheck.tuning import DEFAULT, Tuning
from calcheck.weights import Weights


def input_kind(src: Source, *, score: str | None, probs: list[str] | None) -> str:
    """``"binary"`` or ``"multiclass"``: --probs or auto-detected prob_0..prob_{K−1} columns
    without a score column mean multiclass; everything else is read as binary."""
    if probs or score is not None:                  # decided without reading the columns
        return "multiclass" if probs else "binary"
    return "multiclass" if is_multiclass(column_names(src), score, probs) else "binary"


def _extras(src: Source, table: Any, numeric: list[str], raw: list[str]) -> dict[str, np.ndarray]:
    """Extra columns: ``numeric`` as float64 (missing → NaN, text → error), ``raw`` as they are
    (nulls as None)."""
    out: dict[str, np.ndarray] = {}
    for name in numeric:
        out[name] = variable_values(src, name, table.column(name))
    for name in raw:
        if name not in out:
            out[name] = np.asarray(table.column(name).to_numpy(zero_copy_only=False))
    return out


class _Folding:
    """The fold a run installs (``fold(rows)``: an object with ``feed(scores, labels, rows)``,
    ``stop()``, ``finish()`` and ``close()``; the engine's equal-width bins of a binary read)
    fed from the reader's arrays of the score and label columns; stopped however the read
    ends.  The reader knows nothing of bins: it hands its arrays on."""

    def __init__(self, factory: Callable[[int], Any] | None, score: str, label: str) -> None:
        self.factory, self.score, self.label = factory, score, label
        self.fold: Any = None

    def __enter__(self) -> _Folding:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fold is not None:
            self.fold.stop()
            self.fold.close()

    def consume(self, arrays: dict[str, np.ndarray], rows: int) -> None:
        """``read_columns``' view of the rows read so far."""
        s, y = arrays.get(self.score), arrays.get(self.label)
        if self.fold is None and self.factory is not None and s is not None and y is not None:
            self.fold = self.factory(s.shape[0])
        if self.fold is None:
            return
        if s is None or y is None:              # a column left numpy (nulls, another type)
            self.fold.stop()
        else:
            self.fold.feed(s, y, rows)

    def result(self) -> dict[int, Any] | None:
        """The folded statistics by number of bins, or None (no fold, or it stopped)."""
        return None if self.fold is None else self.fold.finish()


@dataclass(frozen=True)
class ReadPlan:
    """The columns one read takes: the prediction columns (``cols`` for multiclass input,
    else ``score``), the label, the ``--where`` filter, and how they were named."""

    cols: list[str] | None
    score: str
    label: str
    named: tuple[list[str], str] | None
    flt: Any
    columns: list[str]              # every column to read (the filter's are added by the read)


def plan_read(src: Source, *, score: str | None, label: str | None,
              probs: list[str] | None, where: str | None, extra: list[str],
              flags: dict[str, str]) -> ReadPlan:
    """Resolve the columns of a read (every ``extra`` one must exist, named in messages by
    its option in ``flags``) and parse the filter."""
    available = column_names(src)
    check_columns_exist(available, list(dict.fromkeys(extra)), src.name, flags)
    flt = None
    if where:                       # the filter's grammar is imported only when one is given
        from calcheck.where import check_columns, parse_where

        flt = parse_where(where)
        check_columns(flt, available, src.name)
    named = class_named_columns(available, score, label, probs,
                                lambda c: distinct_text(read_columns(src, [c]).column(0)))
    if named is not None:
        probs, label = named
    cols, score_col, label_col = resolve_columns(available, score, label, probs, src.name)
    return ReadPlan(cols, score_col, label_col, named, flt,
                    [*(cols or [score_col]), label_col, *extra])


def _predictions(src: Source, table: Any, plan: ReadPlan, prov: Provenance, *,
                 pos_label: str | None, probs: list[str] | None, renormalize: bool,
                 drop_invalid: bool, pair_as_binary: bool, more: list[Any]
                 ) -> tuple[np.ndarray | None, np.ndarray | None, list[str] | None, np.ndarray,
                            np.ndarray | None, int, dict[str, int]]:
    """The validated predictions of a table: (scores, probabilities, class names, labels,
    rows kept or None, rows dropped, dropped by reason); ``prov`` learns the columns."""
    if plan.cols is None:
        s, y, keep, dropped_n, dropped = binary_columns(src, table, plan.score, plan.label,
                                                        pos_label, drop_invalid, more=more)
        prov.score_column = plan.score
        return np.ascontiguousarray(s, dtype=np.float64), None, None, y, keep, dropped_n, \
            dropped
    names: list[str] | None = class_names_of(plan.cols)
    assert names is not None
    P, y, keep, dropped_n, dropped, renormalized = multiclass_columns(
        src, table, plan.cols, plan.label, names, renormalize=renormalize,
        drop_invalid=drop_invalid, detected=not probs, more=more)
    prov.rows_renormalized = renormalized
    if pair_as_binary and binary_pair(plan.cols, probs) and plan.named is None:
        prov.score_column = plan.cols[1]
        prov.notes.append(binary_pair_note(plan.cols))
        return np.ascontiguousarray(P[:, 1]), None, None, y, keep, dropped_n, dropped
    prov.prob_columns = plan.cols
    return None, P, names, y, keep, dropped_n, dropped


def _provenance(src: Source, plan: ReadPlan, n: int, where: str | None) -> Provenance:
    """The provenance of ``n`` rows read (none is an error naming the ``--where`` filter)."""
    if n == 0:
        if where:
            raise InputError(f"{src.name}: no rows match --where {where!r}")
        raise InputError(f"{src.name}: no data rows (header only?)")
    prov = Provenance(path=src.name, format=src.fmt if src.fmt != "arrow" else "arrow",
                      label_column=plan.label, rows_read=n)
    prov.notes.extend(src.notes)
    if plan.named is not None:
        prov.notes.append(named_note(plan.named))
    return prov


def load_predictions(src: Source, *, score: str | None = None, label: str | None = None,
                     pos_label: str | None = None, probs: list[str] | None = None,
                     renormalize: bool = False, drop_invalid: bool = False,
                     where: str | None = None, numeric: list[str] | None = None,
                     raw: list[str] | None = None,
                     flags: dict[str, str] | None = None,
                     progress: Callable[[int, int], None] | None = None,
                     fold: Callable[[int], Any] | None = None,
                     pair_as_binary: bool = True, tuning: Tuning = DEFAULT,
                     weight: tuple[str, str] | None = None) -> Predictions:
    """Read, select and validate binary or multiclass predictions.

    Invalid rows (missing, non-numeric, infinite or out-of-range scores or probabilities;
    missing or invalid labels; probability rows not summing to 1) raise :class:`InputError`
    naming the first ones, unless ``drop_invalid`` is set: then they are removed and counted
    by reason.  ``flags`` names the options of the extra columns in messages; ``progress``
    (rows read, rows in all) follows the read of a Parquet file or directory.
    ``fold``: a hook the engine installs to fold a large binary Parquet file's rows while it
    is read (``fold(rows)`` makes the folder: the equal-width bins'
    :class:`~calcheck.binning.UniformFold`), its result kept in ``Predictions.uniform_read``
    when every row was folded and kept as read.
    ``pair_as_binary``: two auto-detected probability columns are read as the binary score
    of the second (:func:`calcheck.data.binary_pair`).  ``tuning``: how a large Parquet file
    is read in steps (:class:`calcheck.tuning.Tuning`; the same table either way).
    ``weight``: (column, "count" or "weight") — the rows' counts or weights
    (:mod:`calcheck.weights`), validated with the other columns (a bad one is an invalid row).
    """
    numeric, raw = list(numeric or []), list(raw or [])
    weight_col = [weight[0]] if weight else []
    plan = plan_read(src, score=score, label=label, probs=probs, where=where,
                     extra=[*numeric, *raw, *weight_col],
                     flags={**(flags or {}), **({weight[0]: f"--{weight[1]}"} if weight else {})})
    flt = plan.flt
    foldable = plan.cols is None and pos_label is None and flt is None and weight is None
    with _Folding(fold if foldable else None, plan.score, plan.label) as folding:
        # one column plan for every source kind: the columns the run uses, plus those the filter
        # reads (dropped again once it has been applied)
        table = read_columns(src, plan.columns,
                             to_expression(flt) if flt is not None else None,
                             filter_columns=flt.columns if flt is not None else None,
                             progress=progress,
                             consume=folding.consume if folding.factory else None,
                             tuning=tuning)
        prov = _provenance(src, plan, table.num_rows, where)
        extras = _extras(src, table, numeric, raw)
        w, more = weight_values(src, table, weight[0], weight[1]) if weight else (None, [])
        scores, P, names, y, keep, prov.rows_dropped, prov.dropped_by_reason = _predictions(
            src, table, plan, prov, pos_label=pos_label, probs=probs, renormalize=renormalize,
            drop_invalid=drop_invalid, pair_as_binary=pair_as_binary, more=more)
        del table
        import pyarrow as pa

        pa.default_memory_pool().release_unused()   # the reader's buffers: ~17 bytes per row kept
        if keep is not None:
            extras = {k: v[keep] for k, v in extras.items()}
            w = w[keep] if w is not None else None
        uniform = folding.result() if keep is None else None
    if w is not None and weight is not None and not (w > 0).any():
        raise InputError(f"{src.name}: every {weight[1]} in column {weight[0]!r} is zero; "
                         "nothing to measure", column=weight[0])
    data = Predictions(labels=np.ascontiguousarray(y, dtype=np.int64 if P is not None else
                                                   np.int8), scores=scores,
                       probs=None if P is None else np.ascontiguousarray(P), class_names=names,
                       columns=extras, validate=False, provenance=prov,
                       weights=None if w is None or weight is None else
                       Weights(np.ascontiguousarray(w), weight[1], weight[0]))
    if uniform is not None and scores is not None:
        data.uniform_read = uniform
    if scores is not None and data.positives in (0, data.n):
        only = "1" if data.positives else "0"
        prov.warnings.append(f"{src.name}: column {plan.label!r} holds only one class (all "
                             f"{only}); calibration metrics are still computed but say little")
    return data
