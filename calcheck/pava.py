"""PAVA and PAVA-BC (TCE paper, Definition 3, Algorithms 2 and 3, Appendix A/B): the block
sizes of the pool-adjacent-violators binning with size bounds, over sorted labels (or tie groups'
mean labels), by the paper's scan (:func:`pava_bc_runs`) or numba's compiled copy of it
(:mod:`calcheck._pava_compiled`, loaded when a scan is worth it), and over blocks of rows
(:func:`pava_bc_blocks`, the stream engine's form beyond its exact budget).
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import (
    distinct,
    range_positions,
    run_starts,
    segment_sums,
    shared_labels,
    tie_bounds,
    tied_groups,
)

Number = int | float


def label_runs(values: np.ndarray) -> tuple[list[Number], list[int]]:
    """Runs of equal per-row values (labels, or tie-group mean labels): (values, lengths).
    Whole values are kept as Python ints, so 0/1 labels are compared exactly."""
    if values.shape[0] == 0:
        return [], []
    starts, lengths = run_starts(values)
    vals = [int(v) if float(v).is_integer() else float(v) for v in values[starts].tolist()]
    return vals, lengths.tolist()


def pava_bc_runs(values: list[Number], lengths: list[int], n_min: int,
                 n_max: int) -> list[int]:
    """Block sizes of PAVA-BC over sorted rows given as runs of equal per-row values.

    Algorithm 2 of Matsubara et al. (2023) in the form of their public code: for
    i = 1 .. n − n_min push the row {y_i, weight 1}; while there is a previous block and
    (w_prev + w_last ≤ n_min) or (w_prev + w_last ≤ n_max and mean_prev ≥ mean_last), merge the
    last block into the previous one.  Then the last n_min rows form a tail block, merged into
    the preceding block when 2·n_min ≤ n_max.  (The paper's printed algorithm tests the
    preceding block's weight + n_min ≤ n_max in the tail step; the code tests 2·n_min ≤ n_max,
    so with the default sizes the tail is always merged and the last bin may exceed n_max.)
    ``n_min = 0, n_max = n + 1`` is plain PAVA (pool adjacent violators, equal means pooled).

    The scan takes a run of r equal rows (value v) in closed-form steps instead of row by row,
    so the Python loop runs once per run plus once per merge.  With top block T and the block B
    below it (a settled pair: w_B + w_T > n_min and not mean_B ≥ mean_T):

    * the next row joins T when w_T + 1 ≤ n_min, or w_T + 1 ≤ n_max and mean_T ≥ v; while
      mean_T ≥ v every row of the run joins T up to n_max (while mean_T < v, up to n_min),
      otherwise the row opens a new block, which later rows of the run fill up to n_max;
    * joining rows lowers mean_T towards v; T falls into B after exactly
      j* = ⌈(w_B·S_T − S_B·w_T)/(S_B − w_B·v)⌉ rows when mean_B > v and w_B + w_T + j* ≤ n_max,
      and the merge cascade then runs as usual.

    Whole values keep the arithmetic in integers, so 0/1 labels are compared exactly.
    """
    n = int(sum(lengths))
    if n_min < 0 or n_max < n_min:
        raise ValueError(f"PAVA-BC needs 0 <= n_min <= n_max, got n_min={n_min}, n_max={n_max}")
    head = max(n - n_min, 0)
    W: list[int] = []         # weights of the blocks below the top
    S: list[Number] = []      # label sums of the blocks below the top
    wt: int = 0               # top block (wt == 0: no block yet)
    st: Number = 0
    left = head
    for v, r in zip(values, lengths):
        if left <= 0:
            break
        r = min(r, left)
        left -= r
        while r:
            if wt == 0:
                wt, st, r = 1, v, r - 1
                continue
            if not (wt + 1 <= n_min or (wt + 1 <= n_max and st >= v * wt)):
                W.append(wt)                       # the row opens a new block
                S.append(st)
                wt, st, r = 1, v, r - 1
                continue
            k = min(r, (n_max if st >= v * wt else n_min) - wt)   # rows that join T
            j = _falls_at(W, S, wt, st, v, n_max) if W else None
            if j is not None and j <= k:
                wb, sb = W.pop(), S.pop()
                wt, st = pava_settle(W, S, wb + wt + j, sb + st + j * v, n_min, n_max)
                r -= j
                continue
            wt, st, r = wt + k, st + k * v, r - k
    if wt:
        W.append(wt)
        S.append(st)
    if n_min > 0 and n > 0:
        pava_tail(W, min(n_min, n), n_min, n_max)
    return W


def _falls_at(W: list[int], S: list[Number], wt: int, st: Number, v: Number,
              n_max: int) -> int | None:
    """After how many rows of value v joining the top block T it falls into the block below
    (mean_B ≥ mean_T and the weight allows), or None."""
    wb, sb = W[-1], S[-1]
    den = sb - wb * v
    if den <= 0:                            # mean_B ≤ v: T's mean never drops to mean_B
        return None
    num = wb * st - sb * wt
    if isinstance(num, int) and isinstance(den, int):
        j = max(1, -(-num // den))
    else:
        j = max(1, math.ceil(num / den))
        while j > 1 and sb * (wt + j - 1) >= wb * (st + (j - 1) * v):  # exact smallest j
            j -= 1
        while sb * (wt + j) < wb * (st + j * v):
            j += 1
    return j if wb + wt + j <= n_max else None


def pava_bc_weights(sorted_labels: np.ndarray, n_min: int, n_max: int) -> list[int]:
    """Block sizes of PAVA-BC over labels sorted by score (:func:`pava_bc_runs`; compiled
    when numba is installed, with identical results)."""
    values = np.asarray(sorted_labels)
    if values.shape[0] == 0:
        return pava_bc_runs([], [], n_min, n_max)
    runs = 1 + int(np.count_nonzero(values[1:] != values[:-1]))   # the loop's runs
    kernel = compiled_pava(values.shape[0], runs)
    if kernel is None:
        return pava_bc_runs(*label_runs(values), n_min, n_max)
    # the compiled scan finds the runs itself
    return _compiled_scan(kernel, values, np.zeros(0, dtype=np.int64), n_min, n_max)


def _compiled_scan(kernel: Any, values: np.ndarray, lengths: IntArray, n_min: int,
                   n_max: int) -> list[int]:
    """numba's PAVA-BC scan of rows (empty ``lengths``) or runs: whole values (0/1 labels)
    summed as int64, others as float64."""
    if n_min < 0 or n_max < n_min:
        raise ValueError(f"PAVA-BC needs 0 <= n_min <= n_max, got n_min={n_min}, "
                         f"n_max={n_max}")
    if values.dtype.kind in "iub":
        integer = True
        rows = values.view(np.int8) if values.dtype.kind == "b" else values
    else:
        rows = np.asarray(values, dtype=np.float64)
        integer = bool(np.all(rows == np.round(rows))) and float(np.abs(rows).max()) < 2 ** 52
        if integer:
            rows = rows.astype(np.int64)
    acc = np.zeros(1, dtype=np.int64 if integer else np.float64)
    return kernel(rows, np.asarray(lengths, dtype=np.int64), int(n_min), int(n_max),  # type: ignore[no-any-return]
                  integer, acc).tolist()


USE_COMPILED = True          # tests switch the compiled scan off to compare the two
COMPILE_AT = 1_000_000       # rows: loading numba's scan costs ~0.4 s, the loop 0.36 µs a run
FEW_RUNS = 1 << 18           # ... but fewer runs than this keep the loop (<= ~0.1 s)
_loop_runs = 0               # runs the Python loop has scanned in this process


def compiled_pava(rows: int, runs: int | None = None) -> Any:
    """numba's compiled PAVA-BC scan for a scan of ``rows`` rows in ``runs`` runs of one value
    (default: as many as rows), or None for the Python loop: numba not installed, switched
    off (``CALCHECK_NO_NUMBA=1``), or not worth loading yet — the scan is loaded when this
    call has :data:`COMPILE_AT` rows in at least :data:`FEW_RUNS` runs (a scan of rare
    positives, or rare negatives, walks few runs: the loop takes < 0.1 s, and numba's ~120 MB
    of resident compiler stay out of memory), or when all the loop's calls so far (a
    bootstrap's replicates) reach COMPILE_AT runs, so its one-off cost stays below the time
    it saves."""
    global _loop_runs
    if not USE_COMPILED or os.environ.get("CALCHECK_NO_NUMBA"):
        return None
    runs = rows if runs is None else runs
    if "calcheck._pava_compiled" not in sys.modules and \
            (rows < COMPILE_AT or runs < FEW_RUNS) and runs + _loop_runs < COMPILE_AT:
        _loop_runs += runs
        return None
    try:
        from calcheck._pava_compiled import pava_bc_runs_kernel
    except Exception:                           # numba missing or unusable: the Python loop
        return None
    return pava_bc_runs_kernel


def preload_compiled_pava(rows: int, positives: int | None = None) -> None:
    """Load numba's PAVA-BC scan on a background thread when a scan of ``rows`` 0/1 labels
    (``positives`` of them 1, when known) will use it (:func:`compiled_pava`): its import and
    its first signature cost ~0.4 s of mostly one core, which then overlaps the work before
    the scan (reading and sorting the rows).  A later call waits for the load (the import
    lock, numba's compiler lock).  The rows hold at most 2·min(positives, negatives) + 1 runs
    of one label: fewer than :data:`FEW_RUNS` (rare positives, or rare negatives) keep the
    loop, and numba's ~120 MB of resident compiler unloaded."""
    import threading

    def load() -> None:
        kernel = compiled_pava(rows)
        if kernel is not None:                          # int8 labels: sorted unpacked keys
            kernel(np.zeros(2, dtype=np.int8), np.zeros(0, dtype=np.int64), 1, 2, True,
                   np.zeros(1, dtype=np.int64))

    runs = rows if positives is None else min(rows, 2 * min(positives, rows - positives) + 1)
    if rows >= COMPILE_AT and runs >= FEW_RUNS and "calcheck._pava_compiled" not in sys.modules:
        threading.Thread(target=load, daemon=True).start()


def pava_settle(W: list[int], S: list[Number], wt: int, st: Number, n_min: int,
                n_max: int) -> tuple[int, Number]:
    """PAVA-BC's merge cascade: pop the blocks below (weights ``W``, label sums ``S``) into the
    top block (``wt``, ``st``) while w_prev + w_top ≤ n_min, or ≤ n_max with
    mean_prev ≥ mean_top (compared by cross-multiplication, exactly for whole sums)."""
    while W:
        wb, sb = W[-1], S[-1]
        w = wb + wt
        if w <= n_min or (w <= n_max and sb * wt >= st * wb):
            W.pop()
            S.pop()
            wt, st = w, sb + st
        else:
            break
    return wt, st


def pava_tail(W: list[int], tail: int, n_min: int, n_max: int) -> None:
    """The authors' tail step: the last rows join the last block when 2·n_min ≤ n_max."""
    if W and 2 * n_min <= n_max:
        W[-1] += tail
    else:
        W.append(tail)


def pava_bc_blocks(block_n: IntArray, block_pos: np.ndarray, n_min: int,
                   n_max: int) -> IntArray:
    """Bounds of PAVA-BC run on pre-pooled blocks of sorted rows (the streaming engines' form
    beyond the rows they can hold): each non-empty block enters whole (weight N_c, sum K_c)
    instead of as N_c single rows; the merge rule and the tail step are the row algorithm's,
    so bins end at block boundaries.  ``n_min = 0, n_max = n + 1`` is plain PAVA."""
    occ = np.flatnonzero(block_n)
    w_all = block_n[occ].tolist()
    s_all = [int(v) if float(v).is_integer() else float(v) for v in block_pos[occ].tolist()]
    n = int(sum(w_all))
    W: list[int] = []
    S: list[Number] = []
    used = 0
    i = 0
    while i < len(w_all) and (n_min == 0 or used + w_all[i] <= n - n_min):
        used += w_all[i]
        wt, st = pava_settle(W, S, w_all[i], s_all[i], n_min, n_max)
        i += 1
        W.append(wt)
        S.append(st)
    if n - used:
        pava_tail(W, n - used, n_min, n_max)
    return np.concatenate(([0], np.cumsum(W, dtype=np.int64))).astype(np.int64)


def pava_bc_bounds(sorted_labels: np.ndarray, n_min: int, n_max: int, *,
                   sorted_scores: FloatArray | None = None) -> IntArray:
    """Cut positions of the PAVA-BC blocks; with ``sorted_scores`` (shared ties) every tied row
    takes its tie group's mean label, so equal scores are pooled."""
    runs = None if sorted_scores is None else tied_label_runs(sorted_scores, sorted_labels)
    if runs is not None:
        w = pava_bc_runs(*runs, n_min, n_max)
    elif sorted_scores is not None and (arrays := shared_label_runs(
            sorted_scores, sorted_labels)) is not None:
        w = pava_bc_run_weights(*arrays, n_min, n_max)
    else:
        labels = sorted_labels if sorted_scores is None else \
            shared_labels(sorted_scores, sorted_labels)
        w = pava_bc_weights(labels, n_min, n_max)
    return np.concatenate(([0], np.cumsum(w, dtype=np.int64))).astype(np.int64)


FEW_CHANGES = 16             # labels that change at most once in this many rows: runs


def shared_label_runs(sorted_scores: FloatArray, sorted_labels: np.ndarray
                      ) -> tuple[np.ndarray, IntArray] | None:
    """The runs of :func:`shared_labels` — (float64 values, lengths), the runs
    :func:`label_runs` finds in its rows — without its per-row float64 labels, when some
    scores tie and the labels change at most once in :data:`FEW_CHANGES` rows (rare
    positives, or rare negatives: the scan then walks few runs, and the n-row float array
    was most of its time and 8 bytes a row of memory).  The sorted rows are cut where a label
    changes and where a tie group starts or ends; a piece in a tie group takes the group's
    mean (its labels summed as :func:`shared_labels` sums them: ``reduceat`` over the group's
    float64 labels), any other its label, and equal neighbours join.  None otherwise (no ties: the labels are
    their own runs; frequent changes: the per-row scan)."""
    s = np.asarray(sorted_scores)
    y = np.asarray(sorted_labels)
    n = s.shape[0]
    if n < 2:
        return None
    differs = y[1:] != y[:-1]
    if np.count_nonzero(differs) > n // FEW_CHANGES:
        return None
    groups = tied_groups(s)
    if groups is None:
        return None
    starts, ends = groups
    change = np.flatnonzero(differs) + 1                     # a row whose label differs
    del differs
    width = ends - starts
    at = np.concatenate(([0], np.cumsum(width[:-1])))       # each group in the tied rows
    means = np.add.reduceat(y[range_positions(starts, width)].astype(np.float64), at) / width
    piece = distinct(np.concatenate(([0], change, starts, ends[ends < n])))
    g = np.searchsorted(starts, piece, side="right") - 1
    gg = np.maximum(g, 0)
    inside = (g >= 0) & (piece < ends[gg])
    value = np.where(inside, means[gg], y[piece].astype(np.float64))
    first = np.flatnonzero(np.concatenate(([True], value[1:] != value[:-1])))
    lengths = np.diff(np.append(piece[first], n)).astype(np.int64)
    return value[first], lengths


def pava_bc_run_weights(values: np.ndarray, lengths: IntArray, n_min: int,
                        n_max: int) -> list[int]:
    """:func:`pava_bc_runs` of runs given as arrays (float64 values): numba's scan when
    :func:`compiled_pava` takes it for these rows and runs (identical results), else the
    Python loop."""
    rows = int(lengths.sum())
    kernel = compiled_pava(rows, int(values.shape[0]))
    if kernel is None:
        vals = [int(v) if float(v).is_integer() else float(v) for v in values.tolist()]
        return pava_bc_runs(vals, lengths.tolist(), n_min, n_max)
    return _compiled_scan(kernel, values, lengths, n_min, n_max)


def tied_label_runs(sorted_scores: FloatArray, sorted_labels: np.ndarray
                    ) -> tuple[list[Number], list[int]] | None:
    """:func:`label_runs` of :func:`shared_labels`, from the tie groups themselves, when the
    scores hold at most one distinct value per 8 rows (rounded probabilities, a model with few
    outputs): the PAVA-BC scan then walks a few runs, without the per-row float64 labels
    (8 bytes a row) or loading the compiled scan.  None otherwise (no ties, or many groups:
    the per-row scan)."""
    n = sorted_scores.shape[0]
    if n < 2 or np.count_nonzero(sorted_scores[1:] != sorted_scores[:-1]) + 1 > n // 8:
        return None
    t = tie_bounds(sorted_scores)
    w = np.diff(t)
    means = segment_sums(np.asarray(sorted_labels), t) / np.maximum(w, 1)
    starts = np.flatnonzero(np.concatenate(([True], means[1:] != means[:-1])))
    lengths = np.add.reduceat(w, starts)
    vals = [int(v) if float(v).is_integer() else float(v) for v in means[starts].tolist()]
    return vals, lengths.tolist()


def pava_bounds(sorted_labels: np.ndarray, *,
                sorted_scores: FloatArray | None = None) -> IntArray:
    """Cut positions of plain PAVA blocks: PAVA-BC with n_min = 0 and n_max = n + 1."""
    return pava_bc_bounds(sorted_labels, 0, int(sorted_labels.shape[0]) + 1,
                          sorted_scores=sorted_scores)


def default_pava_bc_sizes(n: int) -> tuple[int, int]:
    """The TCE paper's default bin-size constraints, n_min = ⌊n/20⌋ and n_max = ⌊n/5⌋."""
    return n // 20, n // 5
