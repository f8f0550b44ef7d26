"""The headline a user reads first: one direction from one estimator on every command and
engine, the effect size beside the verdict, and the ``--tolerance`` equivalence verdict."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck.report.summary import effect_interval, tolerance_verdict
from tests.conftest import SAMPLE, run_json


def _model(tmp_path, slope: float, shift: float, n: int = 8000, seed: int = 0):
    """Scores whose true logit is slope·logit(s) + shift: slope < 1 over-confident, shift < 0
    over-predicting."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.03, 0.97, n)
    x = np.log(s / (1 - s))
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(slope * x + shift)))).astype(int)
    path = tmp_path / f"m_{slope}_{shift}.parquet"
    pd.DataFrame({"score": s, "label": y}).to_parquet(path)
    return path


def _direction_text(summary):
    return "; ".join(summary["direction"])


def test_one_direction_on_every_command_and_engine(cli, tmp_path):
    """score, test (with and without Cox), report and every engine say the same sentence with
    the same numbers, from Cox's calibration intercept and slope."""
    path = _model(tmp_path, slope=0.6, shift=-0.3)
    seen = []
    for engine in ("memory", "stream", "dask"):
        rep = run_json(cli, path, "--engine", engine)
        seen.append(_direction_text(rep["summary"]))
        fit = rep["summary"]["direction_fit"]
        assert fit["average"] == "over" and fit["confidence"] == "over"
    for method in ("tcal", "cox", "all"):
        rep = run_json(cli, "test", path, "--method", method, "--trials", "200", cmd=None)
        seen.append(_direction_text(rep["summary"]))
    rep = calcheck.write_report(path, tmp_path / "r.html", adaptive=False, ci=False)
    seen.append(_direction_text(rep.data["summary"]))
    assert rep.data["summary"]["text"] in rep.html().replace("&#x27;", "'") or \
        seen[-1].split(";")[0] in rep.html()
    assert len(set(seen)) == 1, seen
    assert re.search(r"over-predicting on average \(calibration intercept -0\.\d\d, 95% CI",
                     seen[0])
    assert "over-confident: predictions too extreme (calibration slope 0.6" in seen[0]
    fragment = calcheck.score(path)._repr_html_()
    assert "calibration slope 0.6" in fragment


def test_no_direction_when_the_intervals_hold_zero_and_one(cli, tmp_path):
    """A calibrated model flagged by chance gets no direction; a model off in spread only gets
    the spread, never an average it does not have."""
    path = _model(tmp_path, slope=1.8, shift=0.0, n=20000)
    rep = run_json(cli, path)
    assert rep["summary"]["verdict"] == "miscalibrated"
    assert [d.split(":")[0] for d in rep["summary"]["direction"]] == ["under-confident"]
    cal = run_json(cli, SAMPLE / "calibrated_50.parquet")
    assert cal["summary"]["direction"] == [] and cal["summary"]["direction_fit"] is None


def test_the_effect_size_stands_beside_the_verdict(cli):
    rep = run_json(cli, SAMPLE / "miscalibrated_50.parquet")
    e = rep["summary"]["effect"]
    assert e["metric"] == "ace" and e["value"] == rep["metrics"]["ace"]["value"]
    assert 0 < e["low"] < e["value"] < e["high"] and e["level"] == 0.95
    assert "ACE 0.0937 (95% interval" in rep["summary"]["text"]
    with_ci = run_json(cli, SAMPLE / "miscalibrated_50.parquet", "-m", "ace", "--ci",
                       "--ci-reps", "100")
    e2 = with_ci["summary"]["effect"]
    assert (e2["low"], e2["high"]) == (with_ci["metrics"]["ace"]["ci"]["low"],
                                       with_ci["metrics"]["ace"]["ci"]["high"])
    test = run_json(cli, "test", SAMPLE / "miscalibrated_50.parquet", cmd=None)
    assert test["summary"]["effect"]["metric"] == "ace"


def test_effect_interval_is_the_norm_bootstrap_of_the_bins():
    rows = [{"n": 1000, "positives": 300.0, "mean_score": 0.25},
            {"n": 1000, "positives": 700.0, "mean_score": 0.75}]
    e = effect_interval(rows, "l1", seed=0)
    assert e["value"] == pytest.approx(0.05)
    assert e["low"] < 0.05 < e["high"]
    calibrated = [{"n": 1000, "positives": 250.0, "mean_score": 0.25},
                  {"n": 1000, "positives": 750.0, "mean_score": 0.75}]
    c = effect_interval(calibrated, "l1", seed=0)
    assert c["value"] == 0 and c["low"] == 0 and c["high"] > 0
    assert effect_interval(rows, "l2", seed=0)["value"] == pytest.approx(0.05)


def test_tolerance_verdicts():
    ci = {"low": 0.01, "high": 0.03, "level": 0.95}
    assert tolerance_verdict("ece", 0.05, ci)["verdict"] == "within tolerance"
    assert tolerance_verdict("ece", 0.005, ci)["verdict"] == "beyond tolerance"
    assert tolerance_verdict("ece", 0.02, ci)["verdict"] == "inconclusive at this n"
    assert tolerance_verdict("ece", 0.02, None)["verdict"] == "inconclusive at this n"


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_tolerance_on_the_command_line(cli, engine):
    mis = SAMPLE / "miscalibrated_50.parquet"
    rep = run_json(cli, mis, "--tolerance", "ece:0.02", "--engine", engine)
    t = rep["summary"]["tolerance"]
    assert t["metric"] == "ece" and t["value"] == 0.02 and t["verdict"] == "beyond tolerance"
    assert t["low"] > 0.02 and "BEYOND TOLERANCE" in rep["summary"]["text"]
    r = cli(["score", mis, "--tolerance", "ece:0.02", "--fail-if-beyond", "--engine", engine])
    assert r.code == 1 and "--fail-if-beyond" in r.stderr
    r = cli(["score", mis, "--tolerance", "ece:0.5", "--fail-if-beyond", "--engine", engine])
    assert r.code == 0
    assert "WITHIN TOLERANCE" in r.stdout
    r = cli(["test", mis, "--tolerance", "ace:0.02", "--fail-if-beyond", "--trials", "200",
             "--engine", engine])
    assert r.code == 1


def test_tolerance_several_and_its_errors(cli):
    mis = SAMPLE / "miscalibrated_50.parquet"
    rep = run_json(cli, mis, "--tolerance", "ece:0.5", "--tolerance", "brier:0.1")
    assert rep["summary"]["tolerance"]["metric"] == "brier"          # the deciding one
    assert [t["verdict"] for t in rep["summary"]["tolerances"]] == ["within tolerance",
                                                                    "beyond tolerance"]
    for bad, why in (("mce:0.1", "covers its population"), ("ece", "METRIC:VALUE"),
                     ("ece:-1", "positive"), ("nope:0.1", "unknown")):
        r = cli(["score", mis, "--tolerance", bad])
        assert r.code == 2 and why in r.stderr, (bad, r.stderr)
    r = cli(["score", mis, "--fail-if-beyond"])
    assert r.code == 2 and "--tolerance" in r.stderr
    r = cli(["score", mis, "--tolerance", "ace_debiased:0.1", "--engine", "stream"])
    assert r.code in (0, 2)
    api = calcheck.score(mis, tolerance="ece:0.5", fail_if_beyond=True)
    assert api.exit_code == 0 and api.data["summary"]["tolerance"]["verdict"] == \
        "within tolerance"


def test_probabilistic_count_is_formatted_like_a_count(cli):
    r = cli(["score", SAMPLE / "miscalibrated_50.parquet", "-m", "pc"])
    assert "Probabilistic count: 6,000.0 effectively distinct scores" in r.stdout


def test_spiegelhalter_label_in_the_table_follows_its_statistic(cli):
    rep = run_json(cli, "test", SAMPLE / "miscalibrated_50.parquet", "--method",
                   "spiegelhalter", cmd=None)
    t = rep["tests"]["spiegelhalter"]
    assert t["direction"] == ("too extreme" if t["statistic"] > 0 else "too cautious")
    assert json.dumps(rep).count("over-prediction") == 0


def test_the_tie_groups_the_bins_cut_are_found_from_the_bounds():
    """The summary's shared tie groups (found from the bin bounds by binary search) are the
    groups of every tie boundary that a bound falls strictly inside, in order."""
    from calcheck.binning import quantile_bounds, tie_bounds
    from calcheck.report.summary import shared_ties

    rng = np.random.default_rng(3)
    for _ in range(500):
        n = int(rng.integers(1, 400))
        s = np.sort(np.round(rng.random(n), int(rng.integers(1, 5))))
        b = quantile_bounds(n, int(rng.integers(1, 25)))
        t = tie_bounds(s)
        want = [(int(t[g]), int(t[g + 1])) for g in range(t.shape[0] - 1)
                if any(t[g] < p < t[g + 1] for p in b[1:-1])]
        got = shared_ties(s, b)
        assert [(g.size, g.value) for g in got] == [(e - a, float(s[a])) for a, e in want]
        for g, (a, e) in zip(got, want):
            assert sum(g.shares.values()) == e - a
