"""``--compat``: each mode against the numbers its library computes.

The reference values in fixtures/compat/values.json were computed with the libraries
themselves (scikit-learn 1.9.1, torchmetrics 1.9.0, MAPIE 1.6.0, netcal 1.4.0, calzone 0.1.0,
pycaleva 0.8.2; fixtures/compat/generate.py) on the inputs in fixtures/compat/cases.npz:
continuous scores, scores rounded to 2 decimals with exact 0s and 1s, rare events, 41 rows,
and two multiclass sets (one with coarse, tied probabilities).  No peer is imported here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck import compat
from tests.conftest import run_json

HERE = Path(__file__).parent / "fixtures" / "compat"
VALUES = json.loads((HERE / "values.json").read_text())
CASES = np.load(HERE / "cases.npz")
REL = 1e-9

CALZONE = {"ece": "ECE-H", "mce": "MCE-H", "ace": "ECE-C", "mce_q": "MCE-C",
           "ece_top": "ECE-H topclass", "mce_top": "MCE-H topclass",
           "ace_top": "ECE-C topclass"}


def binary(case: str) -> pd.DataFrame:
    return pd.DataFrame({"score": CASES[f"binary_{case}_s"], "label": CASES[f"binary_{case}_y"]})


def multiclass(case: str) -> pd.DataFrame:
    p = CASES[f"multiclass_{case}_p"]
    df = pd.DataFrame({f"prob_{j}": p[:, j] for j in range(p.shape[1])})
    df["label"] = CASES[f"multiclass_{case}_y"]
    return df


def runs(kind: str, library: str) -> list[tuple[str, int]]:
    out = []
    for case, per in VALUES[kind].items():
        for key in per:
            lib, bins = key.rsplit("_", 1)
            if lib == library:
                out.append((case, int(bins)))
    return out


def reference(kind: str, case: str, library: str, bins: int) -> dict:
    return VALUES[kind][case][f"{library}_{bins}"]


def close(got: float, want: float, rel: float = REL) -> None:
    assert got == pytest.approx(want, rel=rel, abs=1e-15), (got, want)


# -- metrics ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case,bins", runs("binary", "sklearn"))
def test_sklearn_binary(case, bins):
    ref = reference("binary", case, "sklearn", bins)
    rep = calcheck.score(binary(case), compat="sklearn", bins=bins)
    close(rep.value("brier"), ref["brier"])
    close(rep.value("log_loss"), ref["log_loss"])
    for mid, strategy in (("ece", "uniform"), ("ace", "quantile")):
        table = rep.data["metrics"][mid]
        curve = ref[f"curve_{strategy}"]
        res = calcheck.score(binary(case), compat="sklearn", bins=bins, metrics=[mid],
                             bins_table=[mid]).data["metrics"][mid]["bins"]
        rows = [b for b in res if b["n"] > 0]
        np.testing.assert_allclose([b["mean_label"] for b in rows], curve["prob_true"],
                                   rtol=1e-12)
        np.testing.assert_allclose([b["mean_score"] for b in rows], curve["prob_pred"],
                                   rtol=1e-12)
        n = sum(b["n"] for b in rows)
        want = sum(b["n"] * abs(t - p) for b, t, p in
                   zip(rows, curve["prob_true"], curve["prob_pred"])) / n
        close(table["value"], want)


@pytest.mark.parametrize("case,bins", runs("binary", "torchmetrics"))
def test_torchmetrics_binary(case, bins):
    ref = reference("binary", case, "torchmetrics", bins)
    rep = calcheck.score(binary(case), compat="torchmetrics", bins=bins)
    assert list(rep.data["metrics"]) == ["ece", "ece_l2", "mce"]
    for mid in ("ece", "ece_l2", "mce"):
        close(rep.value(mid), ref[mid])


@pytest.mark.parametrize("case,bins", runs("multiclass", "torchmetrics"))
def test_torchmetrics_multiclass_to_float32(case, bins):
    # torch sums in float32 with its own reduction order: equal to float32 rounding
    ref = reference("multiclass", case, "torchmetrics", bins)
    rep = calcheck.score(multiclass(case), compat="torchmetrics", bins=bins)
    for mid in ("ece_top", "mce_top", "ece_l2"):
        close(rep.value(mid), ref[mid], rel=1e-6)


@pytest.mark.parametrize("case,bins", runs("binary", "mapie"))
def test_mapie_binary(case, bins):
    ref = reference("binary", case, "mapie", bins)
    rep = calcheck.score(binary(case), compat="mapie", bins=bins)
    close(rep.value("ece"), ref["ece"])
    close(rep.value("ace"), ref["ace"])


@pytest.mark.parametrize("case,bins", runs("multiclass", "mapie"))
def test_mapie_multiclass(case, bins):
    ref = reference("multiclass", case, "mapie", bins)
    rep = calcheck.score(multiclass(case), compat="mapie", bins=bins)
    assert set(rep.data["metrics"]) == {"ece", "ace", "ece_top", "ace_top", "sce", "ace_cw"}
    for mid in rep.data["metrics"]:
        close(rep.value(mid), ref[mid])


@pytest.mark.parametrize("case,bins", runs("binary", "netcal"))
def test_netcal_binary(case, bins):
    ref = reference("binary", case, "netcal", bins)
    rep = calcheck.score(binary(case), compat="netcal", bins=bins)
    for mid in ("ece", "mce", "ace", "mce_q"):
        close(rep.value(mid), ref[mid])


@pytest.mark.parametrize("case,bins", runs("multiclass", "netcal"))
def test_netcal_multiclass(case, bins, cli, tmp_path):
    ref = reference("multiclass", case, "netcal", bins)
    for mid in ("ece_top", "mce_top", "ace_top", "mce_q"):
        if isinstance(ref[mid], dict):             # netcal itself fails: so does the mode
            path = tmp_path / "m.parquet"
            multiclass(case).to_parquet(path)
            r = cli(["score", path, "--compat", "netcal", "--bins", bins, "-m", mid])
            assert r.code == 2 and "netcal itself fails" in r.stderr
            assert "numerically 0" in ref[mid]["error"]
        else:
            rep = calcheck.score(multiclass(case), compat="netcal", bins=bins, metrics=[mid])
            close(rep.value(mid), ref[mid])


@pytest.mark.parametrize("case,bins", runs("binary", "calzone"))
def test_calzone_binary(case, bins):
    ref = reference("binary", case, "calzone", bins)
    rep = calcheck.score(binary(case), compat="calzone", bins=bins)
    for mid in ("ece", "mce", "ace", "mce_q"):
        close(rep.value(mid), ref[CALZONE[mid]])


@pytest.mark.parametrize("case,bins", runs("binary", "calzone"))
def test_calzone_lowess_ici(case, bins):
    # statsmodels' lowess, its window walk and delta interpolation reproduced
    ref = reference("binary", case, "calzone", bins)
    rep = calcheck.score(binary(case), compat="calzone", metrics=["ici"])
    close(rep.value("ici"), ref["Loess ICI"])


@pytest.mark.parametrize("case,bins", runs("multiclass", "calzone"))
def test_calzone_multiclass(case, bins):
    ref = reference("multiclass", case, "calzone", bins)
    rep = calcheck.score(multiclass(case), compat="calzone", bins=bins)
    for mid in ("ece_top", "mce_top", "ace_top"):
        close(rep.value(mid), ref[CALZONE[mid]])
    close(rep.value("mce_q"), ref["MCE-C topclass"])


@pytest.mark.parametrize("case,bins", runs("binary", "pycaleva"))
def test_pycaleva_binary(case, bins):
    ref = reference("binary", case, "pycaleva", bins)
    rep = calcheck.score(binary(case), compat="pycaleva", bins=bins)
    for mid in ("ace", "mce_q", "brier"):
        close(rep.value(mid), ref[mid])


# -- tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case,bins", runs("binary", "mapie"))
def test_mapie_tests(case, bins):
    ref = reference("binary", case, "mapie", bins)
    rep = calcheck.run_tests(binary(case), compat="mapie")
    assert list(rep.data["tests"]) == ["spiegelhalter", "ks", "kuiper"]
    for t in ("spiegelhalter", "ks", "kuiper"):
        got = rep.data["tests"][t]
        close(got["statistic"], ref[t]["statistic"])
        close(got["pvalue"], ref[t]["pvalue"], rel=1e-7)


@pytest.mark.parametrize("case,bins", runs("binary", "calzone"))
def test_calzone_tests(case, bins):
    ref = reference("binary", case, "calzone", bins)
    rep = calcheck.run_tests(binary(case), compat="calzone", bins=bins)
    t = rep.data["tests"]
    close(t["spiegelhalter"]["statistic"], ref["SpiegelhalterZ score"])
    close(t["spiegelhalter"]["pvalue"], ref["SpiegelhalterZ p-value"])
    close(t["hosmer_lemeshow"]["statistic"], ref["HL-C score"])
    close(t["hosmer_lemeshow"]["pvalue"], ref["HL-C p-value"], rel=1e-7)
    cox = t["cox"]
    # statsmodels stops Newton at its tolerance; calcheck iterates to convergence
    close(cox["slope"], ref["COX coef"], rel=1e-7)
    close(cox["intercept"], ref["COX intercept"], rel=1e-6)
    close(cox["slope_ci"][0], ref["COX coef lowerci"], rel=1e-7)
    close(cox["slope_ci"][1], ref["COX coef upperci"], rel=1e-7)
    close(cox["intercept_ci"][0], ref["COX intercept lowerci"], rel=1e-6)
    close(cox["ici"], ref["COX ICI"], rel=1e-6)
    assert cox["settings"]["clip"] == 1e-7


@pytest.mark.parametrize("case,bins", runs("binary", "pycaleva"))
def test_pycaleva_tests(case, bins):
    ref = reference("binary", case, "pycaleva", bins)
    rep = calcheck.run_tests(binary(case), compat="pycaleva", bins=bins)
    hl, z = rep.data["tests"]["hosmer_lemeshow"], rep.data["tests"]["spiegelhalter"]
    close(hl["statistic"], ref["hl"]["statistic"])
    close(hl["pvalue"], ref["hl"]["pvalue"], rel=1e-7)
    assert hl["df"] == ref["hl"]["dof"]
    close(z["statistic"], ref["spiegelhalter"]["statistic"])
    close(z["pvalue"], ref["spiegelhalter"]["pvalue"])


# -- the modes in the pipeline ----------------------------------------------------------------


@pytest.fixture
def ties_file(tmp_path):
    path = tmp_path / "ties.parquet"
    binary("ties").to_parquet(path)
    return path


def test_report_records_the_mode_and_default_bins(cli, ties_file):
    rep = run_json(cli, ties_file, "--compat", "sklearn")
    assert rep["settings"]["compat"] == "sklearn" and rep["settings"]["bins"] == 5
    assert rep["settings"]["ties"] == "sklearn's own"
    assert list(rep["metrics"]) == ["ece", "mce", "ace", "mce_q", "brier", "log_loss"]
    assert rep["metrics"]["ece"]["settings"]["compat"] == "sklearn"
    plain = run_json(cli, ties_file)
    assert plain["settings"]["compat"] is None and plain["settings"]["ties"] == "share"
    t = run_json(cli, ties_file, "--compat", "pycaleva", cmd="test")
    assert t["settings"]["compat"] == "pycaleva" and t["settings"]["bins"] == 10


def test_metric_the_library_lacks_is_exit_2_naming_what_it_has(cli, ties_file):
    r = cli(["score", ties_file, "--compat", "sklearn", "-m", "tce"])
    assert r.code == 2
    assert "tce not available" in r.stderr and "ece, mce, ace, mce_q, brier, log_loss" in r.stderr
    r = cli(["score", ties_file, "--compat", "nixon"])
    assert r.code == 2 and "binary input, no metric" in r.stderr
    r = cli(["score", ties_file, "--compat", "torchmetrics", "--fail-if", "ace>0.1"])
    assert r.code == 2 and "ace not available" in r.stderr


def test_test_the_library_lacks_is_exit_2(cli, ties_file):
    r = cli(["test", ties_file, "--compat", "mapie", "--method", "tcal"])
    assert r.code == 2 and "test tcal not available" in r.stderr and "ks" in r.stderr
    r = cli(["test", ties_file, "--compat", "sklearn"])
    assert r.code == 2 and "no calibration test" in r.stderr


def test_all_means_every_id_of_the_library(cli, ties_file):
    rep = run_json(cli, ties_file, "--compat", "netcal", "-m", "all")
    assert list(rep["metrics"]) == compat.mode("netcal").ids(False)


def test_calzone_reports_rows_in_no_bin(cli, ties_file):
    rep = run_json(cli, ties_file, "--compat", "calzone", "-m", "ece")
    zeros = int((CASES["binary_ties_s"] == 0).sum())
    assert rep["metrics"]["ece"]["rows_in_no_bin"] == zeros
    assert any(f"{zeros} rows" in n for n in rep["notes"])
    assert sum(b["n"] for b in run_json(cli, ties_file, "--compat", "calzone", "-m", "ece",
                                            "--bins-table", "ece")["metrics"]["ece"]["bins"]) \
        == 3000 - zeros


def test_compat_with_groups_and_intervals(cli, ties_file):
    df = binary("ties")
    df["site"] = np.where(np.arange(len(df)) % 2 == 0, "a", "b")
    rep = calcheck.score(df, compat="sklearn", by="site", ci=True, ci_reps=50, metrics=["ece"])
    half = df[df.site == "a"]
    alone = calcheck.score(half[["score", "label"]], compat="sklearn", metrics=["ece"])
    assert rep.data["groups"]["a"]["metrics"]["ece"]["value"] == alone.value("ece")
    ci = rep.data["metrics"]["ece"]["ci"]
    assert ci["low"] <= rep.value("ece") <= ci["high"] and ci["failed_reps"] == 0


def test_compat_needs_memory_engine(cli, ties_file):
    r = cli(["score", ties_file, "--compat", "mapie", "--engine", "stream"])
    assert r.code == 2 and "needs --engine memory" in r.stderr


def test_pycaleva_refuses_what_pycaleva_refuses(cli, tmp_path):
    path = tmp_path / "one.parquet"
    pd.DataFrame({"score": np.linspace(0.1, 0.9, 30), "label": [1] + [0] * 29}).to_parquet(path)
    r = cli(["test", path, "--compat", "pycaleva"])
    assert r.code == 2 and "pycaleva itself refuses" in r.stderr


def test_ties_never_change_a_compat_mode(cli, ties_file):
    a = run_json(cli, ties_file, "--compat", "sklearn", "--ties", "order")
    b = run_json(cli, ties_file, "--compat", "sklearn")
    assert a["metrics"] == b["metrics"]
