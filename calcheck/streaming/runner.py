"""The pass runner: where each pass's rows come from, decided in one place.

A streamed computation (:data:`~calcheck._typing.Passes`) only says what it needs: it yields
a pass's spec — or, when it keeps rows that may stand in for the file (invariant 4 of
docs/streaming.md), a :class:`FromKept` naming them — and is sent the merged state.  The runner
(:func:`drive` for one computation, :func:`drive_lockstep` for many in shared passes) serves
each pass from kept rows when one of them :meth:`~Kept.serves` it, and otherwise from the
source (:meth:`calcheck.streaming.engine.StreamSource.run`: the file, or the Dask cluster),
which counts the passes (invariant 12).  The kept rows:

* exact PAVA's sorted rows (:class:`calcheck.streaming.heldrows.SortedKept`): every later pass
  of that computation;
* the first rank search's kept cells (:class:`calcheck.streaming.prospect.CellsKept`): a pass
  that reads only those cells;
* a small multiclass file's top-label view, kept by the first pass
  (:class:`calcheck.streaming.engine.BatchesKept`): every pass of the top-label view, handed
  to :func:`drive` by the engine.

The budgets that bound them are the :class:`~calcheck.tuning.Tuning`'s (``exact_pava_rows``,
``prospect_rows``, ``hold_top_rows``, ``hold_rows``), whose sum
:meth:`~calcheck.tuning.Tuning.kept_bytes` bounds by the memory goal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, Union

from calcheck._threads import map_two
from calcheck._typing import IntArray, Passes, PassSpec, PassState
from calcheck.errors import CalcheckError
from calcheck.streaming.views import CHUNK, SubStream, ViewsSpec
from calcheck.tuning import Tuning

T = TypeVar("T")
Spec = PassSpec[PassState]


class Source(Protocol):
    """Where the passes that no kept rows serve read their rows: a file or dataset in this
    process or on Dask (:class:`~calcheck.streaming.engine.StreamSource`), or arrays in tests
    (:class:`~calcheck.streaming.engine.ArraySource`); it counts those passes."""

    file_passes: int
    tuning: Tuning

    def run(self, spec: Spec, labels: IntArray | None = None, /) -> tuple[PassState, object]:
        """One pass: the merged state and the read statistics (None for arrays)."""

    def id_bound(self, n: int) -> int:
        """An upper bound of the row ids of a pass over ``n`` rows."""


class Kept(Protocol):
    """Rows kept in memory that can make some passes' states exactly as the file would."""

    def serves(self, spec: Spec) -> bool:
        """Whether :meth:`state` gives this pass's state (the rows it reads are all kept)."""

    def state(self, spec: Spec) -> PassState:
        """The state a pass of ``spec`` over the file would give."""


@dataclass(frozen=True)
class FromKept:
    """A computation's pass that ``kept`` rows may serve (the runner decides)."""

    spec: Spec
    kept: tuple[Kept, ...]


Item = Union[Spec, FromKept]
"""What a computation yields for a pass."""


def served(item: Item, kept: Sequence[Kept] = ()) -> tuple[Spec, PassState | None]:
    """(the spec of a yielded ``item``, its state from kept rows — the item's own, then the
    run's ``kept`` — or None when the pass must read the source)."""
    spec, own = (item.spec, item.kept) if isinstance(item, FromKept) else (item, ())
    for rows in (*own, *kept):
        if rows.serves(spec):
            return spec, rows.state(spec)
    return spec, None


def run_pass(source: Source, item: Item, kept: Sequence[Kept] = ()) -> PassState:
    """One pass of a yielded ``item``: from kept rows, else over ``source``."""
    spec, state = served(item, kept)
    return source.run(spec)[0] if state is None else state


def drive(source: Source, passes: Passes[T], kept: Sequence[Kept] = ()) -> T:
    """Run ``passes`` on ``source`` (``kept``: rows that may serve any of its passes)."""
    try:
        item = next(passes)
        while True:
            item = passes.send(run_pass(source, item, kept))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def _guarded(passes: Passes[Any]) -> Passes[Any]:
    """``passes``, with a :class:`CalcheckError` returned as the result instead of raised."""
    try:
        return (yield from passes)
    except CalcheckError as exc:
        return exc


def drive_lockstep(source: Any, computations: dict[Any, tuple[SubStream, Passes[Any]]], *,
                   view: str = "top", by: str | None = None, rows: dict[Any, int] | None = None,
                   max_rows: int = 0, chunk: int = CHUNK, labels: Any = None
                   ) -> dict[Any, Any]:
    """Run the computations ``chunk`` at a time, each chunk together (one pass per round for
    all that need one): the result by key.  A computation that raises a
    :class:`CalcheckError` (say, a group too small for a metric) gets it as its result.

    A pass whose spec ``holds_rows`` (the exact PAVA pass keeps every row of its sub-stream)
    counts ``rows[key]`` rows; a round takes such passes only while they hold at most
    ``max_rows`` rows in all (always at least one), the others wait for a later round.
    ``labels``: every row's class, kept by the first pass, for the source's reads of class
    sub-streams (:meth:`calcheck.streaming.engine.StreamSource.run`)."""
    results: dict[Any, Any] = {}
    items = list(computations.items())
    for i in range(0, len(items), chunk):
        _lockstep(source, dict(items[i:i + chunk]), view, by, rows or {}, max_rows, labels,
                  results)
    return results


def _lockstep(source: Any, computations: dict[Any, tuple[SubStream, Passes[Any]]],
              view: str, by: str | None, rows: dict[Any, int], max_rows: int, labels: Any,
              results: dict[Any, Any]) -> None:
    """One chunk of :func:`drive_lockstep` (results into ``results``)."""
    pending: dict[Any, tuple[SubStream, Any, Passes[Any]]] = {}

    def step(key: Any, sub: SubStream, gen: Passes[Any], sent: Any) -> None:
        """Advance one computation to its next pass over the source (passes its kept rows
        serve run here, at once)."""
        while True:
            try:
                item = next(gen) if sent is None else gen.send(sent)
            except StopIteration as stop:
                results[key] = stop.value
                pending.pop(key, None)
                return
            spec, sent = served(item)
            if sent is None:
                pending[key] = (sub, spec, gen)
                return

    def held(key: Any) -> int:
        return rows.get(key, 0) if getattr(pending[key][1], "holds_rows", False) else 0

    for key, (sub, gen) in computations.items():
        step(key, sub, _guarded(gen), None)
    while pending:
        keys, total = [], 0
        for key in pending:
            w = held(key)
            if w == 0 or total == 0 or total + w <= max_rows:
                keys.append(key)
                total += w
        spec = ViewsSpec(tuple((pending[k][0], pending[k][1]) for k in keys), view, by)
        state = source.run(spec, labels)[0]
        # the computations' work between passes (sorting a class's rows, PAVA, the binomial
        # tests) is independent and mostly numpy that releases the GIL: two at a time
        map_two(step, [(key, pending[key][0], pending[key][2], part)
                       for key, part in zip(keys, state.states)])
