"""calcheck monitor: the e-process against its definition, a state that continues a run
exactly, the alarm, the offset's confidence sequence, the command line and the figure."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck.hypotests import eprocess as ep


def _stream(days: int = 20, per_day: int = 400, offset: float = 0.0, start: int = 10,
            seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 5, days * per_day)
    day = np.repeat(np.arange(days), per_day)
    eta = np.log(s) - np.log1p(-s) + offset * (day >= start)
    y = (rng.uniform(size=s.size) < 1 / (1 + np.exp(-eta))).astype(int)
    ts = pd.Timestamp("2026-05-01", tz="UTC") + pd.to_timedelta(
        day * 86400 + rng.integers(0, 86400, s.size), unit="s")
    return pd.DataFrame({"ts": ts, "score": s, "label": y})


def test_window_sums_are_the_log_likelihood_ratios():
    rng = np.random.default_rng(0)
    s = rng.uniform(0.01, 0.99, 3000)
    y = (rng.uniform(size=s.size) < s).astype(float)
    w = ep.window_sums(s, y)
    eta = np.log(s / (1 - s))
    for k in (0, 17, len(ep.ALTERNATIVES) - 1):
        a, b = ep.ALTERNATIVES[k]
        p1 = 1 / (1 + np.exp(-(a + b * eta)))
        want = np.sum(y * np.log(p1 / s) + (1 - y) * np.log((1 - p1) / (1 - s)))
        assert w.log_ratio[k] == pytest.approx(want, rel=1e-9)
    j = 90                                                  # θ = +0.25
    p = 1 / (1 + np.exp(-(eta + ep.OFFSETS[j])))
    assert w.offset_loglik[j] == pytest.approx(np.sum(y * np.log(p) + (1 - y) * np.log(1 - p)),
                                               rel=1e-9)
    assert ep.log_mixture(w.log_ratio) == pytest.approx(
        math.log(np.mean(np.exp(w.log_ratio))), rel=1e-9)


def test_plugin_bets_only_on_what_led_before():
    lead = np.zeros(len(ep.ALTERNATIVES))
    lead[5] = 3.0
    assert ep.plugin_choice([]) is None
    assert ep.plugin_choice([np.full(len(ep.ALTERNATIVES), -1.0)]) is None
    assert ep.plugin_choice([lead, np.zeros_like(lead)]) == 5
    assert ep.plugin_step(lead, None) == 0.0
    assert ep.plugin_step(lead, 5) == pytest.approx(math.log(0.5 + 0.5 * math.exp(3.0)))


def test_a_state_continues_the_run_exactly(tmp_path):
    df = _stream(offset=0.5)
    cut = pd.Timestamp("2026-05-11", tz="UTC")
    state = tmp_path / "state.json"
    first = calcheck.monitor(df[df.ts < cut], time="ts", window="1d", state=state)
    assert first["summary"]["windows"] == 10
    second = calcheck.monitor(df[df.ts >= cut], time="ts", window="1d", state=state)
    whole = calcheck.monitor(df, time="ts", window="1d")
    assert second["windows"] == whole["windows"]            # every e-value, bit for bit
    assert second["summary"]["new_windows"] == 10
    assert second["summary"]["alarm"] == whole["summary"]["alarm"]
    saved = json.loads(state.read_text())
    assert saved["format"] == "calcheck-monitor-state" and saved["version"] == 1
    assert saved["last_window"] == whole["windows"][-1]["start"]


def test_state_refusals_leave_the_state_alone(cli, tmp_path):
    df = _stream(days=6)
    path = tmp_path / "d.parquet"
    df.to_parquet(path)
    state = tmp_path / "s.json"
    ok = cli(["monitor", path, "--time", "ts", "--window", "1d", "--state", state])
    assert ok.code == 0, ok.stderr
    before = state.read_text()
    again = cli(["monitor", path, "--time", "ts", "--window", "1d", "--state", state])
    assert again.code == 2 and "already in the state" in again.stderr
    other = cli(["monitor", path, "--time", "ts", "--window", "1d", "--state", state,
                 "--alpha", "0.01"])
    assert other.code == 2 and "alpha 0.05 (now 0.01)" in other.stderr
    hours = cli(["monitor", path, "--time", "ts", "--window", "6h", "--state", state])
    assert hours.code == 2 and "window" in hours.stderr
    assert state.read_text() == before
    (tmp_path / "bad.json").write_text("{not json")
    bad = cli(["monitor", path, "--time", "ts", "--window", "1d", "--state",
               tmp_path / "bad.json"])
    assert bad.code == 2 and "not a readable monitor state" in bad.stderr


def test_drift_raises_the_alarm_and_keeps_it(cli, tmp_path):
    path = tmp_path / "d.parquet"
    _stream(days=16, per_day=1000, offset=0.6, start=8).to_parquet(path)
    r = cli(["monitor", path, "--time", "ts", "--window", "1d", "--json", "--fail-on-alarm"])
    assert r.code == 1
    rep = json.loads(r.stdout)
    flags = [w["alarm"] for w in rep["windows"]]
    first = flags.index(True)
    assert 8 <= first <= 11 and all(flags[first:])
    assert rep["summary"]["alarm"]["window"] == rep["windows"][first]["start"]
    assert rep["summary"]["text"].startswith("ALARM since 2026-05-")
    assert "alarm since" in r.stderr
    assert rep["windows"][-1]["calibration_intercept"] == pytest.approx(0.6, abs=0.15)


def test_calibrated_stream_stays_quiet_and_the_sequence_covers():
    rep = calcheck.monitor(_stream(days=20, seed=7), time="ts", window="1d")
    assert rep["summary"]["alarm"] is None and rep.alarm is None
    for w in rep["windows"]:
        cs = w["offset_cs"]
        assert not cs["empty"] and w["evalue"] < 20
        assert (cs["low"] is None or cs["low"] <= 0) and (cs["high"] is None or cs["high"] >= 0)
    last = rep["windows"][-1]["offset_cs"]
    assert last["high"] - last["low"] < 0.3


def test_empty_windows_are_listed(tmp_path):
    df = _stream(days=5)
    df = df[df.ts.dt.day != 3]
    rep = calcheck.monitor(df, time="ts", window="1d")
    assert [w["n"] for w in rep["windows"]][2] == 0
    assert rep["windows"][2]["evalue"] == rep["windows"][1]["evalue"]


def test_outputs_and_figure(cli, tmp_path):
    path = tmp_path / "d.parquet"
    _stream(days=5).to_parquet(path)
    base = ["monitor", path, "--time", "ts", "--window", "1d"]
    table = cli(base)
    assert table.code == 0 and "no alarm after 5 windows" in table.stdout
    csv = cli([*base, "-f", "csv"])
    assert csv.stdout.splitlines()[0].startswith("start,end,n,positives")
    md = cli([*base, "-f", "md"])
    assert "| window | n |" in md.stdout
    pytest.importorskip("matplotlib")
    png = tmp_path / "m.png"
    r = cli(["plot", path, "--kind", "monitor", "--time", "ts", "--window", "1d", "-o", png])
    assert r.code == 0 and png.stat().st_size > 1000
    missing = cli(["monitor", path, "--window", "1d"])
    assert missing.code == 2 and "--time" in missing.stderr


@pytest.mark.parametrize("theta", [0.0125, -0.0375, 0.3137])
def test_the_offset_confidence_sequence_covers_offsets_between_grid_points(theta):
    """Off the grid's points (every real offset is), the confidence sequence still covers a
    constant offset: at 4·10^5 rows, where the likelihood separates neighbouring grid points
    (0.025 apart) and a grid-only set would exclude both neighbours of θ, the concavity bound
    keeps θ — and the set stays narrow (a few grid steps)."""
    from calcheck.hypotests import eprocess as ep

    rng = np.random.default_rng(11)
    n = 400_000
    s = rng.beta(2, 5, n)
    eta = np.log(s) - np.log1p(-s)
    y = (rng.random(n) < 1 / (1 + np.exp(-(eta + theta)))).astype(np.float64)
    sums = ep.window_sums(s, y)
    empty, low, high = ep.confidence_sequence(sums.offset_loglik, 0.05)
    assert not empty and low < theta < high
    assert high - low < 0.1


def test_window_sums_are_the_per_row_log_likelihoods():
    """The window's sums, computed from Σy, Σyη and one softplus per alternative (two threads,
    chunk by chunk), equal the per-row log likelihood ratios summed directly."""
    from calcheck.hypotests import eprocess as ep
    from calcheck.hypotests.classical import cox_logit

    rng = np.random.default_rng(5)
    for n in (1, 7, 16_384, 40_001):
        s = rng.beta(2, 5, n)
        s[: min(n, 2)] = [0.0, 1.0][: min(n, 2)]
        y = (rng.random(n) < s).astype(np.float64)
        got = ep.window_sums(s, y)
        eta, yy = cox_logit(s)[None, :], y[None, :]
        a, b = ep.ALTERNATIVES[:, :1], ep.ALTERNATIVES[:, 1:]
        null = yy * eta - np.logaddexp(0.0, eta)
        alt = a + b * eta
        want = np.sum(yy * alt - np.logaddexp(0.0, alt) - null, axis=1)
        shifted = eta + ep.OFFSETS[:, None]
        offsets = np.sum(yy * shifted - np.logaddexp(0.0, shifted), axis=1)
        np.testing.assert_allclose(got.log_ratio, want, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(got.offset_loglik, offsets, rtol=1e-12, atol=1e-9)
