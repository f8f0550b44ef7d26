"""Validated binary data with a lazily computed stable sort shared by all metrics, and the
options every metric kernel takes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import BinStats, check_ties, sort_order, sorted_binary
from calcheck.validation import (
    check_binary_labels,
    check_nonempty,
    check_same_length,
    check_scores,
    zero_one,
)
from calcheck.weights import MassAxis, Weights, null_variance


class Prepared:
    """Scores and 0/1 labels, validated once; the stable sort is computed at most once.

    Parameters
    ----------
    scores : array_like of shape (n,)
        Predicted probabilities of the positive class, finite, in [0, 1].
    labels : array_like of shape (n,)
        0/1 outcomes (booleans accepted).
    validate : bool, default True
        Skip the checks when the caller (the file reader) has already made them.
    order : array of int, optional
        An ascending order of ``scores`` (stable, for ``ties="order"``), when the caller
        already knows it (the bootstrap lists its replicates sorted); not checked.
    ties : {"share", "order"}
        How positional bins treat tie groups cut by a bound (see :mod:`calcheck.binning`):
        shared pro rata (default, independent of row order) or split in row order (the
        reference codes).
    weights : Weights, optional
        Row counts or weights (:mod:`calcheck.weights`): every metric is then weighted, and
        equal-mass bins are cut on the mass axis.
    """

    def __init__(self, scores: ArrayLike, labels: ArrayLike, *, validate: bool = True,
                 order: IntArray | None = None, ties: str = "share",
                 weights: Weights | None = None) -> None:
        if validate:
            s = check_scores(scores, where="scores")
            y = check_binary_labels(labels, where="labels")
            check_same_length(s, y, names=("scores", "labels"))
            check_nonempty(len(s), where="scores")
        else:
            s = np.asarray(scores, dtype=np.float64)
            y = np.asarray(labels)
            if y.dtype.kind not in "iu":              # int8 labels from the reader stay int8
                y = y.astype(np.int64)
        self.scores: FloatArray = s
        self.labels: IntArray = y
        self.ties = check_ties(ties)
        self.weights = weights
        if order is not None:
            self.__dict__["order"] = order        # fills the cached property below
        self.uniform: dict[int, BinStats] = {}    # uniform-bin statistics by bins, once each

    @classmethod
    def presorted(cls, sorted_scores: FloatArray, sorted_labels: np.ndarray, *,
                  ties: str = "share") -> Prepared:
        """Rows already in ascending score order — for ``ties="order"``, ties in the order
        the metrics should see them — so no metric sorts again (not checked)."""
        data = cls(sorted_scores, sorted_labels, validate=False, ties=ties)
        data.__dict__["_sorted"] = (data.scores, data.labels)
        return data

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.scores.shape[0])

    @property
    def mass(self) -> float:
        """Σ weight (the rows, unweighted)."""
        return float(self.n) if self.weights is None else self.weights.total

    @property
    def n_samples(self) -> int:
        """The ``n`` a result reports: the rows, or for counts the expanded rows."""
        if self.weights is not None and self.weights.frequency:
            return round(self.weights.total)
        return self.n

    @cached_property
    def sorted_weights(self) -> FloatArray:
        """The weights in the order of :attr:`sorted_scores` (weighted data only)."""
        assert self.weights is not None
        return self.weights.values[self.order]

    @cached_property
    def axis(self) -> MassAxis:
        """The sorted rows on the mass axis (:class:`calcheck.weights.MassAxis`)."""
        assert self.weights is not None
        w = self.sorted_weights
        s, y = self.sorted_scores, self.sorted_labels.astype(np.float64)
        v = self.weights.variance_mass(w) if self.weights.frequency else \
            null_variance(replace(self.weights, values=w), s, y)  # the bins' effective sizes
        return MassAxis.of(s, y, w, v, self.ties)

    @cached_property
    def positives(self) -> int:
        """Number of positive labels."""
        return int(self.labels.sum())

    @cached_property
    def order(self) -> IntArray:
        """Ascending order of the scores (stable — ties in input order — for ties="order")."""
        return sort_order(self.scores, self.ties)

    @cached_property
    def _sorted(self) -> tuple[FloatArray, IntArray]:
        # shared ties and 0/1 labels: one sort of packed keys (binning.sorted_binary), no
        # order array; else the order (stable for ties="order", or the caller's)
        y = self.labels
        if "order" not in self.__dict__ and self.ties == "share" and y.shape[0] and \
                self.weights is None and zero_one(y):
            return sorted_binary(self.scores, y)
        return self.scores[self.order], y[self.order]

    @property
    def sort_made(self) -> bool:
        """Whether the sorted scores and labels exist already (a metric asked for them)."""
        return "_sorted" in self.__dict__

    @property
    def sorted_scores(self) -> FloatArray:
        """Scores in ascending order."""
        return self._sorted[0]

    @property
    def sorted_labels(self) -> IntArray:
        """Labels in the order of :attr:`sorted_scores` (label 0 first among equal scores)."""
        return self._sorted[1]


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricOptions:
    """Options shared by the metric kernels of one run (the defaults of ``calcheck score``).

    ``bins`` is the bin count of the fixed-count binnings; ``alpha``, ``test``, ``tce_nmin``
    and ``tce_nmax`` configure TCE; ``tace_threshold`` TACE; ``compat`` names a peer
    library's conventions (``"nixon"``) or None for calcheck's own; ``ties`` how tie groups
    cut by equal-mass or PAVA bounds are treated ("share" or "order"); ``smece_sigma`` a fixed
    bandwidth for the smooth ECE (None: its fixed point).
    """

    bins: int = 10
    alpha: float = 0.05
    test: str = "binomial"
    tce_nmin: int | None = None
    tce_nmax: int | None = None
    tace_threshold: float = 0.01
    compat: str | None = None
    ties: str = "share"
    smece_sigma: float | None = None
    skce_bandwidth: float | None = None
    seed: int = 0
