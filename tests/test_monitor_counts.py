"""``calcheck monitor --count``: aggregated rows (a ``GROUP BY day, score, label`` export)
give the e-process, alarm, confidence sequence and window fits of the expanded rows, and a
state carries on between counted and expanded files; sampling weights are refused, saying
why (docs/weights.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck.hypotests import eprocess as ep
from tests.test_monitor import _stream
from tests.test_weights_stream import _close


def _aggregated(df: pd.DataFrame) -> pd.DataFrame:
    """The rows grouped by (day, score rounded to 0.01, label) with their count ``n`` — and
    a few groups of count 0 — as a warehouse exports them."""
    df = df.assign(score=df.score.round(2).clip(0.01, 0.99),
                   ts=df.ts.dt.floor("D") + pd.Timedelta(hours=12))
    agg = df.groupby(["ts", "score", "label"], as_index=False).size().rename(
        columns={"size": "n"})
    zero = agg.iloc[::17].assign(n=0)
    return pd.concat([agg, zero]).sample(frac=1.0, random_state=3).reset_index(drop=True)


def _expanded(agg: pd.DataFrame) -> pd.DataFrame:
    return agg.loc[agg.index.repeat(agg.n)].drop(columns="n").reset_index(drop=True)


def test_window_sums_of_counts_are_the_expanded_rows():
    rng = np.random.default_rng(2)
    s = rng.uniform(0.01, 0.99, 9000)
    y = (rng.uniform(size=s.size) < s).astype(float)
    k = rng.integers(0, 4, s.size).astype(float)
    a = ep.window_sums(s, y, k)
    rows = np.repeat(np.arange(s.size), k.astype(int))
    b = ep.window_sums(s[rows], y[rows])
    assert (a.rows, a.positives) == (b.rows, b.positives)
    assert a.score_sum == pytest.approx(b.score_sum, rel=1e-12)
    np.testing.assert_allclose(a.log_ratio, b.log_ratio, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(a.offset_loglik, b.offset_loglik, rtol=1e-9)


@pytest.mark.parametrize("offset", [0.0, 0.6])
def test_counted_monitor_is_the_expanded_monitor(offset):
    agg = _aggregated(_stream(days=16, per_day=1500, offset=offset, start=8))
    counted = calcheck.monitor(agg, time="ts", window="1d", count="n")
    expanded = calcheck.monitor(_expanded(agg), time="ts", window="1d")
    _close(expanded["windows"], counted["windows"], "windows")
    _close(expanded["summary"]["alarm"], counted["summary"]["alarm"], "alarm")
    assert counted["summary"]["rows"] == int(agg.n.sum())
    assert counted["input"]["weights"]["kind"] == "count"
    assert (counted["summary"]["alarm"] is None) == (offset == 0.0)


def test_a_state_carries_on_between_counted_and_expanded_files(tmp_path):
    agg = _aggregated(_stream(days=12, per_day=800, offset=0.4, start=6))
    cut = pd.Timestamp("2026-05-07", tz="UTC")
    state = tmp_path / "state.json"
    calcheck.monitor(agg[agg.ts < cut], time="ts", window="1d", count="n", state=state)
    second = calcheck.monitor(_expanded(agg[agg.ts >= cut]), time="ts", window="1d",
                              state=state)
    whole = calcheck.monitor(agg, time="ts", window="1d", count="n")
    _close(whole["windows"], second["windows"], "windows")


def test_sampling_weights_are_refused_saying_why(cli, tmp_path):
    path = tmp_path / "d.parquet"
    _stream(days=3).assign(w=2.5).to_parquet(path)
    r = cli(["monitor", path, "--time", "ts", "--window", "1d", "--weight", "w"])
    assert r.code == 2 and "test martingale" in r.stderr and "--count" in r.stderr
    bad = tmp_path / "bad.parquet"
    _stream(days=3).assign(n=1.5).to_parquet(bad)
    r = cli(["monitor", bad, "--time", "ts", "--window", "1d", "--count", "n"])
    assert r.code == 2 and "'n'" in r.stderr and r.stdout == ""


def test_counted_monitor_figure_is_the_expanded_one(cli, tmp_path):
    pytest.importorskip("matplotlib")
    agg = _aggregated(_stream(days=8, per_day=600, offset=0.5, start=4))
    counted, expanded = tmp_path / "c.parquet", tmp_path / "e.parquet"
    agg.to_parquet(counted)
    _expanded(agg).to_parquet(expanded)
    a, b = tmp_path / "c.png", tmp_path / "e.png"
    args = ["--kind", "monitor", "--time", "ts", "--window", "1d", "-o"]
    assert cli(["plot", counted, *args, a, "--count", "n"]).code == 0
    assert cli(["plot", expanded, *args, b]).code == 0
    assert a.read_bytes() == b.read_bytes()
    r = cli(["plot", counted, *args, tmp_path / "w.png", "--weight", "n"])
    assert r.code == 2 and "takes counts, not weights" in r.stderr
