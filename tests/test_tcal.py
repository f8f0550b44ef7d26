import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize, stats

import calcheck
from calcheck.hypotests import tcal, tcal_null
from calcheck.hypotests.tcal import (
    bin_ids,
    dpe,
    n_levels,
    plugin_from_bounds,
    simulate_null,
)
from tests.conftest import SAMPLE, shared_path


def dpe_direct(s, y, m):
    """Literal transcription of T-Cal (docs/tests.md): bins ⌊m·s⌋, T_m = (1/n) Σ_b (S_b² − Q_b)/N_b."""
    n = len(s)
    bins = {}
    for si, yi in zip(s, y):
        b = math.floor(m * si)
        bins.setdefault(b, []).append(si - yi)
    t = sum((sum(r) ** 2 - sum(x * x for x in r)) / len(r) for r in bins.values()) / n
    l1 = sum(abs(sum(r)) for r in bins.values()) / n
    l2 = sum(sum(r) ** 2 / len(r) for r in bins.values()) / n
    return t, l2, l1


scores_st = st.lists(st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0, 0.3, 0.7])),
                     min_size=1, max_size=120)


@given(scores_st, st.integers(0, 2**31), st.sampled_from([1, 2, 3, 10, 15, 64, 1000, 2**20]))
def test_dpe_equals_direct_transcription(scores, seed, m):
    s = np.array(scores)
    y = np.random.default_rng(seed).binomial(1, s)
    got = dpe(s, y, m)
    ref = dpe_direct(s, y, m)
    for a, b in zip((got.dpe, got.plugin_l2_biased, got.plugin_l1), ref):
        assert abs(a - b) <= 1e-12 + 1e-9 * abs(b)


def test_bin_ids_as_the_authors_code():
    s = np.array([0.0, 0.29, 0.3, 0.6, 0.7, 1.0])
    assert bin_ids(s, 10).tolist() == [0, 2, 3, 6, 7, 10]    # s = 1.0 gets its own id m
    assert bin_ids(np.array([0.29]), 100).tolist() == [28]


def test_levels_count():
    assert [n_levels(n) for n in (2000, 10_000, 50_000)] == [19, 23, 27]


def _rows_of(plan, K):
    """Labels per sorted row from the successes per unit (a tied unit's first K rows)."""
    y = np.zeros(plan.n)
    starts = plan.units.row_start[:-1]
    ones = np.repeat(starts, K) + np.arange(K.sum()) - np.repeat(np.cumsum(K) - K, K)
    y[ones] = 1.0
    return y


@pytest.mark.parametrize("kind", ["continuous", "ties", "big_ties", "zeros_and_ones", "tiny"])
@pytest.mark.parametrize("levels", ["adaptive", "fixed", "mixed"])
def test_fast_null_equals_naive(kind, levels):
    """Every trial's T_m equals the literal statistic of its drawn labels, for the dense grid,
    the bins summed at their ends, tied runs drawn as one Binomial, and levels that do not nest."""
    rng = np.random.default_rng(4)
    s = rng.uniform(size=400)
    if kind == "ties":
        s = np.round(s, 2)
    if kind == "big_ties":
        s = np.round(s, 1)
        s[:50] = 1.0
    if kind == "zeros_and_ones":
        s[:40], s[40:70] = 1.0, 0.0
    if kind == "tiny":
        s = s[:3]
    ms = {"adaptive": [2 ** b for b in range(1, n_levels(len(s)) + 1)], "fixed": [15],
          "mixed": [2, 4, 8, 15, 64, 1000]}[levels]
    ss = np.sort(s, kind="stable")
    plan = tcal_null.plan(ss, ms)
    for seed in range(4):
        fast, K = tcal_null.one_trial(plan, seed)
        y = _rows_of(plan, K)
        naive = [plugin_from_bounds(ss - y, _bounds(ss, m)).dpe for m in ms]
        np.testing.assert_allclose(fast, naive, rtol=0, atol=1e-14)
    if kind == "big_ties":
        assert plan.groups.size > 0                 # the tied runs are drawn as Binomials


@pytest.mark.parametrize("kind", ["continuous", "ties", "tiny"])
def test_levels_built_from_finer_levels_equal_direct_binning(kind):
    rng = np.random.default_rng(11)
    s = {"continuous": rng.uniform(size=5000), "tiny": rng.uniform(size=3),
         "ties": np.r_[np.round(rng.uniform(size=4000), 3), np.zeros(100), np.ones(100)]}[kind]
    ss = np.sort(s)
    rs = ss - rng.binomial(1, ss)
    B = n_levels(len(ss))
    bounds, stats = tcal.dyadic_levels(ss, rs, B)
    for b, got in zip(range(1, B + 1), stats):
        direct = _bounds(ss, 2 ** b)
        np.testing.assert_array_equal(bounds[2 ** b], direct)
        ref = plugin_from_bounds(rs, direct)
        for a, r in ((got.dpe, ref.dpe), (got.plugin_l1, ref.plugin_l1),
                     (got.plugin_l2_biased, ref.plugin_l2_biased)):
            assert abs(a - r) <= 1e-13 + 1e-12 * abs(r)


def test_simulate_null_is_the_trials_seeded_in_order():
    s = np.random.default_rng(3).uniform(size=500)
    ms = [2, 4, 8, 16]
    null = simulate_null(s, ms, trials=12, resample="labels", rng=np.random.default_rng(9))
    seeds = np.random.default_rng(9).integers(0, 2 ** 63, size=12)
    plan = tcal_null.plan(np.sort(s), ms)
    for j in range(12):
        np.testing.assert_array_equal(null[:, j], tcal_null.one_trial(plan, int(seeds[j]))[0])


def test_null_plan_bin_sums_are_the_same_taken_a_chunk_of_bins_at_a_time():
    """The null plan sums every level's bins in chunks of whole bins (bounded memory): the same
    plan, bit for bit, as with every bin at once, down to chunks of one bin."""
    s = np.sort(np.random.default_rng(5).uniform(size=3_000))
    ms = list(range(2, 60, 3))
    whole = tcal_null.plan(s, ms)
    chunked = tcal_null.plan(s, ms, bin_rows=1)
    np.testing.assert_array_equal(chunked.fine.A, whole.fine.A)
    np.testing.assert_array_equal(chunked.dense_A, whole.dense_A)
    for seed in (1, 2):
        np.testing.assert_array_equal(tcal_null.one_trial(chunked, seed)[0],
                                      tcal_null.one_trial(whole, seed)[0])


def _bounds(ss, m):
    ids = bin_ids(ss, m)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    return np.r_[starts, len(ss)]


def test_consistency_resampling_runs_and_is_seeded():
    rng = np.random.default_rng(2)
    s = rng.uniform(size=300)
    y = rng.binomial(1, s)
    a = calcheck.tcal(s, y, resample="consistency", trials=200, rng=3)
    b = calcheck.tcal(s, y, resample="consistency", trials=200, rng=3)
    assert a.to_dict() == b.to_dict()
    assert a.settings["resample"] == "consistency"


def test_same_seed_same_result_different_seed_different_draws():
    rng = np.random.default_rng(5)
    s = rng.uniform(size=1500)
    y = rng.binomial(1, s)
    a = calcheck.tcal(s, y, trials=300, rng=1).to_dict()
    assert a == calcheck.tcal(s, y, trials=300, rng=1).to_dict()
    c = calcheck.tcal(s, y, trials=300, rng=2).to_dict()
    assert [lv["critical_value"] for lv in a["levels"]] != [lv["critical_value"]
                                                            for lv in c["levels"]]
    ms = [2, 8, 64]
    n1 = simulate_null(s, ms, trials=50, resample="labels", rng=np.random.default_rng(7))
    n2 = simulate_null(s, ms, trials=50, resample="labels", rng=np.random.default_rng(8))
    assert not np.array_equal(n1, n2)


def test_all_singleton_levels_have_pvalue_one():
    s = np.array([0.1, 0.4, 0.8])
    r = calcheck.tcal(s, np.array([0, 1, 1]), bins=1000, trials=50)
    assert r.statistic == 0.0 and r.pvalue == 1.0 and not r.reject


# --------------------------------------------------------------------------- size and power

def test_size_under_the_null_and_uniform_pvalues():
    rng = np.random.default_rng(2024)
    rejections, fixed_p = 0, []
    for i in range(200):
        z = rng.uniform(size=2000)
        y = rng.binomial(1, z)
        rejections += calcheck.tcal(z, y, trials=500, rng=i).reject
        fixed_p.append(calcheck.tcal(z, y, bins=10, trials=199, rng=10_000 + i).pvalue)
    assert rejections / 200 <= 0.08
    # fixed-m Monte Carlo p-values are uniform on {1/200, ..., 1} under H0 (exchangeability);
    # with a fixed seed the KS check fails for 0.1% of seeds when the test is exact
    assert np.mean(np.array(fixed_p) <= 0.05) <= 0.08
    assert stats.kstest(fixed_p, "uniform").pvalue > 0.001


def test_power_against_clear_miscalibration():
    rng = np.random.default_rng(77)
    rejections = 0
    for i in range(100):
        z = rng.uniform(size=2000)
        y = rng.binomial(1, z ** 1.5)
        rejections += calcheck.tcal(z, y, trials=500, rng=i).reject
    assert rejections / 100 >= 0.90


# --------------------------------------------------------------------------- published values

TCAL_FILES = ["cifar10_densenet121", "cifar10_resnet50", "cifar10_vgg19_bn",
              "cifar100_mobilenetv2_x1_4", "cifar100_resnet56", "cifar100_shufflenetv2_x2_0",
              "imagenet_densenet161", "imagenet_resnet152", "imagenet_efficientnet_b7"]
PAPER_ECE = [2.02, 2.23, 2.13, 11.87, 15.2, 9.08, 5.67, 4.99, 2.82]


def load_tcal(name):
    df = pd.read_parquet(shared_path("tcal", f"{name}.parquet"))
    return df["score"].to_numpy(), df["label"].to_numpy()


@pytest.mark.parametrize("name", TCAL_FILES)
def test_reference_plugin_values(name):
    # reference values: dh7401/T-Cal commit b6fe462, plugin_ece on all rows (README there)
    ref = json.loads(shared_path("tcal", "reference_values.json").read_text())[name]
    s, y = load_tcal(name)
    assert n_levels(len(s)) == ref["B_full"]
    for row in ref["full"]["values"]:
        got = dpe(s, y, row["num_bins"])
        for a, b in ((got.dpe, row["dpe_l2sq_debiased"]),
                     (got.plugin_l2_biased, row["plugin_l2sq_biased"]),
                     (got.plugin_l1, row["plugin_l1"])):
            assert abs(a - b) <= 1e-12 + 1e-9 * abs(b), (row["num_bins"], a, b)


@pytest.mark.parametrize("name, ece", list(zip(TCAL_FILES, PAPER_ECE)))
def test_published_ece_and_rejection(name, ece):
    s, y = load_tcal(name)
    assert round(100 * dpe(s, y, 15).plugin_l1, 2) == pytest.approx(ece, abs=1e-9)
    r = calcheck.tcal(s, y, trials=1000, rng=0)
    assert r.reject, name


# --------------------------------------------------------------------------- classical tests

def _data(seed=0, power=1.0, n=3000):
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.01, 0.99, size=n)
    return s, rng.binomial(1, s ** power)


def test_hosmer_lemeshow_direct():
    s, y = _data(1)
    r = calcheck.hosmer_lemeshow(s, y)
    order = np.argsort(s, kind="stable")
    ss, ys = s[order], y[order]
    cuts = (np.linspace(0, 1, 11) * len(s)).astype(int)
    c = 0.0
    for a, b in itertools.pairwise(cuts):
        o, e, n = ys[a:b].sum(), ss[a:b].sum(), b - a
        c += (o - e) ** 2 / (e * (1 - e / n))
    assert r.statistic == pytest.approx(c, rel=1e-12)
    assert r.details["df"] == 10                       # external predictions: χ²(G)
    fitted = calcheck.hosmer_lemeshow(s, y, hl_df="fitted")
    assert fitted.details["df"] == 8 and fitted.statistic == r.statistic
    assert fitted.pvalue < r.pvalue
    assert r.pvalue == pytest.approx(stats.chi2.sf(c, 10), rel=1e-12)
    assert fitted.pvalue == pytest.approx(stats.chi2.sf(c, 8), rel=1e-12)


def test_spiegelhalter_direct_and_direction():
    s, y = _data(2)
    r = calcheck.spiegelhalter(s, y)
    z = np.sum((y - s) * (1 - 2 * s)) / np.sqrt(np.sum((1 - 2 * s) ** 2 * s * (1 - s)))
    assert r.statistic == pytest.approx(z, rel=1e-12)
    assert r.pvalue == pytest.approx(2 * stats.norm.sf(abs(z)), rel=1e-12)
    # the label follows Z's own sign, not the mean residual's: outcomes nearer 1/2 than the
    # scores (true logit = logit(s)/2) make Z > 0, further from it (2·logit(s)) Z < 0
    rng = np.random.default_rng(3)
    s2 = rng.uniform(0.01, 0.99, 20000)
    logit = np.log(s2 / (1 - s2))
    for factor, label in ((0.5, "too extreme"), (2.0, "too cautious")):
        y2 = (rng.uniform(size=s2.shape[0]) < 1 / (1 + np.exp(-factor * logit))).astype(int)
        r2 = calcheck.spiegelhalter(s2, y2)
        assert r2.details["direction"] == label and (r2.statistic > 0) == (label == "too extreme")
    # a mean residual of the other sign does not flip it: scores shifted down a little while
    # too extreme keep Z > 0
    y3 = (rng.uniform(size=s2.shape[0]) < 1 / (1 + np.exp(-(0.5 * logit + 0.3)))).astype(int)
    r3 = calcheck.spiegelhalter(s2, y3)
    assert r3.statistic > 0 and r3.details["direction"] == "too extreme"


def test_cox_calibration_intercept_and_the_one_direction_rule():
    """The calibration intercept is the ML fit of logit P = a + logit(s) (slope held at 1);
    the direction rule reads the intervals of it and of the slope, and claims nothing when
    they hold 0 and 1."""
    from calcheck.hypotests.classical import recalibration_direction

    rng = np.random.default_rng(11)
    s = rng.uniform(0.02, 0.98, 30000)
    x = np.log(s / (1 - s))
    y = (rng.uniform(size=s.shape[0]) < 1 / (1 + np.exp(-(0.6 * x - 0.4)))).astype(int)
    r = calcheck.cox(s, y)
    a0 = optimize.minimize_scalar(lambda a: np.sum(np.logaddexp(0, a + x) - y * (a + x))).x
    assert r.details["calibration_intercept"] == pytest.approx(a0, abs=1e-6)
    p0 = 1 / (1 + np.exp(-(a0 + x)))
    assert r.details["calibration_intercept_se"] == pytest.approx(
        1 / np.sqrt(np.sum(p0 * (1 - p0))), rel=1e-6)
    d = recalibration_direction(r.details)
    assert d == {"average": "over", "confidence": "over"}
    cal = (rng.uniform(size=s.shape[0]) < s).astype(int)
    d = recalibration_direction(calcheck.cox(s, cal).details)
    assert d == {"average": None, "confidence": None}
    y = (rng.uniform(size=s.shape[0]) < 1 / (1 + np.exp(-(1.8 * x + 0.3)))).astype(int)
    assert recalibration_direction(calcheck.cox(s, y).details) == {"average": "under",
                                                                   "confidence": "under"}


def test_cox_matches_direct_maximum_likelihood():
    s, y = _data(4, power=1.3)
    r = calcheck.cox(s, y)
    x = np.log(s / (1 - s))

    def nll(b):
        eta = b[0] + b[1] * x
        return np.sum(np.logaddexp(0, eta) - y * eta)

    opt = optimize.minimize(nll, [0.0, 1.0], method="BFGS", options={"gtol": 1e-10})
    assert r.details["intercept"] == pytest.approx(opt.x[0], abs=1e-5)
    assert r.details["slope"] == pytest.approx(opt.x[1], abs=1e-5)
    lr = 2 * (nll([0.0, 1.0]) - opt.fun)
    assert r.statistic == pytest.approx(lr, rel=1e-6)
    assert r.reject
    s0, y0 = _data(5)
    assert abs(calcheck.cox(s0, y0).details["slope"] - 1) < 0.2


def test_binomial_discrete():
    s = np.repeat([0.1, 0.5, 1.0], [100, 100, 10])
    y = np.r_[np.zeros(90), np.ones(10), np.zeros(50), np.ones(50), np.ones(9), [0]].astype(int)
    r = calcheck.binomial_discrete(s, y)
    # a score of exactly 1 with one counter-example has p = 0
    assert r.statistic == 0.0 and r.reject and r.details["distinct_values"] == 3
    ok = calcheck.binomial_discrete(s[:200], y[:200])
    ref = min(stats.binomtest(10, 100, 0.1).pvalue, stats.binomtest(50, 100, 0.5).pvalue)
    assert ok.statistic == ref and ok.pvalue == min(1, 2 * ref) and not ok.reject


# --------------------------------------------------------------------------- CLI

def test_cli_test_json_equals_api(cli):
    r = cli(["test", SAMPLE / "miscalibrated_50.parquet", "--json", "--trials", "300",
             "--seed", "4"])
    assert r.code == 0, r.stderr
    rep = json.loads(r.stdout)
    df = pd.read_parquet(SAMPLE / "miscalibrated_50.parquet")
    api = calcheck.tcal(df["score"].to_numpy(), df["label"].to_numpy(), trials=300, rng=4)
    got = {k: v for k, v in rep["tests"]["tcal_adaptive"].items()
           if not k.endswith("_adjusted")}             # the family's fields (one test here)
    assert got == api.to_dict()
    assert rep["tests"]["tcal_adaptive"]["pvalue_adjusted"] == api.pvalue
    assert rep["settings"]["seed"] == 4 and rep["command"] == "test"


def test_cli_methods_fixed_m_and_fail_on_reject(cli):
    path = SAMPLE / "miscalibrated_50.csv"
    r = cli(["test", path, "--method", "all", "--bins", "15", "--trials", "200", "--json"])
    rep = json.loads(r.stdout)
    assert set(rep["tests"]) == {"tcal", "hosmer_lemeshow", "spiegelhalter", "cox", "skce", "ks",
                                 "kuiper"}
    t = rep["tests"]["tcal"]
    assert t["m"] == 15 and t["debiased_l2_ece"] == pytest.approx(math.sqrt(max(t["statistic"], 0)))
    assert r.code == 0                                     # verdicts do not change the exit code
    f = cli(["test", path, "--method", "hl", "--fail-on-reject"])
    assert f.code == 1 and "rejected by: hosmer_lemeshow" in f.stderr
    ok = cli(["test", SAMPLE / "calibrated_50.csv", "--method", "cox", "--fail-on-reject"])
    assert ok.code == 0


def test_cli_formats(cli):
    path = SAMPLE / "calibrated_01.csv"
    table = cli(["test", path, "--trials", "200"]).stdout
    assert "adaptive T-Cal" in table and "per level" in table
    csv = cli(["test", path, "--method", "hl,cox", "--format", "csv"]).stdout.splitlines()
    head = csv[0].split(",")
    assert head[:6] == ["test", "statistic", "pvalue", "pvalue_text", "reject", "alpha"]
    assert len(csv) == 3 and "slope" in head and "df" in head       # one column per detail
    assert "{" not in "".join(csv)                                   # no JSON in cells
    md = cli(["test", path, "--method", "spiegelhalter", "--format", "markdown"]).stdout
    assert "| spiegelhalter |" in md


def test_cli_discrete_scores_add_binomial_test(cli, tmp_path):
    rng = np.random.default_rng(0)
    s = rng.choice([0.1, 0.3, 0.6, 0.9], size=2000)
    p = tmp_path / "d.csv"
    pd.DataFrame({"score": s, "label": rng.binomial(1, s)}).to_csv(p, index=False)
    r = cli(["test", p, "--json", "--trials", "200"])
    rep = json.loads(r.stdout)
    assert "binomial_discrete" in rep["tests"] and "tcal_adaptive" in rep["tests"]
    assert "4 distinct values" in r.stderr


@pytest.mark.parametrize("args, needle", [
    (["--bins", "10", "--adaptive"], "exclude each other"),
    (["--resample", "bootstrap"], "unknown --resample"),
    (["--method", "kolmogorov"], "unknown --method"),
    (["--trials", "0"], "--trials must be an integer >= 1"),
    (["--alpha", "0"], "--alpha must be in the open interval"),
    (["--bins", "0"], "--bins must be an integer >= 1"),
])
def test_cli_test_usage_errors(cli, tmp_path, args, needle):
    out = tmp_path / "r.json"
    r = cli(["test", SAMPLE / "calibrated_50.csv", *args, "-o", out])
    assert r.code == 2 and needle in r.stderr and not out.exists()


def test_hosmer_lemeshow_certain_predictions_that_fail_are_infinite():
    s = np.r_[np.full(50, 1.0), np.linspace(0.1, 0.9, 450)]
    y = np.r_[np.ones(45), np.zeros(5), np.random.default_rng(0).binomial(1, s[50:])]
    r = calcheck.hosmer_lemeshow(s, y)
    assert r.details["infinite"] and r.pvalue == 0.0 and r.reject
    assert r.to_dict()["statistic"] is None            # JSON never carries inf


def test_label_draws_are_bernoulli_and_exact_at_the_extremes():
    # distinct scores (each its own row) near every target, and tied runs at 0, 0.3 and 1
    rng = np.random.default_rng(0)
    k = 20_000
    near = [0.0, 1e-300, 1e-9, 0.25, 0.5, 1 - 1e-9]
    rows = [np.full(1, near[0])] + [p * (1 + 1e-9 * rng.random(k)) if 0 < p < 1 else np.full(1, p)
                                    for p in near[1:]]
    s = np.concatenate([*rows, np.full(40, 0.0), np.full(40, 0.3), np.full(40, 1.0),
                        np.full(1, 1.0)])
    ss = np.sort(s)
    plan = tcal_null.plan(ss, [2])
    total = np.zeros(plan.units.score.shape[0])
    trials = 20
    for seed in range(trials):
        total += tcal_null.one_trial(plan, seed)[1]
    us, cnt = plan.units.score, plan.units.count
    assert total[us == 0.0].sum() == 0 and total[us == 1.0].sum() == trials * cnt[us == 1.0].sum()
    assert total[(us > 0) & (us < 1e-200)].sum() == 0                 # 1e-300: relative accuracy
    assert total[(us > 1e-10) & (us < 1e-8)].sum() <= 2
    assert total[(us > 1 - 1e-8) & (us < 1)].sum() >= trials * k - 2
    for lo, hi, p in ((0.24, 0.26, 0.25), (0.49, 0.51, 0.5), (0.29, 0.31, 0.3)):
        sel = (us > lo) & (us < hi)
        draws = trials * cnt[sel].sum()
        se = np.sqrt(p * (1 - p) / draws)
        assert abs(total[sel].sum() / draws - p) < 5 * se
    assert plan.groups.size == 3                      # the runs of 40 are single Binomial draws


def test_null_does_not_depend_on_the_threads():
    import calcheck.hypotests.tcal_null as tc

    rng = np.random.default_rng(6)
    s = np.sort(rng.uniform(size=2000))
    ms = [2, 16, 256]
    p = tc.plan(s, ms)
    draws = [tc.simulate(p, trials=50, rng=np.random.default_rng(1), threads=threads,
                         per_task=per_task)                         # (3: several tasks)
             for threads, per_task in ((1, 3), (4, 3), (2, 8))]
    np.testing.assert_array_equal(draws[0], draws[1])
    np.testing.assert_array_equal(draws[0], draws[2])
    np.testing.assert_array_equal(draws[0], simulate_null(s, ms, trials=50, resample="labels",
                                                          rng=np.random.default_rng(1)))
