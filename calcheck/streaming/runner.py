"""The pass runner: where each pass's rows come from, decided in one place.

A streamed computation (:data:`~calcheck._typing.Passes`) only says what it needs: it yields
a pass's spec — or, when it keeps rows that may stand in for the file (invariant 4 of
docs/streaming.md), a :class:`~calcheck._typing.FromKept` naming them; :func:`one_pass`
yields either and types the state it is sent back.  The runner (:func:`drive` for one
computation, :func:`drive_lockstep` for many in shared passes) serves each pass from kept
rows when one of them :meth:`~calcheck._typing.Kept.serves` it, and otherwise from the
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

from collections.abc import Hashable, Sequence
from typing import Protocol, TypeVar, cast

from calcheck._threads import map_two
from calcheck._typing import FromKept, IntArray, Kept, Passes, PassItem, PassSpec, PassState
from calcheck.errors import CalcheckError
from calcheck.streaming.views import CHUNK, SubStream, ViewsSpec
from calcheck.tuning import Tuning

T = TypeVar("T")
S = TypeVar("S", bound=PassState)
K = TypeVar("K", bound=Hashable)
Spec = PassSpec[PassState]


class Source(Protocol):
    """Where the passes that no kept rows serve read their rows: a file or dataset in this
    process or on Dask (:class:`~calcheck.streaming.engine.StreamSource`), or arrays in tests
    (``tests.arrays.ArraySource``); it counts those passes."""

    file_passes: int
    tuning: Tuning

    def run(self, spec: PassSpec[S], labels: IntArray | None = None, /) -> tuple[S, object]:
        """One pass: the merged state and the read statistics (None for arrays)."""

    def id_bound(self, n: int) -> int:
        """An upper bound of the row ids of a pass over ``n`` rows."""


def one_pass(spec: PassSpec[S], kept: tuple[Kept, ...] = ()) -> Passes[S]:
    """Yield one pass of ``spec`` (with ``kept`` rows that may serve it) and return its state,
    typed as the spec's: how a computation asks for a pass."""
    state = yield (FromKept(spec, kept) if kept else spec)
    return cast(S, state)


def served(item: PassItem, kept: Sequence[Kept] = ()) -> tuple[Spec, PassState | None]:
    """(the spec of a yielded ``item``, its state from kept rows — the item's own, then the
    run's ``kept`` — or None when the pass must read the source)."""
    spec, own = (item.spec, item.kept) if isinstance(item, FromKept) else (item, ())
    for rows in (*own, *kept):
        if rows.serves(spec):
            return spec, rows.state(spec)
    return spec, None


def run_pass(source: Source, item: PassItem, kept: Sequence[Kept] = ()) -> PassState:
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


def _guarded(passes: Passes[T]) -> Passes[T | CalcheckError]:
    """``passes``, with a :class:`CalcheckError` returned as the result instead of raised."""
    try:
        return (yield from passes)
    except CalcheckError as exc:
        return exc


def drive_lockstep(source: Source, computations: dict[K, tuple[SubStream, Passes[T]]], *,
                   view: str = "top", by: str | None = None, rows: dict[K, int] | None = None,
                   max_rows: int = 0, chunk: int = CHUNK, labels: IntArray | None = None
                   ) -> dict[K, T | CalcheckError]:
    """Run the computations ``chunk`` at a time, each chunk together (one pass per round for
    all that need one): the result by key.  A computation that raises a
    :class:`CalcheckError` (say, a group too small for a metric) gets it as its result.

    A pass whose spec ``holds_rows`` (the exact PAVA pass keeps every row of its sub-stream)
    counts ``rows[key]`` rows; a round takes such passes only while they hold at most
    ``max_rows`` rows in all (always at least one), the others wait for a later round.
    ``labels``: every row's class, kept by the first pass, for the source's reads of class
    sub-streams (:meth:`calcheck.streaming.engine.StreamSource.run`)."""
    results: dict[K, T | CalcheckError] = {}
    items = list(computations.items())
    for i in range(0, len(items), chunk):
        _lockstep(source, dict(items[i:i + chunk]), view, by, rows or {}, max_rows, labels,
                  results)
    return results


def _lockstep(source: Source, computations: dict[K, tuple[SubStream, Passes[T]]],
              view: str, by: str | None, rows: dict[K, int], max_rows: int,
              labels: IntArray | None, results: dict[K, T | CalcheckError]) -> None:
    """One chunk of :func:`drive_lockstep` (results into ``results``)."""
    pending: dict[K, tuple[SubStream, Spec, Passes[T | CalcheckError]]] = {}

    def step(key: K, sub: SubStream, gen: Passes[T | CalcheckError],
             sent: PassState | None) -> None:
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

    def held(key: K) -> int:
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
