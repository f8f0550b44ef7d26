"""The one-line summary every report leads with: a verdict, how much, the direction, the worst
place (docs/report.md, "The summary").

* **Verdict.** With tests (``test``, ``report``): *miscalibrated* when a selected test rejects
  at α, naming it and its p-value; otherwise *no evidence of miscalibration*, with the smallest
  p-value.  Without tests (``score``): from the ECE's bin table (or ACE's, or the first binned
  metric's) by consistency resampling (Bröcker & Smith 2007): a calibrated model with these
  bins' scores draws each bin's positives as Binomial(n_b, mean score_b) — a variance at
  least that of the exact Poisson-binomial, so the check is conservative — and the p-value is
  the share of 2,000 such draws (seeded by ``--seed``) whose ECE on the same bins reaches the
  observed one, with the +1 correction.  No binned metric and no test: *not assessed*.
* **How much** (``effect``): the binned error behind the summary with an interval — the
  metric's ``--ci`` interval when the run computed one, else the parametric interval of
  :func:`effect_interval` (the scores fixed, each bin's positives redrawn at its observed
  rate).  With ``--tolerance METRIC:VALUE`` the equivalence verdict of :func:`tolerance_verdict`
  stands beside the significance verdict.
* **Direction.** One rule, :func:`calcheck.hypotests.classical.recalibration_direction`, on
  Cox's logistic recalibration (``direction_fit``): over- or under-predicting on average when
  the calibration intercept's interval excludes 0, over- or under-confident when the slope's
  excludes 1; nothing when they hold 0 and 1.  For multiclass input the view is top-label:
  confidence against accuracy.
* **Where.** The bin that contributes most to the ECE (n_b·|gap_b|), the worst ``--by`` group
  on the first error metric (groups flagged small are skipped) and the variable with the
  largest VCE(v*).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.formatting import number
from calcheck.formatting import pvalue as format_p
from calcheck.formatting import value as format_value
from calcheck.hypotests.classical import recalibration_direction
from calcheck.registry import METRICS, title

DRAWS = 2000
BIN_SOURCES = ("ace", "ace_top", "ece", "ece_top", "mce_q", "mce", "ece_l2")
# the bin metrics whose value the bin table gives, and their norm
NORMS = {"ace": "l1", "ace_top": "l1", "ece": "l1", "ece_top": "l1", "ece_l2": "l2"}
NEEDS_DIRECTION = ("miscalibrated", "inconclusive")
EFFECT_METHOD = ("parametric bootstrap of the bins (scores fixed, each bin's positives "
                 "redrawn as Binomial(n_b, its observed rate)): the plug-in minus (plus) the "
                 "(1+level)/2 quantile of ||m* - m|| (of the linearised change)")
WITHIN, BEYOND, UNDECIDED = "within tolerance", "beyond tolerance", "inconclusive at this n"


def consistency_pvalue(rows: list[Mapping[str, Any]], *, seed: int = 0,
                       draws: int = DRAWS, ties: Sequence[SharedTie] = ()) -> float:
    """P(ECE ≥ observed) for a calibrated model with these bins (see the module docstring).

    ``ties``: the tie groups the bins share pro rata (equal-mass bins cutting a run of equal
    scores): each is drawn once, K ~ Binomial(N, v), and shared as the observed positives are
    — bin b gets K·L_b/N — which has less variance than L_b rows drawn apart; the rest of each
    bin is drawn as before.  Without them a shared tie group's rows count as independent
    rows, and the p-value is conservative (0 of 300 calibrated samples rejected on 11 distinct
    scores, docs/validity.md)."""
    nonempty = [int(r.get("bin", i)) for i, r in enumerate(rows) if r["n"]]
    use = [r for r in rows if r["n"]]
    n_b = np.array([r["n"] for r in use], dtype=np.float64)
    s_b = np.clip(np.array([r["mean_score"] for r in use], dtype=np.float64), 0.0, 1.0)
    k_b = np.array([r["positives"] for r in use], dtype=np.float64)
    n = float(n_b.sum())
    expected = n_b * s_b
    observed = float(np.sum(np.abs(k_b - expected)) / n)
    at = {b: j for j, b in enumerate(nonempty)}
    rest_n, rest_s = n_b.copy(), expected.copy()
    for t in ties:                                  # the rest of each bin: its own rows
        for b, share in t.shares.items():
            if b in at:
                rest_n[at[b]] -= share
                rest_s[at[b]] -= share * t.value
    rest_p = s_b if not ties else \
        np.clip(np.divide(rest_s, rest_n, out=np.zeros_like(rest_s), where=rest_n > 0), 0.0, 1.0)
    # sampling-weighted rows: a bin draws its effective size (Σw)²/Σw² of rows, scaled back to
    # its mass (the variance of a weighted sum); otherwise the scale is 1
    eff = np.array([r.get("effective_n", r["n"]) for r in use], dtype=np.float64)
    scale = np.divide(n_b, eff, out=np.ones_like(n_b), where=eff > 0)
    trials_n = np.maximum(np.round(rest_n / scale), 0).astype(np.int64)
    rng = np.random.default_rng(seed)
    drawn = np.asarray(rng.binomial(trials_n, rest_p, size=(draws, n_b.shape[0])) * scale,
                       dtype=np.float64)
    for t in ties:
        k = rng.binomial(t.size, t.value, size=draws).astype(np.float64)
        for b, share in t.shares.items():
            if b in at:
                drawn[:, at[b]] += k * share / t.size
    null = np.abs(drawn - expected).sum(axis=1) / n
    return float((1 + np.sum(null >= observed - 1e-15)) / (draws + 1))


@dataclass(frozen=True)
class SharedTie:
    """A tie group of ``size`` rows at score ``value`` that equal-mass bins share pro rata:
    ``shares`` maps a bin's index to the rows of the group it holds."""

    value: float
    size: int
    shares: dict[int, float]


def shared_ties(sorted_scores: FloatArray, bounds: IntArray) -> list[SharedTie]:
    """The tie groups of the sorted scores cut by a bin bound (positions ``bounds``): a bound p
    inside (0, n) cuts a group when s[p − 1] = s[p]; the group is found by two binary searches
    (O(bins · log n): no pass over every row, which on 3·10⁷ continuous scores cost ~0.7 s)."""
    n = sorted_scores.shape[0]
    inner = np.asarray(bounds[1:-1], dtype=np.int64)
    inner = inner[(inner > 0) & (inner < n)]
    if inner.size == 0:
        return []
    out = []
    last = -1
    for p in inner[sorted_scores[inner - 1] == sorted_scores[inner]].tolist():
        v = sorted_scores[p]
        a = int(np.searchsorted(sorted_scores, v, side="left"))
        if a == last:                          # a group cut by several bounds: once
            continue
        last = a
        e = int(np.searchsorted(sorted_scores, v, side="right"))
        lo = np.maximum(bounds[:-1], a)
        hi = np.minimum(bounds[1:], e)
        shares = {int(b): float(h - lo_) for b, (lo_, h) in enumerate(zip(lo, hi)) if h > lo_}
        out.append(SharedTie(float(sorted_scores[a]), e - a, shares))
    return out


# ---------------------------------------------------------------------------------------------
# how much: the binned error with an interval


def _norm(u: np.ndarray, norm: str, n_b: np.ndarray, n: float) -> np.ndarray:
    """The binned error of weighted residual sums u = (k_b − n_b·s̄_b)/n (last axis): l1 Σ|u|,
    l2 √(Σ u²·n/n_b) (the root of Σ w_b m_b², w_b = n_b/n, m_b = u_b·n/n_b)."""
    if norm == "l1":
        return np.asarray(np.abs(u).sum(axis=-1))
    return np.asarray(np.sqrt(np.sum(u * u * (n / n_b), axis=-1)))


def effect_interval(rows: list[Mapping[str, Any]], norm: str, *, level: float = 0.95,
                    seed: int = 0, draws: int = DRAWS) -> dict[str, Any] | None:
    r"""The binned error of ``rows`` (ECE or ACE for ``"l1"``, ECE-l2 for ``"l2"``) with a
    parametric interval, for a headline without a ``--ci`` interval.

    The scores are held fixed and each bin's positives redrawn as K*_b ~ Binomial(n_b, ȳ_b)
    (the bin's observed rate: the variance of its label mean given the scores is at most
    ȳ_b(1 − ȳ_b)/n_b).  With u the bins' weighted residuals and N the norm, the ends are those
    of the norm bootstrap (:mod:`calcheck.uncertainty`): θ̂ − q(N(u* − û)) (triangle
    inequality) and θ̂ + q(⟨ĝ, û − u*⟩) (convexity), q the (1 + level)/2 quantile of ``draws``
    redraws.  The estimand is the error of these predictions at these bins given the scores:
    Σ_b w_b |mean of P(y = 1 | s) − s over the bin| (l1).  Coverage: docs/validity.md."""
    use = [r for r in rows if r.get("n")]
    if not use:
        return None
    n_b = np.array([r["n"] for r in use], dtype=np.float64)
    k_b = np.array([r["positives"] for r in use], dtype=np.float64)
    s_b = np.array([r["mean_score"] for r in use], dtype=np.float64)
    n = float(n_b.sum())
    u = (k_b - n_b * s_b) / n
    theta = float(_norm(u, norm, n_b, n))
    rate = np.clip(k_b / n_b, 0.0, 1.0)
    eff = np.array([r.get("effective_n", r["n"]) for r in use], dtype=np.float64)
    trials = np.maximum(np.round(eff), 1).astype(np.int64)     # sampling weights: Σw²'s size
    rng = np.random.default_rng((seed, 1))
    moved = (rng.binomial(trials, rate, size=(draws, n_b.shape[0])) / trials - rate) * n_b / n
    q = (1.0 + level) / 2.0
    spread = _norm(moved, norm, n_b, n)
    down = _quantile(spread, q)
    if norm == "l1":              # a bin at exactly 0 adds |change| (no gradient there)
        up = _quantile(-(moved @ np.sign(u)) + np.abs(moved) @ (u == 0), q)
    else:
        up = _quantile(-(moved @ (u * (n / n_b) / theta)), q) if theta > 0 else down
    return {"value": theta, "low": max(0.0, theta - down), "high": theta + max(0.0, up),
            "level": level, "method": EFFECT_METHOD,
            "estimand": "error of these predictions at these bins, given the scores"}


def _quantile(x: np.ndarray, q: float) -> float:
    """numpy's default (linear) quantile, by a sort: ``np.quantile`` imports ``numpy.ma`` on
    its first call (~6 ms of a small streamed run)."""
    v = np.sort(np.asarray(x, dtype=np.float64).ravel())
    h = (v.shape[0] - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, v.shape[0] - 1)
    return float(v[lo] + (h - lo) * (v[hi] - v[lo]))


def _effect(report: Mapping[str, Any], rows: list[Mapping[str, Any]], bins_of: str | None,
            level: float, seed: int, tolerance: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The headline's effect size: the bin metric ``bins_of`` with its ``--ci`` interval (or
    the one a ``--tolerance`` check computed) when it covers the population value, else
    :func:`effect_interval`."""
    if not bins_of or bins_of not in NORMS or not rows:
        return None
    entry = (report.get("metrics") or {}).get(bins_of) or {}
    out = effect_interval(rows, NORMS[bins_of], level=level, seed=seed)
    if out is None:
        return None
    if entry.get("value") is not None:
        out["value"] = entry["value"]
    ci = entry.get("ci") or next((t for t in tolerance if t["metric"] == bins_of), {})
    if ci.get("low") is not None and str(ci.get("estimand", "")).startswith("population"):
        out.update({k: ci.get(k) for k in ("low", "high", "level", "method", "estimand")})
    return {"metric": bins_of, **out}


def _effect_text(e: Mapping[str, Any], unit: str = "fraction") -> str:
    return (f"{title(e['metric'])} {format_value(e['value'], unit)} "
            f"({e['level']:.0%} interval {format_value(e['low'], unit)}–"
            f"{format_value(e['high'], unit)})")


def tolerance_verdict(metric: str, value: float, ci: Mapping[str, Any] | None) -> dict[str, Any]:
    """The equivalence verdict of ``--tolerance METRIC:VALUE`` from the metric's covering
    interval: *within tolerance* when its upper end is below VALUE, *beyond tolerance* when its
    lower end is above it, else *inconclusive at this n*.  Each end errs with probability at most
    (1 − level)/2, so each of the two firm verdicts is wrong at most that often (docs/validity.md
    measures it)."""
    low = (ci or {}).get("low")
    high = (ci or {}).get("high")
    if low is None or high is None:
        verdict = UNDECIDED
    elif high < value:
        verdict = WITHIN
    elif low > value:
        verdict = BEYOND
    else:
        verdict = UNDECIDED
    return {"metric": metric, "value": value, "low": low, "high": high,
            "level": (ci or {}).get("level"), "verdict": verdict,
            "method": (ci or {}).get("method"), "estimand": (ci or {}).get("estimand")}


def _tolerance(checks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The deciding check of several: beyond if any is, else inconclusive if any is, else
    within (all of them)."""
    if not checks:
        return None
    for v in (BEYOND, UNDECIDED, WITHIN):
        for c in checks:
            if c["verdict"] == v:
                return c
    return checks[0]


def _tolerance_text(t: Mapping[str, Any], unit: str) -> str:
    shown = f"{title(t['metric'])} ≤ {format_value(t['value'], unit)}"
    if t["low"] is None:
        return f"{t['verdict']} ({shown}: no interval)"
    span = f"interval {format_value(t['low'], unit)}–{format_value(t['high'], unit)}"
    where = {WITHIN: "below", BEYOND: "above", UNDECIDED: "holds"}[t["verdict"]]
    return f"{t['verdict'].upper() if t['verdict'] != UNDECIDED else t['verdict']} " \
           f"({shown}: {span} {where} {format_value(t['value'], unit)})"


# ---------------------------------------------------------------------------------------------
# the direction


def _means(rows: list[Mapping[str, Any]]) -> tuple[float, float] | None:
    use = [r for r in rows if r.get("n")]
    if not use:
        return None
    n_b = np.array([r["n"] for r in use], dtype=np.float64)
    x = np.array([r["mean_score"] for r in use], dtype=np.float64)
    y = np.array([r["mean_label"] for r in use], dtype=np.float64)
    n = n_b.sum()
    return float(np.sum(n_b * x) / n), float(np.sum(n_b * y) / n)


def _interval(est: float, ci: Mapping[str, Any]) -> str:
    return f"{est:.2f}, {ci['level']:.0%} CI {ci['low']:.2f} to {ci['high']:.2f}"


def direction(fit: Mapping[str, Any] | None, rows: list[Mapping[str, Any]],
              multiclass: bool) -> list[str]:
    """The direction sentences of Cox's fit ``fit`` (the ``cox`` test's JSON entry), by
    :func:`recalibration_direction`; ``rows`` add the mean score and observed rate."""
    if not fit:
        return []
    d = recalibration_direction(fit)
    out = []
    if d["average"]:
        what, rate = ("confidence", "accuracy") if multiclass else ("mean score", "observed rate")
        means = _means(rows)
        shown = f"; {what} {number(means[0])} vs {rate} {number(means[1])}" if means else ""
        out.append(f"{d['average']}-predicting on average (calibration intercept "
                   f"{_interval(fit['calibration_intercept'], fit['calibration_intercept_ci'])}"
                   f"{shown})")
    if d["confidence"]:
        how = "too extreme" if d["confidence"] == "over" else "too cautious"
        out.append(f"{d['confidence']}-confident: predictions {how} (calibration slope "
                   f"{_interval(fit['slope'], fit['slope_ci'])})")
    return out


def direction_fit_entry(fit: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the JSON summary keeps of the fit behind the direction."""
    if not fit:
        return None
    keys = ("intercept", "intercept_se", "intercept_ci", "slope", "slope_se", "slope_ci",
            "calibration_intercept", "calibration_intercept_se", "calibration_intercept_ci")
    return {"method": "Cox logistic recalibration: logit P(y=1) = a + b logit(s) (slope), and "
                      "a + logit(s) (calibration intercept); Wald intervals",
            **{k: fit[k] for k in keys if k in fit}, **recalibration_direction(fit)}


# ---------------------------------------------------------------------------------------------
# where


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
    size = f"{worst['n']:,} rows" if isinstance(worst["n"], int) else \
        f"weight {worst['n']:,.1f}"
    return (f"{what} {span}: predicted "
            f"{worst['mean_score']:.3f}, observed {worst['mean_label']:.3f} ({size})")


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


# ---------------------------------------------------------------------------------------------
# the verdict


Item = tuple[str, str, Mapping[str, Any]]        # (key, what the headline calls it, entry)


def _items(report: Mapping[str, Any]) -> list[Item]:
    """Every test a verdict reads: the whole data's (keyed by test id), each ``--by``
    group's ("GROUP: id") and each ``--time`` window's ("START: id")."""
    out: list[Item] = [(tid, title(tid), t) for tid, t in (report.get("tests") or {}).items()]
    by = (report.get("settings") or {}).get("by")
    for name, g in (report.get("groups") or {}).items():
        out += [(f"{name}: {tid}", f"{title(tid)} in {by} = {name}", t)
                for tid, t in (g.get("tests") or {}).items()]
    for w in report.get("windows") or []:
        out += [(f"{w['start']}: {tid}", f"{title(tid)} in the window from {w['start']}", t)
                for tid, t in (w.get("tests") or {}).items()]
    return out


def _rejects(t: Mapping[str, Any]) -> bool:
    """Rejected after the family adjustment (when the report made one)."""
    return bool(t.get("reject_adjusted", t.get("reject")))


def _strength(item: Item) -> tuple[bool, float, float, bool]:
    """Order of evidence: the smallest (adjusted) p-value first; at equal p, a test whose
    p-value is exact (or asymptotic) before a Monte Carlo one sitting at its floor."""
    t = item[2]
    q = t.get("pvalue_adjusted", t.get("pvalue"))
    p = t.get("pvalue")
    return (q is None, q if q is not None else 1.0, p if p is not None else 1.0,
            t.get("min_attainable_pvalue") is not None)


def decided_by(report: Mapping[str, Any]) -> list[str]:
    """The tests that decided the verdict, strongest evidence first: every test rejecting
    after the family adjustment (the first is the one the headline quotes), else the one with
    the smallest p-value."""
    items = _items(report)
    rejected = sorted((it for it in items if _rejects(it[2])), key=_strength)
    if rejected or not items:
        return [key for key, _, _ in rejected]
    return [min(items, key=_strength)[0]]


def _p_pair(t: Mapping[str, Any], adjusted: bool) -> str:
    text = f"p {_p_clause(t.get('pvalue'))}"
    if adjusted and t.get("pvalue_adjusted") is not None:
        text += f", adjusted p {_p_clause(t['pvalue_adjusted'])}"
    return text


def _tests_verdict(report: Mapping[str, Any], alpha: float) -> tuple[str, str]:
    items = _items(report)
    if not items:
        return "not assessed", "no test ran"
    family = (report.get("settings") or {}).get("family", "none")
    adjusted = family != "none" and len(items) > 1
    rejected = sorted((it for it in items if _rejects(it[2])), key=_strength)
    if rejected:
        (_, first, t0), others = rejected[0], rejected[1:]
        basis = f"rejected by {first} ({_p_pair(t0, adjusted)})"
        if others:
            shown = others[:5]
            basis += "; also by " + ", ".join(f"{what} ({_p_pair(t, adjusted)})"
                                             for _, what, t in shown)
            if len(others) > len(shown):
                basis += f" and {len(others) - len(shown)} more"
        if adjusted:
            basis += f" ({family} over {len(items)} tests)"
        return "miscalibrated", basis
    best = min(items, key=_strength)
    after = f" after {family}'s adjustment over {len(items)} tests" if adjusted else ""
    basis = (f"no test rejects at α = {alpha:g}{after} (smallest p: {best[1]} "
             f"{format_p(best[2].get('pvalue'))})")
    key = "min_attainable_pvalue_adjusted" if adjusted else "min_attainable_pvalue"
    blind = {what: t.get(key, t.get("min_attainable_pvalue")) for _, what, t in items
             if (t.get(key, t.get("min_attainable_pvalue")) or 0.0) > alpha}
    if blind:
        basis += "; " + "; ".join(f"{what} cannot reach p below {floor:.3g} with these "
                                  "trials" for what, floor in blind.items())
        if len(blind) == len(items):
            return "inconclusive", basis
    return "no evidence of miscalibration", basis


def _p_clause(p: float | None) -> str:
    text = format_p(p)
    return text if text.startswith("<") else f"= {text}"


def consistency_draws(alpha: float, k: int = 1) -> int:
    """Draws of the consistency resampling behind a verdict read in a family of k p-values:
    at least 2,000, and enough that the smallest adjusted p-value, k/(draws + 1), is below
    α/10 (as every Monte Carlo test's)."""
    return max(DRAWS, math.ceil(20 * max(1, k) / alpha))


def group_verdict(rows: Sequence[Mapping[str, Any]], *, alpha: float, seed: int,
                  draws: int, metric: str) -> dict[str, Any]:
    """A ``--by`` group's (or ``--time`` window's) consistency verdict on its bin table —
    read, with the whole data's and the other groups', in one family (:func:`summarize`)."""
    use = [r for r in rows if r.get("n") and r.get("mean_score") is not None]
    p = consistency_pvalue(use, seed=seed, draws=draws) if use else None
    return {"pvalue": p, "reject": bool(p is not None and p <= alpha), "metric": metric,
            "method": f"consistency resampling of the {title(metric)} bins", "draws": draws,
            "min_attainable_pvalue": 1 / (draws + 1)}


def _group_verdicts(report: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    by = (report.get("settings") or {}).get("by")
    out = [(f"{by} = {name}", g["verdict"]) for name, g in (report.get("groups") or {}).items()
           if g.get("verdict")]
    out += [(f"the window from {w['start']}", w["verdict"]) for w in report.get("windows") or []
            if w.get("verdict")]
    return out


def _whole_adjusted(report: Mapping[str, Any], p: float | None) -> float | None:
    """The whole data's consistency p-value adjusted with its groups' (or windows'), when the
    verdict read them together."""
    groups = _group_verdicts(report)
    family = (report.get("settings") or {}).get("family", "none")
    if p is None or not groups or family == "none":
        return None
    from calcheck.hypotests.family import adjust

    return adjust([p, *(e.get("pvalue") for _, e in groups)], family)[0]


def verdict(report: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], *, alpha: float,
            seed: int = 0, ties: Sequence[SharedTie] = ()) -> tuple[str, str, float | None]:
    """The verdict, the start of its basis and the p-value behind a verdict without tests:
    from the tests (``report``'s ``tests``, and its groups' and windows', adjusted for their
    family) when there are any, else by consistency resampling of ``rows`` — read with the
    groups' or windows' own consistency verdicts in one family when there are any (their
    entries gain ``pvalue_adjusted`` and ``reject_adjusted``)."""
    if _items(report):
        v, basis = _tests_verdict(report, alpha)
        return v, basis, None
    rows = [r for r in rows if r.get("n") and r.get("mean_score") is not None]
    if not rows:
        return "not assessed", "no test and no binned metric selected", None
    groups = _group_verdicts(report)
    family = (report.get("settings") or {}).get("family", "none") if groups else "none"
    draws = consistency_draws(alpha, 1 + len(groups) if family != "none" else 1)
    p = consistency_pvalue(rows, seed=seed, draws=draws, ties=ties)
    chance = (f"p < {1 / (draws + 1) * 1.0001:.1g}" if p <= 1 / (draws + 1)
              else f"p {_p_clause(p)}")
    basis = (f"a calibrated model with these scores reaches it with {chance} "
             f"(consistency resampling, {len(rows)} bin{'s' if len(rows) != 1 else ''})")
    if not groups:
        return ("miscalibrated" if p <= alpha else "consistent with calibration"), basis, p
    from calcheck.hypotests.family import adjust

    adj = adjust([p, *(e.get("pvalue") for _, e in groups)], family)
    for (_, e), q in zip(groups, adj[1:]):
        e["pvalue_adjusted"] = q
        e["reject_adjusted"] = bool(q is not None and q <= alpha)
    flagged = sorted(((what, e) for what, e in groups if e["reject_adjusted"]),
                     key=lambda it: it[1]["pvalue_adjusted"])
    whole = adj[0] is not None and adj[0] <= alpha
    if family != "none":
        basis += f", adjusted p {_p_clause(adj[0])} ({family} over {1 + len(groups)})"
    if flagged:
        shown = ", ".join(f"{what} (p {_p_clause(e['pvalue'])}"
                          + (f", adjusted p {_p_clause(e['pvalue_adjusted'])}"
                             if family != "none" else "") + ")" for what, e in flagged[:5])
        more = f" and {len(flagged) - 5} more" if len(flagged) > 5 else ""
        basis += f"; miscalibrated in {shown}{more}"
    elif family != "none":
        basis += "; no group or window rejects after the adjustment"
    v = "miscalibrated" if whole or flagged else "consistent with calibration"
    return v, basis, p


def summarize(report: Mapping[str, Any], *, bins: list[Mapping[str, Any]] | None = None,
              bins_of: str | None = None, seed: int = 0,
              score_range: Callable[[float, float], tuple[float, float] | None] | None = None,
              direction_fit: Mapping[str, Any] | None = None,
              tolerance: list[dict[str, Any]] | None = None,
              ties: Sequence[SharedTie] = ()) -> dict[str, Any]:
    """The report's ``summary``: ``verdict``, ``basis``, ``effect``, ``direction`` (with the
    ``direction_fit`` behind it), ``where``, ``tolerance`` and the one-line ``text``; ``bins``
    is the bin table behind the verdict of a report without tests and behind the effect size
    (that of metric ``bins_of``); ``direction_fit`` Cox's fit (the ``cox`` test's JSON entry,
    when the run made one); ``tolerance`` the ``--tolerance`` checks of
    :func:`tolerance_verdict`; ``ties`` the tie groups the bins share (:func:`shared_ties`);
    ``score_range(lower, upper)`` gives the smallest and largest score of the bin ``where``
    names when its row does not."""
    settings = report.get("settings", {})
    alpha = float(settings.get("alpha", 0.05))
    ci = settings.get("ci")
    level = float(ci.get("level", 0.95)) if isinstance(ci, Mapping) else 0.95
    multiclass = report.get("input", {}).get("kind") == "multiclass"
    tests = report.get("tests") or {}
    rows = [r for r in (bins or []) if r.get("n") and r.get("mean_score") is not None]
    v, basis, p_value = verdict(report, rows, alpha=alpha, seed=seed, ties=ties)
    whole_adjusted = _whole_adjusted(report, p_value)
    effect = _effect(report, rows, bins_of, level, seed, tolerance or []) if rows else None
    unit = (report.get("metrics") or {}).get(bins_of or "", {}).get("unit", "fraction")
    if effect is not None:
        basis = (f"{_effect_text(effect, unit)}; {basis}" if not _items(report)
                 else f"{basis}; {_effect_text(effect, unit)}")
    elif not tests and bins_of:
        m = report.get("metrics", {}).get(bins_of, {})
        value = m.get("value")
        shown = f"{title(bins_of)} {format_value(value, m.get('unit', ''))}" \
            if isinstance(value, float) else title(bins_of)
        basis = f"{shown}; {basis}" if rows else basis
    fit = direction_fit if direction_fit is not None else \
        (tests.get("cox") if "cox" in tests and not settings.get("compat") else None)
    steer = direction(fit, rows, multiclass) if v in NEEDS_DIRECTION else []
    where = [w for w in (_worst_bin(rows, multiclass, score_range) if rows and v == "miscalibrated"
                         else None, _worst_group(report), _worst_variable(report)) if w]
    head = {"miscalibrated": "MISCALIBRATED", "no evidence of miscalibration": "no evidence of "
            "miscalibration", "consistent with calibration": "consistent with calibration",
            "inconclusive": "INCONCLUSIVE", "not assessed": "not assessed"}[v]
    text = f"{head}: {basis}"
    deciding = _tolerance(tolerance or [])
    if deciding is not None:
        tunit = (METRICS[deciding["metric"]].unit if deciding["metric"] in METRICS
                 else "fraction")
        text += "; " + _tolerance_text(deciding, tunit)
    if steer:
        text += "; " + "; ".join(steer)
    if where:
        text += "; " + "; ".join(where)
    decided = decided_by(report)
    first = next((t for key, _, t in _items(report) if decided and key == decided[0]), None)
    out: dict[str, Any] = {
        "verdict": v, "basis": basis, "decided_by": decided,
        "pvalue": first.get("pvalue") if first is not None else p_value,
        "effect": effect, "direction": steer,
        "direction_fit": direction_fit_entry(fit) if v in NEEDS_DIRECTION else None,
        "where": where, "text": text}
    if whole_adjusted is not None:
        out["pvalue_adjusted"] = whole_adjusted
    if deciding is not None:
        out["tolerance"] = deciding
        if len(tolerance or []) > 1:
            out["tolerances"] = list(tolerance or [])
    return out
