"""test --engine stream: exact T-Cal statistics and Spiegelhalter from the grid state; the
grid null is reproducible across partitionings and close to the per-row null; Cox's fit by
Newton passes and the binomial test of discrete scores equal memory."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import calcheck
from calcheck.hypotests.tcal import tcal_adaptive, tcal_fixed
from calcheck.streaming import StreamState
from calcheck.streaming.tests import (
    spiegelhalter_stream,
    tcal_adaptive_stream,
    tcal_fixed_stream,
)


def data(seed, n, power=1.0):
    rng = np.random.default_rng(seed)
    s = rng.uniform(size=n)
    return s, rng.binomial(1, s ** power).astype(np.int8)


def test_fixed_m_statistic_is_exact_and_null_close_to_per_row():
    s, y = data(0, 30_000)
    st = StreamState(tcal_m=15).update(s, y)
    got = tcal_fixed_stream(st, trials=2000, seed=1)
    ref = tcal_fixed(s, y, m=15, trials=2000, rng=1)
    assert got.statistic == pytest.approx(ref.statistic, rel=1e-10, abs=1e-15)
    assert got.details["plugin_l1"] == pytest.approx(ref.details["plugin_l1"], rel=1e-12)
    # different draws, same null: critical values agree to Monte Carlo error
    assert got.details["critical_value"] == pytest.approx(ref.details["critical_value"], rel=0.2)
    assert got.settings["null_variance_excess"] < 1e-7         # units 2^-12 wide
    assert not got.reject and not ref.reject


def test_adaptive_levels_are_exact_up_to_the_grid():
    s, y = data(1, 20_000, power=1.25)
    st = StreamState().update(s, y)
    got = tcal_adaptive_stream(st, trials=1000, seed=0, grid="paper")
    ref = tcal_adaptive(s, y, trials=1000, rng=0, grid="paper")
    assert got.details["B"] == 16 and ref.details["B"] == got.details["B_spec"]
    assert got.details["levels_omitted"] == [2 ** k for k in range(17, ref.details["B"] + 1)]
    for a, b in zip(got.details["levels"], ref.details["levels"]):
        assert a["m"] == b["m"]
        assert a["dpe"] == pytest.approx(b["dpe"], rel=1e-10, abs=1e-15)
    assert got.reject and ref.reject


def test_adaptive_bounded_grid_streams_its_dyadic_levels():
    s, y = data(1, 20_000, power=1.25)
    got = tcal_adaptive_stream(StreamState().update(s, y), trials=500, seed=0)
    ref = tcal_adaptive(s, y, trials=500, rng=0)
    dyadic = {lv["m"]: lv["dpe"] for lv in ref.details["levels"]}
    assert [lv["m"] for lv in got.details["levels"]] == [2 ** k for k in range(1, 11)]
    for lv in got.details["levels"]:
        if lv["m"] in dyadic:
            assert lv["dpe"] == pytest.approx(dyadic[lv["m"]], rel=1e-10, abs=1e-15)
    assert got.details["correction"] == "minp" and got.reject and ref.reject


def test_spiegelhalter_from_sums_equals_in_memory():
    s, y = data(2, 10_000, power=0.9)
    st = StreamState(spiegelhalter=True).update(s, y)
    got, ref = spiegelhalter_stream(st), calcheck.spiegelhalter(s, y)
    assert got.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert got.pvalue == pytest.approx(ref.pvalue, rel=1e-9)
    assert got.details["direction"] == ref.details["direction"]


@pytest.mark.slow
def test_consistency_null_close_to_per_row_and_of_the_right_size():
    s, y = data(3, 20_000)
    got = tcal_fixed_stream(StreamState(tcal_m=15).update(s, y), trials=2000, seed=1,
                            resample="consistency")
    ref = tcal_fixed(s, y, m=15, trials=2000, rng=1, resample="consistency")
    assert got.statistic == pytest.approx(ref.statistic, rel=1e-10, abs=1e-15)
    assert got.details["critical_value"] == pytest.approx(ref.details["critical_value"], rel=0.2)
    assert got.settings["resample"] == "consistency"
    assert got.settings["engine_null"].startswith("multinomial")
    rejections = 0
    for seed in range(60):
        s, y = data(300 + seed, 2_000)
        st = StreamState(tcal_m=10).update(s, y)
        rejections += tcal_fixed_stream(st, trials=200, seed=seed, alpha=0.1,
                                        resample="consistency").reject
    assert rejections / 60 <= 0.22          # nominal 0.1; binomial sd ≈ 0.039


def test_grid_null_has_the_right_size():
    """Type-I error of grid-null T-Cal on calibrated data stays near alpha (80 data sets)."""
    rejections = 0
    for seed in range(80):
        s, y = data(100 + seed, 2_000)
        st = StreamState(tcal_m=10).update(s, y)
        rejections += tcal_fixed_stream(st, trials=200, seed=seed, alpha=0.1).reject
    assert rejections / 80 <= 0.2           # nominal 0.1; binomial sd ≈ 0.034


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    root = tmp_path_factory.mktemp("tparts")
    s, y = data(5, 40_000, power=1.1)
    for i in range(5):
        (root / "a" / f"k={i}").mkdir(parents=True)
        sl = slice(i * 8000, (i + 1) * 8000)
        pq.write_table(pa.table({"score": s[sl], "label": y[sl]}), root / "a" / f"k={i}" / "p.parquet")
    pq.write_table(pa.table({"score": s, "label": y}), root / "all.parquet", row_group_size=7000)
    return root


def _tests_json(cli, *args):
    r = cli(["test", *map(str, args), "--json", "--trials", "200"])
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)["tests"]


@pytest.mark.parametrize("extra", [["--bins", "15"], ["--adaptive"],
                                   ["--bins", "15", "--resample", "consistency"]])
def test_p_values_do_not_depend_on_partitioning(cli, parts, extra):
    a = _tests_json(cli, parts / "a", "--engine", "stream", "--method", "tcal,spiegelhalter", *extra)
    b = _tests_json(cli, parts / "all.parquet", "--engine", "stream", "--batch-rows", "999",
                 "--method", "tcal,spiegelhalter", *extra)
    tid = "tcal" if "--bins" in extra else "tcal_adaptive"
    assert a[tid]["pvalue"] == b[tid]["pvalue"]
    assert a[tid]["statistic"] == pytest.approx(b[tid]["statistic"], rel=1e-12)
    assert a["spiegelhalter"]["statistic"] == pytest.approx(b["spiegelhalter"]["statistic"],
                                                            rel=1e-12)
    mem = _tests_json(cli, parts / "all.parquet", "--method", "tcal", *extra)
    if tid == "tcal":
        assert a[tid]["statistic"] == pytest.approx(mem[tid]["statistic"], rel=1e-10)


@pytest.mark.parametrize("args, needle", [
    (["--scheduler", "tcp://x:1"], "--scheduler applies to --engine dask only"),
])
def test_stream_test_usage_errors(cli, parts, args, needle):
    engine = [] if "--scheduler" in args else ["--engine", "stream"]
    r = cli(["test", parts / "a", *engine, *args])
    assert r.code == 2 and needle in r.stderr, r.stderr


def _cox(r):
    return r["cox"]["intercept"], r["cox"]["slope"], r["cox"]["statistic"]


def test_cox_by_newton_passes_equals_memory(cli, parts):
    mem = _tests_json(cli, parts / "all.parquet", "--method", "cox")
    a = _tests_json(cli, parts / "a", "--engine", "stream", "--method", "cox")
    b = _tests_json(cli, parts / "all.parquet", "--engine", "stream", "--batch-rows", "999",
                    "--method", "cox")
    for got in (a, b):
        assert _cox(got) == pytest.approx(_cox(mem), rel=1e-9)
        assert got["cox"]["pvalue"] == pytest.approx(mem["cox"]["pvalue"], rel=1e-6, abs=1e-300)
        assert got["cox"]["settings"]["passes"] <= 4          # from the grid fit: ~3
    assert abs(_cox(a)[0]) > 1e-3 and abs(_cox(a)[1] - 1) > 1e-3    # not the null's (0, 1)


@pytest.mark.parametrize("case", ["separated", "extreme"])
def test_cox_stream_handles_separation_and_extreme_scores(cli, tmp_path, case):
    rng = np.random.default_rng(3)
    s = rng.uniform(size=4000)
    if case == "separated":                      # y = 1 exactly when s > 0.5: no finite MLE
        y = (s > 0.5).astype(np.int8)
    else:                                        # exact 0s and 1s, clipped to 1e-15
        s[:500], s[500:1000] = 0.0, 1.0
        y = rng.binomial(1, s).astype(np.int8)
    pq.write_table(pa.table({"score": s, "label": y}), tmp_path / "d.parquet")
    mem = _tests_json(cli, tmp_path / "d.parquet", "--method", "cox")
    got = _tests_json(cli, tmp_path / "d.parquet", "--engine", "stream", "--batch-rows", "700",
                      "--method", "cox")
    assert got["cox"]["reject"] == mem["cox"]["reject"]
    assert got["cox"]["statistic"] == pytest.approx(mem["cox"]["statistic"], rel=1e-6)
    if case == "extreme":
        assert _cox(got) == pytest.approx(_cox(mem), rel=1e-9)


@pytest.mark.parametrize("values, expect", [(11, True), (60, False)])
def test_binomial_per_value_joins_tcal_as_in_memory(cli, tmp_path, values, expect):
    rng = np.random.default_rng(4)
    s = rng.integers(0, values, size=30_000) / (values - 1)
    y = rng.binomial(1, np.clip(s * 1.05, 0, 1)).astype(np.int8)
    pq.write_table(pa.table({"score": s, "label": y}), tmp_path / "d.parquet")
    mem = _tests_json(cli, tmp_path / "d.parquet", "--bins", "8")
    got = _tests_json(cli, tmp_path / "d.parquet", "--engine", "stream", "--batch-rows", "999",
                      "--bins", "8")
    assert ("binomial_discrete" in got) is expect and ("binomial_discrete" in mem) is expect
    if expect:
        g, m = got["binomial_discrete"], mem["binomial_discrete"]
        assert g == m


def test_distinct_state_merges_to_the_whole_and_gives_up_past_the_limit():
    from calcheck.streaming.rowtests import DistinctSpec

    rng = np.random.default_rng(6)
    s = rng.integers(0, 7, size=5000) / 8.0
    y = rng.integers(0, 2, size=5000)
    whole = DistinctSpec(10).new()
    whole.update(s, y, 0)
    parts = [DistinctSpec(10).new() for _ in range(3)]
    for i, p in enumerate(parts):
        p.update(s[i::3], y[i::3], 0)
    parts[2].merge(parts[0])
    parts[2].merge(parts[1])
    for k in ("values", "counts", "positives"):
        np.testing.assert_array_equal(getattr(parts[2], k), getattr(whole, k))
    small = DistinctSpec(5).new()
    small.update(s, y, 0)
    assert small.values is None
