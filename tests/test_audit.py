"""calcheck audit: the segments searched, every statistic against a direct computation on the
segment's rows, MCGrad's multicalibration error, the max-type adjustment, the command line."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck.segments import code_column, search_space


def _frame(n: int = 6000, seed: int = 2026, bump: float = 0.08) -> pd.DataFrame:
    """Region × device with y ~ Bernoulli(s + bump) on region B & mobile."""
    rng = np.random.default_rng(seed)
    region = rng.choice(list("ABCD"), n)
    device = rng.choice(["mobile", "desktop"], n)
    s = rng.beta(2, 5, n)
    p = s.copy()
    m = (region == "B") & (device == "mobile")
    p[m] = np.minimum(1, p[m] + bump)
    y = (rng.uniform(size=n) < p).astype(int)
    return pd.DataFrame({"region": region, "device": device, "score": s, "label": y,
                         "age": rng.integers(18, 90, n)})


def _direct(df: pd.DataFrame, mask: np.ndarray) -> dict[str, float]:
    """A segment's numbers from its own rows, the slow way."""
    s, y = df.score.to_numpy()[mask], df.label.to_numpy()[mask].astype(float)
    n = s.size
    order = np.argsort(s, kind="stable")
    ss, yy = s[order], y[order]
    _, last = np.unique(ss, return_index=True)
    ends = np.r_[last[1:] - 1, n - 1]
    walk = np.cumsum(yy - ss)[ends]
    v = max(0.0, walk.max()) - min(0.0, walk.min())
    sd = math.sqrt(np.sum(s * (1 - s)))
    b = np.minimum((s * 10).astype(int), 9)
    ece = sum(abs(y[b == k].sum() - s[b == k].sum()) for k in range(10)) / n
    return {"n": n, "ecce": v / n, "ecce_sigma": v / sd, "z": (y.sum() - s.sum()) / sd,
            "ece": ece, "mean_score": s.mean(), "observed_rate": y.mean()}


def test_every_segment_matches_its_rows():
    df = _frame()
    rep = calcheck.audit(df, segment=["region", "device"], trials=200)
    assert rep["search"]["searched"] == 1 + 4 + 2 + 8
    for e in rep["segments"]:
        mask = np.ones(len(df), dtype=bool)
        for col, level in e["columns"].items():
            mask &= df[col].to_numpy() == level["value"]
        want = _direct(df, mask)
        for k, v in want.items():
            assert e[k] == pytest.approx(v, rel=1e-9, abs=1e-12), (e["name"], k)


def test_multicalibration_error_is_mcgrads():
    """MCGrad 0.1.5, ``MulticalibrationError(df, 'label', 'score',
    categorical_segment_columns=['region', 'device'], max_depth=2, min_samples_per_segment=200,
    max_values_per_segment_feature=10, precision_dtype='float64')`` on this frame: mce
    0.02818142050698921, mce_sigma 5.1645525366013425, global_ecce 0.009884747831954054 (run
    in a scratch environment; MCGrad is not a dependency)."""
    rep = calcheck.audit(_frame(), segment=["region", "device"], trials=100)
    mc = rep["multicalibration"]
    assert mc["mce"] == pytest.approx(0.02818142050698921, rel=1e-10)
    assert mc["mce_sigma"] == pytest.approx(5.1645525366013425, rel=1e-10)
    assert mc["global_ecce"] == pytest.approx(0.009884747831954054, rel=1e-10)
    assert mc["segment"] == "region = B & device = mobile"


def test_the_planted_segment_comes_first_and_rejects(cli, tmp_path):
    path = tmp_path / "a.parquet"
    _frame(n=20_000, bump=0.12).to_parquet(path)
    r = cli(["audit", path, "--segment", "region", "--segment", "device", "--json",
             "--fail-on-reject", "--trials", "300"])
    assert r.code == 1, r.stderr
    rep = json.loads(r.stdout)
    first = rep["segments"][0]
    assert first["name"] == "region = B & device = mobile" and first["reject_adjusted"]
    assert rep["summary"]["verdict"] == "miscalibrated"
    assert rep["summary"]["rejected"][0] == first["name"]
    assert first["direction"] == "under-predicting"
    assert "miscalibrated segments: region = B & device = mobile" in r.stderr
    for e in rep["segments"]:
        assert e["pvalue_adjusted"] >= e["pvalue"] - 1e-15


def test_adjustment_is_seeded_and_max_type():
    df = _frame(bump=0.0)
    a = calcheck.audit(df, segment=["region", "device"], trials=300, seed=3)
    b = calcheck.audit(df, segment=["region", "device"], trials=300, seed=3)
    c = calcheck.audit(df, segment=["region", "device"], trials=300, seed=4)
    assert a.to_dict() == b.to_dict()
    assert a.to_dict() != c.to_dict()
    adj = [e["pvalue_adjusted"] for e in a["segments"]]
    # worst first: the adjusted p-values never decrease down the list (one max-type threshold)
    assert adj == sorted(adj)
    assert all(e["pvalue"] >= 1 / 301 for e in a["segments"])


def test_shuffled_rows_give_the_same_statistics():
    df = _frame()
    a = calcheck.audit(df, segment=["region", "device"], trials=50)
    b = calcheck.audit(df.sample(frac=1.0, random_state=1), segment=["region", "device"],
                       trials=50)
    for x, y in zip(a["segments"], b["segments"]):
        assert x["name"] == y["name"]
        for k in ("ecce", "z", "kuiper", "ece"):
            assert x[k] == pytest.approx(y[k], rel=1e-9, abs=1e-12)


def test_numeric_columns_are_bucketed_and_named():
    col, codes = code_column("age", numeric=np.array([18, 20, 30, 40, 50, 60, np.nan, 89.0]),
                             buckets=4, max_levels=100)
    assert col.kind == "numeric" and len(col.edges) == 3
    names = [lv.name for lv in col.levels]
    assert names[0].startswith("age ∈ [18, ") and names[-2].endswith(", 89]")
    assert names[-1] == "age missing" and codes[6] == len(names) - 1
    small, codes = code_column("flag", numeric=np.array([0.0, 1.0, 1.0]), buckets=4,
                               max_levels=100)
    assert [lv.name for lv in small.levels] == ["flag = 0", "flag = 1"]
    assert codes.tolist() == [0, 1, 1]


def test_search_counts_what_it_leaves_out():
    df = _frame(n=3000)
    rep = calcheck.audit(df, segment=["region", "device", "age"], min_size=300,
                         max_segments=11, trials=50)
    s = rep["search"]
    assert s["searched"] == 11 and s["unsearched"] > 0 and s["small"] > 0
    depths = [e["depth"] for e in sorted(rep["segments"], key=lambda e: e["depth"])]
    assert depths[0] == 0 and max(depths) <= 1          # the shallower are searched first
    assert any("--max-segments" in n for n in rep.notes)
    # a column nested in another: "country = X & city = Y" is "city = Y", searched once
    nested = pd.DataFrame({"city": np.repeat(["P", "L", "M", "B"], 500),
                           "country": np.repeat(["FR", "FR", "ES", "ES"], 500),
                           "score": np.full(2000, 0.3),
                           "label": np.tile([1, 0, 0], 667)[:2000]})
    rep = calcheck.audit(nested, segment=["city", "country"], trials=20)
    assert rep["search"]["duplicates"] == 4
    assert rep["search"]["searched"] == 1 + 4 + 2


def test_space_is_label_free():
    """The segments searched depend on the columns alone."""
    levels = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    rows = np.array([500, 100, 300, 300])
    cols = tuple(code_column(n, categories=(["a", "b"], np.array([0, 1])), buckets=4,
                             max_levels=10)[0] for n in ("x", "z"))
    space = search_space(cols, levels, rows, depth=2, min_size=200, max_segments=100)
    names = [space.name(s) for s in space.segments]
    assert names[0] == "all rows"
    assert "x = a & z = b" not in names and space.small == 1


def test_bad_input_is_exit_2(cli, tmp_path):
    path = tmp_path / "a.parquet"
    _frame(n=500).to_parquet(path)
    r = cli(["audit", path])
    assert r.code == 2 and "--segment" in r.stderr
    r = cli(["audit", path, "--segment", "nope"])
    assert r.code == 2 and "nope" in r.stderr
    many = pd.DataFrame({"score": np.full(50, 0.5), "label": np.tile([0, 1], 25),
                         "id": [str(i) for i in range(50)]})
    many.to_parquet(tmp_path / "m.parquet")
    r = cli(["audit", tmp_path / "m.parquet", "--segment", "id", "--max-levels", "10"])
    assert r.code == 2 and "50 distinct values" in r.stderr


def test_outputs(cli, tmp_path):
    path = tmp_path / "a.parquet"
    _frame(n=4000).to_parquet(path)
    base = ["audit", path, "--segment", "region", "--segment", "device", "--trials", "100"]
    table = cli([*base, "--top", "3"])
    assert table.code == 0 and "segments searched" in table.stdout
    assert "more segment(s)" in table.stdout
    md = cli([*base, "-f", "markdown"])
    assert "| segment | rows | predicted |" in md.stdout
    csv = cli([*base, "-f", "csv"])
    assert csv.stdout.splitlines()[0].startswith("name,depth,n,positives")
    assert len(csv.stdout.splitlines()) == 1 + 15
    out = tmp_path / "a.html"
    r = cli([*base, "-o", out])
    assert r.code == 0 and "<table>" in out.read_text()


@pytest.mark.parametrize("engine", ["stream", "dask"])
def test_streaming_engines_give_the_same_audit(tmp_path, engine):
    """Levels, edges, counts, every statistic and p-value as in memory; the ECCE on the score
    cells (a lower bound of the row-level one)."""
    if engine == "dask":
        pytest.importorskip("dask")
    df = _frame(n=8000)
    df.loc[::50, "age"] = np.nan                     # a missing level too
    path = tmp_path / "a.parquet"
    df.to_parquet(path, row_group_size=1500)
    cols = ["region", "device", "age"]
    mem = calcheck.audit(path, segment=cols, trials=200)
    got = calcheck.audit(path, segment=cols, trials=200, engine=engine, batch_rows=1000)
    assert got["search"] == mem["search"]
    assert got["settings"]["ecce"] == "score cells" and got["settings"]["passes"] >= 3
    for x, y in zip(mem["segments"], got["segments"]):
        assert x["name"] == y["name"] and x["n"] == y["n"]
        for k in ("positives", "mean_score", "observed_rate", "ece", "z", "kuiper", "pvalue",
                  "pvalue_adjusted"):
            assert y[k] == pytest.approx(x[k], rel=1e-9, abs=1e-12), (x["name"], k)
        assert y["ecce"] <= x["ecce"] + 1e-12
