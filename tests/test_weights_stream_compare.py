"""``calcheck compare`` of weighted and counted rows on ``--engine stream``/``dask`` beyond
``Tuning.hold_weighted_rows`` (calcheck/comparison.py ``compare_stream`` with ``passes``):
each model's metrics from its own weighted passes — the in-memory engine's numbers — and the
paired Poisson bootstrap over joint units that carry the rows' weights
(calcheck/paired.py ``PairedUnits``): for counts the expanded files' units, so every number
and interval equals the unweighted streaming compare of the expanded files; for sampling
weights each unit's mass drawn with the mean and variance of Σ c·w, so a constant factor on
the weights changes nothing. NEW's weights are checked against OLD's row by row.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.test_weights_stream import SMALL, TIGHT, _close, _file

METRICS = "ece,ece_l2,ace,brier,log_loss,mce"


def _pair(tmp_path, n=5000, seed=0, factor=1.0):
    """OLD (the beta scores) and NEW (the same rows, scores moved) with the same weights."""
    old = _file(tmp_path, n=n, seed=seed)
    t = pq.read_table(old)
    rng = np.random.default_rng(seed + 1)
    s = np.clip(t["score"].to_numpy() * 1.15 + rng.normal(0, 0.02, n), 0, 1).round(3)
    new = tmp_path / "new.parquet"
    pq.write_table(t.set_column(0, "score", pa.array(s)), new)
    if factor != 1.0:
        for path in (old, new):
            u = pq.read_table(path)
            i = u.schema.get_field_index("iw")
            pq.write_table(u.set_column(i, "iw", pa.array(u["iw"].to_numpy() * factor)), path)
    return old, new


def _compare(cli, argv, tuning=None):
    r = cli(["compare", *argv, "--json"], tuning=tuning) if tuning else \
        cli(["compare", *argv, "--json"])
    assert r.code in (0, 1), r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("kind,column", [("--weight", "iw"), ("--weight", "cw"),
                                         ("--count", "n")])
def test_streamed_compare_of_weighted_rows_is_the_in_memory_one(tmp_path, cli, kind, column):
    old, new = _pair(tmp_path)
    args = [old, new, kind, column, "-m", METRICS]
    mem = _compare(cli, args)
    got = _compare(cli, [*args, "--engine", "stream"], tuning=SMALL)
    assert "weighted" in got["settings"] and "held" not in got["settings"]
    assert got["settings"]["paired_units"]["weights"].startswith(
        "counts" if kind == "--count" else "sampling weights")
    for mid, e in got["metrics"].items():
        m = mem["metrics"][mid]
        for key in ("old", "new", "delta"):
            assert e[key] == pytest.approx(m[key], rel=1e-9, abs=1e-12), (mid, key)
        if m["ci"] is None:
            assert e["ci"] is None, mid
            continue
        width = m["ci"]["high"] - m["ci"]["low"]        # the units' bootstrap against the rows'
        assert abs(e["ci"]["low"] - m["ci"]["low"]) < 0.2 * width, (mid, e["ci"], m["ci"])
        assert abs(e["ci"]["high"] - m["ci"]["high"]) < 0.2 * width, (mid, e["ci"], m["ci"])
    assert got["input"]["old"]["weights"]["column"] == column


def test_streamed_compare_of_counts_is_the_expanded_files(tmp_path, cli):
    """Counts: the joint units of the counted rows are the expanded files' units, so the
    metrics, intervals, p-values and squared-error tests are the unweighted streaming
    compare's of the expanded files."""
    old, new = _pair(tmp_path)
    expanded = []
    for path in (old, new):
        t = pq.read_table(path)
        rows = np.repeat(np.arange(t.num_rows), t["n"].to_numpy().astype(np.int64))
        out = tmp_path / f"x_{path.name}"
        pq.write_table(t.drop(["n"]).take(pa.array(rows)), out)
        expanded.append(out)
    got = _compare(cli, [old, new, "--count", "n", "-m", "ece,ace,brier,log_loss", "--engine",
                         "stream"], tuning=SMALL)
    want = _compare(cli, [*expanded, "-m", "ece,ace,brier,log_loss", "--engine", "stream"])
    _close(want["metrics"], got["metrics"])
    assert want["summary"]["verdict"] == got["summary"]["verdict"]


def test_streamed_compare_is_free_of_the_weights_scale(tmp_path, cli):
    """A constant factor on every weight changes no number, interval or verdict."""
    one = tmp_path / "one"
    ten = tmp_path / "ten"
    one.mkdir()
    ten.mkdir()
    a = _compare(cli, [*_pair(one), "--weight", "iw", "-m", METRICS, "--engine", "stream"],
                 tuning=SMALL)
    b = _compare(cli, [*_pair(ten, factor=7.5), "--weight", "iw", "-m", METRICS, "--engine",
                       "stream"], tuning=SMALL)
    _close(a["metrics"], b["metrics"])


def test_streamed_compare_of_one_file_and_on_dask(tmp_path, cli):
    """Two score columns of one file take the same passes; Dask's numbers are stream's."""
    pytest.importorskip("dask")
    old, new = _pair(tmp_path)
    t = pq.read_table(old).append_column("new", pq.read_table(new)["score"])
    both = tmp_path / "both.parquet"
    pq.write_table(t, both)
    args = ["--weight", "iw", "-m", METRICS, "--seed", "5"]
    two = _compare(cli, [old, new, *args, "--engine", "stream"], tuning=SMALL)
    one = _compare(cli, [both, "--score", "score", "--score", "new", *args, "--engine",
                         "stream"], tuning=SMALL)
    _close(two["metrics"], one["metrics"])
    dask = _compare(cli, [old, new, *args, "--engine", "dask"], tuning=SMALL)
    _close(two["metrics"], dask["metrics"])


def test_streamed_compare_checks_new_weights(tmp_path, cli):
    """NEW's weight column must equal OLD's row by row (the first differing row named), and
    must be there: its metrics come from its own file's passes."""
    old, new = _pair(tmp_path)
    t = pq.read_table(new)
    w = t["iw"].to_numpy().copy()
    w[[40, 41, 99]] += 1.0
    bad = tmp_path / "bad.parquet"
    pq.write_table(t.set_column(t.schema.get_field_index("iw"), "iw", pa.array(w)), bad)
    r = cli(["compare", old, bad, "--weight", "iw", "--engine", "stream"], tuning=SMALL)
    assert r.code == 2 and "'iw'" in r.stderr and "3 of 5,000" in r.stderr, r.stderr
    assert "row 41" in r.stderr and r.stdout == ""
    none = tmp_path / "none.parquet"
    pq.write_table(t.drop(["iw"]), none)
    r = cli(["compare", old, none, "--weight", "iw", "--engine", "stream"], tuning=SMALL)
    assert r.code == 2 and "no such column" in r.stderr and "--engine memory" in r.stderr


def test_streamed_compare_leaves_out_what_the_passes_lack(tmp_path, cli):
    """A metric the passes lack comes from the rows held (within ``Tuning.exact_pava_rows``:
    the in-memory values, without a streamed interval); beyond, naming it is an error naming
    the limit; the default set is what the passes compute."""
    old, new = _pair(tmp_path)
    args = [old, new, "--weight", "iw", "-m", "ece,ici"]
    mem = _compare(cli, args)["metrics"]["ici"]
    got = _compare(cli, [*args, "--engine", "stream"], tuning=SMALL)["metrics"]["ici"]
    assert (got["old"], got["new"]) == pytest.approx((mem["old"], mem["new"]), rel=1e-9)
    r = cli(["compare", *args, "--engine", "stream"], tuning=TIGHT)
    assert r.code == 2 and "-m ici" in r.stderr and "--engine memory" in r.stderr, r.stderr
    got = _compare(cli, [old, new, "--weight", "iw", "--engine", "stream"], tuning=SMALL)
    assert set(got["metrics"]) <= {"ece", "ece_l2", "mce", "ace", "mce_q", "pde", "brier",
                                   "log_loss"}


def test_counted_multiclass_files_beyond_the_budget_take_the_passes(tmp_path, cli):
    """Counted multiclass rows in two files beyond the budget: each model's metrics from its
    passes (the expanded files' numbers, as in memory), the paired units of the top-label
    views carrying the counts — and NEW's counts checked against OLD's."""
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(3), 600)
    q = rng.dirichlet(np.ones(3), 600)
    y = rng.integers(0, 3, 600)
    n = rng.integers(0, 4, 600) * 1.0
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    for path, probs in zip(paths, (p, q)):
        pq.write_table(pa.table({"prob_0": probs[:, 0], "prob_1": probs[:, 1],
                                 "prob_2": probs[:, 2], "label": y, "n": n}), path)
    args = ["compare", *paths, "--count", "n", "-m", "ece_top,ace_top,sce,ace_cw,tace",
            "--json"]
    mem = json.loads(cli(args).stdout)
    r = cli([*args, "--engine", "stream"], tuning=SMALL)
    assert r.code == 0, r.stderr
    got = json.loads(r.stdout)
    for mid, entry in mem["metrics"].items():
        for side in ("old", "new"):
            assert got["metrics"][mid][side] == pytest.approx(entry[side], rel=1e-9), mid
    assert got["metrics"]["ece_top"]["ci"] is not None
    pq.write_table(pa.table({"prob_0": q[:, 0], "prob_1": q[:, 1], "prob_2": q[:, 2],
                             "label": y, "n": n[::-1].copy()}), paths[1])
    r = cli([*args, "--engine", "stream"], tuning=SMALL)
    assert r.code == 2 and "row" in r.stderr and r.stdout == "", r.stderr
