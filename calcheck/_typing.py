"""Type aliases shared across calcheck."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, Union

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
JSONValue = Union[None, bool, int, float, str, list[Any], dict[str, Any]]

T = TypeVar("T")
S = TypeVar("S", bound="PassState")
S_co = TypeVar("S_co", bound="PassState", covariant=True)


class PassState(Protocol):
    """A pass's partial state: it folds validated batches (``start``: the id of the batch's
    first row; some states also take the batch's extra columns after it) and merges with a
    state of the same spec (docs/streaming.md, invariants 1, 9, 10)."""

    def update(self: S, scores: FloatArray, labels: IntArray, start: int, /) -> S: ...

    def merge(self: S, other: S, /) -> S: ...


class PassSpec(Protocol[S_co]):
    """What a pass computes: picklable, hashable data that makes each worker's empty state."""

    def new(self) -> S_co: ...


class Kept(Protocol):
    """Rows kept in memory that can make some passes' states exactly as the file would
    (:mod:`calcheck.streaming.runner`)."""

    def serves(self, spec: PassSpec[PassState], /) -> bool:
        """Whether :meth:`state` gives this pass's state (the rows it reads are all kept)."""

    def state(self, spec: PassSpec[PassState], /) -> PassState:
        """The state a pass of ``spec`` over the file would give."""


@dataclass(frozen=True)
class FromKept:
    """A computation's pass that ``kept`` rows may serve (the runner decides)."""

    spec: PassSpec[PassState]
    kept: tuple[Kept, ...]


PassItem = Union[PassSpec[PassState], FromKept]
"""What a computation yields for a pass: its spec, or its spec with rows that may serve it."""

Passes = Generator[PassItem, PassState, T]
"""A streamed computation that needs passes over the data: it yields each pass (a
:data:`PassItem`), is sent the merged state of that pass, and returns its result
(:func:`calcheck.streaming.runner.drive` runs one on a source;
:func:`calcheck.streaming.runner.drive_lockstep` runs many in shared passes).
:func:`calcheck.streaming.runner.one_pass` yields one pass and gives its state its type."""
