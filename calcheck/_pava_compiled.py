"""PAVA-BC's scan compiled with numba (the optional ``fast`` extra): the same run-compressed
algorithm as :func:`calcheck.pava.pava_bc_runs`, step for step — integer arithmetic for
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

from calcheck._hooks import arraymath_without_scipy_linalg

arraymath_without_scipy_linalg()


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
def _stack_room(values: Any, lengths: Any, n_min: int, n_max: int) -> Any:
    """(rows n, rows before the tail, slots the block stack needs) of
    :func:`pava_bc_runs_kernel`'s input.  A block is pushed below the top when it holds more
    than n_min rows (so with n_min > 0 the stack holds at most head/n_min of them), and a run
    of equal values pushes at most at its first row, where the top block reaches n_min, and at
    each n_max rows: the stack (plus the last top block and the tail) never needs more slots
    than that."""  # pragma: no cover - compiled
    n = values.shape[0] if lengths.shape[0] == 0 else 0
    for r in lengths:
        n += r
    head = max(n - n_min, 0)
    cap = 2 * values.shape[0] + head // max(n_max, 1) + 3
    if n_min > 0:
        cap = min(cap, head // n_min + 3)
    cap = min(cap, head + 3)
    return n, head, cap


@njit(cache=True)
def pava_bc_runs_kernel(values: Any, lengths: Any, n_min: int, n_max: int,
                        integer: bool, acc: Any) -> Any:  # pragma: no cover - compiled
    """Block sizes of PAVA-BC over runs (``values``, ``lengths``), as
    :func:`calcheck.pava.pava_bc_runs`.  Empty ``lengths``: ``values`` are the rows
    themselves and their runs are found here (no run arrays).  Sums are kept in ``acc``'s
    dtype (int64 for whole values, float64 otherwise), whatever the dtype of ``values``."""
    m = values.shape[0]
    per_row = lengths.shape[0] == 0
    n, head, cap = _stack_room(values, lengths, n_min, n_max)
    W = np.empty(cap, np.int64)
    S = np.empty(cap, acc.dtype)
    k = 0
    wt = 0
    zero = acc[0] - acc[0]
    st = zero
    left = head
    i = 0
    while i < m:
        if left <= 0:
            break
        v = values[i] + zero
        if per_row:
            j0 = i + 1
            while j0 < m and values[j0] == values[i]:
                j0 += 1
            r = min(j0 - i, left)
            i = j0
        else:
            r = min(lengths[i], left)
            i += 1
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
