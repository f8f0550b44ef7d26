"""ECCE-MAD / ECCE-R and the Kolmogorov–Smirnov / Kuiper tests on the walk of cumulative
differences: the formulas written out directly on small data, the tail series of the
Brownian-motion laws, and MAPIE's numbers on tie-free data (fixtures/compat)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import ndtr

import calcheck
from calcheck.hypotests.cumulative import max_abs_sf, range_sf, walk_test
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics.cumulative import ecce_mad, ecce_r

FIX = Path(__file__).parent / "fixtures" / "compat"


def direct_walk(s, y):
    """C_0 = 0, then C after each distinct score (the end of its tie group)."""
    n = len(s)
    out = [0.0]
    for v in sorted(set(s)):
        rows = [i for i in range(n) if s[i] <= v]
        out.append(sum(y[i] - s[i] for i in rows) / n)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_ecce_equals_the_formula(seed):
    rng = np.random.default_rng(seed)
    s = np.round(rng.random(60), 1 if seed % 2 else 6)
    y = (rng.random(60) < s).astype(np.int64)
    c = direct_walk(list(s), list(y))
    d = Prepared(s, y)
    assert ecce_mad(d, MetricOptions()).value == pytest.approx(max(abs(x) for x in c), abs=1e-15)
    assert ecce_r(d, MetricOptions()).value == pytest.approx(max(c) - min(c), abs=1e-15)
    sigma = math.sqrt(sum(v * (1 - v) for v in s)) / len(s)
    assert ecce_mad(d, MetricOptions()).extra["sigma"] == pytest.approx(sigma, rel=1e-13)


def test_walk_read_at_tie_group_ends_only():
    # two rows tied at 0.5, one positive: row order must not matter, and the walk never
    # "sees" the positive before the negative
    s = np.array([0.5, 0.5, 0.9])
    a = Prepared(s, np.array([1, 0, 1]))
    b = Prepared(s, np.array([0, 1, 1]))
    for fn in (ecce_mad, ecce_r):
        assert fn(a, MetricOptions()).value == fn(b, MetricOptions()).value
    # C: 0, (1 − 1)/3 = 0 at 0.5, 0.1/3 at 0.9
    assert ecce_r(a, MetricOptions()).value == pytest.approx(0.1 / 3)


@pytest.mark.parametrize("x", [1.0, 1.5, 2.0, 3.0, 5.0, 8.0])
def test_tail_series_against_theta_series(x):
    # P(max|B| < x) and P(range < x) from their small-x theta series, in high precision
    k = np.arange(0, 400)
    h = 2 * k + 1
    ks_cdf = 4 / math.pi * math.fsum((-1.0) ** k / h * np.exp(-(h * math.pi) ** 2 / (8 * x * x)))
    hk = k + 0.5
    r_cdf = math.fsum((8 / x ** 2 + 2 / (hk * math.pi) ** 2)
                      * np.exp(-2 * (hk * math.pi) ** 2 / (x * x)))
    assert max_abs_sf(x) == pytest.approx(1 - ks_cdf, rel=1e-9, abs=1e-15)
    assert range_sf(x) == pytest.approx(1 - r_cdf, rel=1e-9, abs=1e-15)


def test_switch_is_continuous():
    for sf in (max_abs_sf, range_sf):
        assert sf(1 - 1e-12) == pytest.approx(sf(1.0), rel=1e-10)


@pytest.mark.parametrize("x", [20.0, 30.0, 37.0])
def test_deep_tail_p_values(x):
    # the leading terms dominate: 4·Φ̄(x) and 8·Φ̄(x) (the next terms are e^{-4x²} smaller)
    assert max_abs_sf(x) == pytest.approx(4 * ndtr(-x), rel=1e-12)
    assert range_sf(x) == pytest.approx(8 * ndtr(-x) - 16 * ndtr(-2 * x), rel=1e-12)
    assert 0 < max_abs_sf(x) < 1


def test_p_value_below_1e300_is_right_and_logged():
    n = 200_000
    s = 0.01 + np.arange(n) * 1e-9          # distinct scores: the Brownian-motion series
    y = np.zeros(n, dtype=np.int64)
    y[: n // 20] = 1                        # 5 % observed against 1 % predicted
    rep = calcheck.run_tests(pd.DataFrame({"score": s, "label": y}), method=["ks", "kuiper"])
    ks = rep.data["tests"]["ks"]
    assert ks["statistic"] > 38 and ks["pvalue"] == 0.0 and ks["log10_pvalue"] < -300
    assert ks["reject"]


def test_tests_agree_with_mapie_on_tie_free_scores():
    # MAPIE jitters the scores by 1e-8 and truncates its cdf series at 1e-8: on distinct
    # scores its statistics agree with calcheck's to ~1e-8
    values = json.loads((FIX / "values.json").read_text())
    cases = np.load(FIX / "cases.npz")
    for case in ("smooth", "rare", "tiny"):
        df = pd.DataFrame({"score": cases[f"binary_{case}_s"],
                           "label": cases[f"binary_{case}_y"]})
        ref = values["binary"][case]["mapie_50"]
        for t in ("ks", "kuiper"):
            got = walk_test(t, df["score"].to_numpy(), df["label"].to_numpy(), null="brownian")
            assert got.statistic == pytest.approx(ref[t]["statistic"], rel=1e-7)
            assert got.pvalue == pytest.approx(ref[t]["pvalue"], rel=1e-4, abs=2e-8)


def test_few_distinct_scores_get_the_simulated_null():
    """On 11 distinct scores the walk has 11 steps: the Brownian limit is conservative (KS
    size 0.033, Kuiper 0.022 at α = 0.05, docs/validity.md), so the p-value comes from labels
    redrawn from the scores — uniform under calibration; seeded."""
    rng = np.random.default_rng(4)
    pvals = {"ks": [], "kuiper": []}
    for _ in range(300):
        s = np.round(rng.random(2000) * 10) / 10
        y = (rng.random(2000) < s).astype(np.int64)
        for t in pvals:
            r = walk_test(t, s, y, trials=300, seed=1)
            assert r.details["pvalue_method"] == "monte carlo"
            pvals[t].append(r.pvalue)
    for t, p in pvals.items():
        p = np.array(p)
        assert 0.02 <= np.mean(p <= 0.05) <= 0.09, t
        assert stats.kstest(p, "uniform").pvalue > 1e-3 or np.mean(p <= 0.5) < 0.6, t
    again = walk_test("ks", s, y, trials=300, seed=1)
    assert again.pvalue == walk_test("ks", s, y, trials=300, seed=1).pvalue
    smooth = rng.random(3000)
    assert walk_test("ks", smooth, (rng.random(3000) < smooth).astype(int)).details[
        "pvalue_method"] == "brownian motion"


def test_cli_and_engines(cli, tmp_path):
    rng = np.random.default_rng(3)
    s = rng.random(500)
    path = tmp_path / "p.parquet"
    pd.DataFrame({"score": s, "label": (rng.random(500) < s ** 1.5).astype(int)}).to_parquet(path)
    r = cli(["test", path, "--method", "ks,kuiper", "--json"])
    assert r.code == 0, r.stderr
    rep = json.loads(r.stdout)
    assert set(rep["tests"]) == {"ks", "kuiper"} and rep["tests"]["ks"]["reject"]
    r = cli(["test", path, "--method", "ks", "--engine", "stream"])
    assert r.code == 2 and "ks need(s) --engine memory" in r.stderr
    r = cli(["test", path, "--method", "all", "--engine", "stream", "--trials", "50", "--json"])
    assert r.code == 0, r.stderr
    assert "ks" not in json.loads(r.stdout)["tests"] and "ks, kuiper need(s)" in r.stderr
    r = cli(["score", path, "-m", "ecce_mad,ecce_r", "--json"])
    assert r.code == 0 and json.loads(r.stdout)["metrics"]["ecce_r"]["unit"] == "fraction"
