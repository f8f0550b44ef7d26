"""Do calcheck's verdicts and intervals mean what they say?  Size, power and coverage by
simulation from known models.

    python benchmarks/validity.py                  # the full table (about 40 min on 2 cores)
    python benchmarks/validity.py --quick          # a seeded smoke run (seconds; the tests run it)
    python benchmarks/validity.py --write docs/validity.md    # the table of docs/validity.md
    python benchmarks/validity.py --only hl,ci     # some sections

Every sample is drawn from a known model: scores s from a distribution, labels
y ~ Bernoulli(p(s)) with p(s) = s (calibrated), s^γ (globally miscalibrated) or
s + d·1{0.6 ≤ s < 0.7} (a local bump); multiclass samples draw class probabilities from a
Dirichlet and labels from the true class probabilities.  A row of the table gives, over R
samples, the rejection rate of a test at α = 0.05 (its size when the model is calibrated, its
power otherwise) or the coverage of a 95 % interval of the population value.  The binomial
standard error of a rate r over R samples is √(r(1 − r)/R): 0.005 at R = 2,000 and r = 0.05,
0.015 at R = 200, 0.018 at R = 150 and r = 0.95.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

ALPHA = 0.05
LEVEL = 0.95


# ---------------------------------------------------------------------------------------------
# models


def scores_of(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "uniform":
        return rng.random(n)
    if kind == "beta25":
        return rng.beta(2.0, 5.0, n)
    if kind == "rounded":                     # U(0, 1) rounded to 2 decimals: ties
        return np.round(rng.random(n), 2)
    if kind == "u_shaped":                    # Beta(0.5, 0.5): crowded near 0 and 1
        return rng.beta(0.5, 0.5, n)
    if kind == "rare":                        # Beta(0.5, 20): ~2.4 % positives
        return rng.beta(0.5, 20.0, n)
    if kind == "eleven":                      # 11 distinct values 0, 0.1, …, 1
        return np.round(rng.random(n) * 10) / 10
    raise ValueError(kind)


def truth(model: str, s: np.ndarray) -> np.ndarray:
    """P(y = 1 | s) of a model: ``cal``, ``pow:γ`` or ``bump:d``."""
    if model == "cal":
        return s
    name, _, value = model.partition(":")
    if name == "pow":
        return np.asarray(s ** float(value))
    if name == "bump":
        return np.clip(s + float(value) * ((s >= 0.6) & (s < 0.7)), 0.0, 1.0)
    raise ValueError(model)


def sample(model: str, n: int, seed: int, scores: str = "uniform") -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = scores_of(scores, n, rng)
    y = (rng.random(n) < truth(model, s)).astype(np.int64)
    return s, y


def population_ece(model: str, bins: int = 10, p: int = 1) -> float:
    """Population ECE (l1) or l2-ECE of U(0, 1) scores at ``bins`` equal-width bins (equal-mass
    bins are the same for uniform scores), by fine quadrature."""
    grid = (np.arange(2_000_000) + 0.5) / 2_000_000
    resid = truth(model, grid) - grid
    per_bin = resid.reshape(bins, -1).mean(axis=1) / bins          # m_b = E[(y − s)·1{b}]
    if p == 1:
        return float(np.abs(per_bin).sum())
    return float(np.sqrt(np.sum(per_bin ** 2 * bins)))


def multiclass_sample(kind: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """K = 3 Dirichlet(1, 1, 1) predictions; labels from the predictions (``cal``) or from
    the predictions with the two classes that are not the top one swapped (``swap``): the
    top label stays calibrated, the other two classes are not."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(3), size=n)
    Q = P.copy()
    if kind == "swap":
        top = P.argmax(axis=1)
        others = np.array([[k for k in range(3) if k != t] for t in range(3)])[top]
        rows = np.arange(n)
        Q[rows, others[:, 0]], Q[rows, others[:, 1]] = P[rows, others[:, 1]], P[rows, others[:, 0]]
    y = (Q.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1)
    return P, np.minimum(y, 2)


# ---------------------------------------------------------------------------------------------
# one sample of each experiment (module-level functions: they run in worker processes)


def run_tests(model: str, n: int, seed: int, scores: str, trials: int) -> dict[str, float]:
    import calcheck
    from calcheck.hypotests import tcal

    s, y = sample(model, n, seed, scores)
    out = {"hl": calcheck.hosmer_lemeshow(s, y).reject,
           "hl_fitted": calcheck.hosmer_lemeshow(s, y, hl_df="fitted").reject,
           "spiegelhalter": calcheck.spiegelhalter(s, y).reject,
           "cox": calcheck.cox(s, y).reject}
    if trials:
        out["tcal_m15"] = tcal.tcal_fixed(s, y.astype(float), m=15, trials=trials,
                                          rng=seed).reject
    cox = calcheck.cox(s, y)
    ci = cox.details.get("slope_ci")
    out["cox_slope_covers"] = bool(ci and ci["low"] <= 1.0 <= ci["high"]) if model == "cal" \
        else float("nan")
    return {k: float(v) for k, v in out.items()}


def run_adaptive(model: str, n: int, seed: int, trials: int) -> dict[str, float]:
    from calcheck.hypotests import tcal

    s, y = sample(model, n, seed)
    yf = y.astype(float)
    return {
        "fixed m = 15": float(tcal.tcal_fixed(s, yf, m=15, trials=trials, rng=seed).reject),
        "adaptive (bounded, min-P)": float(tcal.tcal_adaptive(s, yf, trials=trials,
                                                              rng=seed).reject),
        "adaptive (paper grid, Bonferroni)": float(tcal.tcal_adaptive(
            s, yf, trials=trials, rng=seed, grid="paper", correction="bonferroni").reject),
        "adaptive (paper grid, min-P)": float(tcal.tcal_adaptive(
            s, yf, trials=trials, rng=seed, grid="paper").reject),
    }


def run_ci(model: str, n: int, seed: int, reps: int) -> dict[str, float]:
    import pandas as pd

    import calcheck

    s, y = sample(model, n, seed)
    ids = ["ece", "ece_debiased", "ece_l2", "ece_l2_debiased", "ace", "ace_debiased"]
    rep = calcheck.score(pd.DataFrame({"score": s, "label": y}), metrics=ids, ci=True,
                         ci_reps=reps, seed=seed, bins=10).data["metrics"]
    out: dict[str, float] = {}
    pop = {"l1": population_ece(model, 10, 1), "l2": population_ece(model, 10, 2)}
    for mid in ("ece", "ece_l2", "ace"):
        target = pop["l2" if mid == "ece_l2" else "l1"]
        ci = rep[mid]["ci"]
        out[f"{mid} covers"] = float(ci["low"] <= target <= ci["high"])
        out[f"{mid} width"] = ci["high"] - ci["low"]
        out[f"{mid} bias"] = rep[mid]["value"] - target
        out[f"{mid}_debiased bias"] = rep[f"{mid}_debiased"]["value"] - target
    return out


def run_headline(model: str, n: int, seed: int, tolerance: float) -> dict[str, float]:
    """The headline of ``calcheck score`` without ``--ci``: does the effect size's parametric
    interval cover the ACE of these predictions at these bins given the scores (its
    estimand), and the population ACE; and the ``--tolerance ece:τ`` verdict's rates."""
    import pandas as pd

    import calcheck

    s, y = sample(model, n, seed)
    rep = calcheck.score(pd.DataFrame({"score": s, "label": y}), metrics=["ece", "ace"],
                         seed=seed, tolerance=f"ece:{tolerance}").data["summary"]
    e = rep["effect"]
    order = np.argsort(s, kind="stable")
    cuts = (np.arange(11) * n) // 10
    resid = (truth(model, s) - s)[order]
    cond = float(sum(abs(resid[a:b].sum()) for a, b in itertools.pairwise(cuts)) / n)
    pop = population_ece(model, 10, 1)
    t = rep["tolerance"]
    return {"effect covers (given scores)": float(e["low"] <= cond <= e["high"]),
            "effect covers (population)": float(e["low"] <= pop <= e["high"]),
            "effect width": e["high"] - e["low"],
            "within tolerance": float(t["verdict"] == "within tolerance"),
            "beyond tolerance": float(t["verdict"] == "beyond tolerance")}


def run_family(model: str, n: int, seed: int, scores: str, trials: int) -> dict[str, float]:
    """``calcheck test --method all``: the Holm headline against the any-rejects rule, and
    each single test's own rejection."""
    import calcheck

    s, y = sample(model, n, seed, scores)
    rep = calcheck.run_tests(scores=s, labels=y, method="all", trials=trials, seed=seed)
    tests = rep.data["tests"]
    out = {"holm headline": float(rep.data["summary"]["verdict"] == "miscalibrated"),
           "any test (--family none)": float(any(t["reject"] for t in tests.values()))}
    for tid in ("tcal_adaptive", "hosmer_lemeshow", "spiegelhalter", "cox", "skce", "ks",
                "kuiper"):
        out[tid] = float(tests[tid]["reject"])
    return out


def run_multiclass_family(kind: str, n: int, seed: int, trials: int) -> dict[str, float]:
    """K = 10 Dirichlet(0.3) predictions, calibrated: the default verdict (T-Cal and SKCE,
    Holm) and ``--method all``."""
    import calcheck

    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(10, 0.3), size=n)
    y = (P.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1).clip(0, 9)
    default = calcheck.run_tests(probs=P, labels=y, trials=trials, seed=seed).data
    every = calcheck.run_tests(probs=P, labels=y, method="all", trials=trials, seed=seed).data
    return {"default (T-Cal + SKCE) headline": float(default["summary"]["verdict"]
                                                    == "miscalibrated"),
            "default, any test": float(any(t["reject"] for t in default["tests"].values())),
            "--method all headline": float(every["summary"]["verdict"] == "miscalibrated"),
            "--method all, any test": float(any(t["reject"] for t in every["tests"].values()))}


def run_groups(groups: int, n: int, seed: int) -> dict[str, float]:
    """``score --by`` on a calibrated model: the headline, which reads every group's
    consistency verdict with the whole data's (Holm), against any group rejecting alone."""
    import pandas as pd

    import calcheck

    s, y = sample("cal", n, seed)
    g = np.random.default_rng(seed + 7).integers(0, groups, n)
    rep = calcheck.score(pd.DataFrame({"score": s, "label": y, "g": g.astype(str)}),
                         metrics=["ace"], by="g", seed=seed, min_group_size=50).data
    raw = [v["verdict"]["pvalue"] for v in rep["groups"].values() if v.get("verdict")]
    return {"holm headline": float(rep["summary"]["verdict"] == "miscalibrated"),
            "any group alone": float(min(raw) <= ALPHA) if raw else float("nan")}


def run_windows(days: int, per_day: int, seed: int, reps: int) -> dict[str, float]:
    """``score --time ts --window 1d --ci`` over ``days`` days of a calibrated stream: the
    headline, and whether any window's ECE interval misses the window's population ECE (0)
    with simultaneous and with marginal intervals."""
    import pandas as pd

    import calcheck

    n = days * per_day
    s, y = sample("cal", n, seed)
    ts = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(
        np.repeat(np.arange(days), per_day) * 86400 + 3600, "s")
    df = pd.DataFrame({"score": s, "label": y, "ts": ts})
    out = {}
    for fam in ("holm", "none"):
        rep = calcheck.score(df, metrics=["ece"], time="ts", window="1d", ci=True,
                             ci_reps=reps, seed=seed, family=fam).data
        lows = [w["metrics"]["ece"]["ci"]["low"] for w in rep["windows"] if w["n"]]
        what = "simultaneous" if fam == "holm" else "marginal"
        out[f"any window interval misses 0 ({what})"] = float(max(lows) > 0)
        if fam == "holm":
            out["holm headline"] = float(rep["summary"]["verdict"] == "miscalibrated")
    return out


def run_compare_cell(kind: str, n: int, seed: int, reps: int) -> dict[str, float]:
    """``compare`` on two equally calibrated models of different sharpness (``sharpness``:
    p against p averaged over 1/10 cells), or against p^1.2 (``power``): the summary's
    calibration verdict, the ECE gate (``--fail-if-worse ece``), and the scores line."""
    import pandas as pd

    import calcheck

    rng = np.random.default_rng(seed)
    s = rng.random(n)
    y = (rng.random(n) < s).astype(int)
    new = (np.floor(s * 10) + 0.5) / 10 if kind == "sharpness" else s ** 1.2
    rep = calcheck.compare(pd.DataFrame({"a": s, "b": new, "label": y}), score=["a", "b"],
                           metrics=["ece", "ece_l2", "ace", "brier", "log_loss"], ci_reps=reps,
                           seed=seed, fail_if_worse=["ece"]).data
    return {"summary: NEW worse calibrated": float(rep["summary"]["verdict"] == "worse"),
            "ECE gate trips": float(rep["gates"][0]["failed"]),
            "ACE worse (interval)": float(rep["metrics"]["ace"]["verdict"] == "worse"),
            "scores line: NEW worse": float(rep["summary"]["scores"]["verdict"] == "worse")}


def run_small(kind: str, n: int, seed: int, trials: int) -> dict[str, float]:
    """Rare positives (Hosmer–Lemeshow's small expected counts), 11 distinct scores (the
    score headline's tie groups, KS and Kuiper) and U-shaped scores (KS, Kuiper, T-Cal), all
    calibrated."""
    import pandas as pd

    import calcheck

    s, y = sample("cal", n, seed, kind)
    out: dict[str, float] = {"score headline": float("nan")}
    if kind == "rare":
        hl = calcheck.hosmer_lemeshow(s, y, trials=trials, rng=seed)
        return {"hl": float(hl.reject),
                "share with a Monte Carlo p-value": float(hl.details["pvalue_method"]
                                                          == "monte carlo"),
                "hl against chi2(G) (before 0.6)": float(_chi2_sf(hl.statistic,
                                                                  hl.details["df"]) <= ALPHA)}
    if kind == "eleven":
        rep = calcheck.score(pd.DataFrame({"score": s, "label": y}), metrics=["ace"],
                             seed=seed).data
        out["score headline"] = float(rep["summary"]["verdict"] == "miscalibrated")
    out["ks"] = float(calcheck.ks(s, y, trials=trials, rng=seed).reject)
    out["kuiper"] = float(calcheck.kuiper(s, y, trials=trials, rng=seed).reject)
    out["tcal adaptive"] = float("nan")
    if kind == "u_shaped":
        from calcheck.hypotests import tcal

        out["tcal adaptive"] = float(tcal.tcal_adaptive(s, y.astype(float), trials=trials,
                                                        rng=seed).reject)
    return out


def audit_sample(kind: str, n: int, seed: int) -> dict[str, Any]:
    """Three segment columns — region (8 values, A a quarter of the rows), device (4 values,
    tablet a fifth), age (numeric: 4 quantile buckets) — about 100 segments at depth 2; scores
    Beta(2, 5); calibrated, or (``planted``) y ~ Bernoulli(s + 0.1) on region A & tablet (5 %
    of the rows)."""
    rng = np.random.default_rng(seed)
    region = rng.choice(list("ABCDEFGH"), n, p=[0.25] + [0.75 / 7] * 7)
    device = rng.choice(["tablet", "mobile", "desktop", "tv"], n, p=[0.2, 0.4, 0.3, 0.1])
    age = rng.integers(18, 90, n).astype(float)
    s = rng.beta(2, 5, n)
    p = s.copy()
    planted = (region == "A") & (device == "tablet")
    if kind == "planted":
        p[planted] = np.minimum(1.0, p[planted] + 0.1)
    y = (rng.uniform(size=n) < p).astype(np.int64)
    return {"scores": s, "labels": y, "segment": {"region": region, "device": device,
                                                   "age": age}}


def run_audit(kind: str, n: int, seed: int, trials: int) -> dict[str, float]:
    """``calcheck audit`` at depth 2: does any segment reject after the adjustment, and is
    the planted segment the first one named?"""
    import calcheck

    rep = calcheck.audit(**audit_sample(kind, n, seed), trials=trials, seed=seed)
    segs = rep["segments"]
    first = segs[0]["name"] if segs else ""
    return {"segments": float(rep["search"]["searched"]),
            "any rejects": float(rep["summary"]["verdict"] == "miscalibrated"),
            "planted first and rejected": float(first == "region = A & device = tablet"
                                                and segs[0]["reject_adjusted"])}


def run_monitor(kind: str, days: int, seed: int, per_day: int) -> dict[str, float]:
    """``calcheck monitor --window 1d`` over ``days`` daily windows of ``per_day`` rows (scores
    Beta(2, 5)): calibrated throughout, or (``drift``) a logit offset of +0.4 from day 30 —
    whether the alarm ever sounds, and after how many windows of the drift."""
    import calcheck

    rng = np.random.default_rng(seed)
    s = rng.beta(2, 5, days * per_day)
    day = np.repeat(np.arange(days), per_day)
    eta = np.log(s) - np.log1p(-s) + (0.4 * (day >= 30) if kind == "drift" else 0.0)
    y = (rng.uniform(size=s.size) < 1 / (1 + np.exp(-eta))).astype(np.int64)
    ts = np.datetime64("2026-01-01T00:00:00") + (day * 86400 + rng.integers(0, 86400, s.size)
                                                 ).astype("timedelta64[s]")
    rep = calcheck.monitor(scores=s, labels=y, time=ts.astype("datetime64[ns]"), window="1d")
    alarms = [i for i, w in enumerate(rep["windows"]) if w["alarm"]]
    first = alarms[0] if alarms else None
    drift = kind == "drift"
    detect = float(first - 30 + 1) if drift and first is not None and first >= 30 else math.nan
    return {"ever alarms": float(first is not None),
            "alarm before the drift": float(first is not None and first < 30) if drift
            else math.nan,
            "median windows to detect": detect}


WEIGHT_F = 0.1                  # negatives kept with probability f, weight 1/f
WEIGHT_BETA = (0.6, 15.0)       # population scores: Beta(0.6, 15), prevalence about 0.04


def weight_truth(kind: str, s: np.ndarray) -> np.ndarray:
    """P(y = 1 | s) of the down-sampling design's population: calibrated, or s^1.15."""
    return s if kind == "calibrated" else s ** 1.15


@functools.cache
def weight_population(kind: str) -> dict[str, float]:
    """The population ECE (10 equal-width bins) and ACE (10 equal-mass bins at the population
    deciles of s) of the down-sampling design, by quadrature of the Beta density."""
    from scipy import integrate, stats

    dist = stats.beta(*WEIGHT_BETA)

    def err(lo: float, hi: float) -> float:
        gap = integrate.quad(lambda x: (weight_truth(kind, np.array(x)) - x) * dist.pdf(x),
                             lo, hi, limit=200)[0]
        return abs(float(gap))

    edges = np.linspace(0, 1, 11)
    q = dist.ppf(np.linspace(0, 1, 11))
    return {"ece": sum(err(a, b) for a, b in itertools.pairwise(edges)),
            "ace": sum(err(a, b) for a, b in itertools.pairwise(q))}


def weight_sample(kind: str, design: str, npop: int,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A population of ``npop`` rows (scores Beta(0.6, 15), labels from ``kind``), sampled:
    ``down`` keeps every positive and each negative with probability f = 0.1 at weight 1/f
    (weights that depend on the label); ``importance`` keeps a row with probability
    π(s) = min(1, 0.05 + 4s) at weight 1/π (weights that depend on the score only)."""
    s = rng.beta(*WEIGHT_BETA, npop)
    y = (rng.uniform(size=npop) < weight_truth(kind, s)).astype(int)
    if design == "down":
        keep = (y == 1) | (rng.uniform(size=npop) < WEIGHT_F)
        return s[keep], y[keep], np.where(y[keep] == 1, 1.0, 1.0 / WEIGHT_F)
    pi = np.minimum(1.0, 0.05 + 4.0 * s)
    keep = rng.uniform(size=npop) < pi
    return s[keep], y[keep], 1.0 / pi[keep]


def run_weights(kind: str, npop: int, seed: int, trials: int, reps: int, design: str = "down",
                null: str = "auto") -> dict[str, float]:
    """Weighted rows from :func:`weight_sample`: the weighted tests' rejection rates (each at
    α, ``--weight-null null``) and the score headline's; with the default null the
    coverage of the weighted ECE and ACE intervals (--ci) for the population values, and the
    bias of the weighted and unweighted ECE.  ``kind="counts"``: the largest gap between a
    counted and an expanded run."""
    import calcheck

    rng = np.random.default_rng(seed)
    if kind == "counts":                     # aggregated rows: counts equal expansion
        s = np.round(rng.beta(*WEIGHT_BETA, 3000), 3)
        y = (rng.uniform(size=3000) < s).astype(int)
        k = rng.integers(0, 6, 3000)
        ids = ["tce", "tce_q", "ece", "ace", "ece_l2", "mce_q", "brier", "log_loss", "pde"]
        a = calcheck.score(scores=s, labels=y, count=k, metrics=ids)
        b = calcheck.score(scores=np.repeat(s, k), labels=np.repeat(y, k), metrics=ids)
        gap = max(abs(a.value(m) - b.value(m)) for m in ids)
        ta = calcheck.run_tests(scores=s, labels=y, count=k, method=["spiegelhalter", "cox"]
                                ).to_dict()["tests"]
        tb = calcheck.run_tests(scores=np.repeat(s, k), labels=np.repeat(y, k),
                                method=["spiegelhalter", "cox"]).to_dict()["tests"]
        tgap = max(abs(ta[t]["pvalue"] - tb[t]["pvalue"]) for t in ta)
        return {"largest metric gap (TCE in %)": gap,
                "largest p-value gap (Spiegelhalter, Cox)": tgap}
    pop = weight_population(kind)
    s, y, w = weight_sample(kind, design, npop, rng)
    tests = calcheck.run_tests(scores=s, labels=y, weight=w, trials=trials, seed=seed,
                               method=["tcal", "hl", "spiegelhalter", "cox", "ks", "kuiper"],
                               family="none", weight_null=null).to_dict()["tests"]
    out = {f"{name}": float(tests[tid]["reject"]) for name, tid in
           (("tcal", "tcal_adaptive"), ("hl", "hosmer_lemeshow"),
            ("spiegelhalter", "spiegelhalter"), ("cox", "cox"), ("ks", "ks"),
            ("kuiper", "kuiper"))}
    extra: dict[str, Any] = {"ci": True, "ci_reps": reps} if null == "auto" else {}
    head = calcheck.score(scores=s, labels=y, weight=w, metrics=["ece", "ace"], seed=seed,
                          weight_null=null, **extra).to_dict()
    out["score headline"] = float(head["summary"]["verdict"] == "miscalibrated")
    for m in ("ece", "ace"):
        ci = head["metrics"][m].get("ci")
        out[f"{m} coverage"] = float(ci["low"] <= pop[m] <= ci["high"]) if ci and \
            design == "down" else float("nan")
    out["ece bias (weighted)"] = head["metrics"]["ece"]["value"] - pop["ece"] \
        if design == "down" else float("nan")
    out["ece bias (unweighted)"] = calcheck.score(scores=s, labels=y, metrics=["ece"]).value(
        "ece") - pop["ece"] if design == "down" else float("nan")
    return out


def run_weights_streamed(kind: str, npop: int, seed: int, trials: int,
                         design: str = "down", reps: int = 1000) -> dict[str, float]:
    """:func:`weight_sample`'s weighted rows through ``--engine stream``'s weighted passes
    (the budget of held rows set to 100, so they stream): the rejection rates of adaptive
    T-Cal (the units' null, dyadic levels), HL, Spiegelhalter and Cox at α = 0.05 and whether
    HL ran its small-count simulation (there the streamed null is each group's Binomial on
    its effective size, not the exact one); in the down-sampling design the coverage of the
    streamed ECE and ACE intervals (``--ci``: the Poisson bootstrap per score unit) for the
    population values."""
    import contextlib
    import io
    import json
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from calcheck.cli import run
    from calcheck.tuning import Tuning

    s, y, w = weight_sample(kind, design, npop, np.random.default_rng(seed))
    docs = []
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/w.parquet"
        pq.write_table(pa.table({"score": s, "label": y.astype(np.int8), "w": w}), path)
        for args in (["test", "--method", "tcal,hl,spiegelhalter,cox", "--family", "none",
                      "--trials", str(trials)],
                     ["score", "-m", "ece,ace", "--ci", "--ci-reps", str(reps)]):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                run([args[0], path, "--weight", "w", "--engine", "stream", "--json",
                     "--seed", str(seed), *args[1:]], tuning=Tuning(hold_weighted_rows=100))
            docs.append(json.loads(out.getvalue()))
    tests, metrics = docs[0]["tests"], docs[1]["metrics"]
    pop = weight_population(kind)
    cover = {f"{m} coverage": float(metrics[m]["ci"]["low"] <= pop[m] <= metrics[m]["ci"]["high"])
             if design == "down" else float("nan") for m in ("ece", "ace")}
    return {"tcal": float(tests["tcal_adaptive"]["reject"]),
            "hl": float(tests["hosmer_lemeshow"]["reject"]),
            "spiegelhalter": float(tests["spiegelhalter"]["reject"]),
            "cox": float(tests["cox"]["reject"]),
            "hl by simulation": float(tests["hosmer_lemeshow"]["pvalue_method"] ==
                                      "monte carlo"), **cover}


def compare_new(kind: str, s: np.ndarray) -> np.ndarray:
    """NEW's scores in the weighted compare design (OLD's are s, the population calibrated):
    ``equal`` each s's 1/40-wide cell's population mean E[s | cell] (calibrated too, less
    sharp), ``worse`` s^0.85 (too high everywhere)."""
    if kind == "worse":
        return s ** 0.85
    from scipy import stats

    a, b = WEIGHT_BETA
    edges = np.linspace(0.0, 1.0, 41)
    mass = np.diff(stats.beta(a, b).cdf(edges))
    first = np.diff(stats.beta(a + 1, b).cdf(edges)) * a / (a + b)     # ∫ s f(s) ds per cell
    means = np.divide(first, mass, out=(edges[:-1] + edges[1:]) / 2, where=mass > 0)
    return means[np.minimum((s * 40).astype(int), 39)]


@functools.cache
def compare_population(kind: str) -> dict[str, float]:
    """The population changes NEW − OLD of ECE (10 equal-width bins), ACE (10 equal-mass bins
    at NEW's population deciles) and the Brier score in the weighted compare design, from a
    sample of 4·10⁶ population rows (OLD calibrated: its ECE and ACE are 0)."""
    s = np.random.default_rng(20261129).beta(*WEIGHT_BETA, 4_000_000)
    new = compare_new(kind, s)
    gap = s - new                                   # E[y − NEW | s] = s − NEW
    ece = np.abs(np.bincount(np.minimum((new * 10).astype(int), 9), weights=gap,
                             minlength=10)).sum() / s.shape[0]
    order = np.argsort(new, kind="stable")          # equal-mass bins of NEW's population
    ace = np.abs(np.add.reduceat(gap[order], np.arange(10) * (s.shape[0] // 10))).sum() / \
        s.shape[0]
    return {"ece": float(ece), "ace": float(ace), "brier": float(np.mean(gap ** 2))}


def run_weighted_compare(kind: str, npop: int, seed: int, reps: int) -> dict[str, float]:
    """``compare --weight`` of the down-sampling design (every positive kept, negatives at
    f = 0.1 with weight 10) between OLD = s and NEW (:func:`compare_new`) on the same rows, in
    memory and on ``--engine stream``'s weighted passes (the held budget set to 100 rows): how
    often ECE's verdict is firm (worse or better) and how often the 95 % intervals of the ECE,
    ACE and Brier changes cover the population change (:func:`compare_population`)."""
    s, y, w = weight_sample("calibrated", "down", npop, np.random.default_rng(seed))
    tables = [{"score": score, "label": y.astype(np.int8), "w": w}
              for score in (s, compare_new(kind, s))]
    return _weighted_compare_cover(tables, ["ece", "ace", "brier"], compare_population(kind),
                                   seed, reps)


def _weighted_compare_cover(tables: list[dict[str, np.ndarray]], ids: list[str],
                            pop: dict[str, float], seed: int, reps: int) -> dict[str, float]:
    """OLD's and NEW's ``tables`` (weights ``w``) compared on ``ids`` in memory and streamed:
    whether the first metric's verdict is firm, and whether each 95 % interval of a change
    covers the population change ``pop``."""
    import contextlib
    import io
    import json
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from calcheck.cli import run
    from calcheck.tuning import Tuning

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = [f"{tmp}/old.parquet", f"{tmp}/new.parquet"]
        for path, cols in zip(paths, tables):
            pq.write_table(pa.table(cols), path)
        for where, extra, tuning in (("memory", [], None),
                                     ("streamed", ["--engine", "stream"],
                                      Tuning(hold_weighted_rows=100))):
            text = io.StringIO()
            with contextlib.redirect_stdout(text), contextlib.redirect_stderr(io.StringIO()):
                run(["compare", *paths, "--weight", "w", "-m", ",".join(ids), "--json",
                     "--seed", str(seed), "--ci-reps", str(reps), *extra],
                    **({"tuning": tuning} if tuning else {}))
            metrics = json.loads(text.getvalue())["metrics"]
            out[f"{ids[0].upper()} firm verdict ({where})"] = float(
                metrics[ids[0]]["verdict"] in ("worse", "better"))
            for m in ids:
                ci = metrics[m]["ci"]
                out[f"{m} change coverage ({where})"] = float(ci["low"] <= pop[m] <= ci["high"])
    return out


MC_KEEP = 0.25        # the multiclass compare design: rows of classes 1 and 2 kept at 1/4


def mc_compare_new(P: np.ndarray, power: float) -> np.ndarray:
    """NEW's probabilities in the multiclass compare design: OLD's (calibrated) raised to
    ``power`` and renormalized — the same top label, overconfident for power > 1."""
    Q = P ** power
    return Q / Q.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]


@functools.cache
def mc_compare_population(power: float) -> dict[str, float]:
    """The population changes NEW − OLD of the top-label ECE (15 equal-width bins), ACE (15
    equal-mass bins of NEW's population confidence) and top-label Brier score, from 4·10⁶
    Dirichlet(1, 1, 1) rows (OLD calibrated: the top label is right with probability its
    confidence p, so NEW's gap at confidence c is p − c)."""
    P = np.random.default_rng(20261129).dirichlet(np.ones(3), 4_000_000)
    p, c = P.max(axis=1), mc_compare_new(P, power).max(axis=1)
    gap, n = p - c, P.shape[0]
    ece = np.abs(np.bincount(np.minimum((c * 15).astype(int), 14), weights=gap,
                             minlength=15)).sum() / n
    order = np.argsort(c, kind="stable")
    ace = np.abs(np.add.reduceat(gap[order], np.arange(15) * (n // 15))).sum() / n
    return {"ece_top": float(ece), "ace_top": float(ace), "brier": float(np.mean(gap ** 2))}


def run_multiclass_weighted_compare(power: float, npop: int, seed: int,
                                    reps: int) -> dict[str, float]:
    """``compare --weight`` of K = 3 probabilities: a Dirichlet(1, 1, 1) population of
    ``npop`` rows with labels drawn from OLD's calibrated probabilities, every row of class 0
    kept and those of classes 1 and 2 at 1/4 (weight 4); NEW = :func:`mc_compare_new`.  The
    top-label ECE's firm verdicts and the coverage of the top-label ECE, ACE and Brier
    changes (:func:`mc_compare_population`), in memory and streamed."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(3), npop)
    y = np.minimum((P.cumsum(axis=1) < rng.random((npop, 1))).sum(axis=1), 2)
    keep = (y == 0) | (rng.uniform(size=npop) < MC_KEEP)
    P, y = P[keep], y[keep]
    w = np.where(y == 0, 1.0, 1.0 / MC_KEEP)
    tables = [{**{f"prob_{k}": Q[:, k] for k in range(3)}, "label": y, "w": w}
              for Q in (P, mc_compare_new(P, power))]
    return _weighted_compare_cover(tables, ["ece_top", "ace_top", "brier"],
                                   mc_compare_population(power), seed, reps)


def _chi2_sf(x: float, df: int) -> float:
    from scipy.stats import chi2

    return float(chi2.sf(x, df))


def run_skce(kind: str, n: int, seed: int, trials: int) -> dict[str, float]:
    import calcheck

    P, y = multiclass_sample(kind, n, seed)
    return {"skce rejects": float(calcheck.skce_test(P, y, trials=trials, rng=seed).reject)}


def run_weighted_skce(kind: str, design: str, seed: int, trials: int) -> dict[str, float]:
    """The SKCE test of weighted or aggregated rows: binary rows of the down-sampling or
    importance design (population 5,000); ``counts``: 20,000 predictions with scores on a
    grid of 0.01 aggregated to (score, label, n); ``multiclass``: K = 3 rows with weights
    Exp(1) that do not depend on the label (the fixed null)."""
    import calcheck

    rng = np.random.default_rng(seed)
    if design == "counts":
        s = np.round(rng.beta(2.0, 5.0, 20_000), 2)
        y = (rng.uniform(size=s.shape[0]) < weight_truth(kind, s)).astype(int)
        keys, k = np.unique(np.column_stack([s, y]), axis=0, return_counts=True)
        res = calcheck.skce_test(keys[:, 0], keys[:, 1].astype(int), count=k, trials=trials,
                                 rng=seed)
    elif design == "multiclass":
        P, y = multiclass_sample("cal" if kind == "calibrated" else "swap", 1000, seed)
        res = calcheck.skce_test(P, y, weight=rng.exponential(1.0, 1000), trials=trials,
                                 rng=seed)
    else:
        s, y, w = weight_sample(kind, design, 5000, rng)
        res = calcheck.skce_test(s, y, weight=w, trials=trials, rng=seed)
    return {"skce rejects": float(res.reject)}


# ---------------------------------------------------------------------------------------------
# the table


@dataclass
class Cell:
    section: str
    label: str
    fn: Callable[..., dict[str, float]]
    args: tuple[Any, ...]
    R: int
    note: str = ""


def cells(quick: bool) -> list[Cell]:
    def r(full, q):
        return (q if quick else full)
    out: list[Cell] = []
    for scores in ("uniform", "beta25", "rounded"):
        for n in (500, 5000):
            out.append(Cell("tests", f"calibrated, scores {scores}, n = {n:,}", run_tests,
                            ("cal", n, scores, r(200, 20)), r(2000, 20)))
    out.append(Cell("tests", "p = s^1.5, scores uniform, n = 500", run_tests,
                    ("pow:1.5", 500, "uniform", r(200, 20)), r(2000, 20)))
    out.append(Cell("adaptive", "calibrated, n = 2,000", run_adaptive, ("cal", 2000, r(1000, 100)),
                    r(200, 6)))
    out.append(Cell("adaptive", "bump d = 0.12 on [0.6, 0.7), n = 2,000", run_adaptive,
                    ("bump:0.12", 2000, r(1000, 100)), r(200, 6)))
    out.append(Cell("adaptive", "p = s^1.3, n = 400", run_adaptive, ("pow:1.3", 400, r(1000, 100)),
                    r(200, 6)))
    out.append(Cell("adaptive", "calibrated, n = 400", run_adaptive, ("cal", 400, r(1000, 100)),
                    r(200, 6)))
    for model, n in (("cal", 2000), ("cal", 20000), ("pow:1.2", 2000), ("pow:1.2", 20000),
                     ("pow:2", 5000)):
        out.append(Cell("ci", f"{model}, n = {n:,}", run_ci, (model, n, r(1000, 100)),
                        r(150, 4)))
    pop12 = population_ece("pow:1.2")
    for model, n, tol in (("cal", 500, 0.02), ("cal", 2000, 0.02), ("cal", 20000, 0.02),
                          ("pow:1.2", 2000, 0.02), ("pow:1.2", 20000, 0.02),
                          ("pow:1.2", 2000, round(pop12, 4)), ("pow:1.2", 20000, round(pop12, 4))):
        out.append(Cell("headline", f"{model}, n = {n:,}, --tolerance ece:{tol:g}", run_headline,
                        (model, n, tol), r(200, 4)))
    for scores in ("uniform", "u_shaped"):
        for n in (100, 500, 5000):
            out.append(Cell("family", f"calibrated, scores {scores}, n = {n:,}", run_family,
                            ("cal", n, scores, r(200, 20)), r(600, 4)))
    for model, n in (("pow:1.5", 500), ("bump:0.12", 2000), ("pow:1.3", 400)):
        out.append(Cell("family", f"{model}, scores uniform, n = {n:,}", run_family,
                        (model, n, "uniform", r(200, 20)), r(500, 4)))
    out.append(Cell("multiclass", "K = 10, Dirichlet(0.3), calibrated, n = 2,000",
                    run_multiclass_family, ("cal", 2000, r(300, 50)), r(300, 3)))
    for groups in (3, 20):
        out.append(Cell("groups", f"score --by, {groups} groups, n = 6,000 (calibrated)",
                        run_groups, (groups, 6000), r(1000, 4)))
    out.append(Cell("windows", "30 daily windows of 300 rows (calibrated)", run_windows,
                    (30, 300, r(500, 50)), r(400, 3)))
    for kind, note in (("sharpness", "p against p averaged over 1/10 cells (equally calibrated)"),
                       ("power", "p against p^1.2 (population ECE change 0.045)")):
        out.append(Cell("compare", f"{note}, n = 2,000", run_compare_cell,
                        (kind, 2000, r(500, 50)), r(500, 4)))
    for kind, n in (("rare", 500), ("rare", 5000)):
        out.append(Cell("small", f"calibrated, scores Beta(0.5, 20), n = {n:,}", run_small,
                        (kind, n, r(1000, 100)), r(1000, 4)))
    for kind, n, what in (("eleven", 1000, "11 distinct values"),
                          ("eleven", 5000, "11 distinct values"),
                          ("u_shaped", 5000, "Beta(0.5, 0.5)")):
        out.append(Cell("ties", f"calibrated, scores {what}, n = {n:,}", run_small,
                        (kind, n, r(1000, 100)), r(2000 if kind == "eleven" else 1500, 4)))
    for kind in ("calibrated", "planted"):
        out.append(Cell("audit", f"{kind}, 3 columns at depth 2, n = 20,000", run_audit,
                        (kind, 20_000, r(1000, 100)), r(300, 3)))
    for kind, per_day, reps in (("calibrated", 1000, 500), ("calibrated", 100, 1000),
                                ("drift", 1000, 200), ("drift", 300, 200)):
        out.append(Cell("monitor", f"{kind}, 60 daily windows of {per_day:,} rows", run_monitor,
                        (kind, 60, per_day), r(reps, 3)))
    for kind, design, null, npop in (
            ("calibrated", "down", "auto", 20_000), ("calibrated", "down", "auto", 100_000),
            ("calibrated", "down", "fixed", 20_000),
            ("calibrated", "importance", "auto", 20_000),
            ("miscalibrated", "down", "auto", 20_000),
            ("miscalibrated", "down", "auto", 100_000),
            ("miscalibrated", "down", "fixed", 20_000),
            ("miscalibrated", "importance", "auto", 20_000)):
        how = ("negatives kept at f = 0.1 (weight 10)" if design == "down" else
               "rows kept at π(s) = min(1, 0.05 + 4s) (weight 1/π)")
        out.append(Cell("weights", f"{kind}, population {npop:,}, {how}; --weight-null "
                        f"{null}", run_weights,
                        (kind, npop, r(300, 20), r(200, 20), design, null), r(300, 3)))
    for kind, npop, design in (("calibrated", 20_000, "down"), ("calibrated", 100_000, "down"),
                               ("calibrated", 20_000, "importance"),
                               ("miscalibrated", 20_000, "down"),
                               ("miscalibrated", 20_000, "importance")):
        how = ("negatives kept at f = 0.1 (weight 10)" if design == "down" else
               "rows kept at π(s) = min(1, 0.05 + 4s) (weight 1/π)")
        out.append(Cell("wstream", f"{kind}, population {npop:,}, {how}, streamed",
                        run_weights_streamed, (kind, npop, r(1000, 100), design, r(1000, 100)),
                        r(300, 3)))
    for kind, label in (("equal", "NEW = the population mean of s in its 1/40 cell, "
                                  "equally calibrated"),
                        ("worse", "NEW = s^0.85, too high")):
        out.append(Cell("wcompare", f"OLD = s calibrated, {label}; population 20,000, "
                        "negatives kept at f = 0.1 (weight 10)", run_weighted_compare,
                        (kind, 20_000, r(500, 50)), r(300, 3)))
    for power in (1.3, 2.0):
        out.append(Cell("wmccompare", f"K = 3, OLD = P ~ Dirichlet(1, 1, 1) calibrated, NEW = "
                        f"P^{power:g} renormalized; population 20,000, classes 1 and 2 kept at "
                        "1/4 (weight 4)", run_multiclass_weighted_compare,
                        (power, 20_000, r(500, 50)), r(300, 3)))
    out.append(Cell("counts", "counts against the expanded file (3,000 rows, counts 0-5)",
                    run_weights, ("counts", 0, 0, 0), r(50, 2)))
    for kind, design, label in (
            ("calibrated", "down", "negatives kept at f = 0.1 (weight 10), class-weight null"),
            ("calibrated", "importance", "rows kept at π(s) (weight 1/π), fixed null"),
            ("calibrated", "counts", "20,000 predictions aggregated to (score, label, n)"),
            ("calibrated", "multiclass", "K = 3, n = 1,000, weights Exp(1), fixed null"),
            ("miscalibrated", "down", "negatives kept at f = 0.1 (weight 10), class-weight null"),
            ("miscalibrated", "counts", "20,000 predictions aggregated to (score, label, n)"),
            ("miscalibrated", "multiclass", "K = 3, n = 1,000, others swapped, weights Exp(1)")):
        out.append(Cell("wskce", f"{kind}, {label}", run_weighted_skce,
                        (kind, design, r(300, 50)), r(1000, 3)))
    out.append(Cell("skce", "K = 3, top label calibrated, others swapped, n = 3,000", run_skce,
                    ("swap", 3000, r(1000, 200)), r(10, 2)))
    out.append(Cell("skce", "K = 3, calibrated, n = 1,000", run_skce,
                    ("cal", 1000, r(1000, 200)), r(40, 4)))
    return out


def _one(job: tuple[Callable[..., dict[str, float]], tuple[Any, ...], int]) -> dict[str, float]:
    fn, args, seed = job
    if fn in (run_tests, run_family):
        return fn(args[0], args[1], seed, args[2], args[3])
    return fn(*args[:2], seed, *args[2:])


def run_cell(cell: Cell, pool: ProcessPoolExecutor | None) -> dict[str, float]:
    jobs = [(cell.fn, cell.args, 10_000 + seed) for seed in range(cell.R)]
    results = list(pool.map(_one, jobs, chunksize=max(1, cell.R // 16))) if pool else \
        [_one(j) for j in jobs]
    out = {}
    for k in results[0]:
        v = np.array([r[k] for r in results], dtype=np.float64)
        agg = np.median if k.startswith("median") else np.mean
        out[k] = float(agg(v[~np.isnan(v)])) if (~np.isnan(v)).any() else float("nan")
    return out


def table(rows: Iterable[tuple[Cell, dict[str, float]]]) -> str:
    lines: list[str] = []
    section = None
    for cell, res in rows:
        if cell.section != section:
            section = cell.section
            lines += ["", f"### {TITLES[section]}", "", "| cell | R | " +
                      " | ".join(res) + " |", "|---|---:|" + "---:|" * len(res)]
        lines.append(f"| {cell.label} | {cell.R} | " +
                     " | ".join(_fmt(k, v) for k, v in res.items()) + " |")
    return "\n".join(lines) + "\n"


def _fmt(key: str, v: float) -> str:
    if math.isnan(v):
        return "–"
    if "gap" in key:
        return f"{v:.1e}"
    if "bias" in key or "width" in key:
        return f"{v:.4f}"
    return f"{v:.3f}"


TITLES = {"tests": "Classical tests and fixed-m T-Cal: rejection rate at α = 0.05 "
                   "(Cox slope: coverage of 1 by the 95 % Wald interval)",
          "adaptive": "Adaptive T-Cal: rejection rate at α = 0.05",
          "ci": "95 % intervals (--ci, 10 equal-width / equal-mass bins): coverage of the "
                "population value, mean width, mean bias of the plug-in and debiased values",
          "skce": "SKCE test (K = 3): rejection rate at α = 0.05",
          "family": "calcheck test --method all: the headline (Holm over the 7 tests) against "
                    "the any-rejects rule (--family none) and each test alone, at α = 0.05",
          "multiclass": "Multiclass verdicts (K = 10): rejection rate of the headline at "
                        "α = 0.05",
          "groups": "score --by: the headline (the whole data's and every group's consistency "
                    "verdicts, Holm) against any group rejecting alone, at α = 0.05",
          "windows": "score --time --window 1d --ci over 30 days: the headline, and whether "
                     "any window's 95 % ECE interval misses 0 (simultaneous and marginal)",
          "compare": "compare at n = 2,000 (interval level 0.95): the summary's calibration "
                     "verdict, the ECE gate (--fail-if-worse ece), ACE's interval verdict and "
                     "the scores line",
          "small": "Hosmer–Lemeshow with rare positives (calibrated): rejection rate at "
                   "α = 0.05",
          "ties": "Few distinct or U-shaped scores (calibrated): rejection rate at α = 0.05",
          "audit": "calcheck audit (region × device × age, depth 2, max-type adjustment at "
                   "α = 0.05): the chance that any segment rejects, and that the planted "
                   "segment (5 % of rows, +0.1) is named first and rejected",
          "monitor": "calcheck monitor over 60 daily windows (α = 0.05): the chance of ever "
                     "alarming, and the median number of drifted windows read until the alarm "
                     "(logit offset +0.4 from day 30)",
          "weights": "Weighted rows (--weight; population prevalence 0.04, calibrated or "
                     "P(y = 1 | s) = s^1.15): each test's rejection rate at α = 0.05 and the "
                     "score headline's; in the down-sampling design the coverage of the 95 % "
                     "ECE and ACE intervals of the population value and the bias of the "
                     "weighted and unweighted ECE",
          "wstream": "Weighted rows streamed beyond the held budget (--engine stream's "
                     "weighted passes; the weights section's designs and seeds): each "
                     "test's rejection rate at α = 0.05 (T-Cal: adaptive, the units' null), "
                     "how often Hosmer–Lemeshow ran its small-count simulation (streamed: "
                     "each group's Binomial on its effective size), and in the down-sampling "
                     "design the coverage of the streamed 95 % ECE and ACE intervals "
                     "(Poisson bootstrap per score unit) of the population value",
          "wcompare": "Weighted compare (--weight, the down-sampling design; interval "
                      "level 0.95): how often ECE's verdict is firm, and the coverage of the "
                      "population change by the ECE, ACE and Brier intervals, in memory and "
                      "on --engine stream's weighted passes (paired units carrying the weights)",
          "wmccompare": "Weighted compare of multiclass input (--weight, K = 3, classes 1 "
                        "and 2 down-sampled; interval level 0.95): how often the top-label "
                        "ECE's verdict is firm, and the coverage of the population change by "
                        "the top-label ECE, ACE and Brier intervals, in memory and on --engine "
                        "stream's weighted passes (the top-label views' paired units carrying "
                        "the weights)",
          "wskce": "SKCE test of weighted (population 5,000, P(y = 1 | s) = s or s^1.15) and "
                   "aggregated rows: rejection rate at α = 0.05",
          "counts": "Aggregated rows (--count) against the expanded file: the largest "
                    "absolute differences",
          "headline": "The headline's effect size (ACE, 10 equal-mass bins, parametric "
                      "interval at 95 %) and the --tolerance verdict (ECE's 95 % norm "
                      "bootstrap interval): coverage, width, rate of each firm verdict"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few samples per cell (seconds)")
    ap.add_argument("--only", default="", help="comma list of sections: tests, adaptive, ci, "
                    "headline, family, multiclass, groups, windows, compare, small, ties, audit, "
                    "monitor, skce, weights, wstream, wcompare, wmccompare, wskce, counts")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--write", default=None, help="also write the table into this markdown "
                    "file, between its '<!-- validity:begin -->' and '<!-- validity:end -->'")
    a = ap.parse_args(argv)
    only = {x.strip() for x in a.only.split(",") if x.strip()}
    chosen = [c for c in cells(a.quick) if not only or c.section in only]
    t0 = time.perf_counter()
    rows = []
    pool = ProcessPoolExecutor(a.workers) if a.workers > 1 and not a.quick else None
    try:
        for c in chosen:
            t = time.perf_counter()
            rows.append((c, run_cell(c, pool)))
            print(f"# {c.section}: {c.label}: {time.perf_counter() - t:.1f} s", file=sys.stderr)
    finally:
        if pool is not None:
            pool.shutdown()
    text = table(rows)
    text += (f"\n_{'quick' if a.quick else 'full'} run, {time.perf_counter() - t0:.0f} s on "
             f"{a.workers} worker(s); reproduce with `python benchmarks/validity.py"
             f"{' --quick' if a.quick else ''}`._\n")
    print(text)
    if a.write:
        from pathlib import Path

        path = Path(a.write)
        doc = path.read_text(encoding="utf-8")
        head, _, rest = doc.partition("<!-- validity:begin -->")
        _, _, tail = rest.partition("<!-- validity:end -->")
        path.write_text(f"{head}<!-- validity:begin -->\n{text}<!-- validity:end -->{tail}",
                        encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
