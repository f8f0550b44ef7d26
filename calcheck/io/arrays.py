"""Arrow arrays as numpy arrays and back, without pandas: pyarrow's own ``to_numpy`` and
``pa.array`` import pandas (a fifth of a small run's time) to check what they are given."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

NUMPY_TYPES = {pa.float64(): np.float64, pa.float32(): np.float32, pa.int64(): np.int64,
                pa.int32(): np.int32, pa.int16(): np.int16, pa.int8(): np.int8,
                pa.uint64(): np.uint64, pa.uint32(): np.uint32, pa.uint16(): np.uint16,
                pa.uint8(): np.uint8}


def numpy_of(col: Any) -> np.ndarray:
    """An Arrow array or chunked array as numpy.  Numbers and booleans without nulls are read
    from the Arrow buffers directly (pyarrow's own ``to_numpy`` imports pandas, a fifth of a
    small run's time); anything else goes through ``to_numpy``."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    parts = []
    for a in chunks:
        dt = NUMPY_TYPES.get(a.type)
        if len(a) == 0:
            continue
        if a.null_count == 0 and dt is not None:
            size = np.dtype(dt).itemsize
            parts.append(np.frombuffer(a.buffers()[1], dtype=dt, count=len(a),
                                       offset=a.offset * size))
        elif a.null_count == 0 and pa.types.is_boolean(a.type):
            bits = np.frombuffer(a.buffers()[1], dtype=np.uint8)
            parts.append(np.unpackbits(bits, count=a.offset + len(a),
                                       bitorder="little")[a.offset:].astype(bool))
        else:
            parts.append(a.to_numpy(zero_copy_only=False))
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return np.asarray(pa.chunked_array([], type=col.type).to_numpy())
    return np.concatenate(parts)


def arrow_of(values: Any, type_: Any) -> Any:
    """A numpy array without nulls as an Arrow array of ``type_`` over the same memory."""
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(values)])
