"""One ``score`` run on arrays: metrics, variable-based calibration and subgroups.

The CLI reads the data (``calcheck.io``) and hands arrays here; this module only computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.errors import CalcheckError
from calcheck.metrics import (
    MetricOptions,
    MetricResult,
    MulticlassPrepared,
    Prepared,
    compute_metrics,
    compute_multiclass_metrics,
)
from calcheck.metrics.vece import VariableResult, qcut_calibration, variable_calibration


@dataclass
class ScoreInput:
    """What a ``score`` run computes on: binary scores or class probabilities, and labels."""

    labels: IntArray
    scores: FloatArray | None = None          # binary
    probs: FloatArray | None = None           # multiclass (n, K)
    order: IntArray | None = None             # binary: the stable score order, when known

    @property
    def multiclass(self) -> bool:
        return self.probs is not None

    def subset(self, mask: np.ndarray) -> ScoreInput:
        return ScoreInput(labels=self.labels[mask],
                          scores=None if self.scores is None else self.scores[mask],
                          probs=None if self.probs is None else self.probs[mask])

    def error_view(self) -> tuple[FloatArray, FloatArray]:
        """(pred_error, incorrect) of the top-label view (SPEC §5).

        Binary scores: the prediction is 1 when s >= 0.5, pred_error = 1 − max(s, 1 − s).
        """
        if self.probs is not None:
            pred = np.argmax(self.probs, axis=1)
            conf = self.probs[np.arange(self.probs.shape[0]), pred]
            return 1.0 - conf, (pred != self.labels).astype(np.float64)
        assert self.scores is not None
        s = self.scores
        pred = (s >= 0.5).astype(np.int64)
        return 1.0 - np.maximum(s, 1.0 - s), (pred != self.labels).astype(np.float64)


def compute(data: ScoreInput, ids: list[str], options: MetricOptions) -> dict[str, MetricResult]:
    """The selected metrics of binary or multiclass data."""
    if data.multiclass:
        assert data.probs is not None
        return compute_multiclass_metrics(MulticlassPrepared(data.probs, data.labels), ids,
                                          options)
    assert data.scores is not None
    return compute_metrics(Prepared(data.scores, data.labels, validate=False, order=data.order),
                           ids, options)


@dataclass
class VariablesResult:
    """VECE per variable, the qcut ECE, and the ranking by VECE (the paper's Table 1)."""

    results: dict[str, VariableResult]
    ece_qcut: float
    ranking: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for name in self.ranking:
            d = self.results[name].to_dict()
            d["ece_qcut"] = self.ece_qcut
            d["rank"] = self.ranking.index(name) + 1
            out[name] = d
        return out


def variables(data: ScoreInput, columns: dict[str, FloatArray], *, span: float = 0.75,
              bins: int = 10, incorrect: FloatArray | None = None) -> VariablesResult:
    """VECE and VCE(v*) for every variable; ``incorrect`` overrides the top-label correctness
    (``--correct-from``)."""
    pred_error, inc = data.error_view()
    if incorrect is not None:
        inc = incorrect
    res = {name: variable_calibration(name, v, pred_error, inc, bins=bins, span=span)
           for name, v in columns.items()}
    ece = qcut_calibration(pred_error, pred_error, inc, bins).value
    ranking = sorted(res, key=lambda k: -res[k].vece)
    return VariablesResult(results=res, ece_qcut=ece, ranking=ranking)


@dataclass
class GroupResult:
    """Metrics of one subgroup."""

    value: str
    n: int
    flagged: bool
    metrics: dict[str, MetricResult]
    errors: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        m: dict[str, Any] = {k: r.to_dict(bins=False) for k, r in self.metrics.items()}
        for k, msg in self.errors.items():
            m[k] = {"value": None, "error": msg}
        return {"n": self.n, "flagged": self.flagged, "metrics": m}


def _group_keys(values: np.ndarray) -> tuple[list[str], IntArray]:
    text = np.array(["(missing)" if v is None or (isinstance(v, float) and np.isnan(v))
                     else str(v) for v in values.tolist()], dtype=object)
    keys, inverse = np.unique(text.astype(str), return_inverse=True)
    return [str(k) for k in keys], inverse


def groups(data: ScoreInput, by: np.ndarray, ids: list[str], options: MetricOptions, *,
           min_size: int = 100,
           compute_fn: Callable[[ScoreInput, list[str], MetricOptions],
                                dict[str, MetricResult]] = compute,
           intervals: dict[str, Any] | None = None) -> list[GroupResult]:
    """Every selected metric per value of a categorical column; small groups are flagged.

    A metric that cannot be computed on a group (e.g. PAVA-BC TCE under 20 rows) is reported
    with its reason instead of a value.  ``intervals`` (``reps``, ``level``, ``seed``) adds a
    bootstrap interval to every metric of every group, resampled within the group.
    """
    from calcheck.uncertainty import bootstrap, with_intervals

    keys, inverse = _group_keys(by)
    out = []
    for j, key in enumerate(keys):
        mask = inverse == j
        sub = data.subset(mask)
        n = int(mask.sum())
        results: dict[str, MetricResult] = {}
        errors: dict[str, str] = {}
        for mid in ids:
            try:
                results.update(compute_fn(sub, [mid], options))
            except CalcheckError as exc:
                errors[mid] = str(exc)
        if intervals is not None:
            results = with_intervals(results, bootstrap(sub, list(results), options,
                                                        **intervals, compute_fn=compute_fn))
        out.append(GroupResult(value=key, n=n, flagged=n < min_size, metrics=results,
                               errors=errors))
    return out
