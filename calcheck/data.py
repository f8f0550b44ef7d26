"""Predictions: binary scores or class probabilities with their labels, validated once.

:class:`Predictions` is what every in-memory computation reads — from a file
(:mod:`calcheck.io`), a DataFrame or Arrow table, or arrays the user built::

    calcheck.Predictions(scores=s, labels=y)                 # binary
    calcheck.Predictions(probs=P, labels=c)                  # multiclass, (n, K)

It carries the one **top-label view** of multiclass input (confidence = max_k p_ik,
prediction = argmax with ties to the lowest index as numpy does, correct = 1[prediction =
label]), the extra columns a run needs (``--by``, ``--var``, ``--correct-from``) and where the
data came from (the report's ``input`` section).

This module also resolves columns by name: the score, label and probability columns found by
their usual names, with a "did you mean" hint for a typo.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from calcheck._typing import FloatArray, IntArray
from calcheck.errors import InputError
from calcheck.weights import Weights

SCORE_NAMES = ("score", "scores", "prob", "proba", "probability", "p", "p_hat", "y_prob",
               "y_score", "pred_prob", "prediction")
LABEL_NAMES = ("label", "labels", "y", "y_true", "target", "outcome", "actual")
PROB_COLUMN = re.compile(r"^prob_(\d+)$", re.IGNORECASE)
ROW_SUM_TOL = 1e-6
_TOP_ROWS = 16_384          # rows per piece of top_label_columns (K columns' pieces in cache)


# ---------------------------------------------------------------------------------------------
# the top-label view


def top_label_view(probs: FloatArray, labels: IntArray) -> tuple[FloatArray, IntArray]:
    """Confidence max_k p_ik and correctness 1[argmax_k p_ik = c_i] (ties → lowest index).

    Parameters
    ----------
    probs : ndarray of shape (n, K)
        Class probabilities, rows summing to 1.
    labels : ndarray of shape (n,)
        True class indices in 0..K−1.

    Returns
    -------
    confidence : ndarray of shape (n,), float64
    correct : ndarray of shape (n,), int64
    """
    pred = np.argmax(probs, axis=1)          # numpy returns the first maximum: lowest index
    conf = probs[np.arange(probs.shape[0]), pred]
    return np.ascontiguousarray(conf, dtype=np.float64), (pred == labels).astype(np.int64)


def top_label_columns(columns: Sequence[FloatArray], labels: IntArray
                      ) -> tuple[FloatArray, IntArray]:
    """:func:`top_label_view` of K probability columns (finite values), column by column:
    the largest probability, then the first class that reaches it (classes from the last to
    the first, each overwriting) — the same confidences and classes, without the (n, K)
    matrix.  In pieces of :data:`_TOP_ROWS` rows that stay in cache."""
    n = int(columns[0].shape[0]) if len(columns) else 0
    conf = np.empty(n, dtype=np.float64)
    pred = np.empty(n, dtype=np.int64)
    eq = np.empty(min(n, _TOP_ROWS), dtype=bool)
    for a in range(0, n, _TOP_ROWS):
        rows = slice(a, a + _TOP_ROWS)
        c, p, e = conf[rows], pred[rows], eq[:min(_TOP_ROWS, n - a)]
        np.copyto(c, columns[0][rows])
        for col in columns[1:]:
            np.maximum(c, col[rows], out=c)
        for k in range(len(columns) - 1, -1, -1):
            np.equal(columns[k][rows], c, out=e)
            np.copyto(p, k, where=e)
    return conf, (pred == labels).astype(np.int64)


@dataclass(frozen=True)
class ClassColumns:
    """The K probability columns of a multiclass batch, kept apart: what the streaming passes
    read (a class's column is contiguous, and no (n, K) copy is made).  ``cols[rows]`` selects
    rows of every column."""

    columns: tuple[FloatArray, ...]

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.columns[0].shape[0]) if self.columns else 0, len(self.columns))

    def __getitem__(self, rows: Any) -> ClassColumns:
        return ClassColumns(tuple(c[rows] for c in self.columns))

    def top_label(self, labels: IntArray) -> tuple[FloatArray, IntArray]:
        return top_label_columns(self.columns, labels)


# ---------------------------------------------------------------------------------------------
# provenance and the data


@dataclass
class Provenance:
    """Where predictions came from and what the reader did to them."""

    path: str = "<arrays>"
    format: str = "arrays"
    score_column: str | None = None
    label_column: str | None = None
    prob_columns: list[str] | None = None
    rows_read: int | None = None
    rows_dropped: int = 0
    dropped_by_reason: dict[str, int] = field(default_factory=dict)
    rows_renormalized: int = 0
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Predictions:
    """Binary scores or multiclass probabilities with labels, validated once.

    Parameters
    ----------
    scores : array_like of shape (n,), optional
        Binary input: predicted probabilities of the positive class, finite, in [0, 1].
    probs : array_like of shape (n, K), optional
        Multiclass input: class probabilities (K >= 2), rows summing to 1 within 1e-6.
    labels : array_like of shape (n,)
        0/1 outcomes (binary) or class indices 0..K−1 (multiclass).
    class_names : sequence of str, optional
        Names of the K classes (default "0".."K-1").
    columns : mapping of str to array_like, optional
        Extra columns aligned with the rows, for ``by=``, ``variables=`` and ``correct_from=``.
    validate : bool, default True
        Check the arrays (the file reader has already checked them).
    provenance : Provenance, optional
        Where the data came from (the report's ``input`` section).
    weights : Weights, optional
        Row counts or sampling weights (:mod:`calcheck.weights`).
    """

    def __init__(self, *, labels: ArrayLike, scores: ArrayLike | None = None,
                 probs: ArrayLike | None = None, class_names: Any = None,
                 columns: Mapping[str, ArrayLike] | None = None, validate: bool = True,
                 provenance: Provenance | None = None, weights: Weights | None = None) -> None:
        if (scores is None) == (probs is None):
            raise InputError("give either scores (binary) or probs (multiclass), not both")
        self.provenance = provenance or Provenance()
        if validate:
            from calcheck.validation import (
                check_binary_labels,
                check_class_labels,
                check_nonempty,
                check_probabilities,
                check_same_length,
                check_scores,
            )

            if scores is not None:
                s = check_scores(scores, where="scores")
                y = check_binary_labels(labels, where="labels")
                check_same_length(s, y, names=("scores", "labels"))
                check_nonempty(len(s), where="scores")
                self.scores: FloatArray | None = s
                self.probs: FloatArray | None = None
            else:
                assert probs is not None
                P = check_probabilities(probs, where="probs")
                y = check_class_labels(labels, P.shape[1], where="labels")
                check_same_length(P, y, names=("probs", "labels"))
                check_nonempty(len(y), where="probs")
                self.scores, self.probs = None, P
        else:
            self.scores = None if scores is None else np.asarray(scores, dtype=np.float64)
            self.probs = None if probs is None else np.asarray(probs, dtype=np.float64)
            y = np.asarray(labels)
            if y.dtype.kind not in "iu":              # the reader's int8 0/1 labels stay int8
                y = y.astype(np.int64)
        self.labels: IntArray = y
        k = None if self.probs is None else int(self.probs.shape[1])
        names = None if class_names is None else [str(c) for c in class_names]
        if names is not None and k is not None and len(names) != k:
            raise InputError(f"class_names has {len(names)} names for {k} probability columns")
        self.class_names: list[str] | None = (names or [str(i) for i in range(k)]) \
            if k is not None else None
        cols = {}
        for name, values in (columns or {}).items():
            arr = np.asarray(values)
            if arr.shape[0] != self.n:
                raise InputError(f"column {name!r} has {arr.shape[0]} rows, the predictions "
                                 f"{self.n}")
            cols[str(name)] = arr
        self.columns: dict[str, np.ndarray] = cols
        if weights is not None and weights.values.shape[0] != self.n:
            raise InputError(f"{weights.kind}s: {weights.values.shape[0]} values for {self.n} "
                             "rows")
        self.weights = weights
        # the stable ascending order of binary scores, when a caller knows it (the bootstrap
        # lists its replicates sorted); metrics then skip their sort
        self.sorted_order: IntArray | None = None
        # equal-width bin statistics (BinStats by number of bins) that the file reader folded
        # while reading these rows (calcheck.io.load_predictions); the metrics start from them
        self.uniform_read: dict[int, Any] = {}

    # -- shape --------------------------------------------------------------------------------

    @property
    def n(self) -> int:
        return int(self.labels.shape[0])

    @property
    def multiclass(self) -> bool:
        return self.probs is not None

    @property
    def kind(self) -> str:
        return "multiclass" if self.multiclass else "binary"

    @property
    def classes(self) -> int:
        return 0 if self.probs is None else int(self.probs.shape[1])

    # -- views --------------------------------------------------------------------------------

    @cached_property
    def top(self) -> tuple[FloatArray, IntArray]:
        """(score, label) of the binary view: the scores themselves, or for multiclass input
        the top-label view (confidence, correct)."""
        if self.probs is None:
            assert self.scores is not None
            return self.scores, self.labels
        return top_label_view(self.probs, self.labels)

    @cached_property
    def positives(self) -> int:
        """The number of positive labels (binary) or of correct top-label predictions (0/1
        values either way, so their nonzero count: a quarter of the time of a sum)."""
        return int(np.count_nonzero(self.labels if self.probs is None else self.top[1]))

    def error_view(self) -> tuple[FloatArray, FloatArray]:
        """(pred_error, incorrect) of the top-label view, as variable-based calibration reads
        it; binary scores predict 1 when s >= 0.5, pred_error = 1 − max(s, 1 − s)."""
        if self.probs is not None:
            conf, correct = self.top
            return 1.0 - conf, (1 - correct).astype(np.float64)
        assert self.scores is not None
        s = self.scores
        pred = (s >= 0.5).astype(np.int64)
        return 1.0 - np.maximum(s, 1.0 - s), (pred != self.labels).astype(np.float64)

    def subset(self, mask: np.ndarray) -> Predictions:
        """The rows ``mask`` selects (a boolean mask or row indices)."""
        return Predictions(labels=self.labels[mask],
                           scores=None if self.scores is None else self.scores[mask],
                           probs=None if self.probs is None else self.probs[mask],
                           class_names=self.class_names,
                           columns={k: v[mask] for k, v in self.columns.items()},
                           validate=False, provenance=self.provenance,
                           weights=None if self.weights is None else self.weights.subset(mask))

    def with_weights(self, values: ArrayLike, kind: str, column: str | None,
                     null: str = "auto") -> Predictions:
        """These predictions with row counts or weights (checked: :func:`check_weights`;
        ``null``: :data:`calcheck.weights.NULLS`)."""
        from calcheck.weights import check_weights

        w = check_weights(values, kind, where=f"{kind} {column}" if column else f"{kind}s")
        out = self.subset(np.arange(self.n))
        out.weights = Weights(w, kind, column, null)
        return out

    def column(self, name: str) -> np.ndarray:
        """An extra column."""
        try:
            return self.columns[name]
        except KeyError:
            raise InputError(f"{self.provenance.path}: no column {name!r}; columns given: "
                             f"{', '.join(self.columns) or '(none)'}", column=name) from None

    # -- the report's input section ----------------------------------------------------------

    def input_info(self) -> dict[str, Any]:
        """The ``input`` object of the JSON report (with ``weights`` for weighted rows)."""
        info = self._input_info()
        if self.weights is not None:
            w = self.weights
            y = self.top[1]
            info["weights"] = {**w.info(), "weighted_" + ("accuracy" if self.multiclass else
                                                          "prevalence"):
                               float(np.dot(w.values, y)) / w.total}
            if not w.frequency:                    # the null the tests use, resolved
                regime, cw = w.regime(y)
                info["weights"]["null"] = regime
                if cw is not None:
                    info["weights"]["class_weights"] = {"negative": cw[0], "positive": cw[1]}
        return info

    def _input_info(self) -> dict[str, Any]:
        p = self.provenance
        n = self.n
        read = n + p.rows_dropped if p.rows_read is None else p.rows_read
        if self.probs is None:
            pos = self.positives
            return {"path": p.path, "format": p.format, "score_column": p.score_column,
                    "label_column": p.label_column, "rows_read": read,
                    "rows_dropped": p.rows_dropped,
                    "dropped_by_reason": dict(p.dropped_by_reason), "rows_used": n,
                    "positives": pos, "prevalence": pos / n if n else None}
        correct = self.top[1]
        return {"path": p.path, "format": p.format, "kind": "multiclass",
                "prob_columns": list(p.prob_columns or self.class_names or []),
                "classes": list(self.class_names or []), "label_column": p.label_column,
                "rows_read": read, "rows_dropped": p.rows_dropped,
                "dropped_by_reason": dict(p.dropped_by_reason),
                "rows_renormalized": p.rows_renormalized, "rows_used": n,
                "accuracy": float(correct.mean()) if n else None}


# ---------------------------------------------------------------------------------------------
# choosing columns


def _did_you_mean(name: str, available: list[str]) -> str:
    close = difflib.get_close_matches(name, available, n=1, cutoff=0.6)
    if not close:
        lower = {c.lower(): c for c in available}
        close = [lower[c] for c in difflib.get_close_matches(name.lower(), list(lower), n=1)]
    return f" (did you mean {close[0]!r}?)" if close else ""


def missing_column(source: str, name: str, flag: str, available: list[str]) -> InputError:
    """"no column 'scroe' (--score; did you mean 'score'?); available columns: …"."""
    return InputError(f"{source}: no column {name!r} ({flag}){_did_you_mean(name, available)}; "
                      f"available columns: {', '.join(available) or '(none)'}", column=name)


def resolve_column(available: list[str], explicit: str | None, candidates: tuple[str, ...],
                   role: str, flag: str, source: str) -> str:
    """Pick the column for ``role``: the one named with ``flag`` or the one usual name present."""
    if explicit is not None:
        if explicit in available:
            return explicit
        lower = {c.lower(): c for c in available}
        if explicit.lower() in lower:
            return lower[explicit.lower()]
        raise missing_column(source, explicit, flag, available)
    found = [c for c in available if c.lower() in candidates]
    if len(found) == 1:
        return found[0]
    if not found:
        padded = [c for c in available if c.strip().lower() in candidates]
        hint = (f" (column {padded[0]!r} has spaces around its name)" if padded else "")
        if role == "score" and not padded:
            prefix = shared_prefix(available)
            if prefix:
                hint = (f"; for multiclass input name the probability columns with --probs "
                        f"'{prefix}*'")
        raise InputError(f"{source}: cannot find the {role} column (looked for "
                         f"{', '.join(candidates)}){hint}; name it with {flag}; available "
                         f"columns: {', '.join(available) or '(none)'}")
    raise InputError(f"{source}: several columns could be the {role} column "
                     f"({', '.join(found)}); choose one with {flag}")


def shared_prefix(available: list[str]) -> str | None:
    """A prefix such as ``prob_`` that at least two columns share (a likely set of class
    probabilities), or None."""
    counts: dict[str, int] = {}
    for c in available:
        for sep in ("_", ":", "-", "."):
            if sep in c:
                head = c[: c.index(sep) + 1]
                counts[head] = counts.get(head, 0) + 1
                break
    best = [p for p, k in counts.items() if k >= 2]
    return max(best, key=lambda p: counts[p]) if best else None


def check_columns_exist(available: list[str], names: list[str], source: str,
                        flags: dict[str, str] | None = None) -> None:
    """Each extra column (``--by``, ``--var``, ``--correct-from``) must exist."""
    for name in names:
        if name not in available:
            raise missing_column(source, name, (flags or {}).get(name, "column"), available)


def natural_key(name: str) -> tuple[str, int, str]:
    m = re.search(r"(\d+)$", name)
    return (name[: m.start()], int(m.group(1)), "") if m else (name, -1, name)


def find_prob_columns(available: list[str]) -> list[str] | None:
    """The auto-detected ``prob_0 .. prob_{K−1}`` columns (K ≥ 2, contiguous), else None."""
    found = {int(m.group(1)): c for c in available if (m := PROB_COLUMN.match(c))}
    if len(found) < 2 or sorted(found) != list(range(len(found))):
        return None
    return [found[k] for k in range(len(found))]


def resolve_prob_columns(available: list[str], probs: list[str] | None, source: str,
                         flag: str = "--probs") -> list[str]:
    """Probability columns named by ``--probs`` (names, comma lists or globs), or auto-detected."""
    import fnmatch

    if not probs:
        found = find_prob_columns(available)
        if found is None:
            raise InputError(f"{source}: no probability columns prob_0..prob_{{K-1}} found; name "
                             f"them with {flag}; available columns: {', '.join(available)}")
        return found
    cols: list[str] = []
    for item in probs:
        for part in (p.strip() for p in item.split(",")):
            if not part:
                continue
            if any(ch in part for ch in "*?["):
                hits = sorted((c for c in available if fnmatch.fnmatchcase(c, part)),
                              key=natural_key)
                if not hits:
                    raise InputError(f"{source}: {flag} {part!r} matches no column; available "
                                     f"columns: {', '.join(available)}")
                cols += [h for h in hits if h not in cols]
            elif part in available:
                if part not in cols:
                    cols.append(part)
            else:
                raise missing_column(source, part, flag, available)
    if len(cols) < 2:
        raise InputError(f"{source}: {flag} names {len(cols)} column(s); multiclass input needs "
                         "at least 2")
    return cols


def multiclass_label(available: list[str], cols: list[str], label: str | None,
                     source: str) -> str:
    """The label column of multiclass input, which cannot be one of the probability columns."""
    clash = [c for c in cols if (c == label if label is not None else c.lower() in LABEL_NAMES)]
    if clash:
        raise InputError(f"{source}: --probs includes {clash[0]!r}, the label column; name only "
                         "the probability columns")
    return resolve_column([c for c in available if c not in cols], label, LABEL_NAMES, "label",
                          "--label", source)


def resolve_columns(available: list[str], score: str | None, label: str | None,
                    probs: list[str] | None, source: str) -> tuple[list[str] | None, str, str]:
    """The columns a run reads: (probability columns, "", label) for multiclass input —
    ``probs``, or prob_0..prob_{K−1} without a score column — else (None, score, label).
    Both readers (in memory and streamed) decide the same way."""
    if is_multiclass(available, score, probs):
        cols = resolve_prob_columns(available, probs, source)
        return cols, "", multiclass_label(available, cols, label, source)
    score_col = resolve_column(available, score, SCORE_NAMES, "score", "--score", source)
    label_col = resolve_column(available, label, LABEL_NAMES, "label", "--label", source)
    if score_col == label_col:
        raise InputError(f"{source}: the score and label columns are the same ({score_col!r})")
    return None, score_col, label_col


MAX_NAMED_CLASSES = 1000


def class_named_columns(available: list[str], score: str | None, label: str | None,
                        probs: list[str] | None,
                        label_values: Callable[[str], list[Any]]) -> tuple[list[str], str] | None:
    """Multiclass probability columns named after the classes: without ``--probs``,
    ``--score``, a score-named column or prob_0..prob_{K−1}, when every distinct value of the
    label column (``label_values(column)``: at least two, text) names a column, those columns
    (in file order) and the label column; else None."""
    if probs or score is not None or any(c.lower() in SCORE_NAMES for c in available) or \
            find_prob_columns(available) is not None:
        return None
    found = [c for c in available if c.lower() in LABEL_NAMES] if label is None else \
        [c for c in available if c == label or c.lower() == label.lower()]
    if len(found) != 1:
        return None
    values = label_values(found[0])
    if not 2 <= len(values) <= MAX_NAMED_CLASSES or not all(isinstance(v, str) for v in values):
        return None
    if not set(values) <= set(available) - {found[0]}:
        return None
    return [c for c in available if c in set(values)], found[0]


def class_names_of(cols: list[str]) -> list[str]:
    """Class names from probability column names: their suffixes after the common prefix
    (``prob_cat`` → ``cat``), or the column names when those are not distinct."""
    prefix = os.path.commonprefix(cols)  # noqa: RUF071 - character prefix of column names
    cut = prefix.rfind("_") + 1 if "_" in prefix else len(prefix)
    names = [c[cut:] for c in cols]
    return names if all(names) and len(set(names)) == len(names) else list(cols)


def binary_pair(cols: list[str] | None, probs: list[str] | None) -> bool:
    """Auto-detected probability columns of two classes (scikit-learn's ``predict_proba`` of a
    binary model, ``prob_0, prob_1``): read as the binary score of the second class, after the
    multiclass checks (rows sum to 1, labels are class indices).  ``--probs`` keeps them
    multiclass."""
    return cols is not None and len(cols) == 2 and not probs


def binary_pair_note(cols: list[str]) -> str:
    return (f"{cols[0]}, {cols[1]}: two probability columns summing to 1, read as a binary "
            f"score ({cols[1]}, the probability of class {class_names_of(cols)[1]}); give "
            f"--probs {cols[0]},{cols[1]} for the multiclass (top-label) metrics")


def is_multiclass(available: list[str], score: str | None, probs: list[str] | None) -> bool:
    """--probs, or auto-detected prob_0..prob_{K−1} columns without a score column."""
    if probs:
        return True
    if score is not None or any(c.lower() in SCORE_NAMES for c in available):
        return False
    return find_prob_columns(available) is not None
