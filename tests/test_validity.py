"""Verdicts you can trust: the references, calibrations and intervals of docs/validity.md.

The size/power/coverage table itself is benchmarks/validity.py (full run on demand); here its
quick mode runs, and each piece is checked against its definition."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import calcheck
from calcheck.errors import UsageError
from calcheck.hypotests import tcal as T
from calcheck.hypotests import tcal_trials, trials_needed

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import validity  # noqa: E402


def _sample(model: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    return validity.sample(model, n, seed)


# ---------------------------------------------------------------------------------------------
# Hosmer–Lemeshow's reference


def test_hl_external_is_chi2_g_and_fitted_is_chi2_g_minus_2():
    s, y = _sample("cal", 3000, 1)
    ext = calcheck.hosmer_lemeshow(s, y)
    fit = calcheck.hosmer_lemeshow(s, y, hl_df="fitted")
    assert ext.details["df"] == 10 and fit.details["df"] == 8
    assert ext.pvalue == pytest.approx(stats.chi2.sf(ext.statistic, 10), rel=1e-12)
    assert fit.pvalue == pytest.approx(stats.chi2.sf(ext.statistic, 8), rel=1e-12)
    assert ext.details["df_rule"] == "external" and "chi2(G)" in ext.details["reference"]
    with pytest.raises(UsageError, match="hl_df"):
        calcheck.hosmer_lemeshow(s, y, hl_df="G-2")


def test_hl_df_counts_groups_left_after_tie_sharing():
    s = np.repeat([0.2, 0.5, 0.8], 200)                 # three distinct scores
    y = (np.random.default_rng(0).random(600) < s).astype(int)
    r = calcheck.hosmer_lemeshow(s, y)
    assert r.details["df"] == r.details["groups"]


def test_hl_size_on_calibrated_samples_is_near_alpha():
    rejections = [calcheck.hosmer_lemeshow(*_sample("cal", 500, seed)).reject
                  for seed in range(400)]
    assert 0.02 <= np.mean(rejections) <= 0.085          # nominal 0.05, sd ≈ 0.011


# ---------------------------------------------------------------------------------------------
# adaptive T-Cal: grid, min-P, trials


def test_bounded_grid_stops_at_n_to_the_two_thirds():
    ms = T.adaptive_ms(2000)
    assert ms[:8] == [2, 3, 4, 5, 6, 8, 10, 13]
    assert ms[-1] <= 2000 ** (2 / 3) < ms[-1] * 1.27
    assert T.adaptive_ms(2000, "paper") == [2 ** b for b in range(1, 20)]
    assert T.adaptive_ms(2000, "bounded", dyadic=True) == [2 ** b for b in range(1, 9)]
    assert T.adaptive_ms(5) == [2, 3] and T.adaptive_ms(2) == [2]


def test_minp_pvalue_is_exact_rank_of_the_observed_column():
    rng = np.random.default_rng(0)
    null = rng.normal(size=(3, 99))
    # an observed column beyond every null draw at one level: the smallest attainable p
    obs = np.array([0.0, 10.0, 0.0])
    p, crit = T.minp_pvalue(obs, null, 0.05)
    assert p == pytest.approx(1 / 100)
    assert 0 < crit < 0.05
    # a null column taken as observed: its p-value is its rank among the R + 1 columns
    pvals = []
    for j in range(99):
        others = np.delete(null, j, axis=1)
        pvals.append(T.minp_pvalue(null[:, j], others, 0.05)[0])
    assert sorted(pvals) == pytest.approx(np.arange(1, 100) / 100, abs=0.02)


def test_adaptive_result_records_grid_and_rule():
    s, y = _sample("cal", 1000, 3)
    r = calcheck.tcal(s, y, trials=200, rng=1)
    assert r.details["correction"] == "minp" and r.details["grid"] == "bounded"
    assert r.settings["grid"] == "bounded" and r.settings["correction"] == "minp"
    assert r.details["min_attainable_pvalue"] == pytest.approx(1 / 201)
    b = calcheck.tcal(s, y, trials=200, rng=1, adaptive_grid="paper",
                      adaptive_correction="bonferroni")
    assert b.details["correction"] == "bonferroni" and b.details["B"] == T.paper_B(1000)
    assert b.pvalue == pytest.approx(min(1.0, b.details["B"] * b.statistic))


def test_default_trials_follow_alpha():
    assert trials_needed(0.05) == 1000 and trials_needed(0.01) == 2000
    assert trials_needed(0.05, multiplicity=19) == 7600
    n, note = tcal_trials(None, 0.01, 1, auto=True)
    assert n == 2000 and note is None and 1 / (n + 1) < 0.01 / 10
    n, note = tcal_trials(50, 0.01, 1, auto=False)        # explicit: kept, and said so
    assert n == 50 and "cannot reject" in note
    n, note = tcal_trials(500, 0.01, 1, auto=False)
    assert n == 500 and "α/10" in note


@pytest.mark.slow
def test_tcal_alpha_001_reaches_below_a_tenth_of_alpha():
    s, y = _sample("pow:1.5", 200_000, 7)
    r = calcheck.tcal(s, y, alpha=0.01)
    assert r.settings["trials"] >= 2000
    assert r.pvalue <= 0.001 and r.reject
    assert r.details["min_attainable_pvalue"] < 0.001


def test_explicit_trials_that_cannot_reach_alpha_make_the_verdict_inconclusive(cli, tmp_path):
    s, y = _sample("cal", 300, 2)
    path = tmp_path / "p.csv"
    pd.DataFrame({"score": s, "label": y}).to_csv(path, index=False)
    r = cli(["test", path, "--trials", "10", "--json"])
    rep = json.loads(r.stdout)
    assert rep["summary"]["verdict"] == "inconclusive"
    assert "cannot reach" in rep["summary"]["basis"]


# ---------------------------------------------------------------------------------------------
# Cox intervals


def test_cox_wald_intervals_follow_the_level():
    s, y = _sample("cal", 2000, 4)
    r = calcheck.cox(s, y)
    z = stats.norm.ppf(0.975)
    ci = r.details["slope_ci"]
    assert ci["low"] == pytest.approx(r.details["slope"] - z * r.details["slope_se"])
    assert ci["high"] == pytest.approx(r.details["slope"] + z * r.details["slope_se"])
    assert ci["level"] == 0.95 and ci["low"] < 1 < ci["high"]
    r90 = calcheck.cox(s, y, ci_level=0.9)
    w95 = ci["high"] - ci["low"]
    w90 = r90.details["slope_ci"]["high"] - r90.details["slope_ci"]["low"]
    assert w90 / w95 == pytest.approx(stats.norm.ppf(0.95) / z)
    assert "intercept_ci" in r.details


def test_cox_slope_interval_covers_one_on_calibrated_samples():
    covers = []
    for seed in range(200):
        ci = calcheck.cox(*_sample("cal", 500, 100 + seed)).details["slope_ci"]
        covers.append(ci["low"] <= 1.0 <= ci["high"])
    assert np.mean(covers) >= 0.9


# ---------------------------------------------------------------------------------------------
# SKCE


def _brute_skce(P: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    n, k = P.shape
    D = np.sqrt(((P[:, None, :] - P[None, :, :]) ** 2).sum(-1))
    iu = np.triu_indices(n, 1)
    nu = float(np.median(D[iu]))
    E = np.eye(k)[y] - P
    H = np.exp(-D / nu) * (E @ E.T)
    return float(H[iu].mean()), nu


def test_skce_equals_its_formula():
    P, y = validity.multiclass_sample("cal", 300, 5)
    r = calcheck.skce(P, y)
    want, nu = _brute_skce(P, y)
    assert r.value == pytest.approx(want, rel=1e-9, abs=1e-15)
    assert r.settings["bandwidth"] == pytest.approx(nu, rel=1e-12)
    assert not r.settings["subsample"]


def test_skce_of_binary_scores_is_that_of_the_two_column_vectors():
    s, y = _sample("pow:1.4", 250, 6)
    r = calcheck.skce(s, y)
    want, _ = _brute_skce(np.column_stack((1 - s, s)), y)
    assert r.value == pytest.approx(want, rel=1e-9, abs=1e-15)
    assert calcheck.skce(s, y, bandwidth=0.3).settings["bandwidth"] == 0.3


def test_skce_subsamples_above_its_limit_and_says_so():
    P, y = validity.multiclass_sample("cal", 5200, 7)
    r = calcheck.skce(P, y, seed=3)
    assert r.settings["subsample"] and r.settings["rows_used"] == 5000
    assert r.value == calcheck.skce(P, y, seed=3).value


def test_skce_test_sees_classwise_miscalibration_that_top_label_tests_miss():
    P, y = validity.multiclass_sample("swap", 3000, 8)
    assert calcheck.skce_test(P, y, trials=300, rng=1).reject
    P, y = validity.multiclass_sample("cal", 1000, 9)
    r = calcheck.skce_test(P, y, trials=300, rng=1)
    assert not r.reject and r.id == "skce"


def test_multiclass_test_default_and_all_include_skce(cli, tmp_path):
    P, y = validity.multiclass_sample("swap", 3000, 10)
    path = tmp_path / "mc.csv"
    pd.DataFrame({"p0": P[:, 0], "p1": P[:, 1], "p2": P[:, 2], "label": y}).to_csv(path,
                                                                               index=False)
    for extra in ([], ["--method", "all"]):
        r = cli(["test", path, "--probs", "p0,p1,p2", "--json", "--trials", "300", *extra])
        rep = json.loads(r.stdout)
        assert "skce" in rep["tests"]
        assert rep["summary"]["verdict"] == "miscalibrated"
        assert "skce" in rep["summary"]["decided_by"]


# ---------------------------------------------------------------------------------------------
# debiased metrics and intervals that cover


def _frame(model: str, n: int, seed: int) -> pd.DataFrame:
    s, y = _sample(model, n, seed)
    return pd.DataFrame({"score": s, "label": y})


def test_debiased_ece_is_its_formula():
    df = _frame("pow:1.3", 3000, 11)
    s, y = df["score"].to_numpy(), df["label"].to_numpy()
    rep = calcheck.score(df, metrics=["ece_debiased", "ece_l2_debiased", "ece"],
                         bins=10).data["metrics"]
    ids = np.minimum((s * 10).astype(int), 9)
    l1 = l2 = 0.0
    for b in range(10):
        r = (y - s)[ids == b]
        d, v = r.mean(), r.var(ddof=1) / r.size
        c = min(1.0, max(0.0, 2.0 - abs(d) / math.sqrt(v)))       # the taper
        l1 += r.size / s.size * math.sqrt(max(0.0, d * d - c * v))
        l2 += r.size / s.size * (d * d - v)
    assert rep["ece_debiased"]["value"] == pytest.approx(l1, rel=1e-9)
    assert rep["ece_l2_debiased"]["value"] == pytest.approx(math.sqrt(max(l2, 0)), rel=1e-9)
    assert rep["ece_debiased"]["value"] < rep["ece"]["value"]


def test_intervals_name_method_and_estimand_and_maxima_have_none():
    rep = calcheck.score(_frame("cal", 2000, 12), metrics=["ece", "ece_debiased", "ace", "mce",
                                                           "brier", "tce"],
                         ci=True, ci_reps=200)
    m = rep.data["metrics"]
    for mid in ("ece", "ece_debiased", "ace"):
        assert m[mid]["ci"]["estimand"] == "population value at the chosen binning"
        assert m[mid]["ci"]["method"].startswith("norm bootstrap")
        assert m[mid]["ci"]["low"] == 0.0                  # a calibrated model reaches 0
    assert m["ece"]["ci"] == m["ece_debiased"]["ci"]
    assert "ci" not in m["mce"]
    assert m["brier"]["ci"]["estimand"] == "population value (a mean)"
    assert "ci" not in m["tce"]                            # a biased estimator: none
    assert any("mce" in n and "maximum" in n for n in rep.data["notes"])
    assert any(n.startswith("tce: a biased estimator") for n in rep.data["notes"])


def test_ece_interval_covers_the_population_value():
    target = validity.population_ece("pow:1.5")
    covered = 0
    for seed in range(30):
        m = calcheck.score(_frame("pow:1.5", 3000, 200 + seed), metrics=["ece"], ci=True,
                           ci_reps=200, seed=seed).data["metrics"]["ece"]
        covered += m["ci"]["low"] <= target <= m["ci"]["high"]
    assert covered >= 26                                 # nominal ≥ 0.95


def test_stream_and_memory_intervals_agree(tmp_path):
    path = tmp_path / "p.parquet"
    _frame("pow:1.2", 20_000, 13).to_parquet(path)
    ids = ["ece", "ece_debiased", "ece_l2", "ece_l2_debiased", "ace"]
    mem = calcheck.score(path, metrics=ids, ci=True, ci_reps=300).data["metrics"]
    st = calcheck.score(path, metrics=ids, ci=True, ci_reps=300,
                        engine="stream").data["metrics"]
    for mid in ids:
        assert st[mid]["value"] == pytest.approx(mem[mid]["value"], rel=1e-9)
        for end in ("low", "high"):                      # Monte Carlo error of 300 reps
            assert st[mid]["ci"][end] == pytest.approx(mem[mid]["ci"][end], abs=0.004)


def test_sce_interval_reaches_zero_for_a_calibrated_model():
    P, y = validity.multiclass_sample("cal", 3000, 14)
    df = pd.DataFrame({"p0": P[:, 0], "p1": P[:, 1], "p2": P[:, 2], "label": y})
    m = calcheck.score(df, probs=["p0", "p1", "p2"], metrics=["sce"], ci=True,
                       ci_reps=200).data["metrics"]["sce"]
    assert m["ci"]["low"] == 0.0 and m["ci"]["high"] > m["value"]
    assert m["ci"]["estimand"] == "population value at the chosen binning"


# ---------------------------------------------------------------------------------------------
# the simulation itself


def test_validity_quick_mode_runs(capsys):
    assert validity.main(["--quick", "--only", "tests,skce"]) == 0
    out = capsys.readouterr().out
    assert "| calibrated, scores uniform, n = 500 |" in out and "skce rejects" in out
