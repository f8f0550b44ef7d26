"""The one-line summary every report leads with: a verdict, a direction, the worst place.

* **Verdict.** With tests (``test``, ``report``): *miscalibrated* when a selected test rejects
  at α, naming it and its p-value; otherwise *no evidence of miscalibration*, with the smallest
  p-value.  Without tests (``score``): from the ECE's bin table (or ACE's, or the first binned
  metric's) by consistency resampling (Bröcker & Smith 2007): a calibrated model with these
  bins' scores draws each bin's positives as Binomial(n_b, mean score_b) — a variance at
  least that of the exact Poisson-binomial, so the check is conservative — and the p-value is
  the share of 2,000 such draws (seeded by ``--seed``) whose ECE on the same bins reaches the
  observed one, with the +1 correction.  No binned metric and no test: *not assessed*.
* **Direction.** Cox's intercept and slope when Cox ran (slope < 1: over-confident, too
  extreme; > 1: under-confident, too cautious; the intercept shifts everything); otherwise the
  bin table: the mean score against the observed rate (over- or under-predicting on average,
  when they differ by more than 1.96 binomial standard errors) and the weighted slope of the
  bins' observed rates on their mean scores (over- or under-confident when it differs from 1
  by more than 1.96 standard errors).  For multiclass input the view is top-label: confidence
  against accuracy.
* **Where.** The bin that contributes most to the ECE (n_b·|gap_b|), the worst ``--by`` group
  on the first error metric (groups flagged small are skipped) and the variable with the
  largest VCE(v*).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from calcheck.formatting import number
from calcheck.formatting import pvalue as format_p
from calcheck.formatting import value as format_value
from calcheck.registry import METRICS, title

DRAWS = 2000
BIN_SOURCES = ("ace", "ace_top", "ece", "ece_top", "mce_q", "mce", "ece_l2")


def consistency_pvalue(rows: list[Mapping[str, Any]], *, seed: int = 0,
                       draws: int = DRAWS) -> float:
    """P(ECE ≥ observed) for a calibrated model with these bins (see the module docstring)."""
    use = [r for r in rows if r["n"]]
    n_b = np.array([r["n"] for r in use], dtype=np.int64)
    s_b = np.clip(np.array([r["mean_score"] for r in use], dtype=np.float64), 0.0, 1.0)
    k_b = np.array([r["positives"] for r in use], dtype=np.float64)
    n = float(n_b.sum())
    observed = float(np.sum(np.abs(k_b - n_b * s_b)) / n)
    rng = np.random.default_rng(seed)
    null = np.abs(rng.binomial(n_b, s_b, size=(draws, n_b.shape[0])) - n_b * s_b).sum(axis=1) / n
    return float((1 + np.sum(null >= observed - 1e-15)) / (draws + 1))


def _average(rows: list[Mapping[str, Any]], multiclass: bool) -> str | None:
    """Over- or under-predicting on average, when the mean score and the observed rate differ
    by more than 1.96 binomial standard errors."""
    n_b = np.array([r["n"] for r in rows], dtype=np.float64)
    x = np.array([r["mean_score"] for r in rows], dtype=np.float64)
    y = np.array([r["mean_label"] for r in rows], dtype=np.float64)
    n = n_b.sum()
    ms, my = float(np.sum(n_b * x) / n), float(np.sum(n_b * y) / n)
    se = math.sqrt(max(float(np.sum(n_b * x * (1 - x))), 1e-300)) / n
    if abs(ms - my) <= 1.96 * se:
        return None
    what, rate = ("confidence", "accuracy") if multiclass else ("mean score", "observed rate")
    return (f"{'over' if ms > my else 'under'}-predicting on average ({what} {number(ms)} vs "
            f"{rate} {number(my)})")


def _binned_slope(rows: list[Mapping[str, Any]]) -> str | None:
    """Over- or under-confident from the weighted slope of the bins' observed rates on their
    mean scores, when it differs from 1 by more than 1.96 standard errors."""
    if len(rows) < 3:
        return None
    n_b = np.array([r["n"] for r in rows], dtype=np.float64)
    x = np.array([r["mean_score"] for r in rows], dtype=np.float64)
    y = np.array([r["mean_label"] for r in rows], dtype=np.float64)
    n = n_b.sum()
    xm, ym = float(np.sum(n_b * x) / n), float(np.sum(n_b * y) / n)
    sxx = float(np.sum(n_b * (x - xm) ** 2))
    if sxx <= 0:
        return None
    slope = float(np.sum(n_b * (x - xm) * (y - ym)) / sxx)
    var = np.clip(x * (1 - x), 1e-12, None) / n_b
    se = math.sqrt(float(np.sum((n_b * (x - xm)) ** 2 * var))) / sxx
    return _confidence(slope, se, "binned slope")


def _confidence(slope: float, se: float, name: str) -> str | None:
    if not abs(slope - 1) > 1.96 * se:
        return None
    if slope < 1:
        return f"over-confident: predictions too extreme ({name} {slope:.2f})"
    return f"under-confident: predictions too cautious ({name} {slope:.2f})"


def _worst_bin(rows: list[Mapping[str, Any]], multiclass: bool,
               score_range: Callable[[float, float], tuple[float, float] | None] | None = None
               ) -> str | None:
    use = [r for r in rows if r["n"]]
    if len(use) < 2:
        return None
    worst = max(use, key=lambda r: r["n"] * abs(r["mean_label"] - r["mean_score"]))
    what = "confidence" if multiclass else "scores"
    lo, hi = worst.get("min_score", worst["lower"]), worst.get("max_score", worst["upper"])
    if "min_score" not in worst and score_range is not None:
        lo, hi = score_range(worst["lower"], worst["upper"]) or (lo, hi)
    span = f"= {lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}"
    return (f"{what} {span}: predicted "
            f"{worst['mean_score']:.3f}, observed {worst['mean_label']:.3f} "
            f"({worst['n']:,} rows)")


def _strength(item: tuple[str, Mapping[str, Any]]) -> tuple[bool, float, bool]:
    """Order of evidence: the smallest p-value first; at equal p, a test whose p-value is
    exact (or asymptotic) before a Monte Carlo one sitting at its floor 1/(trials+1)."""
    t = item[1]
    p = t.get("pvalue")
    return (p is None, p if p is not None else 1.0, t.get("min_attainable_pvalue") is not None)


def decided_by(tests: Mapping[str, Any]) -> list[str]:
    """The tests that decided the verdict, strongest evidence first: every rejecting test
    (the first is the one the headline quotes), else the one with the smallest p-value."""
    rejected = sorted(((tid, t) for tid, t in tests.items() if t.get("reject")), key=_strength)
    if rejected or not tests:
        return [tid for tid, _ in rejected]
    return [min(tests.items(), key=_strength)[0]]


def _tests_verdict(tests: Mapping[str, Any], alpha: float) -> tuple[str, str]:
    if not tests:
        return "not assessed", "no test ran"
    rejected = [(tid, tests[tid]) for tid in decided_by(tests) if tests[tid].get("reject")]
    if rejected:
        (first, t0), others = rejected[0], rejected[1:]
        basis = f"rejected by {title(first)} (p {_p_clause(t0['pvalue'])})"
        if others:
            basis += "; also by " + ", ".join(f"{title(tid)} (p {_p_clause(t['pvalue'])})"
                                             for tid, t in others)
        return "miscalibrated", basis
    best = min(tests.items(), key=_strength)
    basis = (f"no test rejects at α = {alpha:g} (smallest p: {title(best[0])} "
             f"{format_p(best[1].get('pvalue'))})")
    blind = {tid: t["min_attainable_pvalue"] for tid, t in tests.items()
             if (t.get("min_attainable_pvalue") or 0.0) > alpha}
    if blind:
        basis += "; " + "; ".join(f"{title(tid)} cannot reach p below {floor:.3g} with these "
                                  "trials" for tid, floor in blind.items())
        if len(blind) == len(tests):
            return "inconclusive", basis
    return "no evidence of miscalibration", basis


def _p_clause(p: float | None) -> str:
    text = format_p(p)
    return text if text.startswith("<") else f"= {text}"


def _worst_group(report: Mapping[str, Any]) -> str | None:
    groups = report.get("groups") or {}
    metrics = report.get("metrics") or {}
    primary = next((m for m in metrics if METRICS.get(m) is not None and METRICS[m].error), None)
    if primary is None or not groups:
        return None
    scored = [(g, d["metrics"][primary]["value"], d["n"]) for g, d in groups.items()
              if not d.get("flagged") and primary in d.get("metrics", {})
              and d["metrics"][primary].get("value") is not None]
    if not scored:
        return None
    name, value, n = max(scored, key=lambda t: t[1])
    unit = metrics[primary].get("unit", "fraction")
    shown = format_value(value, unit)
    by = report.get("settings", {}).get("by")
    return f"worst group {by} = {name} ({title(primary)} {shown}, {n:,} rows)"


def _worst_variable(report: Mapping[str, Any]) -> str | None:
    variables = report.get("variables") or {}
    if not variables:
        return None
    name, v = max(variables.items(), key=lambda kv: kv[1].get("vce_max") or 0.0)
    return (f"worst along {name}: VCE(v*) {number(v['vce_max'])} at {name} = {v['v_star']:.4g}"
            if v.get("vce_max") is not None else None)


def summarize(report: Mapping[str, Any], *, bins: list[Mapping[str, Any]] | None = None,
              bins_of: str | None = None, seed: int = 0,
              score_range: Callable[[float, float], tuple[float, float] | None] | None = None
              ) -> dict[str, Any]:
    """The report's ``summary``: ``verdict``, ``basis``, ``direction``, ``where`` and the
    one-line ``text``; ``bins`` is the bin table behind the direction and the verdict of a
    report without tests (that of metric ``bins_of``); ``score_range(lower, upper)`` gives
    the smallest and largest score of the bin ``where`` names when its row does not."""
    alpha = float(report.get("settings", {}).get("alpha", 0.05))
    multiclass = report.get("input", {}).get("kind") == "multiclass"
    tests = report.get("tests") or {}
    rows = [r for r in (bins or []) if r.get("n") and r.get("mean_score") is not None]
    p_value: float | None = None
    if tests:
        verdict, basis = _tests_verdict(tests, alpha)
    elif rows:
        draws = max(DRAWS, math.ceil(20 / alpha))      # the floor below α/10, as every test's
        p = p_value = consistency_pvalue(rows, seed=seed, draws=draws)
        m = report.get("metrics", {}).get(bins_of or "", {})
        value = m.get("value")
        shown = f"{title(bins_of or '')} {format_value(value, m.get('unit', ''))}" \
            if isinstance(value, float) else \
            f"{title(bins_of or '')}"
        verdict = "miscalibrated" if p <= alpha else "consistent with calibration"
        chance = (f"p < {1 / (draws + 1) * 1.0001:.1g}" if p <= 1 / (draws + 1)
                  else f"p {_p_clause(p)}")
        basis = (f"{shown}; a calibrated model with these scores reaches it with {chance} "
                 f"(consistency resampling, {len(rows)} bin{'s' if len(rows) != 1 else ''})")
    else:
        verdict, basis = "not assessed", "no test and no binned metric selected"
    direction: list[str] = []
    if verdict in ("miscalibrated", "inconclusive"):
        cox = tests.get("cox", {})
        if cox.get("slope_se") is not None:
            conf = _confidence(cox["slope"], cox["slope_se"], "Cox slope")
        else:
            conf = _binned_slope(rows) if rows else None
        average = _average(rows, multiclass) if rows else None
        if average is None and tests.get("spiegelhalter", {}).get("reject"):
            d = tests["spiegelhalter"].get("direction")
            average = f"{d} on average (Spiegelhalter)" if d and d != "none" else None
        direction = [d for d in (average, conf) if d]
    where = [w for w in (_worst_bin(rows, multiclass, score_range) if rows and verdict == "miscalibrated"
                         else None, _worst_group(report), _worst_variable(report)) if w]
    head = {"miscalibrated": "MISCALIBRATED", "no evidence of miscalibration": "no evidence of "
            "miscalibration", "consistent with calibration": "consistent with calibration",
            "inconclusive": "INCONCLUSIVE", "not assessed": "not assessed"}[verdict]
    text = f"{head}: {basis}"
    if direction:
        text += "; " + "; ".join(direction)
    if where:
        text += "; " + "; ".join(where)
    decided = decided_by(tests)
    return {"verdict": verdict, "basis": basis, "decided_by": decided,
            "pvalue": tests[decided[0]].get("pvalue") if decided else p_value,
            "direction": direction, "where": where, "text": text}
