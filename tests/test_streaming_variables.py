"""--var on the streaming engines: exact order statistics of any column (the rank search),
qcut edges bit-identical to numpy.percentile, VECE / ece_qcut / VCE(v*) equal to the
in-memory engine, the VECE paper's tables through --engine stream."""

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calcheck.metrics import vece as vece_kernels
from calcheck.streaming import ranks
from calcheck.streaming.variables import BinSpec
from calcheck.tuning import DEFAULT as TUNING
from calcheck.tuning import Tuning
from tests.conftest import shared_path, write_dataset


def _search(x, wanted, parts, tuning=TUNING):
    """Resolve ``wanted`` ranks of x over ``parts`` batches, merged in a shuffled order."""
    s = ranks.RankSearch(x.shape[0], wanted, tuning)
    rng_ = s.first()
    passes = 0
    while rng_:
        spec = ranks.RankPassSpec((rng_,))
        states = []
        for part in np.array_split(x, parts):
            st_ = spec.new()
            st_.add(0, ranks.order_keys(part))
            states.append(st_)
        merged = states.pop()
        for other in states[::-1]:
            merged.merge(other)
        s.absorb(merged, 0)
        passes += 1
        rng_ = s.ranges()
    return s, passes


@given(st.integers(0, 2**31), st.integers(1, 4000), st.sampled_from(["normal", "ints", "tie",
                                                                     "zeros"]),
       st.integers(1, 9), st.booleans())
def test_rank_search_is_exact(seed, n, kind, parts, small_collect):
    rng = np.random.default_rng(seed)
    x = {"normal": lambda: rng.normal(size=n) * 10.0 ** rng.integers(-300, 300),
         "ints": lambda: rng.integers(-3, 40, n).astype(float),
         "tie": lambda: np.where(rng.random(n) < 0.9, 2.5, rng.normal(size=n)),
         "zeros": lambda: np.where(rng.random(n) < 0.5, -0.0, rng.random(n) ** 9)}[kind]()
    wanted = sorted({*rng.integers(0, n, 20).tolist(), 0, n - 1})
    # a small collect budget forces the histogram passes
    s, passes = _search(x, wanted, parts, Tuning(rank_collect_rows=16) if small_collect
                        else TUNING)
    xs = np.sort(x)
    assert [s.value(r) for r in wanted] == [float(xs[r]) for r in wanted]
    assert passes <= 5
    q = np.linspace(0, 1, 11) * 100.0
    below, above, gamma = vece_kernels.percentile_plan(n, q)
    s2, _ = _search(x, [*below, *above], parts)
    got = vece_kernels.lerp(np.array([s2.value(int(r)) for r in below]),
                     np.array([s2.value(int(r)) for r in above]), gamma)
    assert np.array_equal(got, np.percentile(x, q))            # bit for bit


def test_order_keys_order_floats():
    x = np.array([-np.inf, -1e300, -2.0, -1e-300, -0.0, 0.0, 1e-300, 0.5, 3.0, np.inf])
    k = ranks.order_keys(x)
    assert np.all(k[1:] >= k[:-1]) and k[4] == k[5]
    assert [ranks.key_value(int(v)) for v in k] == [float(v) + 0.0 for v in x]


@pytest.fixture(scope="module")
def varset(tmp_path_factory):
    root = tmp_path_factory.mktemp("varset")
    rng = np.random.default_rng(3)
    n = 30_000
    s = rng.uniform(size=n)
    x = rng.normal(size=n) * 3
    x[rng.random(n) < 0.02] = np.nan
    x[::7] = np.round(x[::7], 1)                         # ties in a continuous variable
    df = pd.DataFrame({"score": s, "label": rng.binomial(1, s ** 1.3),
                       "age": rng.integers(17, 90, n), "x": x,
                       "pred": rng.integers(0, 2, n), "day": rng.integers(1, 5, n)})
    write_dataset(root, df, ["day"])
    # the same rows in the stream's order, for the in-memory engine
    pq.write_table(pads.dataset(root / "ds", partitioning="hive").to_table(),
                   root / "all.parquet")
    return root


def run(cli, args):
    r = cli(["score", *map(str, args), "--json", "-m", "ece"])
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)


def assert_same(mem, stream, *, curve_tol):
    assert mem["variables"].keys() == stream["variables"].keys()
    for v, a in mem["variables"].items():
        b = stream["variables"][v]
        assert [r["n"] for r in a["bins"]] == [r["n"] for r in b["bins"]]
        assert [r["upper"] for r in a["bins"]] == [r["upper"] for r in b["bins"]]
        for key in ("vece", "ece_qcut"):
            assert b[key] == pytest.approx(a[key], rel=1e-12, abs=1e-15)
        assert (b["n"], b["excluded_missing"], b["rank"]) == (a["n"], a["excluded_missing"],
                                                              a["rank"])
        assert b["curve"]["v"] == a["curve"]["v"]
        for key in ("error_rate", "predicted_error", "error_rate_hi"):
            assert np.allclose(b["curve"][key], a["curve"][key], rtol=0, atol=curve_tol[v])
        assert b["vce_max"] == pytest.approx(a["vce_max"], abs=curve_tol[v])


@pytest.mark.parametrize("batch_rows", ["1500", "1000000"])
def test_stream_var_equals_memory(cli, varset, batch_rows):
    mem = run(cli, [varset / "all.parquet", "--var", "age", "--var", "x"])
    stream = run(cli, [varset / "ds", "--engine", "stream", "--batch-rows", batch_rows,
                       "--var", "age", "--var", "x"])
    # age: 73 distinct values, LOESS on the exact aggregate; x: > 4096 values, grouped
    assert_same(mem, stream, curve_tol={"age": 1e-12, "x": 1e-4})
    assert stream["variables"]["age"]["settings"]["loess_approximation"] is None
    assert "groups" in stream["variables"]["x"]["settings"]["loess_approximation"]
    assert stream["settings"]["variable_passes"] >= 3
    assert stream["variables"]["x"]["excluded_missing"] > 0


def test_stream_var_correct_from_and_where(cli, varset):
    args = ["--var", "age", "--correct-from", "pred", "--where", "day >= 2"]
    mem = run(cli, [varset / "ds", *args])
    stream = run(cli, [varset / "ds", "--engine", "stream", *args])
    assert_same(mem, stream, curve_tol={"age": 1e-12})
    assert stream["settings"]["correct_from"] == "pred"


def test_stream_var_errors(cli, varset, tmp_path):
    r = cli(["score", str(varset / "ds"), "--engine", "stream", "--var", "nope"])
    assert r.code == 2 and "no column 'nope'" in r.stderr
    r = cli(["score", str(varset / "ds"), "--engine", "stream", "--correct-from", "pred"])
    assert r.code == 2 and "--correct-from" in r.stderr and "--var" in r.stderr
    d = tmp_path / "bad"
    d.mkdir()
    v = np.array(["1.5"] * 3000, dtype=object)
    v[2345] = "old"
    pq.write_table(pa.table({"score": np.full(3000, 0.4), "label": np.zeros(3000, np.int8),
                             "v": v}), d / "p.parquet", row_group_size=1000)
    r = cli(["score", str(d), "--engine", "stream", "--var", "v", "--batch-rows", "700"])
    assert r.code == 2 and "column 'v'" in r.stderr and "row 2346" in r.stderr, r.stderr


def test_bin_state_merge_is_order_independent(varset):
    df = pd.read_parquet(varset / "all.parquet")
    s, y = df["score"].to_numpy(), df["label"].to_numpy()
    V = df[["age", "x"]].to_numpy(float)
    edges = (np.array([17.0, 30, 50, 89]), np.array([-9.0, 0, 9]), np.array([0, 0.2, 0.5]))
    groups = (np.unique(V[:, 0]), np.unique(V[~np.isnan(V[:, 1]), 1])[::50])
    spec = BinSpec(("age", "x"), True, edges, (groups[0], np.r_[groups[1], np.inf]))
    rng = np.random.default_rng(0)
    cuts = np.sort(rng.choice(np.arange(1, len(df)), 6, replace=False))
    parts = []
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(df)]):
        parts.append(spec.new().update(s[a:b], y[a:b], 0, V[a:b]))
    one = spec.new().update(s, y, 0, V)
    for order in (range(len(parts)), rng.permutation(len(parts))):
        merged = spec.new()
        for i in order:
            merged.merge(parts[i])
        for j in range(3):
            assert np.array_equal(merged.qcount[j], one.qcount[j])
            assert np.array_equal(merged.qwrong[j], one.qwrong[j])
            assert np.allclose(merged.qerr[j].value, one.qerr[j].value, rtol=1e-12, atol=0)
        for j in range(2):
            assert np.array_equal(merged.gcount[j], one.gcount[j])
        parts = [spec.new().merge(p) for p in parts]        # merge() mutates: fresh copies


def _vece_of(cli, path, *args):
    r = cli(["score", str(path), "--engine", "stream", "--json", "-m", "ece_top", *args])
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)["variables"]


@pytest.mark.parametrize("name, var", [("adult", "age"), ("bank", "age"),
                                       ("cifar10h", "median_rt"), ("cardio", "age")])
def test_stream_reproduces_reference_vece(cli, name, var):
    ref = json.loads(shared_path("vece", "reference_values.json").read_text())[name]["reference"]
    got = _vece_of(cli, shared_path("vece", f"{name}_test.parquet"), "--var", var)[var]
    assert got["ece_qcut"] == pytest.approx(ref["ECE_uncal_qcut10"], abs=1e-12)
    assert got["vece"] == pytest.approx(ref[f"VECE_{var}_uncal_qcut10"], abs=1e-12)


def test_stream_reproduces_table1(cli):
    path = shared_path("vece", "adult_test.parquet")
    expected = {"education_num": (9.95, 20.127), "age": (9.59, 23.437),
                "hours_per_week": (7.94, 18.205), "fnlwgt": (5.06, 12.081)}
    got = _vece_of(cli, path, "--probs", "prob_0_beta,prob_1_beta", "--correct-from", "pred",
                   "--loess-span", "0.9", *[a for v in expected for a in ("--var", v)])
    assert sorted(got, key=lambda v: got[v]["rank"]) == list(expected)
    for v, (vece, worst) in expected.items():
        assert round(100 * got[v]["vece"], 2) == vece
        assert abs(100 * got[v]["vce_max"] - worst) <= 0.5, (v, got[v]["vce_max"])
