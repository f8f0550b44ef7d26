"""Weighted and aggregated rows (``--weight`` / ``--count``) on ``--engine stream`` and
``dask``: the rows held in memory, within a budget.

A weighted run on a streaming engine reads its rows with the in-memory reader — the same
columns, ``--where`` filter, checks and ``--drop-invalid`` counts — when the planned Parquet
files hold at most :attr:`calcheck.tuning.Tuning.hold_weighted_rows` rows (their footers say
so before anything is read), and computes the in-memory engine's numbers: every metric, test,
interval and figure is the in-memory one, to the bit.  What it computes is what the streaming
engine computes unweighted (the run is planned by that engine's capabilities).  The report's
settings say the rows were held (``settings.held``).

Aggregated files (``--count``: 10⁹ predictions in 10⁶ rows) and down-sampled logs are the
inputs weights come with, and they are mostly small.  Beyond the budget the weighted passes
stream them (:mod:`calcheck.engines.weighted`: sampling weights, and counts of a run that asks
only for what those passes compute, the counts as weights); other counted runs are streamed
expanded (:func:`calcheck.io.stream.validated_batches`: each row repeated in place, so every
pass reads the expanded file — exact, at the cost of its rows).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from calcheck.data import Predictions
from calcheck.engines.base import Capabilities, Outcome, Progress
from calcheck.engines.memory import MemoryEngine

HELD_NOTE = ("the weighted rows fit Tuning.hold_weighted_rows, so they were read into memory "
             "and computed as by --engine memory; beyond it they are streamed by weighted "
             "passes (docs/weights.md)")


class HeldEngine(MemoryEngine):
    """The in-memory engine standing in for ``stream`` or ``dask`` on weighted rows: its
    ``name`` is the engine asked for (the run is planned by that engine's capabilities), and
    it holds every row (``capabilities.rows``)."""

    def __init__(self, data: Predictions, name: str, limit: int, *,
                 progress: Progress | None = None) -> None:
        super().__init__(data, progress=progress)
        self.name = name
        self.capabilities = Capabilities(name, rows=True)
        self.limit = limit

    def settings(self) -> dict[str, Any]:
        return {"held": held_settings(self.data.n, self.limit)}

    def reading(self) -> Outcome:
        out = super().reading()
        return dataclasses.replace(out, notes=[*out.notes, f"--engine {self.name}: {HELD_NOTE}"])


def held_settings(rows: int, limit: int) -> dict[str, Any]:
    """``settings.held`` of a report whose weighted rows a streaming engine held."""
    return {"rows": rows, "limit": limit, "note": HELD_NOTE}


def held_predictions(source: Any, arrays: tuple[Any, ...], numeric: tuple[str, ...],
                     null: str) -> Predictions:
    """The rows a weighted pass held (:class:`calcheck.streaming.weighted.HeldRowsSpec`:
    scores, labels, weights and the ``numeric`` columns) as the in-memory engine's
    predictions, carrying the weights of ``source``'s column."""
    from calcheck.weights import Weights

    s, y, w, *more = arrays
    columns = {name: more[0][:, j] for j, name in enumerate(numeric)} if numeric else {}
    return Predictions(scores=s, labels=y, columns=columns, validate=False,
                       weights=Weights(w, source.weight_kind, source.weight, null))
