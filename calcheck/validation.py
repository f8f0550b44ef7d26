"""The one home of calcheck's input checks.

Every check takes ``where=`` naming what is checked (``"scores"`` from the Python API,
``"preds.csv: column 'score'"`` from the file reader) and ``row_base=`` so that messages
number rows the way the user sees them: 1 = first data row of a file (header excluded),
0 = first element of an array.  Messages look like::

    preds.csv: column 'score': 3 values outside [0, 1]; first at rows 17, 40, 112 (e.g. 1.37)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from calcheck._typing import BoolArray, FloatArray, IntArray
from calcheck.errors import InputError, UsageError
from calcheck.limits import bins_in_range

MAX_SHOWN = 3


def _fmt_value(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return repr(float(v)) if not np.isfinite(v) else f"{float(v):.6g}"
    return repr(v.item() if isinstance(v, np.generic) else v)


def describe_rows(mask: BoolArray, values: Any = None, *, row_base: int = 1) -> str:
    """Say where ``mask`` is true: ``"first at rows 17, 40 (e.g. 1.37)"``."""
    idx = np.flatnonzero(mask)[:MAX_SHOWN]
    word = "index" if row_base == 0 else "row"     # 0: array positions; >= 1: file rows
    words = word + ("s" if len(idx) > 1 else "") if word == "row" else (
        "indices" if len(idx) > 1 else "index")
    text = f"first at {words} " + ", ".join(str(int(i) + row_base) for i in idx)
    if values is not None and len(idx):
        shown = ", ".join(_fmt_value(values[i]) for i in idx)
        text += f" (e.g. {shown})"
    return text


def _fail(where: str, what: str, mask: BoolArray, values: Any, row_base: int) -> InputError:
    n_bad = int(mask.sum())
    noun = "value" if n_bad == 1 else "values"
    rows = [int(i) + row_base for i in np.flatnonzero(mask)[:MAX_SHOWN]]
    return InputError(f"{where}: {n_bad} {noun} {what}; {describe_rows(mask, values, row_base=row_base)}",
                      rows=rows)


def as_float_array(x: ArrayLike, *, where: str) -> FloatArray:
    """Convert to a 1-D float64 array or raise naming ``where``."""
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: not numeric ({exc})") from None
    if arr.ndim != 1:
        raise InputError(f"{where}: expected a 1-D array, got shape {arr.shape}")
    return arr


def invalid_score_masks(scores: FloatArray) -> dict[str, BoolArray]:
    """Masks of the invalid scores by reason: ``missing`` (NaN), ``infinite``, ``out_of_range``."""
    nan = np.isnan(scores)
    inf = np.isinf(scores)
    with np.errstate(invalid="ignore"):
        out = ~nan & ~inf & ((scores < 0.0) | (scores > 1.0))
    return {"missing": nan, "infinite": inf, "out_of_range": out}


_SCORE_WHAT = {
    "missing": "missing (NaN or empty)",
    "infinite": "infinite",
    "out_of_range": "outside [0, 1]",
}


def check_scores(scores: ArrayLike, *, where: str = "scores", row_base: int = 0) -> FloatArray:
    """Return ``scores`` as float64, raising :class:`InputError` unless all are finite in [0, 1]."""
    arr = as_float_array(scores, where=where)
    if in_unit(arr):
        return arr
    for reason, mask in invalid_score_masks(arr).items():
        if mask.any():
            raise _fail(where, _SCORE_WHAT[reason], mask, arr, row_base)
    raise AssertionError("unreachable")  # pragma: no cover


_ONE_BITS = int(np.float64(1.0).view(np.uint64))


def in_unit(arr: np.ndarray) -> bool:
    """Whether every value of a float64 array is in [0, 1] (NaN and ±inf are not), in one
    integer maximum over the bit patterns — half the time of a minimum and a maximum.
    Non-negative doubles order as their patterns, so every pattern above 1.0's is a value
    above 1, +inf or NaN, and a set sign bit (a negative value, −NaN or −0.0) is larger still;
    only −0.0, which is in [0, 1], then needs the comparisons."""
    if arr.size == 0:
        return True
    if arr.dtype == np.float64 and int(arr.view(np.uint64).max()) <= _ONE_BITS:
        return True
    return bool(arr.min() >= 0.0 and arr.max() <= 1.0)   # NaN fails both comparisons


def zero_one(arr: np.ndarray) -> bool:
    """Whether integer or boolean ``arr`` holds only 0 and 1, in one pass: the OR of all values
    has no bit but the lowest (a negative value sets the sign bit).  Other dtypes: False."""
    if arr.dtype.kind == "b":
        return True
    return arr.dtype.kind in "iu" and (not arr.size or not int(np.bitwise_or.reduce(arr)) & ~1)


def check_binary_labels(labels: ArrayLike, *, where: str = "labels", row_base: int = 0) -> IntArray:
    """Return 0/1 labels as int64 (booleans and 0.0/1.0 accepted) or raise :class:`InputError`."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise InputError(f"{where}: expected a 1-D array, got shape {arr.shape}")
    if arr.dtype == np.bool_:
        return arr.astype(np.int64)
    if arr.dtype.kind not in "iuf":
        raise InputError(
            f"{where}: labels are not numeric (e.g. {_fmt_value(arr[0]) if arr.size else '?'}); "
            "give 0/1 or booleans, or name the positive class with --pos-label")
    if arr.dtype.kind == "f":
        nan = np.isnan(arr)
        if nan.any():
            raise _fail(where, "missing (NaN or empty)", nan, arr, row_base)
    if arr.size and zero_one(arr):
        return np.asarray(arr, dtype=np.int64)
    bad = (arr != 0) & (arr != 1)
    if bad.any():
        raise _fail(where, "not 0 or 1 (labels must be binary)", bad, arr, row_base)
    return np.asarray(arr, dtype=np.int64)


def check_probabilities(probs: ArrayLike, *, where: str = "probs", tol: float = 1e-6,
                        renormalize: bool = False) -> FloatArray:
    """Return an (n, K) float64 matrix of class probabilities (K >= 2, finite, in [0, 1], rows
    summing to 1 within ``tol``; ``renormalize`` divides the rows by their sums instead)."""
    try:
        arr = np.array(probs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: not numeric ({exc})") from None
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise InputError(f"{where}: expected an (n, K) array with K >= 2 classes, got shape "
                         f"{arr.shape}")
    flat = arr.reshape(-1)
    if not in_unit(flat):
        for reason, mask in invalid_score_masks(flat).items():
            if mask.any():
                rows = np.asarray(mask.reshape(arr.shape).any(axis=1), dtype=bool)
                raise _fail(where, f"rows with a probability {_SCORE_WHAT[reason]}", rows,
                            None, 0)
    sums = arr.sum(axis=1)
    off = np.abs(sums - 1.0) > tol
    if off.any():
        if renormalize and (sums > 0).all():
            arr /= sums[:, None]
        else:
            raise _fail(where, f"rows that do not sum to 1 (within {tol:g})", off, sums, 0)
    return arr


def check_class_labels(labels: ArrayLike, k: int, *, where: str = "labels") -> IntArray:
    """Return class indices 0..k−1 as int64 or raise :class:`InputError`."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise InputError(f"{where}: expected a 1-D array, got shape {arr.shape}")
    if arr.dtype.kind not in "iuf":
        raise InputError(f"{where}: class labels must be integers 0..{k - 1}")
    bad = (arr != np.round(arr)) | (arr < 0) | (arr >= k)
    if arr.dtype.kind == "f":
        bad |= np.isnan(arr)
    if bad.any():
        raise _fail(where, f"not a class index 0..{k - 1}", bad, arr, 0)
    return arr.astype(np.int64)


def check_same_length(*arrays: Sequence[Any] | np.ndarray, names: Sequence[str]) -> int:
    """Return the common length or raise naming the lengths found."""
    lengths = [len(a) for a in arrays]
    if len(set(lengths)) > 1:
        found = ", ".join(f"{n}={k}" for n, k in zip(names, lengths))
        raise InputError(f"inconsistent numbers of samples: {found}")
    return lengths[0] if lengths else 0


def check_nonempty(n: int, *, where: str) -> None:
    """Raise when there is nothing to compute on."""
    if n == 0:
        raise InputError(f"{where}: no rows to compute on")


def check_bins(bins: Any, *, name: str = "bins", minimum: int = 1) -> int:
    """Validate a bin count: an integer, in the range every entry point shares
    (:func:`calcheck.limits.bins_in_range`)."""
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)):
        raise UsageError(f"{name} must be an integer >= {minimum}, got {bins!r}")
    return bins_in_range(int(bins), name, minimum)


def check_alpha(alpha: float, *, name: str = "alpha") -> float:
    """Validate a significance level in the open interval (0, 1)."""
    a = float(alpha)
    if not (0.0 < a < 1.0):
        raise UsageError(f"{name} must be in the open interval (0, 1), got {alpha!r}")
    return a


def check_p(p: int, *, name: str = "p") -> int:
    """Validate the norm of an ECE (1 or 2)."""
    if p not in (1, 2):
        raise UsageError(f"{name} must be 1 or 2, got {p!r}")
    return int(p)
