r"""The CORP decomposition of a score into miscalibration, discrimination and uncertainty.

CORP (Consistent, Optimally binned, Reproducible, PAV-based; Dimitriadis, Gneiting & Jordan,
PNAS 2021) recalibrates the scores by isotonic regression of the outcomes on them — the
pool-adjacent-violators algorithm, tied scores pooled into one block, so ŝ is the same for
equal scores and does not depend on row order.  For a proper score S with mean S̄:

.. math:: \mathrm{MCB} = \bar S(s) - \bar S(\hat s), \quad
          \mathrm{DSC} = \bar S(\bar y) - \bar S(\hat s), \quad
          \mathrm{UNC} = \bar S(\bar y), \qquad \bar S(s) = \mathrm{MCB} - \mathrm{DSC} + \mathrm{UNC}.

MCB ≥ 0 is the part of the score a monotone recalibration would remove (0 for a calibrated
model); DSC ≥ 0 the discrimination that survives recalibration; UNC the score of always
predicting the base rate.  ``corp_mcb``, ``corp_dsc``, ``corp_unc`` use the Brier score
S(p, y) = (p − y)²; ``corp_mcb_log``, ``corp_dsc_log``, ``corp_unc_log`` the log score
S(p, y) = −y log p − (1 − y) log(1 − p) in nats, with p (the scores, ŝ and ȳ alike) clipped
to [1e-15, 1 − 1e-15] as ``log_loss`` does — so a PAV block of only 0s or only 1s costs
~1e-15 instead of 0.  MCB is an error; DSC and UNC are not (more discrimination is better).

References
----------
.. [1] Dimitriadis, Gneiting, Jordan. Stable reliability diagrams for probabilistic
   classifiers. PNAS 118(8), 2021.
.. [2] Ayer, Brunk, Ewing, Reid, Silverman. An empirical distribution function for sampling
   with incomplete information. Ann. Math. Statist. 26, 1955 (PAV).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray
from calcheck.binning import tie_bounds
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics._result import MetricResult
from calcheck.metrics.scoring import LOG_LOSS_EPS


@dataclass(frozen=True)
class Recalibration:
    """PAV fit on the distinct scores: value, rows, positives and recalibrated value each."""

    x: FloatArray
    count: FloatArray
    positives: FloatArray
    fit: FloatArray

    @property
    def n(self) -> float:
        return float(self.count.sum())


def pav(x: FloatArray, count: FloatArray, positives: FloatArray) -> Recalibration:
    """Isotonic (non-decreasing) regression of the mean outcome per distinct score."""
    from scipy.optimize import isotonic_regression

    fit = isotonic_regression(positives / count, weights=count).x
    return Recalibration(x=x, count=count, positives=positives, fit=np.asarray(fit))


def recalibration(data: Prepared) -> Recalibration:
    """The PAV recalibration of ``data`` (computed once per data set)."""
    cache = data.__dict__
    if "_corp" not in cache:
        s, y = data.sorted_scores, data.sorted_labels
        b = tie_bounds(s)
        if data.weights is None:
            count = np.diff(b).astype(np.float64)
            positives = np.add.reduceat(np.asarray(y, dtype=np.float64), b[:-1])
        else:                           # weighted rows: each distinct score's mass
            w = data.sorted_weights
            count = np.add.reduceat(w, b[:-1])
            positives = np.add.reduceat(w * np.asarray(y, dtype=np.float64), b[:-1])
        keep = count > 0
        cache["_corp"] = pav(s[b[:-1]][keep], count[keep], positives[keep])
    return cache["_corp"]  # type: ignore[no-any-return]


def mean_score(kind: str, p: FloatArray, count: FloatArray, positives: FloatArray) -> float:
    """S̄ of predictions ``p`` per distinct score with ``count`` rows and ``positives``."""
    n = float(count.sum())
    if kind == "brier":       # Σ over rows of (p − y)²: k rows at (p − 1)², the rest at p²
        total = positives * (1.0 - p) ** 2 + (count - positives) * p * p
    else:
        q = np.clip(p, LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS)
        total = -(positives * np.log(q) + (count - positives) * np.log1p(-q))
    return float(np.sum(total) / n)


@dataclass(frozen=True)
class Decomposition:
    """A score's CORP decomposition, score = mcb − dsc + unc — as attributes or by key
    (``r["mcb"]``), with ``to_dict()``; ``value`` is MCB, the calibration part."""

    score: float
    mcb: float
    dsc: float
    unc: float
    kind: str = "brier"

    def __getitem__(self, key: str) -> float:
        if key not in ("score", "mcb", "dsc", "unc"):
            raise KeyError(key)
        return float(getattr(self, key))

    def keys(self) -> list[str]:
        return ["score", "mcb", "dsc", "unc"]

    @property
    def value(self) -> float:
        return self.mcb

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "mcb": self.mcb, "dsc": self.dsc, "unc": self.unc,
                "kind": self.kind}


def decompose(r: Recalibration, kind: str) -> Decomposition:
    """S̄(s), MCB, DSC and UNC of the Brier (``"brier"``) or log (``"log"``) score."""
    base = np.full_like(r.x, float(r.positives.sum() / r.n))
    s_orig = mean_score(kind, r.x, r.count, r.positives)
    s_fit = mean_score(kind, r.fit, r.count, r.positives)
    unc = mean_score(kind, base, r.count, r.positives)
    return Decomposition(score=s_orig, mcb=s_orig - s_fit, dsc=unc - s_fit, unc=unc, kind=kind)


@dataclass(frozen=True)
class Band:
    """Pointwise consistency band of the PAV curve under calibration, on points ``x``."""

    x: FloatArray
    low: FloatArray
    high: FloatArray
    level: float
    reps: int
    seed: int


PREFETCH_SCORES = 10_000     # distinct scores from which the draws run on their own thread


def consistency_band(r: Recalibration, *, reps: int = 200, level: float = 0.9,
                     seed: int = 0, points: int = 512,
                     prefetch_from: int = PREFETCH_SCORES) -> Band:
    """Where the PAV curve of a *calibrated* model would lie: ``reps`` replicates draw every
    row's outcome as Bernoulli(s) (per distinct score: Binomial(rows, s) positives), refit
    PAV, and the band is the pointwise (1 ± level)/2 quantiles of the refitted curves, read at
    up to ``points`` scores (all distinct scores, or equally spaced ranks among them).  From
    ``prefetch_from`` distinct scores the draws run on their own thread (the same band)."""
    from scipy.optimize import isotonic_regression

    from calcheck._prefetch import prefetch

    rng = np.random.default_rng(seed)
    k = r.x.shape[0]
    at = np.arange(k) if k <= points else \
        np.unique(np.linspace(0, k - 1, points).round().astype(np.int64))
    curves = np.empty((reps, at.shape[0]))
    counts = r.count.astype(np.int64)
    p = np.clip(r.x, 0.0, 1.0)
    # the draws, in order from the one generator, on a background thread while this one
    # refits the last (both release the GIL): the same band on two cores
    draws = (rng.binomial(counts, p) for _ in range(reps))
    for i, pos in enumerate(prefetch(draws) if k >= prefetch_from else draws):
        curves[i] = isotonic_regression(pos / r.count, weights=r.count).x[at]
    q = [(1 - level) / 2, (1 + level) / 2]
    low, high = np.quantile(curves, q, axis=0)
    return Band(x=r.x[at], low=low, high=high, level=level, reps=reps, seed=seed)


def weighted_band(r: Recalibration, data: Prepared, *, reps: int = 200, level: float = 0.9,
                  seed: int = 0, points: int = 512) -> Band:
    """:func:`consistency_band` of sampling-weighted rows: each replicate redraws every row's
    label by the weights' null (:class:`calcheck.weights.NullDraws`: the weight held fixed, or
    class weights following the drawn label), sums each distinct score's label mass and
    mass, and refits the weighted PAV; the band is the pointwise quantiles as unweighted."""
    from dataclasses import replace

    from scipy.optimize import isotonic_regression

    from calcheck.weights import NullDraws

    assert data.weights is not None
    s, y, w = data.sorted_scores, data.sorted_labels, data.sorted_weights
    starts = tie_bounds(s)[:-1]
    keep = np.add.reduceat(w, starts) > 0              # the scores recalibration() keeps
    draws = NullDraws.of(replace(data.weights, values=w), s, y)
    rng = np.random.default_rng(seed)
    k = r.x.shape[0]
    at = np.arange(k) if k <= points else \
        np.unique(np.linspace(0, k - 1, points).round().astype(np.int64))
    curves = np.empty((reps, at.shape[0]))
    for i in range(reps):
        mass, ws = draws(1, rng)
        cnt = np.add.reduceat(ws[0], starts)[keep]
        pos = np.add.reduceat(mass[0], starts)[keep]
        curves[i] = isotonic_regression(pos / cnt, weights=cnt).x[at]
    low, high = np.quantile(curves, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return Band(x=r.x[at], low=low, high=high, level=level, reps=reps, seed=seed)


_PART = {"corp_mcb": ("brier", "mcb"), "corp_dsc": ("brier", "dsc"), "corp_unc": ("brier", "unc"),
         "corp_mcb_log": ("log", "mcb"), "corp_dsc_log": ("log", "dsc"),
         "corp_unc_log": ("log", "unc")}


def _result(mid: str, data: Prepared) -> MetricResult:
    kind, part = _PART[mid]
    r = recalibration(data)
    d = decompose(r, kind)
    return MetricResult(id=mid, value=float(getattr(d, part)),
                        unit="nats" if kind == "log" else "fraction",
                        settings={"score": "log score" if kind == "log" else "Brier score",
                                  "recalibration": "PAV, ties pooled",
                                  **({"clip": LOG_LOSS_EPS} if kind == "log" else {})},
                        n_samples=data.n_samples,
                        extra={"decomposition": {"score": d.score, "mcb": d.mcb, "dsc": d.dsc,
                                                 "unc": d.unc},
                               "pav_blocks": int(np.unique(r.fit).shape[0])})


def corp_mcb(data: Prepared, o: MetricOptions) -> MetricResult:
    return _result("corp_mcb", data)


def corp_dsc(data: Prepared, o: MetricOptions) -> MetricResult:
    return _result("corp_dsc", data)


def corp_unc(data: Prepared, o: MetricOptions) -> MetricResult:
    return _result("corp_unc", data)


def corp_mcb_log(data: Prepared, o: MetricOptions) -> MetricResult:
    return _result("corp_mcb_log", data)


def corp_dsc_log(data: Prepared, o: MetricOptions) -> MetricResult:
    return _result("corp_dsc_log", data)


def corp_unc_log(data: Prepared, o: MetricOptions) -> MetricResult:
    return _result("corp_unc_log", data)
