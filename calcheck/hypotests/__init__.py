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
    ties: str = "share"
    auto_trials: bool = False        # trials not set by the user: raise them to reach α
    trials_label: str = "--trials"


def tcal_trials(trials: int, alpha: float, levels: int, *, auto: bool,
                label: str = "--trials") -> tuple[int, str | None]:
    """The Monte Carlo trials of a T-Cal test over ``levels`` Bonferroni levels, and a note.

    The smallest p-value the test can reach is levels/(trials + 1): when it is not below α the
    test can never reject, whatever the data.  Without an explicit trial count the trials are
    raised until levels/(trials + 1) ≤ α/2; an explicit count is kept, with a note when it
    cannot reach α.
    """
    need = math.ceil(2 * levels / alpha) - 1
    floor = levels / (trials + 1)
    what = "adaptive T-Cal" if levels > 1 else "T-Cal"
    del label                       # the note is part of the report: the same from CLI and API
    if auto and trials < need:
        return need, (f"{what}: Monte Carlo trials raised from {trials} to {need} so that its "
                      f"smallest attainable p-value, {levels}/(trials + 1) = "
                      f"{levels / (need + 1):.3g}, is at most α/2 (set the trials to choose)")
    if floor > alpha:
        return trials, (f"{what} with {trials} Monte Carlo trials cannot reach a p-value below "
                        f"{floor:.3g} > α = {alpha:g}: it cannot reject at this α; use {need} "
                        "trials or more")
    return trials, None


def discrete_note(distinct: int, discrete_max: int) -> str:
    return (f"scores take {distinct} distinct values (<= --discrete-max {discrete_max}): added "
            "the exact binomial test per value (binomial_discrete); T-Cal assumes continuous "
            "scores")


def run_tests(scores: np.ndarray, labels: np.ndarray, methods: list[str], options: TestOptions,
              *, progress: Any = None) -> tuple[dict[str, TestResult], list[str]]:
    """Run the selected tests; returns the results by test id and notes for the user."""
    from calcheck.hypotests import classical, tcal

    results: dict[str, TestResult] = {}
    notes: list[str] = []
    for m in methods:
        if m == "tcal":
            from calcheck.hypotests.tcal import n_levels

            levels = 1 if options.bins is not None else n_levels(scores.shape[0])
            trials, note = tcal_trials(options.trials, options.alpha, levels,
                                       auto=options.auto_trials, label=options.trials_label)
            if note:
                notes.append(note)
            options = replace(options, trials=trials)
            if options.bins is not None:
                results["tcal"] = tcal.tcal_fixed(
                    scores, labels, m=options.bins, alpha=options.alpha, trials=options.trials,
                    resample=options.resample, rng=options.seed, progress=progress)
            else:
                results["tcal_adaptive"] = tcal.tcal_adaptive(
                    scores, labels, alpha=options.alpha, trials=options.trials,
                    resample=options.resample, rng=options.seed, progress=progress)
            distinct = int(np.unique(scores).shape[0])
            if distinct <= options.discrete_max:
                results["binomial_discrete"] = classical.binomial_discrete(
                    scores, labels, alpha=options.alpha)
                notes.append(discrete_note(distinct, options.discrete_max))
        elif m == "hl":
            results["hosmer_lemeshow"] = classical.hosmer_lemeshow(
                scores, labels, groups=options.hl_groups, alpha=options.alpha,
                ties=options.ties)
        elif m == "spiegelhalter":
            results["spiegelhalter"] = classical.spiegelhalter(scores, labels, alpha=options.alpha)
        elif m == "cox":
            results["cox"] = classical.cox(scores, labels, alpha=options.alpha)
        elif m in ("ks", "kuiper"):
            from calcheck.hypotests.cumulative import walk_test

            results[m] = walk_test(m, scores, labels, alpha=options.alpha, ties=options.ties)
    return results, notes
