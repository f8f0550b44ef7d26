"""Uncertainty on metrics: bootstrap confidence intervals that cover the population value.

Binned calibration errors (ECE, ECE-l2, ACE, SCE and their debiased forms)
-------------------------------------------------------------------------------
Such a metric is a norm θ = N(m) of the vector m of per-bin mean residuals
(:mod:`calcheck.metrics.debiased`; SCE: the classwise vector, averaged over classes).  The
plug-in θ̂ = N(m̂) is biased upward, so the percentile interval of its replicates sits above
the population value and never reaches 0 for a calibrated model.  calcheck's interval (method
``"norm bootstrap"``) uses two inequalities that hold for every norm, with the bootstrap
distribution of m̂* − m̂ standing in for that of m̂ − m:

* lower end θ̂ − q_{1−α/2}(N(m̂* − m̂)), at least 0: θ ≥ θ̂ − N(m̂ − m) (triangle
  inequality).  For a calibrated model (m = 0) θ̂ = N(m̂ − m) itself, so the interval reaches 0
  with probability 1 − α/2: exactly its level where the plug-in interval never does;
* upper end θ̂ + q_{1−α/2}(⟨ĝ, m̂ − m̂*⟩) with ĝ the gradient of N at m̂ (the signs of m̂ for
  the l1 norms): θ − θ̂ ≤ ⟨g, m − m̂⟩ (convexity), a linear form whose spread does not depend on
  the signs for bins that do not overlap.

Each end errs with probability at most α/2, so the interval covers with probability at least
the level (asymptotically); in the simulations of docs/validity.md about 1 − α/2 when the model
is calibrated or clearly miscalibrated.  The estimand is the population value of the metric at
the chosen binning (the bins' edges fixed; equal-mass bins at their population quantiles).  The
debiased metrics have the same estimand and get the same interval.

The Brier score and the log loss are means, and the CORP uncertainty component a smooth
function of one: the percentile interval of their replicates covers their population value.

**Every other metric gets no interval**, with its reason in the notes (:func:`no_interval`):
maxima (MCE, MCE(Q)) because the bootstrap of a maximum is inconsistent near ties and at 0;
every other estimator (TCE and its variants, PDE, classwise ACE, TACE, the smooth, cumulative,
LOESS and sweep errors, CORP's MCB and DSC) because it is biased, and the percentile interval of
a biased estimator sits beside its population value rather than around it — classwise ACE's
interval lay entirely above its own estimate on calibrated K = 10 models (docs/validity.md).
An interval is offered only where it covers.

How replicates are made
-----------------------

In memory, a replicate resamples the n rows with replacement (row i taken c_i times,
(c_1 … c_n) ~ Multinomial(n; 1/n, …, 1/n)) and recomputes every selected metric on it, bins
included — equal-mass, PAVA-BC and per-class bins are re-estimated on each replicate.  The
draws index the rows in a canonical order (by score, then label; multiclass: by label, then
the probabilities), so an interval does not depend on the order of the rows in a file; the
binary replicate is listed in that order, which is sorted by score, so the metrics' sort is
not redone.  Draws depend only on ``seed`` and n.

Binary ECE, ECE-l2, MCE, ACE, MCE(Q), Brier and log loss are computed from the replicate's
counts instead of a resampled copy (:class:`WeightedReplicates`): in the canonical order the
rows are sorted by score, so every uniform bin and every tie group is a run of rows, and
cumulative sums of c_i, c_i·s_i and c_i·y_i give each bin's count, score and label sums — for
the equal-mass bins at the cut positions ⌊j·n/B⌋ of the replicate, a tie group cut by one
shared pro rata, as on a resampled copy.  Same draws, same values (up to the last bits of a
float sum), about 50× faster; the other metrics are recomputed on the resampled copy.

The percentile interval is the (1 − level)/2 and (1 + level)/2 quantiles of the replicate values
(numpy's default linear interpolation).  Replicates on which a metric
cannot be computed (e.g. an empty class) are counted and left out; an interval is only given
when at least half the replicates produced a finite value.

The Poisson bootstrap over score units (the streaming engines' grid units, ``compare``'s paired
units) is in :mod:`calcheck.unit_bootstrap`; both return :class:`ConfidenceInterval`.

References
----------
.. [1] Efron, Tibshirani. An Introduction to the Bootstrap. Chapman & Hall, 1993 (percentile
       intervals).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from calcheck._prefetch import prefetch
from calcheck._threads import one_blas_thread
from calcheck._typing import FloatArray
from calcheck.errors import CalcheckError, UsageError

DEFAULT_REPS = 1000
DEFAULT_LEVEL = 0.95
# why a metric without ``ci`` in the registry gets no interval
_MAXIMUM = ("a maximum over bins: its bootstrap does not cover the population value (at 0 or "
            "with near-equal bins); no interval")
NO_INTERVAL = {"pc": "a resample repeats rows, which changes the number of distinct scores "
                     "that pc counts; no bootstrap interval",
               "mce": _MAXIMUM, "mce_q": _MAXIMUM, "mce_top": _MAXIMUM,
               "skce": "its test (calcheck test --method skce) says whether it is 0; no "
                       "interval"}
BIASED = ("a biased estimator: the percentile bootstrap of it does not cover its population "
          "value (docs/uncertainty.md), so no interval is offered")


def no_interval(mid: str) -> str:
    """Why metric ``mid`` gets no ``--ci`` interval."""
    return NO_INTERVAL.get(mid, BIASED)
# the binned errors whose interval is the norm bootstrap: (bin vector, norm)
NORM_METRICS = {"ece": ("uniform", "l1"), "ece_debiased": ("uniform", "l1"),
                "ece_l2": ("uniform", "l2"), "ece_l2_debiased": ("uniform", "l2"),
                "ace": ("quantile", "l1"), "ace_debiased": ("quantile", "l1"),
                "sce": ("classwise", "l1")}
POPULATION = "population value at the chosen binning"
MEANS = ("brier", "log_loss", "corp_unc", "corp_unc_log")   # means, or a smooth function of one
SAMPLING = "sampling distribution of the estimator (coverage of the population value not shown)"
NORM_METHOD = ("norm bootstrap: plug-in minus the (1+level)/2 quantile of ||m* - m||, plus "
               "that of the linearised change")


def estimand_of(mid: str) -> str:
    """What the interval of metric ``mid`` covers."""
    if mid in NORM_METRICS:
        return POPULATION
    return "population value (a mean)" if mid in MEANS else SAMPLING


def covers_population(mid: str) -> bool:
    """Whether the ``--ci`` interval of metric ``mid`` (or of the binary metric it runs on the
    top-label view) covers a population value: the binned errors' norm intervals and the
    means' percentile intervals."""
    from calcheck import registry

    base = registry_base(mid)
    return (mid in NORM_METRICS or base in NORM_METRICS or base in MEANS) and \
        bool(registry.METRICS[mid].ci)


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
    estimand: str = SAMPLING

    def to_dict(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "level": self.level, "reps": self.reps,
                "se": self.se, "failed_reps": self.failed, "seed": self.seed,
                "method": self.method, "estimand": self.estimand,
                "resampling": self.resampling}


def simultaneous_level(level: float, k: int, family: str) -> float:
    """The level of each of k intervals read together (the ``--time`` windows'): Bonferroni's
    1 − (1 − level)/k, so that all k cover at once with probability at least ``level``;
    ``family="none"`` keeps each at ``level`` (they then cover one at a time)."""
    return level if family == "none" or k <= 1 else 1.0 - (1.0 - level) / k


def check_ci_options(reps: int, level: float) -> None:
    if reps < 10:
        raise UsageError(f"ci_reps must be >= 10, got {reps}")
    if not 0.0 < level < 1.0:
        raise UsageError(f"ci_level must be in (0, 1), got {level}")


REPS_BUDGET = 2 << 30           # bytes of the replicate values and norm statistics


def check_reps_size(reps: int, metrics: int) -> None:
    """Refuse, before resampling, replicate tables that would not fit :data:`REPS_BUDGET`."""
    need = 8 * reps * (metrics + 8)
    if need > REPS_BUDGET:
        raise UsageError(f"--ci-reps {reps:,} for {metrics} metric(s) needs ~{need / 2 ** 30:.1f} "
                         f"GB of replicate values; at most {REPS_BUDGET // (8 * (metrics + 8)):,} "
                         f"replicates fit in {REPS_BUDGET >> 30} GB")


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
    check_reps_size(reps, len(ids))
    if getattr(data, "weights", None) is not None:
        return weighted_bootstrap(data, ids, options, compute, reps=reps, level=level,
                                  seed=seed, progress=progress)
    model = ModelReplicates(data, ids, options, compute, reps)
    rng = np.random.default_rng(seed)
    # draws index the rows in their canonical order, so a replicate does not depend on the
    # order of the rows in the file; listed in that order it is sorted by score.  They are
    # made in order in a background thread while this one computes the previous replicate.
    n = data.n
    draws = prefetch((np.bincount(rng.integers(0, n, size=n), minlength=n)
                      for _ in range(reps)), depth=4)
    with one_blas_thread():                 # the drawing thread and BLAS would share 2 cores
        for r, counts in enumerate(draws):
            model.add(r, counts)
            if progress is not None:
                progress(r + 1, reps)
    return model.intervals(level=level, seed=seed)


def weighted_bootstrap(data: Any, ids: list[str], options: Any,
                       compute: Callable[[Any, list[str], Any], Mapping[str, Any]], *,
                       reps: int, level: float, seed: int,
                       progress: Callable[[int, int], None] | None = None
                       ) -> dict[str, ConfidenceInterval]:
    """The intervals of :func:`bootstrap` on weighted or aggregated rows
    (:class:`RowWeightReplicates`), the rows in their canonical order."""
    base = data.subset(canonical_order(data))  # an order that does not depend on the file's
    model = RowWeightReplicates(base, ids, options, compute, reps, listed_sorted=True)
    rng = np.random.default_rng(seed)
    for r in range(reps):
        model.add(r, replicate_weights(base.weights, rng))
        if progress is not None:
            progress(r + 1, reps)
    return model.intervals(level=level, seed=seed)


def replicate_weights(weights: Any, rng: np.random.Generator) -> FloatArray:
    """One bootstrap replicate of weighted rows as new weights: counts c ~ Multinomial(N; k/N)
    (N predictions drawn from the expanded file), or w·c with c ~ Multinomial(n; 1/n) (n rows
    drawn, each keeping its weight)."""
    w = weights.values
    n = w.shape[0]
    if weights.frequency:
        total = round(weights.total)
        if total > 4 * n:            # many predictions a row: one binomial per row
            return rng.multinomial(total, w / w.sum()).astype(np.float64)
        # else the predictions themselves, drawn by their place in the expanded file
        at = np.searchsorted(np.cumsum(w), rng.integers(0, total, size=total), side="right")
        return np.bincount(at, minlength=n).astype(np.float64)
    return np.asarray(w * np.bincount(rng.integers(0, n, size=n), minlength=n),
                      dtype=np.float64)


class RowWeightReplicates:
    """The bootstrap replicates of one model's metrics ``ids`` on weighted or aggregated rows:
    :meth:`add` takes replicate r as the rows' new weights (:func:`replicate_weights`) and
    recomputes every metric on it, bins re-cut.  The binned errors keep the norm bootstrap
    from each replicate's bin vector m*_b = (Σw*y − Σw*s)_b / Σw*, the means the percentile
    interval.  ``listed_sorted``: binary rows listed in their canonical (sorted) order."""

    def __init__(self, data: Any, ids: list[str], options: Any,
                 compute: Callable[[Any, list[str], Any], Mapping[str, Any]], reps: int, *,
                 listed_sorted: bool = False) -> None:
        self.data, self.ids, self.options, self.compute = data, ids, options, compute
        self.sorted = listed_sorted and not data.multiclass
        # the binary means and binned errors from the replicate's weights by prefix sums over
        # the sorted rows (WeightedReplicates), as in the unweighted bootstrap: the same
        # numbers as recomputing them on the replicate, without its sort
        w = data.weights
        self.fast = WeightedReplicates(data.scores, data.labels, ids, int(options.bins),
                                       frequency=w.frequency) \
            if self.sorted and not getattr(options, "compat", None) and \
            getattr(options, "ties", "share") == "share" and \
            set(ids) & set(WeightedReplicates.IDS) else None
        self.slow = [m for m in ids if self.fast is None or m not in self.fast.ids]
        res = compute(data, ids, options)
        self.norms = {m: NORM_METRICS[registry_base(m)][1] for m in ids
                      if registry_base(m) in NORM_METRICS and res[m].bins is not None}
        self.vectors = {}
        for m in self.norms:
            b = res[m].bins
            tot = float(b.count.sum())
            self.vectors[m] = NormReplicates((b.sum_label - b.sum_score) / tot, b.count / tot,
                                             reps)
        self.values = np.full((len(ids), reps), np.nan)

    def add(self, r: int, weights: FloatArray) -> None:
        from calcheck.data import Predictions
        from calcheck.weights import Weights

        rows = {m: j for j, m in enumerate(self.ids)}
        if self.fast is not None:
            for m, v in self.fast.values(weights).items():
                self.values[rows[m], r] = v
                if m in self.vectors:
                    self.vectors[m].add(r, self.fast.quantile_m if m == "ace" else
                                        self.fast.uniform_m)
        if not self.slow:
            return
        w = self.data.weights
        keep = weights > 0
        sub = self.data.subset(keep)
        sample = Predictions(labels=sub.labels, scores=sub.scores, probs=sub.probs,
                             class_names=sub.class_names, validate=False,
                             provenance=sub.provenance,
                             weights=Weights(weights[keep], w.kind, w.column, w.null))
        if self.sorted:
            sample.sorted_order = np.arange(sample.n)
        try:
            out = self.compute(sample, self.slow, self.options)
        except CalcheckError:
            return
        for m in self.slow:
            self.values[rows[m], r] = out[m].value
            b = out[m].bins
            if m in self.vectors and b is not None and \
                    b.count.shape == self.vectors[m].m.shape:
                self.vectors[m].add(r, (b.sum_label - b.sum_score) / float(b.count.sum()))

    def normed(self, mid: str) -> tuple[NormReplicates, str] | None:
        """The bin-vector statistics and norm of a norm-bootstrap metric, else None."""
        return (self.vectors[mid], self.norms[mid]) if mid in self.vectors else None

    def replicate_values(self, mid: str) -> FloatArray:
        out: FloatArray = self.values[self.ids.index(mid)]
        return out

    def intervals(self, *, level: float, seed: int) -> dict[str, ConfidenceInterval]:
        w = self.data.weights
        resampling = ("counts: the expanded rows with replacement" if w.frequency else
                      "rows with replacement, each keeping its weight")
        cis = {}
        for j, m in enumerate(self.ids):
            if m in self.vectors:
                ci = self.vectors[m].interval(self.norms[m], level=level, seed=seed)
            else:
                ci = percentile_interval(self.values[j], level=level, seed=seed,
                                         estimand=estimand_of(m))
            cis[m] = replace(ci, resampling=resampling)
        return cis


def registry_base(mid: str) -> str:
    """The binary id a top-label id runs (``ece_top`` → ``ece``), else ``mid``."""
    from calcheck import registry

    return registry.binary_of(mid) or mid


class ModelReplicates:
    """The bootstrap replicates of one model's metrics ``ids``: :meth:`add` takes replicate r
    as counts per row in the model's canonical order (:func:`canonical_order`) and keeps each
    metric's value (or, for the norm-bootstrap metrics, its bin-vector statistics)."""

    def __init__(self, data: Any, ids: list[str], options: Any,
                 compute: Callable[[Any, list[str], Any], Mapping[str, Any]], reps: int) -> None:
        self.data, self.ids, self.options, self.compute = data, ids, options, compute
        self.canon = canonical_order(data)
        self.fast = WeightedReplicates.for_data(data, self.canon, ids, options)
        self.vectors = BinVectors.for_data(data, self.canon, ids, options, reps, self.fast)
        fast, vectors = self.fast, self.vectors
        # the norm-bootstrap metrics need only their bin vectors, no recomputed value
        self.slow = [m for m in ids if (fast is None or m not in fast.ids)
                     and (vectors is None or m not in vectors.ids)]
        self.values = np.full((len(ids), reps), np.nan)
        self.rows = {m: j for j, m in enumerate(ids)}

    def add(self, r: int, counts: np.ndarray) -> None:
        data, fast, vectors, slow = self.data, self.fast, self.vectors, self.slow
        if fast is not None:
            for mid, v in fast.values(counts).items():
                self.values[self.rows[mid], r] = v
        sample = None
        if slow or (vectors is not None and vectors.needs_sample):
            sample = data.subset(np.repeat(self.canon, counts))
            if not data.multiclass:
                sample.sorted_order = np.arange(data.n)
        if slow:
            self.values[[self.rows[m] for m in slow], r] = _values(self.compute, sample, slow,
                                                                   self.options)
        if vectors is not None:
            vectors.add(r, counts, sample)

    def normed(self, mid: str) -> tuple[NormReplicates, str] | None:
        """The bin-vector statistics and norm of a norm-bootstrap metric, else None."""
        if self.vectors is None or mid not in self.vectors.ids:
            return None
        kind, norm = self.vectors.ids[mid]
        return self.vectors.reps[kind], norm

    def replicate_values(self, mid: str) -> FloatArray:
        """Metric ``mid`` on each replicate (NaN where it could not be computed); the
        norm-bootstrap metrics that were not recomputed have none (all NaN)."""
        out: FloatArray = self.values[self.rows[mid]]
        return out

    def intervals(self, *, level: float, seed: int) -> dict[str, ConfidenceInterval]:
        out = {}
        for mid in self.ids:
            if self.vectors is not None and mid in self.vectors.ids:
                out[mid] = self.vectors.interval(mid, level=level, seed=seed)
            else:
                out[mid] = percentile_interval(self.values[self.rows[mid]], level=level,
                                               seed=seed, estimand=estimand_of(mid))
        return out


class NormReplicates:
    """The norm-bootstrap interval of one bin vector m̂ (module docstring): collects, per
    replicate, N(m̂* − m̂) and ⟨ĝ, m̂ − m̂*⟩ for the l1 norm Σ|m_b|/scale and the l2 norm
    (Σ m_b²/P̂_b)^(1/2)."""

    def __init__(self, m_hat: FloatArray, p_hat: FloatArray, reps: int, *,
                 scale: float = 1.0) -> None:
        self.m = np.asarray(m_hat, dtype=np.float64).ravel()
        p = np.asarray(p_hat, dtype=np.float64).ravel()
        self.inv_p = np.divide(1.0, p, out=np.zeros_like(self.m), where=p > 0)
        self.scale = scale
        self.theta = {"l1": float(np.sum(np.abs(self.m))) / scale,
                      "l2": float(np.sqrt(np.sum(self.m * self.m * self.inv_p)))}
        th2 = self.theta["l2"]
        self.grad = {"l1": np.sign(self.m) / scale,
                     "l2": self.m * self.inv_p / th2 if th2 > 0 else np.zeros_like(self.m)}
        self.dev = {k: np.full(reps, np.nan) for k in ("l1", "l2")}
        self.lin = {k: np.full(reps, np.nan) for k in ("l1", "l2")}

    def add(self, r: int | slice, m_star: FloatArray) -> None:
        """Replicate(s) ``r`` with bin vector(s) ``m_star`` (shape (B,) or (t, B))."""
        if isinstance(r, (int, np.integer)):
            r = slice(int(r), int(r) + 1)
        d = np.asarray(m_star, dtype=np.float64).reshape(-1, self.m.shape[0]) - self.m
        self.dev["l1"][r] = np.abs(d).sum(axis=1) / self.scale
        self.dev["l2"][r] = np.sqrt((d * d * self.inv_p).sum(axis=1))
        self.lin["l1"][r] = -(d @ self.grad["l1"])
        # at θ̂ = 0 the l2 gradient is undefined: the triangle bound serves both ends
        self.lin["l2"][r] = -(d @ self.grad["l2"]) if self.theta["l2"] > 0 else \
            self.dev["l2"][r]

    def interval(self, norm: str, *, level: float, seed: int,
                 **labels: str) -> ConfidenceInterval:
        """The interval at ``level``; ``se`` is the standard deviation of the linearised
        change (the delta-method standard error of the plug-in)."""
        dev, lin = self.dev[norm], self.lin[norm]
        ok = np.isfinite(dev) & np.isfinite(lin)
        reps = int(dev.shape[0])
        failed = reps - int(ok.sum())
        if ok.sum() < max(2, (reps + 1) // 2):
            return ConfidenceInterval(None, None, level, reps, None, failed, seed,
                                      method=NORM_METHOD, estimand=POPULATION, **labels)
        q = (1.0 + level) / 2.0
        theta = self.theta[norm]
        se = float(np.std(lin[ok], ddof=1))
        low = max(0.0, theta - float(np.quantile(dev[ok], q)))
        high = theta + max(0.0, float(np.quantile(lin[ok], q)))
        return ConfidenceInterval(low, high, level, reps, se, failed, seed, method=NORM_METHOD,
                                  estimand=POPULATION, **labels)


class BinVectors:
    """The bin vectors m̂ of the norm-bootstrap metrics of one in-memory run and their
    replicates (module docstring): ``uniform`` and ``quantile`` bins of the binary (or
    top-label) view, ``classwise`` uniform bins of every class (SCE)."""

    def __init__(self, data: Any, canon: np.ndarray, ids: dict[str, tuple[str, str]],
                 bins: int, ties: str, reps: int,
                 weighted: WeightedReplicates | None = None,
                 fast_uniform: WeightedReplicates | None = None) -> None:
        from calcheck.binning import uniform_assign
        from calcheck.metrics.debiased import quantile_residuals, uniform_residuals

        self.ids, self.bins, self.ties = ids, bins, ties
        kinds = {k for k, _ in ids.values()}
        # the run's fast path already sums each uniform bin of a replicate (same bins)
        self.fast_uniform = fast_uniform if "uniform" in kinds else None
        # equal-mass bins re-cut per replicate: from the replicate's counts where the binary
        # fast path applies (``weighted``: ties shared), else from the resampled copy
        self.weighted = weighted if "quantile" in kinds else None
        self.needs_sample = "quantile" in kinds and self.weighted is None
        self.n = data.n
        self.reps: dict[str, NormReplicates] = {}
        s, y = data.top
        s = np.asarray(s, dtype=np.float64)[canon]           # canonical order: no digit
        y = np.asarray(y, dtype=np.float64)[canon]           # depends on the input order
        if "uniform" in kinds:
            br = uniform_residuals(s, y, bins)
            self.reps["uniform"] = NormReplicates(br.m, br.p, reps)
            self.u_ids, self.u_r = uniform_assign(s, bins), y - s
        if "quantile" in kinds:
            order = np.lexsort((y, s))
            br = quantile_residuals(s[order], y[order], bins, ties)
            self.reps["quantile"] = NormReplicates(br.m, br.p, reps)
        if "classwise" in kinds:
            P = data.probs[canon]
            k = P.shape[1]
            self.c_ids = (uniform_assign(P.ravel(), bins).reshape(P.shape)
                          + np.arange(k)[None, :] * bins).ravel()
            R = -P
            R[np.arange(P.shape[0]), data.labels[canon]] += 1.0
            self.c_r = R
            m = np.bincount(self.c_ids, weights=R.ravel(), minlength=k * bins) / self.n
            p = np.bincount(self.c_ids, minlength=k * bins) / self.n
            self.reps["classwise"] = NormReplicates(m, p, reps, scale=float(k))

    @classmethod
    def for_data(cls, data: Any, canon: np.ndarray, ids: list[str], options: Any,
                 reps: int, fast: WeightedReplicates | None = None) -> BinVectors | None:
        """The norm-bootstrap metrics among ``ids`` (calcheck's conventions; binary ids of
        multiclass input are on the top-label view), or None."""
        if getattr(options, "compat", None):
            return None

        chosen = {}
        for mid in ids:
            base = mid if not data.multiclass or mid == "sce" else \
                registry_base(mid)
            if base in NORM_METRICS and (base != "sce" or data.multiclass):
                chosen[mid] = NORM_METRICS[base]
        if not chosen:
            return None
        weighted = None
        if any(k == "quantile" for k, _ in chosen.values()):     # the run's own fast path when
            weighted = fast if fast is not None and "ace" in fast.ids else \
                WeightedReplicates.for_data(data, canon, ["ace"], options)  # it re-cuts ACE
        uniform = fast if fast is not None and {"ece", "ece_l2", "mce"} & set(fast.ids) \
            else None
        return cls(data, canon, chosen, int(options.bins), getattr(options, "ties", "share"),
                   reps, weighted, uniform)

    def add(self, r: int, counts: np.ndarray, sample: Any) -> None:
        """Replicate r: row i of the canonical order taken ``counts[i]`` times (``sample``:
        the resampled copy, for the equal-mass bins that are re-cut per replicate)."""
        from calcheck.metrics.debiased import quantile_residuals

        n = self.n
        c = np.asarray(counts, dtype=np.float64)
        if "uniform" in self.reps and self.fast_uniform is not None:
            self.fast_uniform.values(counts)          # memoised: once per replicate
            self.reps["uniform"].add(r, self.fast_uniform.uniform_m)
        elif "uniform" in self.reps:
            m = np.bincount(self.u_ids, weights=c * self.u_r, minlength=self.bins) / n
            self.reps["uniform"].add(r, m)
        if "quantile" in self.reps and self.weighted is not None:
            self.weighted.values(counts)              # memoised: once per replicate
            self.reps["quantile"].add(r, self.weighted.quantile_m)
        elif "quantile" in self.reps:
            s, y = sample.top
            s, y = np.asarray(s, dtype=np.float64), np.asarray(y, dtype=np.float64)
            order = np.lexsort((y, s)) if sample.multiclass else np.arange(s.shape[0])
            br = quantile_residuals(s[order], y[order], self.bins, self.ties)
            self.reps["quantile"].add(r, br.m)
        if "classwise" in self.reps:
            w = (c[:, None] * self.c_r).ravel()
            m = np.bincount(self.c_ids, weights=w, minlength=self.c_r.shape[1] * self.bins) / n
            self.reps["classwise"].add(r, m)

    def interval(self, mid: str, *, level: float, seed: int) -> ConfidenceInterval:
        kind, norm = self.ids[mid]
        return self.reps[kind].interval(norm, level=level, seed=seed)


class WeightedReplicates:
    """Binary metrics of a bootstrap replicate from its counts per row (module docstring).

    Built once per run on the rows in canonical order (sorted by score); :meth:`values` takes
    the replicate's counts c (c_i copies of canonical row i) and returns each metric's value.
    ``frequency=False``: the replicate's "counts" are real row weights (a replicate of
    sampling-weighted rows, :class:`RowWeightReplicates`): the equal-mass cuts fall at j·W/B of
    its total weight W instead of ⌊j·N/B⌋, and every mean divides by W.
    """

    IDS = ("ece", "ece_l2", "mce", "ace", "mce_q", "brier", "log_loss")

    def __init__(self, scores: FloatArray, labels: np.ndarray, ids: list[str], bins: int, *,
                 frequency: bool = True) -> None:
        from calcheck.binning import quantile_bounds, uniform_edges
        from calcheck.metrics.scoring import LOG_LOSS_EPS

        self.ids = [m for m in ids if m in self.IDS]
        s = np.asarray(scores, dtype=np.float64)
        y = np.asarray(labels, dtype=np.float64)
        self.n = s.shape[0]
        self.s, self.y = s, y
        # uniform bins are runs of the sorted rows: each bin's first row (bins may be empty)
        edges = uniform_edges(bins)
        self.uniform_starts = np.concatenate(([0], np.searchsorted(s, edges[1:-1],
                                                                   side="left")))
        # tie groups (runs of equal scores): the first row of each and its score
        self.group_first = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
        self.group_next = np.append(self.group_first[1:], self.n)
        self.cuts = quantile_bounds(self.n, bins)
        self.bins, self.frequency = bins, frequency
        self.sq = (s - y) ** 2
        c = np.clip(s, LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS)
        self.ll = np.where(y > 0, np.log(c), np.log1p(-c))
        # buffers reused by every replicate (first-touch page faults cost more than the sums)
        self._c, self._cs, self._cy = (np.empty(self.n) for _ in range(3))
        self._last: tuple[Any, dict[str, float]] = (None, {})

    @classmethod
    def for_data(cls, data: Any, canon: np.ndarray, ids: list[str],
                 options: Any) -> WeightedReplicates | None:
        """The fast path when it applies: binary data, calcheck's own conventions, shared ties."""
        if data.multiclass or getattr(options, "compat", None) or \
                getattr(options, "ties", "share") != "share" or not set(ids) & set(cls.IDS):
            return None
        return cls(data.scores[canon], data.labels[canon], ids, int(options.bins))

    def values(self, counts: np.ndarray) -> dict[str, float]:
        if counts is self._last[0]:                # the same replicate asked twice
            return dict(self._last[1])
        out = self._values(counts)
        self._last = (counts, out)
        return dict(out)

    def _values(self, counts: np.ndarray) -> dict[str, float]:
        from calcheck.binning import quantile_bounds

        ids = self.ids
        c = self._c
        np.copyto(c, counts)
        # the replicate's total: n for a resample of n rows (the cuts of the run), the drawn
        # N for counts, the real total for sampling weights
        n: Any = self.n
        cuts = self.cuts
        if self.frequency:
            drawn = round(float(c.sum()))
            if drawn != n:
                n, cuts = drawn, quantile_bounds(drawn, self.bins)
        else:
            n = float(c.sum())
            cuts = np.linspace(0.0, 1.0, self.bins + 1) * n
        out: dict[str, float] = {}
        if "brier" in ids:
            out["brier"] = float(np.dot(c, self.sq) / n)
        if "log_loss" in ids:
            out["log_loss"] = float(-np.dot(c, self.ll) / n)
        uniform = bool({"ece", "ece_l2", "mce"} & set(ids))
        equal_mass = bool({"ace", "mce_q"} & set(ids))
        if not (uniform or equal_mass):
            return out
        marks = [np.array([0, self.n])]                    # row positions
        if uniform:
            marks.append(self.uniform_starts)
        if equal_mass:
            # the tie group holding each cut position k of the replicate, from the running
            # count of copies at the groups' ends
            first = self.group_first
            # integer sums (exact and fast), or the real weights' sums
            whole = np.asarray(counts, dtype=np.int64 if self.frequency else np.float64)
            ends = np.cumsum(np.add.reduceat(whole, first) if first.shape[0] < self.n
                             else whole)
            k = cuts[1:-1]
            g = np.searchsorted(ends, k, side="right")
            before = np.where(g > 0, ends[np.maximum(g - 1, 0)], 0).astype(np.float64)
            size = ends[g] - before
            lo, hi = first[g], self.group_next[g]
            marks += [lo, hi]
        # sums of c, c·s and c·y over the runs between marks, then prefix sums at each mark
        pos = np.unique(np.concatenate(marks))
        starts = pos[:-1]                                   # every run is non-empty
        np.multiply(c, self.s, out=self._cs)
        np.multiply(c, self.y, out=self._cy)
        seg = np.column_stack([np.add.reduceat(a, starts) if starts.size else np.zeros(0)
                               for a in (c, self._cs, self._cy)])
        pre = np.vstack((np.zeros(3), np.cumsum(seg, axis=0)))      # row m: sums before pos[m]

        def at(rows: np.ndarray) -> np.ndarray:
            return pre[np.searchsorted(pos, rows)]

        if uniform:
            bounds = at(np.append(self.uniform_starts, self.n))
            d = np.diff(bounds, axis=0)
            self.uniform_m = (d[:, 2] - d[:, 1]) / n                      # signed, per bin
            out.update(_binned(d[:, 0], d[:, 1], d[:, 2], n, ids, ("ece", "ece_l2", "mce")))
        if equal_mass:
            pl, ph = at(lo), at(hi)
            part = k.astype(np.float64) - before       # copies of the group left of the cut
            share = np.divide(part, size, out=np.zeros_like(part), where=size > 0)
            cum_s = np.concatenate(([0.0], pl[:, 1] + part * self.s[np.minimum(lo, self.n - 1)],
                                    [pre[-1, 1]]))
            cum_y = np.concatenate(([0.0], pl[:, 2] + share * (ph[:, 2] - pl[:, 2]),
                                    [pre[-1, 2]]))
            self.quantile_m = (np.diff(cum_y) - np.diff(cum_s)) / n     # signed, per bin
            out.update(_binned(np.diff(cuts).astype(np.float64), np.diff(cum_s),
                               np.diff(cum_y), n, ids, ("ace", "ace_l2", "mce_q")))
        return out


def _binned(nb: FloatArray, sb: FloatArray, yb: FloatArray, n: int, ids: list[str],
            names: tuple[str, str, str]) -> dict[str, float]:
    """The l1, l2 and max calibration errors of a bin table of counts and sums."""
    ok = nb > 0
    gap = np.zeros_like(nb)
    gap[ok] = np.abs(sb[ok] - yb[ok]) / nb[ok]
    w = nb / n
    l1, l2, mx = names
    out = {}
    if l1 in ids:
        out[l1] = float(np.sum(w * gap))
    if l2 in ids:
        out[l2] = float(np.sqrt(np.sum(w * gap * gap)))
    if mx in ids:
        out[mx] = float(gap.max()) if gap.size else 0.0
    return out


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
