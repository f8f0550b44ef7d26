"""The hypothesis-test engine: T-Cal, adaptive T-Cal, the binomial test of discrete scores,
the classical calibration tests (Hosmer–Lemeshow, Spiegelhalter, Cox) and the
Kolmogorov–Smirnov and Kuiper tests on the walk of cumulative differences.

:func:`run_tests` is what the CLI calls; each test is also a pure function on arrays
returning a :class:`~calcheck.hypotests._result.TestResult`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from calcheck.hypotests._result import TestResult
from calcheck.weights import Weights

__all__ = ["TestOptions", "TestResult", "run_tests"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TestOptions:
    """Options of one ``calcheck test`` run (docs/report.md defaults)."""

    __test__ = False

    alpha: float = 0.05
    bins: int | None = None          # fixed m; None → adaptive
    trials: int = 1000
    resample: str = "labels"
    seed: int = 0
    discrete_max: int = 50
    hl_groups: int = 10
    hl_df: str = "external"          # χ²(G) for external predictions, "fitted": χ²(G − 2)
    adaptive_grid: str = "bounded"
    adaptive_correction: str = "minp"
    skce_bandwidth: float | None = None
    ci_level: float = 0.95           # Cox's Wald intervals
    ties: str = "share"
    auto_trials: bool = False        # trials not set by the user: raise them to reach α
    trials_label: str = "--trials"
    family: str = "holm"             # how the verdict reads the tests' p-values together
    family_groups: int = 1           # ... over this many groups (whole data + --by groups)
    family_members: int = 0          # ... and this many tests of each, when those run here are
    #                                  part of more (0: the methods run here, with T-Cal's
    #                                  binomial test per value)
    compat: str | None = None        # --compat: that library's tests (calcheck.compat)

    def family_size(self, methods: list[str], discrete: bool) -> int:
        """How many p-values the verdict reads together: the methods' (and the binomial test
        per value on ``discrete`` scores) in each of the ``family_groups`` groups; 1 without a
        family adjustment."""
        if self.family == "none":
            return 1
        return (self.family_members or family_of(methods, self.family, discrete)) * \
            self.family_groups


MIN_TRIALS = 1000
FLOOR_FRACTION = 10              # the smallest attainable p-value is below α / this


def trials_needed(alpha: float, multiplicity: int = 1) -> int:
    """Default Monte Carlo trials at level α: at least 1,000, and enough that the smallest
    attainable p-value, multiplicity/(trials + 1), is below α/10 (with a factor 2 of margin:
    ⌈20·multiplicity/α⌉)."""
    return max(MIN_TRIALS, math.ceil(2 * FLOOR_FRACTION * multiplicity / alpha))


def tcal_trials(trials: int | None, alpha: float, levels: int, *, auto: bool,
                label: str = "--trials", family: int = 1) -> tuple[int, str | None]:
    """The Monte Carlo trials of a test whose smallest attainable p-value is
    levels/(trials + 1) (``levels`` = 1 for fixed-m T-Cal, min-P adaptive T-Cal and the SKCE
    test; the number of levels under Bonferroni), read in a family of ``family`` tests (its
    smallest adjusted p-value is ``family`` times that), and a note.

    Without an explicit count (``auto`` or ``trials=None``) the trials are
    :func:`trials_needed` (at least 1,000; the adjusted floor below α/10).  An explicit count
    is kept, with a note when its floor is not below α/10, and a stronger one when it cannot
    reach α.
    """
    levels = levels * max(1, family)
    need = trials_needed(alpha, levels)
    what = "adaptive T-Cal" if levels > family else "the Monte Carlo test"
    del label                       # the note is part of the report: the same from CLI and API
    if trials is None or auto:
        if trials is not None and trials < need:
            return need, (f"{what}: Monte Carlo trials raised from {trials} to {need} so that "
                          f"its smallest attainable p-value, {levels}/(trials + 1) = "
                          f"{levels / (need + 1):.3g}, is below α/10 (set the trials to "
                          "choose)")
        return need, None
    floor = levels / (trials + 1)
    if floor > alpha:
        return trials, (f"{what} with {trials} Monte Carlo trials cannot reach a p-value below "
                        f"{floor:.3g} > α = {alpha:g}: it cannot reject at this α; use {need} "
                        "trials or more")
    if floor >= alpha / FLOOR_FRACTION:
        return trials, (f"{what} with {trials} Monte Carlo trials cannot reach a p-value below "
                        f"{floor:.3g} (α/10 = {alpha / FLOOR_FRACTION:.3g}): a clear rejection "
                        f"shows as p = {floor:.3g}; use {need} trials or more")
    return trials, None


def family_of(methods: list[str], family: str, discrete: bool) -> int:
    """How many p-values the verdict reads together (the methods', and the binomial test per
    value that T-Cal adds on discrete scores); 1 without a family adjustment."""
    if family == "none":
        return 1
    return len(methods) + (1 if "tcal" in methods and discrete else 0)


def discrete_note(distinct: int, discrete_max: int) -> str:
    return (f"scores take {distinct} distinct values (<= --discrete-max {discrete_max}): added "
            "the exact binomial test per value (binomial_discrete); T-Cal assumes continuous "
            "scores")


def run_tests(scores: np.ndarray, labels: np.ndarray, methods: list[str], options: TestOptions,
              *, progress: Any = None, probs: np.ndarray | None = None,
              classes: np.ndarray | None = None,
              weights: Weights | None = None) -> tuple[dict[str, TestResult], list[str]]:
    """Run the selected tests; returns the results by test id and notes for the user.

    ``scores``/``labels`` are the binary (or top-label) view; ``probs`` (n, K) and ``classes``
    (class index per row) are the multiclass input, which the SKCE test uses whole.
    ``weights``: row counts or weights (:mod:`calcheck.hypotests.weighted`; the methods
    without a weighted form are refused before this is called)."""
    results: dict[str, TestResult] = {}
    notes: list[str] = []
    distinct = 0
    if "tcal" in methods:                # (rows of weight 0 hold no score)
        shown = scores if weights is None else scores[weights.values > 0]
        distinct = int(np.unique(shown).shape[0])
    discrete = distinct <= options.discrete_max and (weights is None or weights.frequency)
    family = options.family_size(methods, discrete)
    n = scores.shape[0] if weights is None else weighted_n(weights)
    for m in methods:
        if m == "tcal":
            options, got = _tcal_results(scores, labels, options, weights=weights, n=n,
                                         distinct=distinct, family=family, progress=progress,
                                         notes=notes)
            results.update(got)
        elif m == "skce":
            from calcheck.hypotests.kernel import skce_test

            p2, c2 = (probs, classes) if probs is not None and classes is not None else \
                (scores, labels)
            trials, note = tcal_trials(None if options.auto_trials else options.trials,
                                       options.alpha, 1, auto=options.auto_trials,
                                       family=family)
            if note:
                notes.append(note)
            results["skce"] = skce_test(p2, c2, alpha=options.alpha, trials=trials,
                                        rng=options.seed, bandwidth=options.skce_bandwidth,
                                        weights=weights)
        else:
            results[TEST_IDS.get(m, m)] = _row_test(m, scores, labels, weights, options, family)
    return results, notes


TEST_IDS = {"hl": "hosmer_lemeshow"}      # a method's result id, where it differs


def _tcal_results(scores: np.ndarray, labels: np.ndarray, options: TestOptions, *,
                  weights: Weights | None, n: int, distinct: int, family: int, progress: Any,
                  notes: list[str]) -> tuple[TestOptions, dict[str, TestResult]]:
    """T-Cal (fixed m or adaptive; weighted rows: their null) and, for unweighted discrete
    scores, the binomial test per value; the options with T-Cal's trials, for the tests
    after it."""
    from calcheck.hypotests import classical, tcal
    from calcheck.hypotests.tcal import n_levels

    levels = 1 if options.bins is not None or options.adaptive_correction == "minp" \
        else n_levels(n, options.adaptive_grid)
    trials, note = tcal_trials(options.trials, options.alpha, levels, auto=options.auto_trials,
                               label=options.trials_label, family=family)
    if note:
        notes.append(note)
    options = replace(options, trials=trials)
    if weights is not None:
        got = _weighted_tcal(scores, labels, weights, n, options)
        if distinct <= options.discrete_max and weights.frequency:      # the expanded rows'
            got["binomial_discrete"] = classical.binomial_discrete(
                scores, labels, alpha=options.alpha, counts=weights.values)
            notes.append(discrete_note(distinct, options.discrete_max))
        elif distinct <= options.discrete_max:
            notes.append(f"scores take {distinct} distinct values: the exact binomial test per "
                         "value (binomial_discrete) counts labels and is not run on sampling-"
                         "weighted rows; T-Cal assumes continuous scores")
        return options, got
    out: dict[str, TestResult] = {}
    if options.bins is not None:
        out["tcal"] = tcal.tcal_fixed(
            scores, labels, m=options.bins, alpha=options.alpha, trials=options.trials,
            resample=options.resample, rng=options.seed, progress=progress)
    else:
        out["tcal_adaptive"] = tcal.tcal_adaptive(
            scores, labels, alpha=options.alpha, trials=options.trials,
            resample=options.resample, rng=options.seed, progress=progress,
            grid=options.adaptive_grid, correction=options.adaptive_correction)
    if distinct <= options.discrete_max:
        out["binomial_discrete"] = classical.binomial_discrete(scores, labels,
                                                               alpha=options.alpha)
        notes.append(discrete_note(distinct, options.discrete_max))
    return options, out


def _row_test(m: str, scores: np.ndarray, labels: np.ndarray, weights: Weights | None,
              options: TestOptions, family: int) -> TestResult:
    """Hosmer–Lemeshow, Spiegelhalter, Cox, KS or Kuiper (``m``), on weighted rows by their
    weighted forms (:mod:`calcheck.hypotests.weighted`)."""
    from calcheck.hypotests import classical, weighted
    from calcheck.hypotests.cumulative import walk_test

    trials, _ = tcal_trials(None if options.auto_trials else options.trials, options.alpha, 1,
                            auto=options.auto_trials, family=family)
    alpha, seed, ties = options.alpha, options.seed, options.ties
    if m == "hl":
        if weights is not None:
            return weighted.hosmer_lemeshow(scores, labels, weights, groups=options.hl_groups,
                                            alpha=alpha, ties=ties, df=options.hl_df,
                                            trials=trials, seed=seed)
        return classical.hosmer_lemeshow(scores, labels, groups=options.hl_groups, alpha=alpha,
                                         ties=ties, df=options.hl_df, trials=trials, seed=seed)
    if m == "spiegelhalter":
        return classical.spiegelhalter(scores, labels, alpha=alpha) if weights is None else \
            weighted.spiegelhalter(scores, labels, weights, alpha=alpha)
    if m == "cox":
        if weights is not None:
            return weighted.cox(scores, labels, weights, alpha=alpha, ci_level=options.ci_level)
        return classical.cox(scores, labels, alpha=alpha, ci_level=options.ci_level)
    if weights is not None:
        return weighted.walk_test(m, scores, labels, weights, alpha=alpha, ties=ties,
                                  trials=trials, seed=seed)
    return walk_test(m, scores, labels, alpha=alpha, ties=ties, trials=trials, seed=seed)


def weighted_n(weights: Weights) -> int:
    """The sample size that sets T-Cal's levels on weighted rows (:func:`levels_n`)."""
    return levels_n(weights.total, weights.effective_n, weights.frequency)


def levels_n(total: float, effective_n: float, frequency: bool) -> int:
    """The sample size that sets T-Cal's levels on weighted rows: the expanded rows of counts
    (their ``total``), Kish's effective n of weights."""
    return max(2, round(total if frequency else effective_n))


def _weighted_tcal(scores: np.ndarray, labels: np.ndarray, weights: Weights, n: int,
                   options: TestOptions) -> dict[str, TestResult]:
    from calcheck.hypotests import weighted
    from calcheck.hypotests.tcal import adaptive_ms, check_null_size

    if options.bins is not None:
        check_null_size(1, options.trials)
        return {"tcal": weighted.tcal(scores, labels, weights, ms=[options.bins],
                                      alpha=options.alpha, trials=options.trials,
                                      seed=options.seed, adaptive=False)}
    ms = adaptive_ms(n, options.adaptive_grid)
    check_null_size(len(ms), options.trials)
    return {"tcal_adaptive": weighted.tcal(scores, labels, weights, ms=ms, alpha=options.alpha,
                                           trials=options.trials, seed=options.seed,
                                           correction=options.adaptive_correction,
                                           grid=options.adaptive_grid)}
