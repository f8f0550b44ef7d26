"""Smooth ECE, ICI/E50/E90/Emax, the CORP decomposition and ECE-sweep.

Smooth ECE is held against relplot 1.0.3 and the CORP decomposition against model-diagnostics
1.5.0 (values in fixtures/beyond, computed with the packages by fixtures/beyond/generate.py);
ICI and its quantiles and ECE-sweep against direct implementations of their formulas.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck.metrics import corp, ici, smooth
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics.binned import ece_sweep, sweep_bins
from tests.conftest import run_json

HERE = Path(__file__).parent / "fixtures" / "beyond"
VALUES = json.loads((HERE / "values.json").read_text())
CASES = np.load(HERE / "cases.npz")
NAMES = [k for k in VALUES if k != "versions"]


def case(name: str) -> tuple[np.ndarray, np.ndarray]:
    return CASES[f"{name}_s"], CASES[f"{name}_y"]


# -- smooth ECE -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_smece_agrees_with_relplot(name):
    s, y = case(name)
    ref = VALUES[name]["relplot"]
    r = smooth.smece(Prepared(s, y), MetricOptions())
    assert abs(r.value - ref["smece"]) <= 2e-3
    # the fixed point itself: smECE_sigma = sigma (relplot bisects to 2^-10 only), to the
    # resolution of the grid, whose size steps with sigma
    if r.extra["sigma"] > smooth.SIGMA_MIN:
        assert r.value == pytest.approx(r.extra["sigma"], abs=1e-4)
    for sigma in (0.05, 0.2):
        at = smooth.smece(Prepared(s, y), MetricOptions(smece_sigma=sigma))
        assert at.value == pytest.approx(ref[f"at_{sigma}"], abs=1e-6)
        assert at.extra["sigma"] == sigma


def test_smece_of_a_calibrated_step_is_small_and_of_a_shift_is_the_shift():
    rng = np.random.default_rng(0)
    s = rng.uniform(0.2, 0.8, 200_000)
    y = (rng.random(200_000) < s).astype(int)
    assert smooth.smece(Prepared(s, y), MetricOptions()).value < 0.01
    y = (rng.random(200_000) < s - 0.1).astype(int)        # over-prediction by 0.1
    assert smooth.smece(Prepared(s, y), MetricOptions()).value == pytest.approx(0.1, abs=0.01)


def test_smece_streams_identically(cli, tmp_path):
    s, y = case("ties")
    path = tmp_path / "t.parquet"
    pd.DataFrame({"score": s, "label": y}).to_parquet(path)
    mem = run_json(cli, path, "-m", "smece")["metrics"]["smece"]
    st = run_json(cli, path, "-m", "smece", "--engine", "stream", "--batch-rows", "999")
    # the same cell sums (added batch by batch: equal to ~1e-15, as every grid metric)
    assert st["metrics"]["smece"]["value"] == pytest.approx(mem["value"], rel=1e-12)
    assert st["metrics"]["smece"]["sigma"] == pytest.approx(mem["sigma"], rel=1e-9)
    fixed = run_json(cli, path, "-m", "smece", "--smece-sigma", "0.1")["metrics"]["smece"]
    assert fixed["sigma"] == 0.1 and fixed["settings"]["bandwidth"].startswith("given")
    r = cli(["score", path, "-m", "smece", "--smece-sigma", "0"])
    assert r.code == 2 and "--smece-sigma" in r.stderr


# -- CORP -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_corp_agrees_with_model_diagnostics(name):
    s, y = case(name)
    rec = corp.recalibration(Prepared(s, y))
    for kind in ("brier", "log"):
        ref = VALUES[name]["model_diagnostics"][kind]
        d = corp.decompose(rec, kind)
        for part in ("dsc", "unc"):
            assert getattr(d, part) == pytest.approx(ref[part], rel=1e-9, abs=1e-12)
        if np.isfinite(ref["mcb"]):
            assert d.mcb == pytest.approx(ref["mcb"], rel=1e-9, abs=1e-12)
        else:                    # a score of 0 with outcome 1: infinite there, clipped here
            assert kind == "log" and np.isfinite(d.mcb) and d.mcb > 0


@pytest.mark.parametrize("name", NAMES)
def test_corp_adds_up_to_the_score(name):
    s, y = case(name)
    rep = calcheck.score(pd.DataFrame({"score": s, "label": y}),
                         metrics=["corp_mcb", "corp_dsc", "corp_unc", "brier", "corp_mcb_log",
                                  "corp_dsc_log", "corp_unc_log", "log_loss"])
    v = rep.value
    assert v("corp_mcb") - v("corp_dsc") + v("corp_unc") == pytest.approx(v("brier"), abs=1e-12)
    assert v("corp_mcb_log") - v("corp_dsc_log") + v("corp_unc_log") == \
        pytest.approx(v("log_loss"), abs=1e-12)
    assert v("corp_mcb") >= -1e-15 and v("corp_dsc") >= -1e-15
    assert rep.data["metrics"]["corp_mcb_log"]["unit"] == "nats"


def test_pav_pools_ties_and_is_isotonic():
    s = np.array([0.1, 0.1, 0.2, 0.3, 0.3, 0.3, 0.9])
    y = np.array([1, 0, 0, 1, 0, 0, 1])
    rec = corp.recalibration(Prepared(s, y))
    assert list(rec.x) == [0.1, 0.2, 0.3, 0.9]
    # means 0.5 (2 rows), 0 (1 row), 1/3 (3 rows), 1: pooling the first two gives 1/3
    np.testing.assert_allclose(rec.fit, [1 / 3, 1 / 3, 1 / 3, 1.0])


# -- ICI, E50, E90, Emax ------------------------------------------------------------------------


def direct_loess(s, y, span=0.75):
    """Local quadratic, tricube, q = ⌊span·n⌋ nearest rows, written out point by point."""
    n = len(s)
    q = int(np.floor(n * span))
    fits = []
    for x0 in s:
        dist = np.abs(s - x0)
        h = np.sort(dist)[q - 1]
        u = dist / h
        w = np.where(u < 1, (1 - u ** 3) ** 3, 0.0)
        X = np.column_stack([np.ones(n), s - x0, (s - x0) ** 2])
        beta = np.linalg.lstsq(X * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
        fits.append(beta[0])
    return np.array(fits)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ici_family_equals_the_formula(seed):
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.05, 0.95, 150)
    if seed == 2:
        s = np.round(s, 2)                                   # ties
    y = (rng.random(150) < s ** 1.4).astype(float)
    d = np.abs(direct_loess(s, y) - s)
    data = Prepared(s, y.astype(int))
    o = MetricOptions()
    assert ici.ici(data, o).value == pytest.approx(d.mean(), abs=1e-9)
    assert ici.e50(data, o).value == pytest.approx(np.percentile(d, 50), abs=1e-9)
    assert ici.e90(data, o).value == pytest.approx(np.percentile(d, 90), abs=1e-9)
    assert ici.emax(data, o).value == pytest.approx(d.max(), abs=1e-9)


def test_weighted_percentile_is_numpy_on_the_rows():
    rng = np.random.default_rng(3)
    d = rng.random(40)
    w = rng.integers(1, 6, 40).astype(float)
    rows = np.repeat(d, w.astype(int))
    for q in (0, 10, 50, 90, 100):
        assert ici.weighted_percentile(d, w, q) == pytest.approx(np.percentile(rows, q))


def test_ici_beyond_4096_scores_is_close_to_exact_and_says_so():
    rng = np.random.default_rng(4)
    s = rng.random(6000)
    y = (rng.random(6000) < s ** 1.3).astype(int)
    data = Prepared(s, y)
    approx = ici.ici(data, MetricOptions())
    assert "approximation" in approx.settings
    exact = ici._distances(data.sorted_scores, data.sorted_labels, ici.SPAN, max_groups=10_000)
    assert not exact.grouped
    assert approx.value == pytest.approx(np.average(exact.d, weights=exact.weight), abs=2e-4)


# -- ECE-sweep -------------------------------------------------------------------------------


def direct_sweep(s, y):
    order = np.argsort(s, kind="stable")
    ys, ss = y[order].astype(float), s[order]
    n = len(s)
    best = 1
    for b in range(2, n + 1):
        cuts = (np.linspace(0, 1, b + 1) * n).astype(int)
        means = [ys[cuts[i]:cuts[i + 1]].mean() for i in range(b)]
        if any(means[i + 1] < means[i] for i in range(b - 1)):
            break
        best = b
    cuts = (np.linspace(0, 1, best + 1) * n).astype(int)
    ece = sum((cuts[i + 1] - cuts[i]) / n * abs(ys[cuts[i]:cuts[i + 1]].mean()
                                                - ss[cuts[i]:cuts[i + 1]].mean())
              for i in range(best))
    return best, ece


@pytest.mark.parametrize("seed", range(5))
def test_ece_sweep_equals_the_formula(seed):
    rng = np.random.default_rng(seed)
    n = [300, 1000, 2500, 80, 5000][seed]
    s = rng.random(n)
    y = (rng.random(n) < s ** (1 + seed / 4)).astype(int)
    b, value = direct_sweep(s, y)
    r = ece_sweep(Prepared(s, y))
    assert r.extra["sweep_bins"] == b and r.settings["bins"] == b
    assert r.value == pytest.approx(value, abs=1e-12)
    assert len(r.bin_rows()) == b


def test_ece_sweep_of_separable_labels_stops_at_the_cap():
    s = np.linspace(0.01, 0.99, 30_000)
    y = (s > 0.5).astype(int)
    b, capped = sweep_bins(Prepared(s, y))
    assert capped and b == 10_000


# -- in the pipeline --------------------------------------------------------------------------

NEW = ["smece", "ici", "e50", "e90", "emax", "corp_mcb", "corp_dsc", "corp_unc", "corp_mcb_log",
       "corp_dsc_log", "corp_unc_log", "ece_sweep", "ecce_mad", "ecce_r"]


@pytest.fixture
def sample(tmp_path):
    s, y = case("ties")
    df = pd.DataFrame({"score": s, "label": y,
                       "site": np.where(np.arange(len(s)) % 3 == 0, "a", "b")})
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    return path


def test_all_includes_them_with_groups_and_intervals(cli, sample):
    rep = run_json(cli, sample, "-m", "all", "--by", "site", "--ci", "--ci-reps", "30")
    for mid in NEW:
        m = rep["metrics"][mid]
        covers = mid in ("corp_unc", "corp_unc_log")          # a function of a mean
        assert np.isfinite(m["value"]) and ("ci" in m) == covers, mid
        assert covers or any(n.startswith(f"{mid}: a biased estimator") for n in rep["notes"])
        assert mid in rep["groups"]["a"]["metrics"]


def test_streamed_all_names_what_needs_memory(cli, sample):
    r = cli(["score", sample, "-m", "all", "--engine", "stream", "--json"])
    assert r.code == 0, r.stderr
    got = json.loads(r.stdout)["metrics"]
    assert "smece" in got and "ici" not in got
    assert "ici" in r.stderr and "need(s) --engine memory" in r.stderr
    r = cli(["score", sample, "-m", "corp_mcb", "--engine", "stream"])
    assert r.code == 2 and "corp_mcb" in r.stderr


def test_multiclass_top_label_view(cli, tmp_path):
    rng = np.random.default_rng(5)
    p = rng.dirichlet([1, 1, 1], 3000)
    y = np.array([rng.choice(3, p=row) for row in p])
    df = pd.DataFrame({f"prob_{j}": p[:, j] for j in range(3)})
    df["label"] = y
    rep = calcheck.score(df, metrics=["smece", "ici", "corp_mcb"])
    conf, correct = p.max(axis=1), (p.argmax(axis=1) == y).astype(int)
    direct = calcheck.score(pd.DataFrame({"score": conf, "label": correct}),
                            metrics=["smece", "ici", "corp_mcb"])
    for mid in ("smece", "ici", "corp_mcb"):
        assert rep.value(mid) == direct.value(mid)
        assert rep.data["metrics"][mid]["settings"]["view"] == "top-label"


CLASSWISE = {"smece_cw": "smece", "ici_cw": "ici", "ecce_mad_cw": "ecce_mad",
             "ecce_r_cw": "ecce_r", "ece_sweep_cw": "ece_sweep"}


def test_classwise_forms_average_the_one_vs_rest_values(cli, tmp_path):
    rng = np.random.default_rng(8)
    p = rng.dirichlet([2, 1, 1, 0.5], 2500)
    y = np.array([rng.choice(4, p=row) for row in p])
    df = pd.DataFrame({f"prob_{j}": p[:, j] for j in range(4)})
    df["label"] = y
    rep = calcheck.score(df, metrics=list(CLASSWISE))
    for mid, binary in CLASSWISE.items():
        per = [calcheck.score(pd.DataFrame({"score": p[:, k], "label": (y == k).astype(int)}),
                              metrics=[binary]).value(binary) for k in range(4)]
        assert rep.value(mid) == pytest.approx(np.mean(per), rel=1e-12, abs=1e-15)
        rows = rep.data["metrics"][mid]["per_class"]
        assert [rows[str(k)]["error"] for k in range(4)] == pytest.approx(per, rel=1e-12)
        assert rep.data["metrics"][mid]["settings"]["one_vs_rest"] == binary
    # in the multiclass "all", memory only (named on the streaming engines)
    path = tmp_path / "mc.parquet"
    df.to_parquet(path)
    everything = run_json(cli, path, "-m", "all")["metrics"]
    assert set(CLASSWISE) <= set(everything)
    r = cli(["score", str(path), "-m", "smece_cw", "--engine", "stream"])
    assert r.code == 2 and "smece_cw" in r.stderr


def test_corp_plot(cli, sample, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "corp.png"
    r = cli(["plot", sample, "--kind", "corp", "-o", out, "--band-reps", "50", "--seed", "3"])
    assert r.code == 0, r.stderr
    assert out.read_bytes().startswith(b"\x89PNG")
    r = cli(["plot", sample, "--kind", "corp", "-o", out, "--engine", "stream"])
    assert r.code == 2 and "needs --engine memory" in r.stderr


def test_consistency_band_covers_a_calibrated_curve():
    rng = np.random.default_rng(8)
    s = rng.random(4000)
    y = (rng.random(4000) < s).astype(int)
    rec = corp.recalibration(Prepared(s, y))
    band = corp.consistency_band(rec, reps=200, level=0.9, seed=1)
    inside = (rec.fit[np.searchsorted(rec.x, band.x)] >= band.low - 1e-12) & \
        (rec.fit[np.searchsorted(rec.x, band.x)] <= band.high + 1e-12)
    assert inside.mean() > 0.8
    again = corp.consistency_band(rec, reps=200, level=0.9, seed=1)
    assert np.array_equal(band.low, again.low)             # --seed reproduces it


def test_consistency_band_draws_on_a_thread_give_the_same_band():
    """Past ``prefetch_from`` distinct scores the band's binomial draws run on a background
    thread while the main one refits PAV: the same generator, in the same order, so the same
    band as one thread draws and fits in turn."""
    rng = np.random.default_rng(2)
    s = rng.random(3000)
    y = (rng.random(3000) < s).astype(int)
    rec = corp.recalibration(Prepared(s, y))
    bands = []
    for limit in (10**9, 1):                               # one thread; drawn on a thread
        bands.append(corp.consistency_band(rec, reps=40, level=0.9, seed=5,
                                           prefetch_from=limit))
    for name in ("x", "low", "high"):
        np.testing.assert_array_equal(getattr(bands[0], name), getattr(bands[1], name))
