"""The hypothesis-test engine: T-Cal, adaptive T-Cal, the binomial test of discrete scores and
the classical calibration tests (Hosmer–Lemeshow, Spiegelhalter, Cox).

:func:`run_tests` is what the CLI calls; each test is also a pure function on arrays
returning a :class:`~calcheck.hypotests._result.TestResult`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck.errors import UsageError
from calcheck.hypotests._result import TestResult
from calcheck.registry import split_ids

METHODS = ("tcal", "hl", "spiegelhalter", "cox")
METHOD_IDS = {"hl": "hosmer_lemeshow", "spiegelhalter": "spiegelhalter", "cox": "cox"}

__all__ = ["METHODS", "TestOptions", "TestResult", "resolve_methods", "run_tests"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TestOptions:
    """Options of one ``calcheck test`` run (SPEC §9 defaults)."""

    __test__ = False

    alpha: float = 0.05
    bins: int | None = None          # fixed m; None → adaptive
    trials: int = 1000
    resample: str = "labels"
    seed: int = 0
    discrete_max: int = 50
    hl_groups: int = 10
    ties: str = "share"


def resolve_methods(methods: Iterable[str] | None) -> list[str]:
    """Validate ``--method`` values (comma lists allowed; ``all``); default ``tcal``."""
    if not methods:
        return ["tcal"]
    out: list[str] = []
    for m in split_ids(list(methods)):
        if m == "all":
            out.extend(x for x in METHODS if x not in out)
        elif m in METHODS:
            if m not in out:
                out.append(m)
        else:
            raise UsageError(f"unknown --method {m!r}; use one of {', '.join(METHODS)}, all")
    if not out:
        raise UsageError("no test method selected")
    return out


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
    return results, notes
