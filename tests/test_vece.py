"""Variable-based calibration (Kelly & Smyth) — published and recomputed values."""

import json

import numpy as np
import pandas as pd
import pytest

from calcheck.data import Predictions
from calcheck.metrics.vece import qcut_assign, qcut_calibration, qcut_edges, variable_calibration
from calcheck.metrics.vece import variables as _variables
from tests.conftest import shared_path


def ScoreInput(**kw):
    return Predictions(**kw, validate=False)


def variables(data, columns, **kw):
    pe, inc = data.error_view()
    if "incorrect" in kw:
        inc = kw.pop("incorrect")
    return _variables(pe, inc, columns, **kw)

# (file, variable, reference key prefix) — reference values: Dataset.py of
# markellekelly/variable-wise-calibration (HEAD de86a20) run on these files (README there)
UNCAL = [("adult", "age"), ("bank", "age"), ("cifar10h", "median_rt"), ("cardio", "age")]


def load(name):
    return pd.read_parquet(shared_path("vece", f"{name}_test.parquet"))


def ref_values():
    return json.loads(shared_path("vece", "reference_values.json").read_text())


def probs_of(df, suffix=""):
    cols = sorted((c for c in df.columns if c.startswith("prob_") and c.endswith(suffix)
                   and (suffix or c[5:].isdigit())), key=lambda c: int(c[5:].split("_")[0]))
    return df[cols].to_numpy()


@pytest.mark.parametrize("name, var", UNCAL)
def test_uncalibrated_ece_and_vece(name, var):
    df = load(name)
    ref = ref_values()[name]["reference"]
    data = ScoreInput(labels=df["label"].to_numpy(), probs=probs_of(df))
    res = variables(data, {var: df[var].to_numpy(float)})
    assert res.ece_qcut == pytest.approx(ref["ECE_uncal_qcut10"], abs=1e-12)
    assert res.results[var].vece == pytest.approx(ref[f"VECE_{var}_uncal_qcut10"], abs=1e-12)


def test_published_percentages():
    # Tables 2, 4, 5 (uncalibrated ECE / VECE in %)
    for name, var, ece, vece in [("adult", "age", 20.67, 20.67), ("bank", "age", 4.69, 4.69),
                                 ("cifar10h", "median_rt", 1.90, 1.92)]:
        df = load(name)
        res = variables(ScoreInput(labels=df["label"].to_numpy(), probs=probs_of(df)),
                        {var: df[var].to_numpy(float)})
        assert round(100 * res.ece_qcut, 2) == ece
        assert round(100 * res.results[var].vece, 2) == vece


def test_table1_beta_ranking_and_worst_case():
    df = load("adult")
    P = probs_of(df, "_beta")
    pred_error = 1 - P.max(axis=1)
    incorrect = (df["pred"] != df["label"]).to_numpy(float)   # the authors' uncalibrated pred
    expected = {"education_num": (9.95, 20.127), "age": (9.59, 23.437),
                "hours_per_week": (7.94, 18.205), "fnlwgt": (5.06, 12.081)}
    got = {v: variable_calibration(v, df[v].to_numpy(float), pred_error, incorrect, span=0.9)
           for v in expected}
    assert sorted(got, key=lambda v: -got[v].vece) == list(expected)
    for v, (vece, worst) in expected.items():
        assert round(100 * got[v].vece, 2) == vece
        assert abs(100 * got[v].vce_max - worst) <= 0.5, (v, 100 * got[v].vce_max)


def test_cli_table1(cli):
    path = shared_path("vece", "adult_test.parquet")
    r = cli(["score", path, "--probs", "prob_0_beta,prob_1_beta", "--correct-from", "pred",
             "--var", "education_num", "--var", "age", "--var", "hours_per_week", "--var",
             "fnlwgt", "--loess-span", "0.9", "-m", "ece_top", "--json"])
    assert r.code == 0, r.stderr
    rep = json.loads(r.stdout)
    assert list(rep["variables"]) == ["education_num", "age", "hours_per_week", "fnlwgt"]
    assert [round(100 * v["vece"], 2) for v in rep["variables"].values()] == [9.95, 9.59, 7.94,
                                                                               5.06]
    curve = rep["variables"]["age"]["curve"]
    assert len(curve["v"]) == 500
    assert all(lo <= mid <= hi for lo, mid, hi in zip(curve["error_rate_lo"],
                                                      curve["error_rate"],
                                                      curve["error_rate_hi"]))
    assert rep["variables"]["education_num"]["settings"]["loess_span"] == 0.9
    assert len(rep["variables"]["education_num"]["bins"]) == 6   # ties drop qcut edges


# ------------------------------------------------------------------ qcut semantics, no data

def test_qcut_matches_pandas():
    rng = np.random.default_rng(0)
    for v in (rng.normal(size=1000), rng.integers(0, 7, 500).astype(float),
              np.r_[np.zeros(300), rng.uniform(size=50)]):
        cat, pd_edges = pd.qcut(v, 10, duplicates="drop", retbins=True)
        edges = qcut_edges(v, 10)
        # pandas 2.x (the authors') takes np.percentile(v, 100·i/B); pandas 3 np.quantile(v, i/B):
        # the two can differ in the last bits of an edge
        np.testing.assert_allclose(edges, pd_edges, rtol=1e-14, atol=0)
        np.testing.assert_array_equal(qcut_assign(v, edges), cat.codes)


def test_vece_hand_computed():
    v = np.arange(1.0, 11.0)                     # 10 bins of one row each
    pe = np.full(10, 0.2)
    inc = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 1], float)
    assert qcut_calibration(v, pe, inc).value == pytest.approx(0.5 * 0.2 + 0.5 * 0.8)


def test_missing_variable_values_are_excluded_and_counted():
    rng = np.random.default_rng(1)
    v = rng.normal(size=500)
    v[:7] = np.nan
    r = variable_calibration("v", v, rng.uniform(size=500) * 0.3, rng.binomial(1, 0.2, 500))
    assert r.excluded_missing == 7 and r.n == 493


def test_binary_score_column_error_view():
    # a single score column: prediction 1 when s >= 0.5 (docs/multiclass.md)
    s = np.array([0.2, 0.5, 0.9, 0.4])
    y = np.array([0, 0, 1, 1])
    pe, inc = ScoreInput(labels=y, scores=s).error_view()
    np.testing.assert_allclose(pe, [0.2, 0.5, 0.1, 0.4])
    assert inc.tolist() == [0, 1, 0, 1]
