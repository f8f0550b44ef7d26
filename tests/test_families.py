"""One error rate for every verdict: families of tests, groups, windows and compare's
calibration errors; Hosmer–Lemeshow's small expected counts; the sharper compare gate."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck.hypotests.family import adjust
from calcheck.paired import PairSums, squared_change
from tests.conftest import SAMPLE, run_json


def test_holm_and_bonferroni_adjust_as_defined():
    p = [0.01, 0.04, 0.03, None, 0.5]
    assert adjust(p, "none") == [0.01, 0.04, 0.03, None, 0.5]
    assert adjust(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, None, 1.0])
    # Holm: sorted 0.01, 0.03, 0.04, 0.5 → 4·0.01, max(·, 3·0.03), max(·, 2·0.04), max(·, 0.5)
    got = adjust(p, "holm")
    assert got[0] == pytest.approx(0.04) and got[2] == pytest.approx(0.09)
    assert got[1] == pytest.approx(0.09) and got[4] == pytest.approx(0.5) and got[3] is None


def _calibrated(tmp_path, n=3000, seed=0, groups=None):
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    df = pd.DataFrame({"score": s, "label": (rng.random(n) < s).astype(int)})
    if groups:
        df["site"] = rng.choice(groups, n)
        df["ts"] = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(
            rng.integers(0, 5 * 86400, n), "s")
    path = tmp_path / f"c{seed}.parquet"
    df.to_parquet(path)
    return path


def test_method_all_reads_its_tests_as_one_family(cli, tmp_path):
    path = _calibrated(tmp_path)
    rep = run_json(cli, "test", path, "--method", "all", "--trials", "300", cmd=None)
    fam = rep["summary"]["family"]
    assert fam["method"] == "holm" and fam["size"] == len(rep["tests"]) == 7
    raw = [t["pvalue"] for t in rep["tests"].values()]
    assert [t["pvalue_adjusted"] for t in rep["tests"].values()] == \
        pytest.approx(adjust(raw, "holm"))
    assert all(t["pvalue_adjusted"] >= t["pvalue"] for t in rep["tests"].values())
    assert all(t["reject_adjusted"] == (t["pvalue_adjusted"] <= 0.05)
               for t in rep["tests"].values())
    # explicit trials are kept (with a note when the adjusted floor is not below α/10); the
    # default trials reach α/10 after the adjustment
    assert any("cannot reach a p-value below" in n for n in rep["notes"])
    auto = run_json(cli, "test", path, "--method", "tcal,hl,cox", cmd=None)
    tc = auto["tests"]["tcal_adaptive"]
    assert tc["settings"]["trials"] == 1200 and tc["min_attainable_pvalue_adjusted"] <= 0.005
    none = run_json(cli, "test", path, "--method", "all", "--trials", "300", "--family",
                    "none", cmd=None)
    assert none["summary"]["family"]["method"] == "none"
    assert all(t["pvalue_adjusted"] == t["pvalue"] for t in none["tests"].values())


def test_fail_on_reject_and_the_table_read_the_adjusted_verdict(cli):
    r = cli(["test", SAMPLE / "miscalibrated_50.parquet", "--method", "hl,spiegelhalter",
             "--fail-on-reject"])
    assert r.code == 1 and "holm p" in r.stdout
    rep = calcheck.run_tests(SAMPLE / "miscalibrated_50.parquet", method="hl,spiegelhalter")
    assert rep.rejected == rep.data["summary"]["decided_by"]


def test_test_by_groups_and_windows(cli, tmp_path):
    rng = np.random.default_rng(3)
    n = 6000
    s = rng.random(n)
    site = rng.choice(["a", "b", "c"], n)
    y = (rng.random(n) < np.where(site == "c", s ** 1.6, s)).astype(int)
    t = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(rng.integers(0, 4 * 86400, n),
                                                               "s")
    path = tmp_path / "g.parquet"
    pd.DataFrame({"score": s, "label": y, "site": site, "ts": t}).to_parquet(path)
    rep = run_json(cli, "test", path, "--by", "site", "--method", "hl,cox", cmd=None)
    assert set(rep["groups"]) == {"a", "b", "c"}
    assert rep["summary"]["family"]["size"] == 2 * 4          # whole data + 3 groups
    assert rep["summary"]["verdict"] == "miscalibrated"
    assert any(k.startswith("c: ") for k in rep["summary"]["decided_by"])
    assert all(not tt["reject_adjusted"] for g in ("a", "b")
               for tt in rep["groups"][g]["tests"].values())
    win = run_json(cli, "test", path, "--time", "ts", "--window", "1d", "--method", "hl",
                   cmd=None)
    assert len(win["windows"]) == 4 and all("tests" in w for w in win["windows"])
    assert win["summary"]["family"]["size"] == 5
    r = cli(["test", path, "--by", "site", "--engine", "stream"])
    assert r.code == 2 and "--engine memory" in r.stderr


def test_score_groups_and_windows_are_read_with_the_whole_data(cli, tmp_path):
    path = _calibrated(tmp_path, n=4000, groups=["a", "b", "c", "d"])
    rep = run_json(cli, path, "--by", "site", "-m", "ace,ece")
    verdicts = [g["verdict"] for g in rep["groups"].values()]
    assert all({"pvalue", "pvalue_adjusted", "reject_adjusted"} <= set(v) for v in verdicts)
    assert rep["summary"]["family"]["size"] == 5
    assert rep["summary"]["pvalue_adjusted"] >= rep["summary"]["pvalue"]
    win = run_json(cli, path, "--time", "ts", "--window", "1d", "-m", "ece", "--ci",
                   "--ci-reps", "50")
    k = win["settings"]["window_intervals"]["windows"]
    assert win["settings"]["window_intervals"]["per_window_level"] == pytest.approx(
        1 - 0.05 / k)
    assert all(w["metrics"]["ece"]["ci"]["level"] == pytest.approx(1 - 0.05 / k)
               for w in win["windows"] if w["n"])
    marginal = run_json(cli, path, "--time", "ts", "--window", "1d", "-m", "ece", "--ci",
                        "--ci-reps", "50", "--family", "none")
    assert marginal["settings"]["window_intervals"]["kind"] == "marginal"
    r = cli(["score", path, "--family", "bonferroni"])
    assert r.code == 2 and "--by" in r.stderr


def test_hosmer_lemeshow_small_counts_and_constant_groups():
    rng = np.random.default_rng(1)
    s = rng.beta(0.5, 20, 3000)
    y = (rng.random(3000) < s).astype(int)
    r = calcheck.hosmer_lemeshow(s, y, trials=500, rng=3)
    assert r.details["pvalue_method"] == "monte carlo" and r.details["min_expected"] < 5
    assert r.settings["trials"] == 500 and r.pvalue >= 1 / 501
    assert calcheck.hosmer_lemeshow(s, y, trials=500, rng=3).pvalue == r.pvalue    # seeded
    big = rng.random(5000)
    r = calcheck.hosmer_lemeshow(big, (rng.random(5000) < big).astype(int))
    assert r.details["pvalue_method"] == "chi2" and r.details["df"] == 10
    z = np.concatenate([np.zeros(1000), rng.random(4000)])
    r = calcheck.hosmer_lemeshow(z, (rng.random(5000) < z).astype(int))
    assert r.details["constant_groups"] == 2 and r.details["df"] == 8


def test_hosmer_lemeshow_small_counts_on_a_stream(cli, tmp_path):
    rng = np.random.default_rng(2)
    s = rng.beta(0.5, 20, 3000)
    path = tmp_path / "rare.parquet"
    pd.DataFrame({"score": s, "label": (rng.random(3000) < s).astype(int)}).to_parquet(path)
    m = run_json(cli, "test", path, "--method", "hl", cmd=None)["tests"]["hosmer_lemeshow"]
    st = run_json(cli, "test", path, "--method", "hl", "--engine", "stream",
                  cmd=None)["tests"]["hosmer_lemeshow"]
    assert m["statistic"] == pytest.approx(st["statistic"], rel=1e-9)
    assert m["pvalue_method"] == st["pvalue_method"] == "monte carlo"
    assert "conservative" in st["settings"]["null"]


def _pair(tmp_path, n, seed, new):
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    y = (rng.random(n) < s).astype(int)
    path = tmp_path / f"pair{seed}.parquet"
    pd.DataFrame({"a": s, "b": new(s), "label": y}).to_parquet(path)
    return path


def test_compare_summary_reads_calibration_errors_and_scores_apart(cli, tmp_path):
    """Two calibrated models of different sharpness: Brier and log loss see the sharper one
    better, the calibration verdict sees no difference (it never says "calibrated" because of
    Brier)."""
    path = _pair(tmp_path, 4000, 0, lambda s: np.where(s < 0.5, 0.25, 0.75))
    r = cli(["compare", path, "--score", "b", "--score", "a", "--json", "--ci-reps", "200"])
    d = json.loads(r.stdout)
    assert d["summary"]["verdict"] == "no detectable difference"
    assert "brier" not in d["summary"]["family"]["metrics"]
    assert d["summary"]["scores"]["verdict"] == "better"
    assert "scores better overall" in d["summary"]["scores_text"]
    assert d["metrics"]["brier"]["verdict_scope"] == "this metric alone"


def test_the_ece_gate_uses_the_sharper_test_and_the_margin_the_interval(cli, tmp_path):
    path = _pair(tmp_path, 20000, 1, lambda s: s ** 1.3)
    r = cli(["compare", path, "--score", "a", "--score", "b", "-m", "ece", "--json",
             "--ci-reps", "200", "--fail-if-worse", "ece", "--fail-if-worse", "ece:0.5"])
    d = json.loads(r.stdout)
    e = d["metrics"]["ece"]
    assert e["test"]["statistic"] > 3 and e["verdict"] == "worse" and r.code == 1
    assert [g["decided_by"] for g in d["gates"]] == ["squared-error test", "interval"]
    assert [g["failed"] for g in d["gates"]] == [True, False]
    st = json.loads(cli(["compare", path, "--score", "a", "--score", "b", "-m", "ece",
                         "--json", "--ci-reps", "200", "--engine", "stream"]).stdout)
    assert st["metrics"]["ece"]["test"]["statistic"] == pytest.approx(e["test"]["statistic"],
                                                                      rel=1e-9)


def test_squared_change_sums_add_and_identical_models_show_nothing():
    rng = np.random.default_rng(5)
    s = rng.random(3000)
    y = (rng.random(3000) < s).astype(float)
    whole = PairSums.of(s, s ** 1.1, y, y, 10)
    parts = PairSums.of(s[:1000], s[:1000] ** 1.1, y[:1000], y[:1000], 10) + \
        PairSums.of(s[1000:], s[1000:] ** 1.1, y[1000:], y[1000:], 10)
    a, b = squared_change(whole, level=0.95), squared_change(parts, level=0.95)
    assert a["statistic"] == pytest.approx(b["statistic"], rel=1e-9)
    same = squared_change(PairSums.of(s, s, y, y, 10), level=0.95)
    assert same["statistic"] == 0 and same["verdict"] == "no detectable difference"
