"""Calibration tests of weighted or aggregated rows (``--weight``, ``--count``; docs/weights.md).

Every statistic below is the unweighted one with each row's sums taken with its **mass** w
(a count k, or a weight).  Its null — the law of the labels under calibration, given the
scores — is that of :meth:`calcheck.weights.Weights.regime`:

* **counts**: a row of count k holds k independent labels, K ~ Binomial(k, s): every number is
  the expanded file's;
* **fixed** (weights that do not depend on the label: importance or survey weights): the
  label is redrawn y* ~ Bernoulli(s) and the weight held fixed; the variance of w(y − s) is
  w²·s(1 − s);
* **labels** (class weights: every positive one weight w₁, every negative w₀ — a class-based
  down-sampling, e.g. every positive kept and 10 % of the negatives at weight 10): among the
  kept rows P(y = 1 | s) = q(s) = (s/w₁)/(s/w₁ + (1 − s)/w₀) when the population is
  calibrated, and a row's weight follows its label; the label is redrawn y* ~ Bernoulli(q) with
  its class's weight, and the variance of w(y − s) (mean 0) is q·w₁²(1 − s)² + (1 − q)·w₀²s².

With unit weights every statistic is the unweighted test's.  Multiplying every weight by a
constant changes no statistic or p-value.

* Spiegelhalter: Z = Σ w (y − s)(1 − 2s) / √(Σ (1 − 2s)² Var w(y − s)).
* Hosmer–Lemeshow: equal-mass groups on the mass axis; O_g = Σ w y, E_g = Σ w s; the
  variance V_g·p̄_g(1 − p̄_g) with V_g = Σ k or Σ w² (counts, fixed weights; p̄_g = E_g / Σ_g w:
  the classical n_g·p̄_g(1 − p̄_g) at unit weights) or Σ Var w(y − s) (labels), less what
  pro-rata sharing of a tie group removes; the χ² reference, or with an expected count under
  5 on the effective group sizes (Σ_g w)²/V_g the null by simulation.
* Cox: the weighted logistic fit of y on logit(s).  Counts: the expanded file's likelihood and
  its likelihood-ratio test.  Weights: a pseudo-likelihood, so the test of (0, 1) is a Wald
  test with the robust (sandwich) covariance H⁻¹ B H⁻¹, B = Σ w² (y − p)² [1 x; x x²], and
  the intervals are robust too.
* T-Cal: the debiased statistic T_m = (1/Σw) Σ_b (S_b² − Q_b) / N_b with S_b = Σ w (s − y),
  Q_b = Σ w² (s − y)² (Σ k (s − y)² for counts), N_b = Σ w; its Monte Carlo null redraws the
  labels by the regime (under ``labels`` the weights, and with them N_b and Σw, follow the
  drawn labels): exact Monte Carlo p-values given the scores.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import sort_order
from calcheck.hypotests._result import TestResult
from calcheck.weights import MassAxis, NullDraws, Weights, mass_cuts, null_variance

CHUNK_BYTES = 64_000_000        # memory of one chunk of null draws (trials × rows × 8 bytes × 3)


def _rows(scores: FloatArray, labels: np.ndarray, weights: Weights,
          ties: str = "share") -> tuple[FloatArray, FloatArray, Weights]:
    """(s, y, weights) sorted by score (stable for ``ties="order"``)."""
    order = sort_order(np.asarray(scores, dtype=np.float64), ties)
    return (np.asarray(scores, dtype=np.float64)[order],
            np.asarray(labels, dtype=np.float64)[order], weights.subset(order))


def _how(weights: Weights, labels: np.ndarray) -> str:
    return regime_note(*weights.regime(labels))


def regime_note(regime: str, cw: tuple[float, float] | None) -> str:
    """The ``settings.weights`` of a test under the null ``regime`` (:meth:`Weights.regime`)."""
    if regime == "count":
        return "counts: the expanded file's statistic"
    if regime == "labels":
        assert cw is not None
        return (f"class weights (negatives {cw[0]:g}, positives {cw[1]:g}): labels redrawn "
                "from the kept rows' rate q(s), each with its class's weight")
    return "weights held fixed: labels redrawn as Bernoulli(s), variances w²·s(1 − s)"


def _with_settings(res: TestResult, weights: Weights, labels: np.ndarray,
                   **more: Any) -> TestResult:
    return dataclasses.replace(res, settings={**res.settings,
                                              "weights": _how(weights, labels), **more})


# ---------------------------------------------------------------------------------------------
# Spiegelhalter


def spiegelhalter(scores: FloatArray, labels: np.ndarray, weights: Weights, *,
                  alpha: float = 0.05) -> TestResult:
    """Spiegelhalter's Z of weighted rows (module docstring)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    w = weights.values
    t = 1.0 - 2.0 * s
    res = spiegelhalter_of_sums(float(np.dot(w, (y - s) * t)),
                                float(np.dot(t * t, null_variance(weights, s, y))),
                                weights.total, float(np.dot(w, s)), float(np.dot(w, y)),
                                alpha=alpha)
    return _with_settings(res, weights, y)


def spiegelhalter_of_sums(num: float, den: float, total: float, sum_score: float,
                          sum_label: float, *, alpha: float) -> TestResult:
    """Spiegelhalter's Z from Σ w (y − s)(1 − 2s), Σ (1 − 2s)² Var w(y − s), Σw, Σw·s and
    Σw·y (the in-memory and the streamed weighted rows)."""
    from calcheck.hypotests.classical import spiegelhalter_from_sums

    res = spiegelhalter_from_sums(num, den, n=1, mean_score=sum_score / total,
                                  mean_label=sum_label / total, alpha=alpha)
    details = {**res.details, "brier_excess": res.details["brier_excess"] / total}
    return dataclasses.replace(res, details=details)


# ---------------------------------------------------------------------------------------------
# Hosmer–Lemeshow


def hosmer_lemeshow(scores: FloatArray, labels: np.ndarray, weights: Weights, *,
                    groups: int = 10, alpha: float = 0.05, ties: str = "share",
                    df: str = "external", trials: int = 1000, seed: int = 0) -> TestResult:
    """Hosmer–Lemeshow on ``groups`` equal-mass groups of weighted rows (module docstring)."""
    s, y, weights = _rows(scores, labels, weights, ties)
    w, v = weights.values, weights.variance_mass()
    exact = weights.regime(y)[0] == "labels"         # the null variance row by row
    ax = MassAxis.of(s, y, w, null_variance(weights, s, y) if exact else v, ties)
    cuts = mass_cuts(ax.total, groups, weights.frequency)
    # Σ k or Σ w² per unit: the effective group sizes of the small-count rule
    vcum = np.concatenate(([0.0], np.cumsum(np.add.reduceat(v, ax.first)))) \
        if s.shape[0] else np.zeros(1)

    draws = NullDraws.of(weights, s, y)

    def draw(t_: int, rng: np.random.Generator) -> FloatArray:
        mass, ws = draws(t_, rng)                            # O* = E + Σ w*(y* − s)
        return np.asarray(w * s + mass - ws * s, dtype=np.float64)

    def null(trials_: int) -> FloatArray:
        return _group_draws(ax, cuts, draw, s.shape[0], trials_, seed)

    res = hl_on_axis(ax, vcum, cuts, exact, groups=groups, alpha=alpha, df=df, trials=trials,
                     seed=seed, null=null)
    return _with_settings(res, weights, y, ties=ties)


def hl_on_axis(ax: MassAxis, vcum: FloatArray, cuts: FloatArray, exact: bool, *, groups: int,
               alpha: float, df: str, trials: int | None, seed: int,
               null: Any, null_how: str | None = None) -> TestResult:
    """Hosmer–Lemeshow of the groups between the masses ``cuts`` of the axis ``ax`` (its
    ``V``: each unit's null variance when ``exact`` — the ``labels`` null — else its variance
    mass Σv, whose cumulative sums ``vcum`` are, either way); ``null(trials)``: the groups'
    O*_g of that many draws (the small-count rule's simulation; ``null_how`` says how, when
    not the exact null)."""
    from calcheck.hypotests.classical import hosmer_lemeshow_from_groups

    unit_var = np.diff(ax.V) if exact else np.diff(ax.V) * ax.scores * (1.0 - ax.scores)
    loss = ax.variance_loss(cuts, unit_var)
    return hosmer_lemeshow_from_groups(np.diff(cuts), np.diff(ax.at(ax.Y, cuts)),
                                       np.diff(ax.at(ax.S, cuts)), groups=groups, alpha=alpha,
                                       df=df, variance_loss=loss if loss.any() else None,
                                       trials=trials, seed=seed, null=null, null_how=null_how,
                                       variance_mass=np.diff(ax.at(vcum, cuts)),
                                       variance=np.diff(ax.at(ax.V, cuts)) if exact else None)


def _chunk(n: int, trials: int) -> int:
    return max(1, min(trials, CHUNK_BYTES // (24 * max(n, 1))))


def _group_draws(ax: MassAxis, cuts: FloatArray, draw: Any, n: int, trials: int,
                 seed: int) -> FloatArray:
    """O*_g of ``trials`` null draws (trials × groups): each row's drawn label mass
    (``draw(t, rng)``, t × n), summed per unit of the mass axis and shared between groups pro
    rata as the observed one is."""
    rng = np.random.default_rng(seed)
    keep = np.concatenate(([True], np.diff(ax.M) > 0))
    Mk = ax.M[keep]
    j = np.clip(np.searchsorted(Mk, cuts, side="right") - 1, 0, Mk.shape[0] - 2)
    width = Mk[j + 1] - Mk[j]
    frac = np.where(width > 0, (cuts - Mk[j]) / np.where(width > 0, width, 1.0), 0.0)
    out = np.empty((trials, cuts.shape[0] - 1))
    done = 0
    step = _chunk(n, trials)
    while done < trials:
        t = min(step, trials - done)
        drawn = draw(t, rng)
        unit = np.add.reduceat(drawn, ax.first, axis=1)
        cum = np.concatenate((np.zeros((t, 1)), np.cumsum(unit, axis=1)), axis=1)[:, keep]
        at = cum[:, j] + frac * (cum[:, np.minimum(j + 1, cum.shape[1] - 1)] - cum[:, j])
        out[done:done + t] = np.diff(at, axis=1)
        done += t
    return out


# ---------------------------------------------------------------------------------------------
# Cox


def cox(scores: FloatArray, labels: np.ndarray, weights: Weights, *, alpha: float = 0.05,
        ci_level: float = 0.95) -> TestResult:
    """Cox's intercept and slope of weighted rows: the likelihood-ratio test for counts, the
    robust Wald test for weights (module docstring)."""
    from calcheck.hypotests.classical import (
        NULL_FIT,
        cox_logit,
        cox_result,
        logistic_evaluator,
        newton_logistic,
    )

    order = np.lexsort((labels, scores))
    x = cox_logit(np.asarray(scores, dtype=np.float64)[order])
    y = np.asarray(labels, dtype=np.float64)[order]
    w = weights.values[order]

    fit = logistic_evaluator(x, y, w)
    a, b, ll_fit = newton_logistic(fit)
    ll_null = float(fit(NULL_FIT)[0])
    a0, _, _ = newton_logistic(fit, NULL_FIT, slope_fixed=True)
    if weights.frequency:
        res = cox_result(a, b, ll_fit, ll_null, alpha=alpha, ci_level=ci_level,
                         hessian=fit((a, b))[3:6], citl=(a0, float(fit((a0, 1.0))[3])))
        return _with_settings(res, weights, y)
    # robust (sandwich) covariance of the pseudo-likelihood fit
    p = 1.0 / (1.0 + np.exp(-(a + b * x)))
    xx = x * x

    def moments(v: FloatArray) -> FloatArray:
        """Σ v·[1 x; x x²] (the design's cross products, weighted by v)."""
        s1 = float(np.dot(v, x))
        return np.array([[float(v.sum()), s1], [s1, float(np.dot(v, xx))]])

    r = w * (y - p)
    p0 = 1.0 / (1.0 + np.exp(-(a0 + x)))
    return robust_cox(a, b, ll_fit, ll_null, a0, moments(w * p * (1.0 - p)), moments(r * r),
                      float(np.dot(w, p0 * (1.0 - p0))), float(np.dot(w * w, (y - p0) ** 2)),
                      alpha=alpha, ci_level=ci_level)


def robust_cox(a: float, b: float, ll_fit: float, ll_null: float, a0: float, H: FloatArray,
               B: FloatArray, h0: float, b0: float, *, alpha: float,
               ci_level: float, settings: dict[str, Any] | None = None) -> TestResult:
    """Cox's robust Wald test of sampling-weighted rows from the fit (a, b) with its
    pseudo-log-likelihood ℓ and ℓ(0, 1), the calibration intercept a0, the sandwich's
    H = Σ w p(1 − p)[1 x; x x²] and B = Σ w²(y − p)²[1 x; x x²] at (a, b), and at (a0, 1)
    h0 = Σ w p(1 − p), b0 = Σ w²(y − p)² (the in-memory and the streamed weighted rows)."""
    from calcheck.hypotests.classical import _chi2_sf, _normal_quantile, cox_result

    res = cox_result(a, b, ll_fit, ll_null, alpha=alpha, ci_level=ci_level, settings=settings)
    details = dict(res.details)
    z = _normal_quantile((1.0 + ci_level) / 2.0)
    try:
        Hi = np.linalg.inv(H)
        cov = Hi @ B @ Hi
        d = np.array([a, b - 1.0])
        stat = float(d @ np.linalg.solve(cov, d))
    except np.linalg.LinAlgError:
        cov, stat = None, math.inf
    if cov is not None:
        for i, (name, est) in enumerate((("intercept", a), ("slope", b))):
            se = math.sqrt(max(float(cov[i, i]), 0.0))
            details[f"{name}_se"] = se
            details[f"{name}_ci"] = {"low": est - z * se, "high": est + z * se,
                                     "level": ci_level, "method": "Wald, robust (sandwich)"}
    details["calibration_intercept"] = a0
    if h0 > 0:
        se0 = math.sqrt(b0) / h0
        details["calibration_intercept_se"] = se0
        details["calibration_intercept_ci"] = {"low": a0 - z * se0, "high": a0 + z * se0,
                                               "level": ci_level,
                                               "method": "Wald, robust (sandwich)"}
    pvalue = _chi2_sf(stat, 2) if math.isfinite(stat) else 0.0
    details["statistic_name"] = ("robust (sandwich) Wald statistic vs (intercept, slope) = "
                                 "(0, 1)")
    details["likelihood_ratio"] = res.statistic
    res = dataclasses.replace(res, statistic=stat, pvalue=pvalue, reject=pvalue <= alpha,
                              details=details)
    return dataclasses.replace(res, settings={**res.settings, "weights": (
        "robust (sandwich) Wald test of the weighted fit: valid for any weights")})


# ---------------------------------------------------------------------------------------------
# T-Cal


def _level_sums(x: FloatArray, starts: IntArray) -> FloatArray:
    """Sums of the columns of ``x`` (t × u) over the runs starting at ``starts``."""
    return np.add.reduceat(x, starts, axis=-1) if starts.shape[0] else np.zeros(
        (*x.shape[:-1], 0))


def _running(runs: FloatArray) -> FloatArray:
    """The runs' running sums from 0 (last axis): a level's bin sums are their differences at
    the bins' edges (:func:`_bin_sums`), so a level costs its bins, not every run (the runs
    are the finest cuts of all levels together)."""
    cum = np.cumsum(runs, axis=-1)
    return np.concatenate((np.zeros((*runs.shape[:-1], 1)), cum), axis=-1)


def _bin_sums(cum: FloatArray, where: IntArray) -> FloatArray:
    """A level's bin sums from the runs' running sums ``cum``, its bins starting at the runs
    ``where``."""
    ends = np.append(where[1:], cum.shape[-1] - 1)
    return np.asarray(cum[..., ends] - cum[..., where], dtype=np.float64)


def dpe(S: FloatArray, Q: FloatArray, N: FloatArray) -> Any:
    """Σ_b (S_b² − Q_b)/N_b over the bins of positive mass (last axis)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(N > 0, (S * S - Q) / np.where(N > 0, N, 1.0), 0.0).sum(axis=-1)


def plugin_of(S: FloatArray, Q: FloatArray, N: FloatArray, total: float) -> Any:
    """T-Cal's plug-in statistics of one level from its bins' S, Q and N (total mass W)."""
    from calcheck.hypotests.tcal import PluginStats

    return PluginStats(dpe=float(dpe(S, Q, N)) / total,
                       plugin_l2_biased=float(np.sum(np.where(
                           N > 0, S * S / np.where(N > 0, N, 1.0), 0.0)) / total),
                       plugin_l1=float(np.sum(np.abs(S)) / total))


def tcal(scores: FloatArray, labels: np.ndarray, weights: Weights, *, ms: list[int],
         alpha: float = 0.05, trials: int = 1000, seed: int = 0, adaptive: bool = True,
         correction: str = "minp", grid: str = "bounded") -> TestResult:
    """T-Cal (one level ``ms[0]``, or adaptive over ``ms``) of weighted rows (module
    docstring): the observed statistics and ``trials`` null draws by the weights' regime,
    then the same p-values as unweighted T-Cal (min-P or Bonferroni over levels)."""
    from calcheck.hypotests.tcal import adaptive_result, fixed_result
    from calcheck.hypotests.tcal_null import level_bounds

    s, y, weights = _rows(scores, labels, weights, "order")
    w, v = weights.values, weights.variance_mass()
    total = weights.total
    bounds = {m: level_bounds(s, m) for m in ms}
    # the runs between every level's cuts: each level's bins are unions of them
    cuts = np.unique(np.concatenate(list(bounds.values())))
    starts = cuts[:-1]
    where = {m: np.searchsorted(starts, bounds[m][:-1]) for m in ms}
    r = s - y
    N_run = _level_sums(w, starts)
    observed = []
    S_cum, Q_cum, N_cum = (_running(x) for x in (_level_sums(w * r, starts),
                                                 _level_sums(v * r * r, starts), N_run))
    for m in ms:
        S, Q, N = (_bin_sums(x, where[m]) for x in (S_cum, Q_cum, N_cum))
        observed.append(plugin_of(S, Q, N, total))
    rng = np.random.default_rng(seed)
    null = np.empty((len(ms), trials))
    if weights.frequency:
        _counted_null(null, s, w, starts, where, ms, total, rng)
    else:
        _weighted_null(null, s, y, weights, starts, where, ms, N_run, rng)
    settings = {"trials": trials, "resample": "labels", "seed": seed,
                "weights": _how(weights, y)}
    if not adaptive:
        return fixed_result(observed[0], null[0], m=ms[0], alpha=alpha,
                            settings={"m": ms[0], **settings})
    return adaptive_result(observed, null, ms, alpha=alpha, correction=correction,
                           details={"grid": grid, "max_bins": ms[-1]},
                           settings={"levels": f"round(2^(k/3)) from 2 to {ms[-1]} "
                                               f"({len(ms)} levels)" if grid == "bounded"
                                     else f"2^1..2^{len(ms)}", "grid": grid, **settings})


def _counted_null(null: FloatArray, s: FloatArray, k: FloatArray, starts: IntArray,
                  where: dict[int, IntArray], ms: list[int], total: float,
                  rng: np.random.Generator) -> None:
    """T-Cal's null draws of counted rows: a score's rows are one Binomial(Σk, s) — their
    positives are all that S_b = Σ(k·s) − K and Q_b = Σ(k·s²) − 2Σ(s·K) + K use — drawn per
    distinct score (a bin, ⌊m·s⌋, never splits one), summed into the runs between the levels'
    cuts."""
    from calcheck.binning import tie_bounds

    first = tie_bounds(s)[:-1]
    us = s[first]
    ku = np.add.reduceat(k, first) if first.shape[0] else np.zeros(0)
    at = np.searchsorted(first, starts)                # each run's first distinct score
    C1, C2 = _level_sums(ku * us, at), _level_sums(ku * us * us, at)
    N_cum = _running(_level_sums(ku, at))
    whole = np.round(ku).astype(np.int64)
    done = 0
    step = _chunk(us.shape[0], null.shape[1])
    while done < null.shape[1]:
        t = min(step, null.shape[1] - done)
        K = rng.binomial(whole, us, size=(t, us.shape[0])).astype(np.float64)
        KR, sKR = _level_sums(K, at), _level_sums(K * us, at)
        A_cum, B_cum = _running(C1 - KR), _running(C2 - 2.0 * sKR + KR)
        for i, m in enumerate(ms):
            null[i, done:done + t] = dpe(_bin_sums(A_cum, where[m]),
                                          _bin_sums(B_cum, where[m]),
                                          _bin_sums(N_cum, where[m])) / total
        done += t


def _weighted_null(null: FloatArray, s: FloatArray, y: FloatArray, weights: Weights,
                   starts: IntArray, where: dict[int, IntArray], ms: list[int],
                   N_run: FloatArray, rng: np.random.Generator) -> None:
    """T-Cal's null draws of sampling-weighted rows, by the weights' null (under ``labels``
    the weights, and with them N_b and Σw, follow the drawn labels).

    A row's terms are linear in its drawn label y* ∈ {0, 1}: w(s − y*) = w·s − y*·w and
    (w(s − y*))² = w²s² + y*·w²(1 − 2s) with w fixed; under ``labels`` (weight w₀ or w₁ by
    the label) w₀s + y*(w₁(s − 1) − w₀s), w₀²s² + y*(w₁²(1 − s)² − w₀²s²) and a mass of
    w₀ + y*(w₁ − w₀).  So a draw sums y* times fixed coefficients per run — the labels drawn
    as :meth:`~calcheck.weights.NullDraws.labels` draws them, without forming each row's
    weight and label mass (5·10⁵ class-weighted rows, ``test --method tcal``: 25.6 s →
    13.9 s)."""
    draws = NullDraws.of(weights, s, y)
    w = weights.values
    if draws.classes is not None:
        w0, w1 = draws.classes
        on = w > 0
        base = [np.where(on, w0 * s, 0.0), np.where(on, (w0 * s) ** 2, 0.0)]
        slope = [np.where(on, w1 * (s - 1.0) - w0 * s, 0.0),
                 np.where(on, (w1 * (1.0 - s)) ** 2 - (w0 * s) ** 2, 0.0),
                 np.where(on, w1 - w0, 0.0)]
        N_base = _level_sums(np.where(on, w0, 0.0), starts)
    else:
        base, slope = [w * s, (w * s) ** 2], [-w, w * w * (1.0 - 2.0 * s)]
    A0, B0 = (_level_sums(b, starts) for b in base)
    total = weights.total
    done = 0
    step = _chunk(s.shape[0], null.shape[1])
    while done < null.shape[1]:
        t = min(step, null.shape[1] - done)
        ystar = draws.labels(t, rng).astype(np.float64)
        A_cum = _running(A0 + _level_sums(ystar * slope[0], starts))
        B_cum = _running(B0 + _level_sums(ystar * slope[1], starts))
        if draws.classes is not None:
            N_t = N_base + _level_sums(ystar * slope[2], starts)
            N_cum, total_t = _running(N_t), N_t.sum(axis=1)
        else:
            N_cum, total_t = _running(N_run), np.full(t, total)
        for i, m in enumerate(ms):
            null[i, done:done + t] = dpe(_bin_sums(A_cum, where[m]),
                                          _bin_sums(B_cum, where[m]),
                                          _bin_sums(N_cum, where[m])) / total_t
        done += t


# ---------------------------------------------------------------------------------------------
# Kolmogorov–Smirnov and Kuiper on the weighted walk


def walk_test(test_id: str, scores: FloatArray, labels: np.ndarray, weights: Weights, *,
              alpha: float = 0.05, ties: str = "share", trials: int = 1000,
              seed: int = 0) -> TestResult:
    """The ``ks`` or ``kuiper`` test of weighted rows: the walk C_k = Σ_{i≤k} w_i(y_i − s_i)/W
    read at the tie groups' ends, over σ̂ = √(Σ Var w(y − s))/W (the null's variance,
    :func:`calcheck.weights.null_variance`).  Its increments are independent with mean 0
    under calibration, so C/σ̂ tends to a Brownian motion in the time of its variance — the
    same maxima as on [0, 1] — and the p-value is the Brownian series; with at most
    :data:`~calcheck.hypotests.cumulative.SIMULATE_MAX_GROUPS` distinct scores, the null's
    own walks by simulation (labels redrawn by the weights' null, :meth:`Weights.regime`)."""
    from calcheck.binning import tie_bounds
    from calcheck.hypotests import cumulative, simulate

    s, y, weights = _rows(scores, labels, weights, ties)
    w = weights.values
    first = tie_bounds(s)[:-1]
    total = weights.total
    walk = np.concatenate(([0.0], np.cumsum(np.add.reduceat(w * (y - s), first)))) / total
    sigma = float(np.sqrt(np.sum(null_variance(weights, s, y)))) / total

    def stat(c: FloatArray) -> Any:
        top, bottom = np.maximum(c.max(axis=-1), 0.0), np.minimum(c.min(axis=-1), 0.0)
        return np.maximum(top, -bottom) if test_id == "ks" else top - bottom

    raw = float(stat(walk))
    x = raw / sigma if sigma > 0 else (0.0 if raw == 0 else math.inf)
    details: dict[str, Any] = {"ecce": raw, "sigma": sigma,
                               "statistic_name": cumulative.STATISTIC_NAMES[test_id]}
    if first.shape[0] <= cumulative.SIMULATE_MAX_GROUPS and sigma > 0:
        rng = np.random.default_rng(seed)
        draws = NullDraws.of(weights, s, y)
        drawn = np.empty(trials)
        done = 0
        step = _chunk(s.shape[0], trials)
        while done < trials:
            t = min(step, trials - done)
            mass, ws = draws(t, rng)
            steps = np.add.reduceat(mass - ws * s, first, axis=1)
            walks = np.cumsum(steps, axis=1) / ws.sum(axis=1, keepdims=True)
            drawn[done:done + t] = stat(np.concatenate((np.zeros((t, 1)), walks), axis=1))
            done += t
        p = simulate.mc_pvalue(raw, drawn)
        details.update({"pvalue_method": "monte carlo", "distinct_values": int(first.shape[0]),
                        "min_attainable_pvalue": 1 / (trials + 1)})
        settings: dict[str, Any] = {"null": "labels redrawn by the weights' null",
                                    "trials": trials, "seed": seed}
    else:
        p = cumulative.max_abs_sf(x) if test_id == "ks" else cumulative.range_sf(x)
        details["pvalue_method"] = "brownian motion"
        settings = {"null": "standard Brownian motion in the time of the walk's variance",
                    "pvalue": "upper-tail series"}
    res = TestResult(id=test_id, statistic=x, pvalue=p, reject=p <= alpha, alpha=alpha,
                     details=details, settings=settings)
    return _with_settings(res, weights, y, ties=ties)
