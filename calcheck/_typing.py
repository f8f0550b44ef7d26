"""Type aliases shared across calcheck."""

from __future__ import annotations

from typing import Any, Union

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
JSONValue = Union[None, bool, int, float, str, list[Any], dict[str, Any]]
