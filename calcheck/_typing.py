"""Type aliases shared across calcheck."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol, TypeVar, Union

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
JSONValue = Union[None, bool, int, float, str, list[Any], dict[str, Any]]

T = TypeVar("T")
Passes = Generator[Any, Any, T]
"""A streamed computation that needs passes over the data: it yields each pass's spec, is sent
the merged state of that pass, and returns its result (:func:`calcheck.streaming.runner.drive`
runs one on a source; :func:`calcheck.streaming.runner.drive_lockstep` runs many in shared
passes)."""

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

