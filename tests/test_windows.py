"""score --time/--window: calibration per calendar window, on every engine."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from calcheck.io.windows import parse_window, timestamps


def _month(tmp_path, skip_days=(9, 10), n=12000, seed=0):
    rng = np.random.default_rng(seed)
    t = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(
        rng.integers(0, 31 * 86400, n), unit="s")
    s = rng.random(n)
    y = (rng.random(n) < s).astype(np.int8)
    df = pd.DataFrame({"score": s, "label": y, "ts": t})
    df = df[~df.ts.dt.day.isin([d + 1 for d in skip_days])]
    f = tmp_path / "month.parquet"
    df.to_parquet(f)
    return f, df


def _run(cli, *args):
    r = cli(["score", *map(str, args), "--json"])
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)


def test_one_row_per_day_empty_days_kept(cli, tmp_path):
    f, df = _month(tmp_path)
    d = _run(cli, f, "-m", "ece,brier", "--time", "ts", "--window", "1d")
    w = d["windows"]
    assert len(w) == 31
    assert [x["start"][:10] for x in w] == [f"2026-01-{k:02d}" for k in range(1, 32)]
    assert all(x["start"].endswith("+00:00") for x in w)
    assert w[9]["n"] == 0 and w[10]["n"] == 0 and w[9]["metrics"] == {}
    assert sum(x["n"] for x in w) == len(df)
    day = df[df.ts.dt.day == 3]
    from calcheck import ece

    assert w[2]["metrics"]["ece"]["value"] == pytest.approx(
        ece(day.score.to_numpy(), day.label.to_numpy()).value, abs=1e-12)
    assert "groups" not in d


@pytest.mark.parametrize("engine", ["stream", "dask"])
def test_engines_agree(cli, tmp_path, engine):
    if engine == "dask":
        pytest.importorskip("dask")
    f, _ = _month(tmp_path, n=6000)
    mem = _run(cli, f, "-m", "ece,ace,brier", "--time", "ts", "--window", "7d")
    st = _run(cli, f, "-m", "ece,ace,brier", "--time", "ts", "--window", "7d", "--engine",
              engine)
    assert [w["start"] for w in mem["windows"]] == [w["start"] for w in st["windows"]]
    for a, b in zip(mem["windows"], st["windows"]):
        assert a["n"] == b["n"]
        for m in ("ece", "ace", "brier"):
            assert a["metrics"][m]["value"] == pytest.approx(b["metrics"][m]["value"],
                                                             abs=1e-9)
    # ISO weeks start on Monday
    assert datetime.fromisoformat(mem["windows"][0]["start"]).weekday() == 0


def test_time_zones_and_months():
    w = parse_window("1d", "Europe/Paris")
    ns = timestamps(pa.array(["2026-03-28T12:00:00Z", "2026-03-30T01:00:00+02:00"]), "t", "f")
    span = w.span(int(ns.min()), int(ns.max()))
    starts = [datetime.fromisoformat(w.iso(a)) for a, _ in span]
    assert [s.hour for s in starts] == [0, 0, 0]
    lengths = [(datetime.fromisoformat(w.iso(b)) - datetime.fromisoformat(w.iso(a)))
               for a, b in span]
    assert lengths[1] == timedelta(hours=23)          # the spring-forward day
    m = parse_window("1mo")
    span = m.span(int(ns.min()), int(ns.max()) + 40 * 86400 * 10**9)
    assert [m.iso(a)[:10] for a, _ in span] == ["2026-03-01", "2026-04-01", "2026-05-01"]
    assert parse_window("14d").unit == "week" and parse_window("14d").count == 2


def test_text_and_bad_timestamps(cli, tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("score,label,ts\n0.2,0,2026-01-01T10:00:00Z\n0.7,1,2026-01-02T11:00:00Z\n"
                 "0.4,0,2026-01-02T12:00:00Z\n")
    d = _run(cli, f, "-m", "brier", "--time", "ts", "--window", "1d")
    assert [w["n"] for w in d["windows"]] == [1, 2]
    g = tmp_path / "bad.csv"
    g.write_text("score,label,ts\n0.2,0,2026-01-01\n0.7,1,yesterday\n")
    r = cli(["score", g, "--time", "ts", "--window", "1d"])
    assert r.code == 2 and "row 2" in r.stderr and "ts" in r.stderr
    r = cli(["score", f, "--time", "ts"])
    assert r.code == 2 and "--window" in r.stderr
    r = cli(["score", f, "--time", "ts", "--window", "1x"])
    assert r.code == 2
    r = cli(["score", f, "--time", "ts", "--window", "1d", "--tz", "Mars/Base"])
    assert r.code == 2


def test_table_and_drift_plot(cli, tmp_path):
    pytest.importorskip("matplotlib")
    f, _ = _month(tmp_path, n=3000)
    r = cli(["score", f, "-m", "ece", "--time", "ts", "--window", "1d"])
    assert r.code == 0 and "2026-01-31T00:00:00+00:00" in r.stdout
    out = tmp_path / "drift.png"
    r = cli(["plot", f, "--kind", "drift", "--time", "ts", "--window", "7d", "-m", "ece",
             "-o", out, "--ci-reps", "50"])
    assert r.code == 0, r.stderr
    assert out.stat().st_size > 1000
    r = cli(["plot", f, "--kind", "drift", "-o", out])
    assert r.code == 2
