"""``calcheck audit --count`` (and ``report --audit``): aggregated rows give the expanded rows'
audit — the quantile buckets and score cells (numpy's linear percentiles of the expanded
rows), every segment's sums, walks, p-values (the same seeded null draws) and the verdict —
on the memory engine and, beyond the rows held, on the streaming engines (streamed
expanded); sampling weights are refused, saying why."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from calcheck import segments
from calcheck.tuning import Tuning
from tests.test_weights_stream import _close

SEGMENTS = ["--segment", "region", "--segment", "device", "--segment", "age"]


def _files(tmp_path):
    """A model miscalibrated in one segment, its rows grouped by (segments, score rounded to
    0.01, label) with their count ``n`` (and a few groups of count 0), and the expansion."""
    rng = np.random.default_rng(7)
    n = 30000
    region, device = rng.choice(list("nsew"), n), rng.choice(["ios", "android", "web"], n)
    age = (rng.integers(18, 80, n) // 10 * 10).astype(float)
    s = np.round(rng.beta(2, 5, n), 2).clip(0.01, 0.99)
    eta = np.log(s / (1 - s)) + 0.5 * ((region == "s") & (device == "web"))
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    df = pd.DataFrame({"region": region, "device": device, "age": age, "score": s, "label": y})
    agg = df.groupby(["region", "device", "age", "score", "label"], as_index=False).size()
    agg = agg.rename(columns={"size": "n"})
    agg = pd.concat([agg, agg.iloc[::13].assign(n=0)]).sample(frac=1.0, random_state=1)
    agg = agg.reset_index(drop=True)
    counted, expanded = tmp_path / "agg.parquet", tmp_path / "exp.parquet"
    agg.to_parquet(counted)
    agg.loc[agg.index.repeat(agg.n)].drop(columns="n").to_parquet(expanded)
    return counted, expanded


def _run(cli, args, tuning=None):
    r = cli(args, tuning=tuning) if tuning is not None else cli(args)
    assert r.code in (0, 1), r.stderr
    return json.loads(r.stdout)


def test_percentiles_of_counts_are_the_expanded_rows():
    rng = np.random.default_rng(1)
    v = np.round(rng.normal(size=500), 1)
    k = rng.integers(1, 6, v.size).astype(float)
    at = segments.percents(7)
    assert np.array_equal(segments.percentiles(v, at, k),
                          np.percentile(np.repeat(v, k.astype(int)), at))


def test_counted_audit_is_the_expanded_audit(tmp_path, cli):
    counted, expanded = _files(tmp_path)
    args = [*SEGMENTS, "--json", "--trials", "300"]
    a = _run(cli, ["audit", counted, "--count", "n", *args])
    b = _run(cli, ["audit", expanded, *args])
    for key in ("segments", "summary", "multicalibration", "search"):
        _close(b[key], a[key], key)
    assert a["input"]["weights"]["kind"] == "count" and a["summary"]["verdict"] == \
        "miscalibrated" and a["segments"][0]["name"] == "region = s & device = web"


def test_counted_audit_beyond_the_held_rows_streams_expanded(tmp_path, cli):
    counted, expanded = _files(tmp_path)
    args = [*SEGMENTS, "--json", "--trials", "300", "--engine", "stream"]
    a = _run(cli, ["audit", counted, "--count", "n", *args], Tuning(hold_weighted_rows=100))
    b = _run(cli, ["audit", expanded, *args])
    for key in ("segments", "summary", "multicalibration"):
        _close(b[key], a[key], key)
    held = _run(cli, ["audit", counted, "--count", "n", *args])       # held: as in memory
    memory = _run(cli, ["audit", counted, "--count", "n", *SEGMENTS, "--json", "--trials",
                        "300"])
    _close(memory["segments"], held["segments"], "segments")


def test_report_audit_takes_counts_and_weights_are_refused(tmp_path, cli):
    pytest.importorskip("matplotlib")
    counted, _ = _files(tmp_path)
    out = tmp_path / "r.html"
    r = cli(["report", counted, "--count", "n", "--audit", "region", "--audit", "device",
             "-o", out])
    assert r.code == 0 and "region = s" in out.read_text(), r.stderr
    for argv in (["audit", counted, "--weight", "n", "--segment", "region"],
                 ["report", counted, "--weight", "n", "--audit", "region", "-o",
                  tmp_path / "w.html"]):
        r = cli(argv)
        assert r.code == 2 and "Bernoulli" in r.stderr and "--count" in r.stderr, r.stderr
    assert not (tmp_path / "w.html").exists()
