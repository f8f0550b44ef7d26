"""Metrics and tests on arrays: ``calcheck.ece(scores, labels)`` and its siblings.

>>> import numpy as np, calcheck
>>> s = np.array([0.1, 0.4, 0.35, 0.8]); y = np.array([0, 0, 1, 1])
>>> round(calcheck.ece(s, y, bins=2).value, 4)
0.0875

Every function takes ``weight=`` (sampling or importance weights: the weighted population's
number) or ``count=`` (row counts: exactly the number of the expanded rows), one value per row
(docs/weights.md); a metric or test without a weighted form refuses them with a
:class:`~calcheck.errors.UsageError` saying why.

>>> round(calcheck.ece(s, y, bins=2, count=[2, 1, 1, 1]).value, 4)
0.05
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from calcheck import registry
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
from calcheck.metrics._result import MetricSet
from calcheck.validation import check_alpha, check_bins, check_p
from calcheck.weights import weights_of

if TYPE_CHECKING:
    from calcheck.metrics.corp import Decomposition


def ece(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10, p: int = 1,
        weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricResult:
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
    return binned.ece(_data(scores, labels, weight, count, "ece"), bins=check_bins(bins),
                      p=check_p(p))


def mce(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10,
        weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricResult:
    """Maximum calibration error on ``bins`` equal-width bins."""
    return binned.mce(_data(scores, labels, weight, count, "mce"), bins=check_bins(bins))


def ace(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10,
        ties: str = "share",
        weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricResult:
    """Adaptive calibration error on ``bins`` equal-mass bins (cuts at ⌊j·n/B⌋ of the sorted
    scores; ``ties="share"`` splits a tie group cut by one pro rata, ``"order"`` by row
    position as the reference codes do)."""
    return binned.ace(_data(scores, labels, weight, count, "ace", ties=ties),
                      bins=check_bins(bins))


def mce_q(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10,
          ties: str = "share",
          weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricResult:
    """MCE(Q): maximum calibration error on ``bins`` equal-mass bins."""
    return binned.mce_q(_data(scores, labels, weight, count, "mce_q", ties=ties),
                        bins=check_bins(bins))


def pde(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10,
        ties: str = "share",
        weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricResult:
    """Probability deviation error on ``bins`` equal-mass bins."""
    return binned.pde(_data(scores, labels, weight, count, "pde", ties=ties),
                      bins=check_bins(bins))


def tce(scores: ArrayLike, labels: ArrayLike, *, binning: str = "pava-bc", bins: int = 10,
        alpha: float = 0.05, test: str = "binomial", n_min: int | None = None,
        n_max: int | None = None, ties: str = "share",
        weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricResult:
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
    weight, count : array_like of shape (n,), optional
        Row counts (``count=``: the expanded rows' TCE); sampling weights are refused (the
        per-prediction binomial tests count labels).

    Returns
    -------
    MetricResult
        ``.value`` in percent; ``.bins`` and ``.bin_extra`` form the test-based reliability
        table (per bin: edges, n, empirical probability, min/quartiles/max of the predictions,
        number and percent rejected).
    """
    mid = {"pava-bc": "tce", "quantile": "tce_q", "pava": "tce_v", "uniform": "tce_u"}.get(
        binning, "tce")
    return _tce.tce(_data(scores, labels, weight, count, mid, ties=ties), binning=binning,
                    bins=check_bins(bins),
                    alpha=check_alpha(alpha, name="alpha"), test=test, n_min=n_min, n_max=n_max)


def tcal(scores: ArrayLike, labels: ArrayLike, *, adaptive: bool = True, bins: int | None = None,
         alpha: float = 0.05, trials: int | None = None, resample: str = "labels",
         rng: Any = 0, adaptive_grid: str = "bounded",
         adaptive_correction: str = "minp", weight: ArrayLike | None = None, count: ArrayLike | None = None,
         weight_null: str = "auto") -> TestResult:
    """T-Cal (Lee, Huang, Hassani, Dobriban): a test of calibration with a Monte Carlo p-value.

    Parameters
    ----------
    scores, labels : array_like of shape (n,)
        Predicted probabilities in [0, 1] and 0/1 outcomes.
    adaptive : bool, default True
        Test the dyadic levels m = 2^1 … 2^L jointly (adaptive T-Cal).  Ignored when ``bins``
        is given.
    bins : int, optional
        Fixed number of bins m (T-Cal with fixed m); bin id ⌊m·s⌋.
    alpha : float
        Significance level.
    trials : int, optional
        Monte Carlo draws of the null distribution.  Default: at least 1,000 and enough that
        the smallest attainable p-value is below α/10 (``details["min_attainable_pvalue"]``);
        an explicit count is honoured.
    resample : {"labels", "consistency"}
        Redraw labels only (exact type-I control) or scores and labels (the authors' code).
    rng : int, numpy.random.Generator or None
        Seed or generator; the same seed gives the same result.
    adaptive_grid : {"bounded", "paper"}
        The levels: up to the optimal bin count n^(2/3) of smoothness ≥ 1/2 (default), or the
        paper's grid up to 2^B, B = int(2·log2(n/√ln n)).
    adaptive_correction : {"minp", "bonferroni"}
        Joint calibration of the levels: min-P from the same null draws (default) or the
        paper's Bonferroni rule.
    weight, count : array_like of shape (n,), optional
        Sampling weights or row counts (docs/weights.md): the null redraws the labels with
        the weights held (``resample="labels"`` only); the levels' grid uses the expanded n
        of counts, Kish's effective n of weights.
    weight_null : {"auto", "fixed", "labels"}
        The null of sampling weights (docs/weights.md): weights held fixed, or class weights
        that follow the drawn label; ``"auto"``: ``"labels"`` for class weights.

    Returns
    -------
    TestResult
        ``.statistic`` (T_m for fixed m; the smallest level p-value for adaptive), ``.pvalue``,
        ``.reject``, ``.details`` (critical values, the per-level table), ``.to_dict()``.
    """
    from calcheck.hypotests import tcal as _tcal
    from calcheck.hypotests import tcal_trials, weighted_n

    alpha = check_alpha(alpha, name="alpha")
    if not isinstance(adaptive, bool):
        raise UsageError(f"adaptive must be True or False, got {adaptive!r}")
    _check_choice(adaptive_grid, _tcal.GRIDS, "adaptive_grid")
    _check_choice(adaptive_correction, _tcal.CORRECTIONS, "adaptive_correction")
    rng = _check_rng(rng)
    if trials is not None:
        _check_trials(trials)
    data = _data(scores, labels, weight, count, "tcal", weight_null=weight_null)
    fixed = bins is not None
    if not fixed and not adaptive:
        raise UsageError("give bins=m for T-Cal with fixed m, or adaptive=True")
    if data.weights is not None and resample != "labels":
        raise UsageError(f"resample={resample!r} redraws unweighted rows; weighted rows use "
                         "resample='labels'")
    n = data.n if data.weights is None else weighted_n(data.weights)
    mult = 1 if fixed or adaptive_correction == "minp" else _tcal.n_levels(n, adaptive_grid)
    n_trials, note = tcal_trials(trials, alpha, mult, auto=trials is None)
    if data.weights is not None:
        res = _weighted_tcal(data, bins, n, alpha, n_trials, _seed_of(rng), adaptive_grid,
                             adaptive_correction)
    elif bins is not None:
        res = _tcal.tcal_fixed(data.scores, data.labels, m=check_bins(bins, name="bins"),
                               alpha=alpha, trials=n_trials, resample=resample, rng=rng)
    else:
        res = _tcal.tcal_adaptive(data.scores, data.labels, alpha=alpha, trials=n_trials,
                                  resample=resample, rng=rng, grid=adaptive_grid,
                                  correction=adaptive_correction)
    if note:
        res.details["trials_note"] = note
    return res


def skce(probs: ArrayLike, labels: ArrayLike, *, bandwidth: float | None = None,
         seed: int = 0, weight: ArrayLike | None = None,
         count: ArrayLike | None = None) -> MetricResult:
    """Squared kernel calibration error (Widmann, Lindsten & Zachariah 2019), unbiased.

    Parameters
    ----------
    probs : array_like of shape (n,) or (n, K)
        Binary scores P(y = 1) (taken as the vector (1 − s, s)) or class probabilities.
    labels : array_like of shape (n,)
        0/1 labels, or class indices 0 … K − 1.
    bandwidth : float, optional
        ν of the kernel exp(−‖p − q‖₂/ν); default the median pairwise distance.
    seed : int
        Seed of the subsample drawn above 5,000 rows (``settings["subsample"]``).

    Returns
    -------
    MetricResult
        ``.value`` (may be negative: an unbiased estimate of 0 when calibrated) and
        ``.settings`` (bandwidth, rows used, subsample).
    """
    from calcheck.metrics import skce as _skce

    data = _kernel_input(probs, labels)
    weights = weights_of(weight, count, data[1].shape[0])
    res = _skce.skce(data[0], data[1], bandwidth=None if bandwidth is None
                     else _skce.check_bandwidth(float(bandwidth)), seed=_check_rng(seed) or 0,
                     weights=weights)
    return MetricResult(id="skce", value=res.value, settings=res.settings(seed),
                        n_samples=res.rows if weights is not None and weights.frequency
                        else int(data[1].shape[0]))


def skce_test(probs: ArrayLike, labels: ArrayLike, *, alpha: float = 0.05,
              trials: int | None = None, rng: Any = 0,
              bandwidth: float | None = None, weight: ArrayLike | None = None,
              count: ArrayLike | None = None, weight_null: str = "auto") -> TestResult:
    """The SKCE test of calibration over every class: Monte Carlo p-value from labels drawn
    from the predictions (``trials`` default: at least 1,000, floor below α/10)."""
    from calcheck.hypotests import tcal_trials
    from calcheck.hypotests.kernel import skce_test as _test

    alpha = check_alpha(alpha, name="alpha")
    probs_, labels_ = _kernel_input(probs, labels)
    weights = weights_of(weight, count, labels_.shape[0], weight_null)
    n_trials, note = tcal_trials(trials, alpha, 1, auto=trials is None)
    res = _test(probs_, labels_, alpha=alpha, trials=n_trials, rng=_check_rng(rng),
                bandwidth=bandwidth, weights=weights)
    if note:
        res.details["trials_note"] = note
    return res


def _kernel_input(probs: ArrayLike, labels: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validated binary scores (1-D) or class probabilities (2-D, K ≥ 2) and labels."""
    P = np.asarray(probs)
    if P.ndim == 1:
        data = Prepared(P, labels)
        return data.scores, data.labels
    from calcheck.validation import check_class_labels, check_probabilities, check_same_length

    if P.ndim != 2 or P.shape[1] < 2:
        raise UsageError(f"probs must be 1-D scores or an (n, K) matrix with K >= 2, got shape "
                         f"{P.shape}")
    probs_ = check_probabilities(P)
    labels_ = check_class_labels(labels, probs_.shape[1])
    check_same_length(probs_, labels_, names=("probs", "labels"))
    return np.asarray(probs_, dtype=np.float64), np.asarray(labels_, dtype=np.int64)


def _check_choice(value: Any, choices: tuple[str, ...], name: str) -> None:
    if not isinstance(value, str) or value not in choices:
        raise UsageError(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def _check_rng(rng: Any) -> Any:
    """A seed (int ≥ 0), a numpy Generator or None; anything else is a UsageError."""
    if rng is None or isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, bool) or not isinstance(rng, (int, np.integer)) or rng < 0:
        raise UsageError(f"rng must be a seed (an integer >= 0), a numpy.random.Generator or "
                         f"None, got {rng!r}")
    return int(rng)


def _check_trials(trials: Any) -> int:
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise UsageError(f"trials must be an integer >= 1, got {trials!r}")
    return int(trials)


def _seed_of(rng: Any) -> int:
    """A seed from a seed, a Generator (one draw of it) or None (0)."""
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(0, 2 ** 63))
    return 0 if rng is None else int(rng)


def hosmer_lemeshow(scores: ArrayLike, labels: ArrayLike, *, groups: int = 10,
                    alpha: float = 0.05, ties: str = "share",
                    hl_df: str = "external", trials: int = 1000,
                    rng: int = 0, weight: ArrayLike | None = None, count: ArrayLike | None = None,
                    weight_null: str = "auto") -> TestResult:
    """Hosmer–Lemeshow test on equal-mass groups: χ²(G) for predictions not fitted to these
    rows (``hl_df="external"``, default), χ²(G − 2) for a logistic model fitted to them
    (``hl_df="fitted"``); G counts the informative groups.  When a group expects fewer than
    5 positives or negatives, the p-value comes from ``trials`` draws of the exact null
    (seeded by ``rng``; ``details["pvalue_method"]`` says which)."""
    from calcheck.hypotests import classical, weighted

    _check_choice(hl_df, classical.HL_DF, "hl_df")
    data = _data(scores, labels, weight, count, "hl", weight_null=weight_null)
    g, a = check_bins(groups, name="groups"), check_alpha(alpha, name="alpha")
    t, seed = _check_trials(trials), _seed_of(_check_rng(rng))
    if data.weights is not None:
        return weighted.hosmer_lemeshow(data.scores, data.labels, data.weights, groups=g,
                                        alpha=a, ties=data.ties, df=hl_df, trials=t, seed=seed)
    return classical.hosmer_lemeshow(data.scores, data.labels, groups=g, alpha=a, ties=data.ties,
                                     df=hl_df, trials=t, seed=seed)


def spiegelhalter(scores: ArrayLike, labels: ArrayLike, *, alpha: float = 0.05,
                  weight: ArrayLike | None = None, count: ArrayLike | None = None,
                  weight_null: str = "auto") -> TestResult:
    """Spiegelhalter's two-sided Z test, with the direction of the miscalibration."""
    from calcheck.hypotests import classical, weighted

    data = _data(scores, labels, weight, count, "spiegelhalter", weight_null=weight_null)
    alpha = check_alpha(alpha, name="alpha")
    if data.weights is not None:
        return weighted.spiegelhalter(data.scores, data.labels, data.weights, alpha=alpha)
    return classical.spiegelhalter(data.scores, data.labels, alpha=alpha)


def cox(scores: ArrayLike, labels: ArrayLike, *, alpha: float = 0.05,
        ci_level: float = 0.95, weight: ArrayLike | None = None,
        count: ArrayLike | None = None) -> TestResult:
    """Cox calibration intercept and slope with the likelihood-ratio test of (0, 1), and Wald
    intervals (``intercept_ci``, ``slope_ci``) at ``ci_level`` (sampling weights: the robust
    Wald test of the weighted fit, docs/weights.md)."""
    from calcheck.hypotests import classical, weighted

    data = _data(scores, labels, weight, count, "cox")
    a, level = check_alpha(alpha, name="alpha"), check_alpha(ci_level, name="ci_level")
    if data.weights is not None:
        return weighted.cox(data.scores, data.labels, data.weights, alpha=a, ci_level=level)
    return classical.cox(data.scores, data.labels, alpha=a, ci_level=level)


def binomial_discrete(scores: ArrayLike, labels: ArrayLike, *, alpha: float = 0.05,
                      weight: ArrayLike | None = None, count: ArrayLike | None = None) -> TestResult:
    """Exact binomial test per distinct score value with Bonferroni (discrete predictors)."""
    from calcheck.hypotests import classical

    data = _data(scores, labels, weight, count, "binomial_discrete")
    return classical.binomial_discrete(data.scores, data.labels,
                                       counts=None if data.weights is None else data.weights.values,
                                       alpha=check_alpha(alpha, name="alpha"))


def brier(scores: ArrayLike, labels: ArrayLike, *,
          weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricResult:
    """Brier score."""
    return scoring.brier(_data(scores, labels, weight, count, "brier"))


def log_loss(scores: ArrayLike, labels: ArrayLike, *,
             weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricResult:
    """Log loss (natural log), scores clipped to [1e-15, 1 − 1e-15]."""
    return scoring.log_loss(_data(scores, labels, weight, count, "log_loss"))


def pc(scores: ArrayLike, labels: ArrayLike, *,
       weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricResult:
    """Probabilistic count of the scores (labels are validated but not used)."""
    return scoring.pc(_data(scores, labels, weight, count, "pc"))


def smece(scores: ArrayLike, labels: ArrayLike, *, sigma: float | None = None,
          weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricResult:
    """Smooth ECE (Błasiok & Nakkiran) at its fixed-point bandwidth, or at ``sigma``;
    ``.extra["sigma"]`` is the bandwidth used (docs/smooth-ece.md)."""
    from calcheck.metrics import smooth

    if sigma is not None:
        from calcheck.checks import check_sigma

        sigma = check_sigma(sigma, "sigma")
    return smooth.smece(_data(scores, labels, weight, count, "smece"),
                        MetricOptions(smece_sigma=sigma))


def ici(scores: ArrayLike, labels: ArrayLike, *,
        weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricSet:
    """ICI, E50, E90 and Emax of the LOESS calibration curve (docs/ici.md): a result object
    whose ``.value`` is ICI and whose metrics are there by id (``r["e90"]``, ``r.e90``)."""
    from calcheck.metrics import ici as _ici

    ids = ["ici", "e50", "e90", "emax"]
    data, o = _data(scores, labels, weight, count, *ids), MetricOptions()
    return MetricSet({m: getattr(_ici, m)(data, o) for m in ids})


def corp(scores: ArrayLike, labels: ArrayLike, *, score: str = "brier",
         weight: ArrayLike | None = None, count: ArrayLike | None = None) -> Decomposition:
    """The CORP decomposition (docs/corp.md) of the Brier (``"brier"``) or log (``"log"``)
    score: a result object with ``score``, ``mcb``, ``dsc`` and ``unc`` (score = mcb − dsc +
    unc; also by key, ``r["mcb"]``); ``.value`` is MCB."""
    from calcheck.metrics import corp as _corp

    if score not in ("brier", "log"):
        raise UsageError(f"score must be 'brier' or 'log', got {score!r}")
    data = _data(scores, labels, weight, count, "corp_mcb")
    return _corp.decompose(_corp.recalibration(data), score)


def ece_sweep(scores: ArrayLike, labels: ArrayLike, *, ties: str = "share",
              weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricResult:
    """ECE-sweep (Roelofs et al.): ECE on the most equal-mass bins with monotone label means."""
    return binned.ece_sweep(_data(scores, labels, weight, count, "ece_sweep", ties=ties))


def ecce(scores: ArrayLike, labels: ArrayLike, *,
         weight: ArrayLike | None = None, count: ArrayLike | None = None) -> MetricSet:
    """ECCE-MAD and ECCE-R (docs/ecce.md): a result object whose ``.value`` is ECCE-MAD and
    whose metrics are there by id (``r["ecce_r"]``, ``r.ecce_r``)."""
    from calcheck.metrics import cumulative

    data, o = _data(scores, labels, weight, count, "ecce_mad", "ecce_r"), MetricOptions()
    return MetricSet({"ecce_mad": cumulative.ecce_mad(data, o),
                      "ecce_r": cumulative.ecce_r(data, o)})


def ks(scores: ArrayLike, labels: ArrayLike, *, alpha: float = 0.05, trials: int = 1000,
       rng: int = 0, weight: ArrayLike | None = None, count: ArrayLike | None = None,
       weight_null: str = "auto", ties: str = "share") -> TestResult:
    """Kolmogorov–Smirnov test of calibration on the walk of cumulative differences (on at
    most 1,000 distinct scores the null is simulated: ``trials`` draws seeded by ``rng``)."""
    return _walk("ks", _data(scores, labels, weight, count, "ks", weight_null=weight_null),
                 alpha, trials, rng, ties)


def kuiper(scores: ArrayLike, labels: ArrayLike, *, alpha: float = 0.05, trials: int = 1000,
           rng: int = 0, weight: ArrayLike | None = None, count: ArrayLike | None = None,
           weight_null: str = "auto", ties: str = "share") -> TestResult:
    """Kuiper test of calibration on the walk of cumulative differences (on at most 1,000
    distinct scores the null is simulated: ``trials`` draws seeded by ``rng``)."""
    return _walk("kuiper", _data(scores, labels, weight, count, "kuiper", weight_null=weight_null),
                 alpha, trials, rng, ties)


def evaluate(scores: ArrayLike, labels: ArrayLike, ids: list[str] | None = None, *,
             weight: ArrayLike | None = None, count: ArrayLike | None = None,
             **options: Any) -> dict[str, MetricResult]:
    """Several binary metrics at once, sharing one sort; ``options`` as
    :class:`~calcheck.metrics.MetricOptions` (``bins``, ``alpha``, ``test``, ``tce_nmin``,
    ``tce_nmax``).  For multiclass input, files and tables use :func:`calcheck.score`."""
    from calcheck.metrics import resolve_metric_ids

    opts = MetricOptions(**options)
    wanted = resolve_metric_ids(ids)
    kind = "weight" if weight is not None else "count" if count is not None else None
    if ids is None and kind:          # the default set without the metrics that refuse them
        wanted = [m for m in wanted if registry.weight_refusal(m, kind) is None]
    return compute_metrics(_data(scores, labels, weight, count, *wanted, ties=opts.ties),
                           wanted, opts)


def _data(scores: ArrayLike, labels: ArrayLike, weight: ArrayLike | None,
          count: ArrayLike | None, *ids: str, ties: str = "share",
          weight_null: str = "auto") -> Prepared:
    """The validated rows, with their weights when given; a metric or test of ``ids`` without
    a weighted form of that kind is a UsageError saying why."""
    data = Prepared(scores, labels, ties=_ties(ties))
    weights = weights_of(weight, count, data.n, weight_null)
    if weights is None:
        return data
    for mid in ids:
        why = registry.weight_refusal(mid, weights.kind)
        if why:
            raise UsageError(f"{weights.kind}=: {why}")
    return Prepared(data.scores, data.labels, validate=False, ties=data.ties, weights=weights)


def _weighted_tcal(data: Prepared, bins: int | None, n: int, alpha: float, trials: int,
                   seed: int, grid: str, correction: str) -> TestResult:
    """T-Cal of weighted rows (:func:`calcheck.hypotests.weighted.tcal`): level ``bins``, or
    the adaptive levels of the (expanded or effective) sample size ``n``."""
    from calcheck.hypotests import weighted
    from calcheck.hypotests.tcal import adaptive_ms, check_null_size

    assert data.weights is not None
    ms = [check_bins(bins, name="bins")] if bins is not None else adaptive_ms(n, grid)
    check_null_size(len(ms), trials)
    return weighted.tcal(data.scores, data.labels, data.weights, ms=ms, alpha=alpha,
                         trials=trials, seed=seed, adaptive=bins is None,
                         correction=correction, grid=grid)


def _walk(test_id: str, data: Prepared, alpha: float, trials: int, rng: Any,
          ties: str) -> TestResult:
    """The KS or Kuiper test of ``data`` (weighted rows: their weighted walk)."""
    from calcheck.hypotests import weighted
    from calcheck.hypotests.cumulative import walk_test

    a, t, seed = check_alpha(alpha, name="alpha"), _check_trials(trials), _seed_of(_check_rng(rng))
    if data.weights is not None:
        return weighted.walk_test(test_id, data.scores, data.labels, data.weights, alpha=a,
                                  ties=_ties(ties), trials=t, seed=seed)
    return walk_test(test_id, data.scores, data.labels, alpha=a, ties=_ties(ties), trials=t,
                     seed=seed)


def _ties(ties: str) -> str:
    if ties not in ("share", "order"):
        raise UsageError(f"ties must be 'share' or 'order', got {ties!r}")
    return ties
