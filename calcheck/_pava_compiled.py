"""PAVA-BC's scan compiled with numba (the optional ``fast`` extra): the same run-compressed
algorithm as :func:`calcheck.binning.pava_bc_runs`, step for step — integer arithmetic for
whole values (0/1 labels), float64 otherwise, in the same order of operations — so the block
sizes are identical; tests compare the two on random inputs.  30–80× faster than the Python
loop (10^6 rows: 2 ms instead of 0.18 s).  Imported only when TCE runs; without numba the
Python loop runs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit


@njit(cache=True)
def _falls_at(wb: Any, sb: Any, wt: Any, st: Any, v: Any, n_max: int,
              integer: bool) -> int:  # pragma: no cover - compiled
    den = sb - wb * v
    if den <= 0:
        return -1
    num = wb * st - sb * wt
    if integer:
        j = -((-num) // den)
        if j < 1:
            j = 1
    else:
        j = max(1, int(math.ceil(num / den)))  # noqa: RUF046 (an int64 in numba)
        while j > 1 and sb * (wt + j - 1) >= wb * (st + (j - 1) * v):
            j -= 1
        while sb * (wt + j) < wb * (st + j * v):
            j += 1
    return j if wb + wt + j <= n_max else -1


@njit(cache=True)
def pava_bc_runs_kernel(values: Any, lengths: Any, n_min: int, n_max: int,
                        integer: bool) -> Any:  # pragma: no cover - compiled
    """Block sizes of PAVA-BC over runs (``values``, ``lengths``), as
    :func:`calcheck.binning.pava_bc_runs`."""
    n = 0
    for r in lengths:
        n += r
    head = max(n - n_min, 0)
    W = np.empty(head + 2, np.int64)
    S = np.empty(head + 2, values.dtype)
    k = 0
    wt = 0
    zero = values[0] - values[0]
    st = zero
    left = head
    for idx in range(values.shape[0]):
        if left <= 0:
            break
        v = values[idx]
        r = min(lengths[idx], left)
        left -= r
        while r > 0:
            if wt == 0:
                wt = 1
                st = v
                r -= 1
                continue
            if not (wt + 1 <= n_min or (wt + 1 <= n_max and st >= v * wt)):
                W[k] = wt
                S[k] = st
                k += 1
                wt = 1
                st = v
                r -= 1
                continue
            kk = min(r, (n_max if st >= v * wt else n_min) - wt)
            j = _falls_at(W[k - 1], S[k - 1], wt, st, v, n_max, integer) if k > 0 else -1
            if j != -1 and j <= kk:
                k -= 1
                wt = W[k] + wt + j
                st = S[k] + st + j * v
                while k > 0:
                    w2 = W[k - 1] + wt
                    if w2 <= n_min or (w2 <= n_max and S[k - 1] * wt >= st * W[k - 1]):
                        k -= 1
                        st = S[k] + st
                        wt = w2
                    else:
                        break
                r -= j
                continue
            wt += kk
            st += kk * v
            r -= kk
    if wt:
        W[k] = wt
        S[k] = st
        k += 1
    if n_min > 0 and n > 0:
        tail = min(n_min, n)
        if k > 0 and 2 * n_min <= n_max:
            W[k - 1] += tail
        else:
            W[k] = tail
            k += 1
    return W[:k].copy()
