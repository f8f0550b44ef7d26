"""Classical calibration tests beside T-Cal (docs/tests.md), and the binomial test of discrete scores.

References
----------
.. [1] Hosmer, Lemeshow. Goodness of fit tests for the multiple logistic regression model. 1980.
.. [2] Spiegelhalter. Probabilistic prediction in patient management and clinical trials. 1986.
.. [3] Cox. Two further applications of a model for binary regression. Biometrika 1958.
.. [4] Lee, Huang, Hassani, Dobriban. T-Cal, Appendix 8.2.4 (binomial test with Bonferroni).
.. [5] Hosmer, Lemeshow, Sturdivant. Applied Logistic Regression, 3rd ed., Wiley 2013, §5.2.2
       (the statistic of predictions from a model developed on other data is referred to
       χ²(G): no parameters were fitted to the rows tested).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import (
    count_value,
    label_sums,
    quantile_bounds,
    segment_sums,
    sort_order,
    tie_bounds,
)
from calcheck.hypotests._result import TestResult

LOGIT_EPS = 1e-15
HL_DF = ("external", "fitted")


MIN_EXPECTED = 5.0          # Cochran's rule: the χ² reference needs expected counts >= 5


def hosmer_lemeshow(scores: FloatArray, labels: IntArray, *, groups: int = 10,
                    alpha: float = 0.05, ties: str = "share",
                    df: str = "external", trials: int = 1000, seed: int = 0) -> TestResult:
    r"""Hosmer–Lemeshow test on ``groups`` equal-mass groups (cuts at ⌊g·n/G⌋ of the sorted
    scores; a tie group cut by one is shared pro rata, or split in row order with
    ``ties="order"``).

    .. math:: C = \sum_g \frac{(O_g - E_g)^2}{E_g (1 - E_g / n_g)}

    ``df="external"`` (default): C ~ χ²(G) — predictions scored on rows they were not fitted
    to, calcheck's normal case; ``df="fitted"``: C ~ χ²(G − 2), the original reference for a
    logistic model fitted on these very rows.  G counts the *informative* groups: empty groups
    and groups whose scores are all 0 or all 1 (no variance: they add 0 when O_g = E_g and make
    C infinite otherwise) do not count.  With shared ties (the default), a tie group cut by a
    bound adds its label sum pro rata to the groups it spans, which lowers the variance of O_g
    under calibration; the denominator drops by exactly that amount (:func:`shared_tie_loss`),
    so tied scores keep the size of the test.

    **Small expected counts.** χ²(G) is the distribution of C only when every informative
    group expects at least :data:`MIN_EXPECTED` positives and negatives (E_g ≥ 5 and
    n_g − E_g ≥ 5, Cochran's rule); with rare positives it is not (size 0.09–0.10 at α = 0.05
    measured).  Then the p-value comes from the exact null by simulation: ``trials`` label
    vectors y ~ Bernoulli(s) drawn per tie group (seeded by ``seed``;
    :mod:`calcheck.hypotests.simulate`), each giving C on the same groups
    (``pvalue_method: "monte carlo"``); otherwise ``"chi2"``.
    """
    order = sort_order(scores, ties)
    s, y = scores[order], labels[order]
    b = quantile_bounds(s.shape[0], groups)
    loss = None
    if ties == "share":
        t = tie_bounds(s)
        k = np.searchsorted(t, b[1:-1], side="right") - 1
        cut = (t[k] < b[1:-1]) & (b[1:-1] < t[np.minimum(k + 1, t.shape[0] - 1)])
        k = np.unique(k[cut])
        loss = shared_tie_loss(b, t[k], t[k + 1] - t[k], s[t[k]]) if k.size else None

    def null(trials_: int) -> FloatArray:
        from calcheck.hypotests import simulate

        start, score, size = simulate.units(s, None if ties == "share" else b)
        return np.concatenate([simulate.segment_sums(d, start, size, b)
                               for d in simulate.chunks(score, size, trials_, seed)])

    result = hosmer_lemeshow_from_groups(np.diff(b), label_sums(s, y, b, ties),
                                         segment_sums(s, b), groups=groups, alpha=alpha, df=df,
                                         variance_loss=loss, trials=trials, seed=seed,
                                         null=null)
    result.settings["ties"] = ties
    return result


def shared_tie_loss(bounds: IntArray, start: IntArray, size: IntArray,
                    value: FloatArray) -> FloatArray:
    """Per group, the binomial variance that pro-rata sharing removes: a tie group of N rows
    at score v whose L rows fall in group g adds L/N of its label sum to O_g, whose variance
    under calibration is (L²/N)·v(1 − v) instead of the L·v(1 − v) of L whole rows — a loss of
    L·(1 − L/N)·v(1 − v).  ``start``, ``size``, ``value``: the tie groups cut by a bound."""
    lo, hi = np.asarray(bounds[:-1])[None, :], np.asarray(bounds[1:])[None, :]
    a = np.asarray(start, dtype=np.float64)[:, None]
    n = np.asarray(size, dtype=np.float64)[:, None]
    v = np.asarray(value, dtype=np.float64)[:, None]
    L = np.maximum(0.0, np.minimum(a + n, hi) - np.maximum(a, lo))
    return np.asarray((L * (1.0 - L / n) * v * (1.0 - v)).sum(axis=0), dtype=np.float64)


def _hl_statistic(obs: FloatArray, exp: FloatArray, var: FloatArray) -> FloatArray:
    """C of every row of ``obs`` (trials × groups, or one vector)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        terms = np.where(var > 0, (obs - exp) ** 2 / np.where(var > 0, var, 1.0),
                         np.where(np.isclose(obs, exp), 0.0, np.inf))
    return np.asarray(terms.sum(axis=-1), dtype=np.float64)


def _hl_variances(n_g: FloatArray, exp: FloatArray, keep: np.ndarray,
                  variance_mass: ArrayLike | None, variance: ArrayLike | None
                  ) -> tuple[FloatArray, FloatArray]:
    """Each group's null variance of O_g and its (effective) size: E_g(1 − E_g/n_g) and n_g;
    weighted rows (``variance_mass`` Σv) V_g·p̄_g(1 − p̄_g) — or ``variance`` given — and
    n_g²/V_g."""
    if variance_mass is None:
        return exp * (1.0 - exp / n_g), n_g
    vm = np.asarray(variance_mass, dtype=np.float64)[keep]
    var0 = vm * (exp / n_g) * (1.0 - exp / n_g)
    eff = np.divide(n_g * n_g, vm, out=np.zeros_like(vm), where=vm > 0)
    if variance is not None:
        var0 = np.asarray(variance, dtype=np.float64)[keep]
    return var0, eff


def _hl_monte_carlo(stat: float, n_g: FloatArray, exp: FloatArray, var: FloatArray,
                    keep: np.ndarray, trials: int, seed: int,
                    null: Callable[[int], FloatArray] | None) -> tuple[float, str]:
    """The Monte Carlo p-value of the HL statistic ``stat`` and how its null was drawn: the
    exact one from ``null``, or per group Binomial(n_g, E_g/n_g) (conservative)."""
    from calcheck.hypotests.simulate import mc_pvalue

    if null is not None:
        draws = np.asarray(null(trials))[:, keep]
        how = "labels y ~ Bernoulli(s) redrawn per tie group (the exact null)"
    else:
        rng = np.random.default_rng(seed)
        draws = rng.binomial(np.maximum(np.round(n_g), 1).astype(np.int64),
                             np.clip(exp / n_g, 0.0, 1.0),
                             size=(trials, n_g.shape[0])).astype(np.float64)
        how = ("per group Binomial(n_g, mean score): a variance at least the exact one, "
               "so the p-value is conservative")
    return mc_pvalue(stat, _hl_statistic(draws.astype(np.float64), exp, var)), how


def hosmer_lemeshow_from_groups(count: ArrayLike, observed: ArrayLike, expected: ArrayLike, *,
                                groups: int = 10, alpha: float = 0.05,
                                df: str = "external",
                                variance_loss: ArrayLike | None = None,
                                trials: int | None = None, seed: int = 0,
                                null: Callable[[int], FloatArray] | None = None,
                                variance_mass: ArrayLike | None = None,
                                variance: ArrayLike | None = None,
                                null_how: str | None = None) -> TestResult:
    """Hosmer–Lemeshow from the groups' row counts, positives O_g and Σ score E_g;
    ``variance_loss`` (:func:`shared_tie_loss`) is subtracted from each group's variance
    E_g(1 − E_g/n_g) where tie groups cut by a bound were shared pro rata.  ``null_how``
    names the null of ``null`` when it is not the exact one.

    With small expected counts (:func:`hosmer_lemeshow`) and ``trials``, the p-value is a
    Monte Carlo one: ``null(trials)`` gives each trial's O*_g (trials × groups; the exact null,
    drawn from the rows), or without it — a streamed source, whose rows are not at hand —
    O*_g ~ Binomial(n_g, E_g/n_g), whose variance is at least the exact Poisson-binomial one,
    so that p-value is conservative.

    ``variance_mass``: weighted rows (:mod:`calcheck.hypotests.weighted`) — each group's Σv
    (counts: Σk; weights: Σw²) replaces n_g in the variance, V_g·p̄_g(1 − p̄_g), and the
    expected counts of the small-count rule are on the effective group size n_g²/V_g;
    ``variance``: each group's variance given directly (the design variance Σw²(y − s)²)."""
    if df not in HL_DF:
        from calcheck.errors import UsageError

        raise UsageError(f"unknown Hosmer–Lemeshow reference {df!r}; use one of "
                         f"{', '.join(HL_DF)}")
    n_all = np.asarray(count).astype(np.float64)
    keep = n_all > 0
    obs = np.asarray(observed)[keep].astype(np.float64)
    exp = np.asarray(expected, dtype=np.float64)[keep]
    n_g = n_all[keep]
    var0, eff = _hl_variances(n_g, exp, keep, variance_mass, variance)
    var = var0
    shared = variance_loss is not None and bool(np.any(np.asarray(variance_loss) > 0))
    if variance_loss is not None:
        var = np.maximum(var - np.asarray(variance_loss, dtype=np.float64)[keep], 0.0)
    stat = float(_hl_statistic(obs, exp, var))
    informative = var0 > 0
    g = int(informative.sum())
    constant = int(keep.sum()) - g
    dof = g if df == "external" else g - 2
    # expected positives and negatives (weighted rows: on the effective group sizes)
    e_pos = (exp if variance_mass is None else exp / n_g * eff)[informative]
    e_neg = eff[informative] - e_pos
    small = bool(np.any((e_pos < MIN_EXPECTED) | (e_neg < MIN_EXPECTED)))
    details: dict[str, Any] = {"df": dof, "df_rule": df, "groups": g,
                               "constant_groups": constant, "infinite": bool(np.isinf(stat)),
                               "min_expected": float(np.min(np.minimum(e_pos, e_neg)))
                               if g else None}
    settings: dict[str, Any] = {"groups": groups, "grouping": "equal-mass by index",
                                "hl_df": df, "tie_variance": "shared ties' variance removed"
                                if shared else "none cut"}
    if small and trials and dof > 0:
        p, how = _hl_monte_carlo(stat, n_g, exp, var, keep, trials, seed, null)
        how = null_how or how
        details.update({"pvalue_method": "monte carlo", "min_attainable_pvalue": 1 / (trials + 1),
                        "reference": f"the exact null by simulation: an expected count below "
                                     f"{MIN_EXPECTED:g} makes chi2({dof}) unreliable"})
        settings.update({"trials": trials, "seed": seed, "null": how})
    else:
        p = _chi2_sf(stat, dof) if dof > 0 else float("nan")
        details.update({"pvalue_method": "chi2",
                        "reference": (f"chi2(G) = chi2({dof}): predictions not fitted to these "
                                      "rows" if df == "external" else
                                      f"chi2(G - 2) = chi2({dof}): a logistic model fitted to "
                                      "these rows")})
    details["table"] = [{"n": count_value(a), "observed": float(o), "expected": float(e)}
                        for a, o, e in zip(n_g, obs, exp)]
    return TestResult(id="hosmer_lemeshow", statistic=stat, pvalue=p,
                      reject=bool(p <= alpha) if dof > 0 else False, alpha=alpha,
                      details=details, settings=settings)


def _chi2_sf(x: float, df: int) -> float:
    """P(χ²(df) ≥ x); for df = 2 (Cox's test) the closed form exp(−x/2), exact to the last
    bit and without scipy (whose import a streamed ``score`` with a direction would pay)."""
    if df == 2:
        return math.exp(-x / 2.0)
    from scipy.special import chdtrc  # scipy loads on first use: the streamed tests skip it

    return float(chdtrc(df, x))


def spiegelhalter(scores: FloatArray, labels: IntArray, *, alpha: float = 0.05) -> TestResult:
    r"""Spiegelhalter's Z test, two-sided.

    .. math:: Z = \frac{\sum (y - s)(1 - 2s)}{\sqrt{\sum (1 - 2s)^2 s (1 - s)}}

    The numerator is the Brier score minus its expectation under calibration, Σ (y − s)² −
    Σ s(1 − s); ``direction`` follows its sign (:func:`spiegelhalter_direction`).
    """
    s = scores
    y = labels.astype(np.float64)
    num = float(np.sum((y - s) * (1.0 - 2.0 * s)))
    den = float(np.sum((1.0 - 2.0 * s) ** 2 * s * (1.0 - s)))
    return spiegelhalter_from_sums(num, den, n=s.shape[0], mean_score=float(s.mean()),
                                   mean_label=float(y.mean()), alpha=alpha)


def spiegelhalter_from_sums(num: float, den: float, *, n: int, mean_score: float,
                            mean_label: float, alpha: float = 0.05) -> TestResult:
    """Spiegelhalter's test from Σ (y − s)(1 − 2s), Σ (1 − 2s)² s (1 − s) and the means (the
    streaming engine keeps exactly these sums)."""
    root = math.sqrt(den) if den > 0 else 0.0
    if root == 0.0:
        z = 0.0 if num == 0.0 else math.copysign(math.inf, num)
    else:
        z = num / root
    p = math.erfc(abs(z) / math.sqrt(2.0))          # 2·(1 − Φ(|z|))
    return TestResult(id="spiegelhalter", statistic=z, pvalue=p, reject=p <= alpha, alpha=alpha,
                      details={"mean_score": mean_score, "mean_label": mean_label,
                               "direction": spiegelhalter_direction(z),
                               "brier_excess": num / n},
                      settings={"alternative": "two-sided"})


SPIEGELHALTER_DIRECTIONS = {
    "too extreme": "Brier score above its expected value under calibration (Z > 0): "
                   "outcomes less predictable than the scores claim",
    "too cautious": "Brier score below its expected value under calibration (Z < 0): "
                    "outcomes more predictable than the scores claim",
    "none": "Z = 0"}


def spiegelhalter_direction(z: float) -> str:
    """What the sign of Spiegelhalter's Z itself says (:data:`SPIEGELHALTER_DIRECTIONS`): its
    numerator Σ (y − s)(1 − 2s) is positive when the outcomes fall nearer 1/2 than the scores
    (scores too extreme) and negative when they fall further from it (too cautious).  It is
    not the sign of the mean residual: a test's label follows its own statistic."""
    return "too extreme" if z > 0 else "too cautious" if z < 0 else "none"


LOGISTIC_BLOCK = 1 << 15      # rows a block of :func:`logistic_sums`: its temporaries stay in L2


def logistic_sums(x: FloatArray, y: FloatArray, beta: FloatArray,
                  weights: FloatArray | None = None, *,
                  block: int = LOGISTIC_BLOCK) -> FloatArray:
    """Log-likelihood, gradient and Hessian (negated) of logit P(y=1) = a + b·x at β = (a, b):
    ``[ℓ, Σr, Σr·x, Σw, Σw·x, Σw·x²]`` with r = y − p, w = p(1 − p) (row weights optional).
    Sums of rows add, so batches of a stream add their sums (:func:`newton_logistic`).

    The rows are taken ``block`` at a time (a block's dozen temporaries stay in cache: 2·10⁶
    rows 0.19 s → 0.08 s an evaluation), and the blocks' sums are added in the order numpy's
    pairwise summation adds the halves of a whole array, so the sums are bit for bit those of
    one block holding every row (:func:`pairwise_blocks`; ``block`` changes no number)."""
    def sums(a: int, b: int) -> FloatArray:
        return _logistic_block(x[a:b], y[a:b], beta, None if weights is None else weights[a:b])

    return pairwise_blocks(sums, int(x.shape[0]), block)


def logistic_evaluator(x: FloatArray, y: FloatArray, weights: FloatArray | None = None
                       ) -> Callable[[ArrayLike], FloatArray]:
    """β ↦ :func:`logistic_sums` of these rows, each β evaluated once: Cox's fits ask again
    for sums they had (ℓ at the fit, the Hessian at the fit, ℓ(0, 1) where the null fit
    starts) — 3 of ~18 evaluations."""
    seen: dict[tuple[float, float], FloatArray] = {}

    def fit(beta: ArrayLike) -> FloatArray:
        b = np.asarray(beta, dtype=np.float64)
        key = (float(b[0]), float(b[1]))
        if key not in seen:
            seen[key] = logistic_sums(x, y, b, weights)
        return seen[key]

    return fit


def pairwise_blocks(sums: Callable[[int, int], FloatArray], n: int, block: int) -> FloatArray:
    """``sums(a, b)`` (a vector of ``np.sum`` over rows a..b) over rows 0..n, split and added
    as numpy's pairwise summation splits a contiguous array (halves, the first rounded down
    to a multiple of 8, until a part has at most ``block`` rows; numpy adds parts of up to
    128 rows in one loop, so a block is at least that): each component is the ``np.sum`` of
    the whole column, to the bit
    (tests/test_weights_engines.py::test_logistic_sums_in_blocks_are_the_sums_of_one_block)."""
    block = max(block, 128)
    if n <= block:
        return sums(0, n)

    def part(a: int, m: int) -> FloatArray:
        if m <= block:
            return sums(a, a + m)
        h = m // 2
        h -= h % 8
        return part(a, h) + part(a + h, m - h)

    return part(0, n)


def _logistic_block(x: FloatArray, y: FloatArray, beta: FloatArray,
                    weights: FloatArray | None) -> FloatArray:
    """:func:`logistic_sums` of one block of rows."""
    eta = beta[0] + beta[1] * x
    # one exp serves p = σ(η), w = p(1 − p) = e/(1 + e)² and the log-likelihood, e = e^{−|η|}:
    # −log σ(η) = log1p(e) + max(−η, 0); −log(1 − σ(η)) likewise with +η
    e = np.exp(-np.abs(eta))
    inv = 1.0 / (1.0 + e)
    p = np.where(eta >= 0.0, inv, e * inv)
    w = e * inv * inv
    r = y - p
    nll = np.log1p(e) + np.maximum(np.where(y > 0.5, -eta, eta), 0.0)     # y is 0 or 1
    if weights is not None:
        w, r, nll = w * weights, r * weights, nll * weights
    wx = w * x
    # sums of products, not np.dot: BLAS threads compete with the Parquet decoder
    return np.array([-np.sum(nll), np.sum(r), np.sum(r * x), np.sum(w), np.sum(wx),
                     np.sum(wx * x)])


def newton_steps(beta0: ArrayLike = (0.0, 0.0), *, iters: int = 100, last_eval: bool = True,
                 slope_fixed: bool = False
                 ) -> Generator[FloatArray, FloatArray, tuple[float, float, float]]:
    """Newton's method with step halving as a coroutine: it yields each β = (a, b) whose
    :func:`logistic_sums` it needs and is sent them back, and returns (a, b, ℓ) — so one
    driver evaluates the iterates of an array in memory (:func:`newton_logistic`) and another
    those of several fits in one pass over a stream.

    It stops after a step under 1e-10.  Without ``last_eval`` (a stream, where an evaluation is
    a pass over the files) that final step is taken without evaluating its end point when ℓ
    can change by at most |∇ℓ·step| ≤ 1e-12·|ℓ| along it (far below ℓ's rounding).
    ``slope_fixed``: the slope stays at b₀ (the calibration intercept's fit: logit P(y=1) =
    a + x, with x the offset) and only the intercept moves, step Σr / Σw."""
    beta = np.asarray(beta0, dtype=np.float64)
    sums = yield beta
    for _ in range(iters):
        grad = sums[1:3]
        if slope_fixed:
            step = np.array([grad[0] / sums[3] if sums[3] > 0 else 0.0, 0.0])
        else:
            hess = np.array([[sums[3], sums[4]], [sums[4], sums[5]]])
            try:
                step = np.linalg.solve(hess, grad)
            except np.linalg.LinAlgError:
                step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        if (not last_eval and np.max(np.abs(step)) < 1e-10
                and abs(float(grad[0] * step[0] + grad[1] * step[1]))
                <= 1e-12 * max(1.0, abs(float(sums[0])))):
            beta = beta + step
            break
        # a step that lowers ℓ is halved; on a stream ℓ's rounding (≈1e-16·|ℓ| per term) is
        # no descent: there a candidate within 1e-12·|ℓ| is accepted (each halving is a pass)
        slack = 1e-12 if last_eval else 1e-12 * max(1.0, abs(float(sums[0])))
        for _ in range(30):
            cand = beta + step
            cand_sums = yield cand
            if cand_sums[0] >= sums[0] - slack:
                break
            step /= 2.0
        beta, sums = cand, cand_sums
        if np.max(np.abs(step)) < 1e-10:
            break
    return float(beta[0]), float(beta[1]), float(sums[0])


def newton_logistic(evaluate: Callable[[FloatArray], FloatArray], beta0: ArrayLike = (0.0, 0.0),
                    iters: int = 100, last_eval: bool = True,
                    slope_fixed: bool = False) -> tuple[float, float, float]:
    """Maximum-likelihood (a, b) and ℓ by :func:`newton_steps` (step halving keeps the
    log-likelihood increasing under separation and extreme scores); ``evaluate(β)`` gives the
    :func:`logistic_sums` at β — of an array in memory, of one pass on a stream."""
    steps = newton_steps(beta0, iters=iters, last_eval=last_eval, slope_fixed=slope_fixed)
    beta = next(steps)
    while True:
        try:
            beta = steps.send(evaluate(beta))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def cox_logit(scores: FloatArray) -> FloatArray:
    """The regressor of Cox's test: logit(s), s clipped to [1e-15, 1 − 1e-15]."""
    s = np.clip(scores, LOGIT_EPS, 1.0 - LOGIT_EPS)
    return np.log(s) - np.log1p(-s)


def cox(scores: FloatArray, labels: IntArray, *, alpha: float = 0.05,
        ci_level: float = 0.95) -> TestResult:
    """Cox calibration intercept and slope, with the likelihood-ratio test of (0, 1), and the
    calibration intercept (calibration-in-the-large).

    Logistic regression of y on logit(s) (s clipped to [1e-15, 1 − 1e-15]), the rows summed in
    the order (score, label) so that no digit depends on the order of the input.  LR = 2·(ℓ(â, b̂) −
    ℓ(0, 1)) ~ χ²(2).  A slope below 1 means predictions too extreme (over-confident), above 1
    too moderate; the intercept shifts them all.  ``intercept_ci`` and ``slope_ci`` are Wald
    intervals at ``ci_level`` from the observed information at the fit.  The calibration
    intercept is the fit of logit P(y = 1) = a + logit(s) (the slope held at 1): below 0 the
    scores are too high on average, above 0 too low (:func:`recalibration_direction`).
    """
    order = np.lexsort((labels, scores))       # a canonical row order: identical sums (and
    x = cox_logit(scores[order])               # fit) for any order of the rows in a file
    y = labels[order].astype(np.float64)

    fit = logistic_evaluator(x, y)
    a, b, ll_fit = newton_logistic(fit)
    ll_null = float(fit(NULL_FIT)[0])
    a0, _, _ = newton_logistic(fit, NULL_FIT, slope_fixed=True)
    return cox_result(a, b, ll_fit, ll_null, alpha=alpha, ci_level=ci_level,
                      hessian=fit((a, b))[3:6], citl=(a0, float(fit((a0, 1.0))[3])))


NULL_FIT = (0.0, 1.0)        # Cox's (intercept, slope) of calibrated scores


def cox_result(a: float, b: float, ll_fit: float, ll_null: float, *, alpha: float,
               settings: dict[str, Any] | None = None,
               hessian: ArrayLike | None = None, ci_level: float = 0.95,
               citl: tuple[float, float] | None = None) -> TestResult:
    """Cox's result from the fitted (a, b), the maximum log-likelihood and ℓ(0, 1);
    ``hessian`` = (Σw, Σw·x, Σw·x²) at the fit gives the Wald standard errors and the Wald
    intervals (â ± z·se, b̂ ± z·se, z the (1 + level)/2 normal quantile); ``citl`` = (the
    calibration intercept, Σw at it) gives that intercept with its Wald interval."""
    lr = max(0.0, 2.0 * (ll_fit - ll_null))
    p = _chi2_sf(lr, 2)
    details: dict[str, Any] = {"intercept": a, "slope": b, "df": 2,
                               "statistic_name": "likelihood ratio vs (intercept, slope) = (0, 1)"}
    z = _normal_quantile((1.0 + ci_level) / 2.0)
    if hessian is not None:
        w, wx, wxx = (float(v) for v in np.asarray(hessian, dtype=np.float64))
        det = w * wxx - wx * wx
        if det > 0:
            details["intercept_se"] = math.sqrt(wxx / det)
            details["slope_se"] = math.sqrt(w / det)
            for name, est in (("intercept", a), ("slope", b)):
                se = details[f"{name}_se"]
                details[f"{name}_ci"] = {"low": est - z * se, "high": est + z * se,
                                         "level": ci_level, "method": "Wald"}
    if citl is not None:
        a0, w0 = citl
        details["calibration_intercept"] = a0
        if w0 > 0:
            se0 = 1.0 / math.sqrt(w0)
            details["calibration_intercept_se"] = se0
            details["calibration_intercept_ci"] = {"low": a0 - z * se0, "high": a0 + z * se0,
                                                   "level": ci_level, "method": "Wald"}
    return TestResult(id="cox", statistic=lr, pvalue=p, reject=p <= alpha, alpha=alpha,
                      details=details, settings={"clip": LOGIT_EPS, "ci_level": ci_level,
                                                 **(settings or {})})


def recalibration_direction(details: Mapping[str, Any]) -> dict[str, Any]:
    """The direction of a miscalibration, from Cox's fit (``details`` of :func:`cox_result`) —
    the one rule behind every headline (docs/tests.md, "The direction"):

    * ``average``: ``"over"`` (over-predicting on average) when the calibration intercept's
      Wald interval lies below 0, ``"under"`` when it lies above 0, else None;
    * ``confidence``: ``"over"`` (over-confident: predictions too extreme) when the slope's
      interval lies below 1, ``"under"`` (under-confident: too cautious) when it lies above 1,
      else None.

    Nothing is claimed without an interval (a fit without standard errors: separation)."""
    out: dict[str, Any] = {"average": None, "confidence": None}
    ci0 = details.get("calibration_intercept_ci")
    if ci0 and math.isfinite(ci0["low"]) and math.isfinite(ci0["high"]):
        out["average"] = "over" if ci0["high"] < 0 else "under" if ci0["low"] > 0 else None
    ci1 = details.get("slope_ci")
    if ci1 and math.isfinite(ci1["low"]) and math.isfinite(ci1["high"]):
        out["confidence"] = "over" if ci1["high"] < 1 else "under" if ci1["low"] > 1 else None
    return out


def _normal_quantile(q: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(q)


def binomial_discrete(scores: FloatArray, labels: IntArray, *, alpha: float = 0.05,
                      counts: FloatArray | None = None) -> TestResult:
    """Per distinct score value v, the exact two-sided binomial test of (k_v of n_v) at p = v.

    Rejects when some p_v <= α/V (Bonferroni over the V distinct values); p = min(1, V·min p_v).
    The authors' ``multiple_binom_test`` (T-Cal paper, Appendix 8.2.4).  ``counts``: each
    row's count (aggregated rows): n_v and k_v of the expanded rows.
    """
    if counts is not None:
        used = counts > 0
        s, c = scores[used], counts[used]
        values, inverse = np.unique(s, return_inverse=True)
        n_v = np.bincount(inverse, weights=c, minlength=values.shape[0]).round().astype(np.int64)
        k = np.bincount(inverse, weights=c * labels[used],
                        minlength=values.shape[0]).round().astype(np.int64)
        return binomial_discrete_counts(values, n_v, k, alpha=alpha)
    values, inverse, rows = np.unique(scores, return_inverse=True, return_counts=True)
    k = np.bincount(inverse, weights=labels, minlength=values.shape[0]).round().astype(np.int64)
    return binomial_discrete_counts(values, rows, k, alpha=alpha)


def binomial_discrete_counts(values: FloatArray, counts: IntArray, k: IntArray, *,
                             alpha: float = 0.05) -> TestResult:
    """:func:`binomial_discrete` from the distinct values (sorted), their rows and positives."""
    from calcheck.binomial import flat, pvalues  # scipy.stats, on first use

    pv = pvalues(*flat(k, counts, values))
    V = int(values.shape[0])
    pmin = float(pv.min())
    worst = int(np.argmin(pv))
    return TestResult(id="binomial_discrete", statistic=pmin, pvalue=min(1.0, V * pmin),
                      reject=pmin <= alpha / V, alpha=alpha,
                      details={"statistic_name": "smallest per-value p-value", "distinct_values": V,
                               "level_alpha": alpha / V,
                               "worst_value": {"score": float(values[worst]), "n": int(counts[worst]),
                                               "positives": int(k[worst])},
                               "note": "scores take few distinct values; T-Cal assumes continuous "
                                       "scores, this test does not"},
                      settings={"correction": "bonferroni"})
