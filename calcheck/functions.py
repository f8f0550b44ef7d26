"""Metrics and tests on arrays: ``calcheck.ece(scores, labels)`` and its siblings.

>>> import numpy as np, calcheck
>>> s = np.array([0.1, 0.4, 0.35, 0.8]); y = np.array([0, 0, 1, 1])
>>> round(calcheck.ece(s, y, bins=2).value, 4)
0.0875
"""

from __future__ import annotations

from typing import Any

from numpy.typing import ArrayLike

from calcheck.errors import UsageError
from calcheck.hypotests._result import TestResult
from calcheck.metrics import (
    MetricOptions,
    MetricResult,
    Prepared,
    binned,
    compute_metrics,
    scoring,
)
from calcheck.metrics import tce as _tce
from calcheck.validation import check_alpha, check_bins, check_p


def ece(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10, p: int = 1) -> MetricResult:
    """Expected calibration error on ``bins`` equal-width bins (``p=2``: the l2 version).

    Parameters
    ----------
    scores : array_like of shape (n,)
        Predicted probabilities of the positive class, in [0, 1].
    labels : array_like of shape (n,)
        0/1 outcomes.
    bins : int, default 10
        Number of equal-width bins, ``numpy.linspace(0, 1, bins + 1)`` (see docs/metrics.md).
    p : {1, 2}
        Norm: 1 → Σ_b (N_b/n)|P̂_b − Q̄_b|; 2 → the square root of the weighted squares.

    Returns
    -------
    MetricResult
        ``.value`` (a fraction), ``.bins`` (the bin table), ``.to_dict()``.
    """
    return binned.ece(Prepared(scores, labels), bins=check_bins(bins), p=check_p(p))


def mce(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10) -> MetricResult:
    """Maximum calibration error on ``bins`` equal-width bins."""
    return binned.mce(Prepared(scores, labels), bins=check_bins(bins))


def ace(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10,
        ties: str = "share") -> MetricResult:
    """Adaptive calibration error on ``bins`` equal-mass bins (cuts at ⌊j·n/B⌋ of the sorted
    scores; ``ties="share"`` splits a tie group cut by one pro rata, ``"order"`` by row
    position as the reference codes do)."""
    return binned.ace(Prepared(scores, labels, ties=_ties(ties)), bins=check_bins(bins))


def mce_q(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10,
          ties: str = "share") -> MetricResult:
    """MCE(Q): maximum calibration error on ``bins`` equal-mass bins."""
    return binned.mce_q(Prepared(scores, labels, ties=_ties(ties)), bins=check_bins(bins))


def pde(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10,
        ties: str = "share") -> MetricResult:
    """Probability deviation error on ``bins`` equal-mass bins."""
    return binned.pde(Prepared(scores, labels, ties=_ties(ties)), bins=check_bins(bins))


def tce(scores: ArrayLike, labels: ArrayLike, *, binning: str = "pava-bc", bins: int = 10,
        alpha: float = 0.05, test: str = "binomial", n_min: int | None = None,
        n_max: int | None = None, ties: str = "share") -> MetricResult:
    """Test-based calibration error in percent (Matsubara et al., UAI 2023).

    Parameters
    ----------
    scores, labels : array_like of shape (n,)
        Predicted probabilities in [0, 1] and 0/1 outcomes.
    binning : {"pava-bc", "quantile", "pava", "uniform"}
        PAVA-BC (TCE, default), equal-mass (TCE(Q)), PAVA (TCE(V)) or equal-width (TCE(U)).
    bins : int
        Bin count of the equal-mass and equal-width binnings.
    alpha : float
        Significance level; rejection when p-value <= alpha.
    test : {"binomial", "t"}
        Exact two-sided binomial test (default) or one-sample t-test.
    n_min, n_max : int, optional
        PAVA-BC bin sizes; default ⌊n/20⌋ and ⌊n/5⌋.  PAVA-BC refuses fewer than 20 rows
        unless they are given.
    ties : {"share", "order"}
        Tie groups cut by a bound: shared pro rata (default; no value depends on row order)
        or split by row position (the authors' code, which reproduces the published tables).

    Returns
    -------
    MetricResult
        ``.value`` in percent; ``.bins`` and ``.bin_extra`` form the test-based reliability
        table (per bin: edges, n, empirical probability, min/quartiles/max of the predictions,
        number and percent rejected).
    """
    return _tce.tce(Prepared(scores, labels, ties=_ties(ties)), binning=binning,
                    bins=check_bins(bins),
                    alpha=check_alpha(alpha, name="alpha"), test=test, n_min=n_min, n_max=n_max)


def tcal(scores: ArrayLike, labels: ArrayLike, *, adaptive: bool = True, bins: int | None = None,
         alpha: float = 0.05, trials: int = 1000, resample: str = "labels",
         rng: Any = 0) -> TestResult:
    """T-Cal (Lee, Huang, Hassani, Dobriban): a test of calibration with a Monte Carlo p-value.

    Parameters
    ----------
    scores, labels : array_like of shape (n,)
        Predicted probabilities in [0, 1] and 0/1 outcomes.
    adaptive : bool, default True
        Test every dyadic level m = 2^1 … 2^B with Bonferroni level α/B (adaptive T-Cal).
        Ignored when ``bins`` is given.
    bins : int, optional
        Fixed number of bins m (T-Cal with fixed m); bin id ⌊m·s⌋.
    alpha : float
        Significance level.
    trials : int
        Monte Carlo draws of the null distribution.
    resample : {"labels", "consistency"}
        Redraw labels only (exact type-I control) or scores and labels (the authors' code).
    rng : int, numpy.random.Generator or None
        Seed or generator; the same seed gives the same result.

    Returns
    -------
    TestResult
        ``.statistic`` (T_m for fixed m; the smallest level p-value for adaptive), ``.pvalue``,
        ``.reject``, ``.details`` (critical values, the per-level table), ``.to_dict()``.
    """
    from calcheck.hypotests import tcal as _tcal

    data = Prepared(scores, labels)
    if bins is not None:
        return _tcal.tcal_fixed(data.scores, data.labels, m=bins, alpha=alpha, trials=trials,
                                resample=resample, rng=rng)
    if not adaptive:
        raise UsageError("give bins=m for T-Cal with fixed m, or adaptive=True")
    return _tcal.tcal_adaptive(data.scores, data.labels, alpha=alpha, trials=trials,
                               resample=resample, rng=rng)


def hosmer_lemeshow(scores: ArrayLike, labels: ArrayLike, *, groups: int = 10,
                    alpha: float = 0.05, ties: str = "share") -> TestResult:
    """Hosmer–Lemeshow test on equal-mass groups, χ²(G − 2)."""
    from calcheck.hypotests import classical

    data = Prepared(scores, labels)
    return classical.hosmer_lemeshow(data.scores, data.labels, groups=check_bins(groups, name="groups"),
                                     alpha=check_alpha(alpha, name="alpha"), ties=_ties(ties))


def spiegelhalter(scores: ArrayLike, labels: ArrayLike, *, alpha: float = 0.05) -> TestResult:
    """Spiegelhalter's two-sided Z test, with the direction of the miscalibration."""
    from calcheck.hypotests import classical

    data = Prepared(scores, labels)
    return classical.spiegelhalter(data.scores, data.labels, alpha=check_alpha(alpha, name="alpha"))


def cox(scores: ArrayLike, labels: ArrayLike, *, alpha: float = 0.05) -> TestResult:
    """Cox calibration intercept and slope with the likelihood-ratio test of (0, 1)."""
    from calcheck.hypotests import classical

    data = Prepared(scores, labels)
    return classical.cox(data.scores, data.labels, alpha=check_alpha(alpha, name="alpha"))


def binomial_discrete(scores: ArrayLike, labels: ArrayLike, *, alpha: float = 0.05) -> TestResult:
    """Exact binomial test per distinct score value with Bonferroni (discrete predictors)."""
    from calcheck.hypotests import classical

    data = Prepared(scores, labels)
    return classical.binomial_discrete(data.scores, data.labels,
                                       alpha=check_alpha(alpha, name="alpha"))


def brier(scores: ArrayLike, labels: ArrayLike) -> MetricResult:
    """Brier score."""
    return scoring.brier(Prepared(scores, labels))


def log_loss(scores: ArrayLike, labels: ArrayLike) -> MetricResult:
    """Log loss (natural log), scores clipped to [1e-15, 1 − 1e-15]."""
    return scoring.log_loss(Prepared(scores, labels))


def pc(scores: ArrayLike, labels: ArrayLike) -> MetricResult:
    """Probabilistic count of the scores (labels are validated but not used)."""
    return scoring.pc(Prepared(scores, labels))


def smece(scores: ArrayLike, labels: ArrayLike, *, sigma: float | None = None) -> MetricResult:
    """Smooth ECE (Błasiok & Nakkiran) at its fixed-point bandwidth, or at ``sigma``;
    ``.extra["sigma"]`` is the bandwidth used (docs/smooth-ece.md)."""
    from calcheck.metrics import smooth

    if sigma is not None and not 0 < sigma <= 1:
        raise UsageError(f"sigma must be in (0, 1], got {sigma!r}")
    return smooth.smece(Prepared(scores, labels), MetricOptions(smece_sigma=sigma))


def ici(scores: ArrayLike, labels: ArrayLike) -> dict[str, MetricResult]:
    """ICI, E50, E90 and Emax of the LOESS calibration curve (docs/ici.md), by id."""
    from calcheck.metrics import ici as _ici

    data, o = Prepared(scores, labels), MetricOptions()
    return {m: getattr(_ici, m)(data, o) for m in ("ici", "e50", "e90", "emax")}


def corp(scores: ArrayLike, labels: ArrayLike, *, score: str = "brier") -> dict[str, float]:
    """The CORP decomposition (docs/corp.md) of the Brier (``"brier"``) or log (``"log"``)
    score: ``{"score", "mcb", "dsc", "unc"}`` with score = mcb − dsc + unc."""
    from calcheck.metrics import corp as _corp

    if score not in ("brier", "log"):
        raise UsageError(f"score must be 'brier' or 'log', got {score!r}")
    return vars(_corp.decompose(_corp.recalibration(Prepared(scores, labels)), score))


def ece_sweep(scores: ArrayLike, labels: ArrayLike, *, ties: str = "share") -> MetricResult:
    """ECE-sweep (Roelofs et al.): ECE on the most equal-mass bins with monotone label means."""
    return binned.ece_sweep(Prepared(scores, labels, ties=_ties(ties)))


def ecce(scores: ArrayLike, labels: ArrayLike) -> dict[str, MetricResult]:
    """ECCE-MAD and ECCE-R (docs/ecce.md), by id."""
    from calcheck.metrics import cumulative

    data, o = Prepared(scores, labels), MetricOptions()
    return {"ecce_mad": cumulative.ecce_mad(data, o), "ecce_r": cumulative.ecce_r(data, o)}


def ks(scores: ArrayLike, labels: ArrayLike, *, alpha: float = 0.05) -> TestResult:
    """Kolmogorov–Smirnov test of calibration on the walk of cumulative differences."""
    from calcheck.hypotests.cumulative import walk_test

    data = Prepared(scores, labels)
    return walk_test("ks", data.scores, data.labels, alpha=check_alpha(alpha, name="alpha"))


def kuiper(scores: ArrayLike, labels: ArrayLike, *, alpha: float = 0.05) -> TestResult:
    """Kuiper test of calibration on the walk of cumulative differences."""
    from calcheck.hypotests.cumulative import walk_test

    data = Prepared(scores, labels)
    return walk_test("kuiper", data.scores, data.labels, alpha=check_alpha(alpha, name="alpha"))


def evaluate(scores: ArrayLike, labels: ArrayLike, ids: list[str] | None = None,
             **options: Any) -> dict[str, MetricResult]:
    """Several binary metrics at once, sharing one sort; ``options`` as
    :class:`~calcheck.metrics.MetricOptions` (``bins``, ``alpha``, ``test``, ``tce_nmin``,
    ``tce_nmax``).  For multiclass input, files and tables use :func:`calcheck.score`."""
    from calcheck.metrics import resolve_metric_ids

    opts = MetricOptions(**options)
    return compute_metrics(Prepared(scores, labels, ties=_ties(opts.ties)),
                           resolve_metric_ids(ids), opts)


def _ties(ties: str) -> str:
    if ties not in ("share", "order"):
        raise UsageError(f"ties must be 'share' or 'order', got {ties!r}")
    return ties
