"""Uncertainty on metrics: percentile bootstrap confidence intervals.

In memory, a replicate resamples the n rows with replacement (row i taken c_i times,
(c_1 … c_n) ~ Multinomial(n; 1/n, …, 1/n)) and recomputes every selected metric on it, bins
included — equal-mass, PAVA-BC and per-class bins are re-estimated on each replicate.  The
draws index the rows in a canonical order (by score, then label; multiclass: by label, then
the probabilities), so an interval does not depend on the order of the rows in a file; the
binary replicate is listed in that order, which is sorted by score, so the metrics' sort is
not redone.  Draws depend only on ``seed`` and n.

The interval is the percentile interval of the replicate values: the (1 − level)/2 and
(1 + level)/2 quantiles (numpy's default linear interpolation).  Replicates on which a metric
cannot be computed (e.g. an empty class) are counted and left out; an interval is only given
when at least half the replicates produced a finite value.

The streaming engines' Poisson bootstrap over grid units is in
:mod:`calcheck.streaming.bootstrap`; both return :class:`ConfidenceInterval`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from calcheck._typing import FloatArray
from calcheck.errors import CalcheckError, UsageError

DEFAULT_REPS = 1000
DEFAULT_LEVEL = 0.95
# why a metric without ``ci`` in the registry gets no interval
NO_INTERVAL = {"pc": "a resample repeats rows, which changes the number of distinct scores "
                     "that pc counts; no bootstrap interval"}


@dataclass(frozen=True, slots=True)
class ConfidenceInterval:
    """A bootstrap interval of one metric, with what a reviewer needs to redo it."""

    low: float | None
    high: float | None
    level: float
    reps: int
    se: float | None               # standard deviation of the replicate values
    failed: int                    # replicates without a finite value
    seed: int
    method: str = "percentile bootstrap"
    resampling: str = "rows with replacement"

    def to_dict(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "level": self.level, "reps": self.reps,
                "se": self.se, "failed_reps": self.failed, "seed": self.seed,
                "method": self.method, "resampling": self.resampling}


def check_ci_options(reps: int, level: float) -> None:
    if reps < 10:
        raise UsageError(f"ci_reps must be >= 10, got {reps}")
    if not 0.0 < level < 1.0:
        raise UsageError(f"ci_level must be in (0, 1), got {level}")


def percentile_interval(values: FloatArray, *, level: float, seed: int,
                        **labels: str) -> ConfidenceInterval:
    """The percentile interval of replicate ``values`` (non-finite values are failures)."""
    reps = int(values.shape[0])
    ok = values[np.isfinite(values)]
    failed = reps - int(ok.shape[0])
    if ok.shape[0] < max(2, (reps + 1) // 2):
        return ConfidenceInterval(None, None, level, reps, None, failed, seed, **labels)
    lo, hi = np.quantile(ok, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return ConfidenceInterval(float(lo), float(hi), level, reps, float(np.std(ok, ddof=1)),
                              failed, seed, **labels)


def with_intervals(results: Mapping[str, Any], cis: Mapping[str, ConfidenceInterval]
                   ) -> dict[str, Any]:
    """``results`` (metric id → MetricResult) with each interval in the result's ``ci``."""
    return {m: replace(r, extra={**r.extra, "ci": cis[m].to_dict()}) if m in cis else r
            for m, r in results.items()}


def bootstrap(data: Any, ids: list[str], options: Any,
              compute: Callable[[Any, list[str], Any], Mapping[str, Any]], *,
              reps: int = DEFAULT_REPS, level: float = DEFAULT_LEVEL, seed: int = 0,
              progress: Callable[[int, int], None] | None = None
              ) -> dict[str, ConfidenceInterval]:
    """Percentile bootstrap intervals of the metrics ``ids`` of ``data`` (a
    :class:`~calcheck.data.Predictions`) computed by ``compute(data, ids, options)``, ``reps``
    replicates seeded by ``seed``; ids without an interval (``pc``) get none."""
    from calcheck import registry

    check_ci_options(reps, level)
    ids = [m for m in ids if registry.METRICS[m].ci]
    n = data.n
    canon = canonical_order(data)
    rng = np.random.default_rng(seed)
    values = np.full((len(ids), reps), np.nan)
    for r in range(reps):
        # draws index the rows in their canonical order, so a replicate does not depend on
        # the order of the rows in the file; listed in that order it is sorted by score
        counts = np.bincount(rng.integers(0, n, size=n), minlength=n)
        sample = data.subset(np.repeat(canon, counts))
        if not data.multiclass:
            sample.sorted_order = np.arange(n)
        values[:, r] = _values(compute, sample, ids, options)
        if progress is not None:
            progress(r + 1, reps)
    return {mid: percentile_interval(values[j], level=level, seed=seed)
            for j, mid in enumerate(ids)}


def canonical_order(data: Any) -> np.ndarray:
    """The rows sorted by score then label (binary), or by label then the probabilities
    (multiclass): an order that does not depend on the order of the input."""
    if data.multiclass:
        keys = [data.probs[:, j] for j in range(data.probs.shape[1] - 1, -1, -1)]
        return np.lexsort([*keys, data.labels])
    return np.lexsort((data.labels, data.scores))


def _values(compute: Callable[..., Mapping[str, Any]], sample: Any, ids: list[str],
            options: Any) -> list[float]:
    """Every metric of one replicate (one shared sort); one by one when one of them fails."""
    try:
        res = compute(sample, ids, options)
        return [res[m].value for m in ids]
    except CalcheckError:
        out = []
        for mid in ids:
            try:
                out.append(compute(sample, [mid], options)[mid].value)
            except CalcheckError:
                out.append(np.nan)
        return out
