"""Type aliases shared across calcheck."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar, Union

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
