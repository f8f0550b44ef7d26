"""calcheck compare: matching, verdicts, gates, engines and the paired intervals."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck.paired import delta_norm_interval
from calcheck.uncertainty import NormReplicates


def _pair(tmp_path, n=4000, power=1.5, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    y = (rng.random(n) < s).astype(np.int8)
    ids = np.arange(n) * 7 + 3
    old = pd.DataFrame({"id": ids, "score": s, "label": y,
                        "site": rng.choice(["a", "b"], n)})
    new = pd.DataFrame({"id": ids, "score": s ** power, "label": y})
    po, pn = tmp_path / "old.parquet", tmp_path / "new.parquet"
    old.to_parquet(po)
    new.to_parquet(pn)
    shuffled = tmp_path / "new_shuffled.parquet"
    new.sample(frac=1.0, random_state=1).to_parquet(shuffled)
    both = tmp_path / "both.parquet"
    pd.DataFrame({"a": s, "b": s ** power, "label": y}).to_parquet(both)
    return po, pn, shuffled, both


def _json(cli, *args):
    r = cli(["compare", *map(str, args), "--json"])
    return r, (json.loads(r.stdout) if r.stdout else None)


def test_identical_models_no_difference(cli, tmp_path):
    po, _, _, _ = _pair(tmp_path)
    r, d = _json(cli, po, po, "-m", "ece,ace,brier", "--fail-if-worse", "ece")
    assert r.code == 0, r.stderr
    for e in d["metrics"].values():
        assert e["delta"] == 0.0
        assert e["ci"]["low"] <= 0.0 <= e["ci"]["high"]
        assert e["verdict"] == "no detectable difference"
    assert d["summary"]["verdict"] == "no detectable difference"
    assert d["gates"][0]["failed"] is False


def test_worse_model_fails_the_gate(cli, tmp_path):
    po, pn, _, _ = _pair(tmp_path)
    r, d = _json(cli, po, pn, "-m", "ece,ace,brier,mce", "--fail-if-worse", "ece")
    assert r.code == 1
    e = d["metrics"]["ece"]
    assert e["new"] - e["old"] == pytest.approx(e["delta"])
    assert e["ci"]["low"] > 0 and e["verdict"] == "worse"
    assert set(e["ci"]) >= {"low", "high", "level", "reps", "method"}
    assert d["summary"]["verdict"] == "worse"
    assert d["metrics"]["mce"]["verdict"] is None and d["metrics"]["mce"]["ci"] is None
    r = cli(["compare", po, pn, "-m", "ece", "--fail-if-worse", "ece:0.5"])
    assert r.code == 0, r.stderr
    # the reverse comparison is "better"
    _, d = _json(cli, pn, po, "-m", "ece")
    assert d["metrics"]["ece"]["verdict"] == "better"


def test_id_matching_takes_old_order(cli, tmp_path):
    po, pn, shuffled, both = _pair(tmp_path)
    _, a = _json(cli, po, pn, "-m", "ece,brier,ace", "--ci-reps", "200")
    _, b = _json(cli, po, shuffled, "--id", "id", "-m", "ece,brier,ace", "--ci-reps", "200")
    _, c = _json(cli, both, "--score", "a", "--score", "b", "-m", "ece,brier,ace",
                 "--ci-reps", "200")
    for m in ("ece", "brier", "ace"):
        assert a["metrics"][m]["delta"] == pytest.approx(b["metrics"][m]["delta"], abs=1e-12)
        assert a["metrics"][m]["ci"]["low"] == pytest.approx(b["metrics"][m]["ci"]["low"],
                                                             abs=1e-12)
        assert a["metrics"][m]["delta"] == pytest.approx(c["metrics"][m]["delta"], abs=1e-12)
    assert b["input"]["matched_by"] == "id column id"


def test_mismatches_are_exit_2(cli, tmp_path):
    po, pn, shuffled, _ = _pair(tmp_path, n=500)
    df = pd.read_parquet(shuffled)
    df.iloc[:-3].to_parquet(tmp_path / "short.parquet")
    r = cli(["compare", po, tmp_path / "short.parquet", "--id", "id"])
    assert r.code == 2 and "3 id(s)" in r.stderr
    r = cli(["compare", po, tmp_path / "short.parquet"])
    assert r.code == 2 and "500" in r.stderr and "497" in r.stderr
    bad = pd.read_parquet(pn)
    bad.loc[[5, 9], "label"] = 1 - bad.loc[[5, 9], "label"]
    bad.to_parquet(tmp_path / "bad.parquet")
    r = cli(["compare", po, tmp_path / "bad.parquet", "--id", "id"])
    assert r.code == 2 and "on 2 of 500" in r.stderr and "id 38" in r.stderr
    r = cli(["compare", po, pn, "--fail-if-worse", "mce"])
    assert r.code == 2 and "no interval" in r.stderr
    r = cli(["compare", po])
    assert r.code == 2


@pytest.mark.parametrize("engine", ["stream", "dask"])
def test_engines_agree(cli, tmp_path, engine):
    if engine == "dask":
        pytest.importorskip("dask")
    po, pn, _, both = _pair(tmp_path, n=3000)
    ids = "ece,ece_l2,ace,brier,log_loss,tce"
    _, mem = _json(cli, po, pn, "-m", ids, "--ci-reps", "400")
    _, st = _json(cli, po, pn, "-m", ids, "--ci-reps", "400", "--engine", engine)
    _, one = _json(cli, both, "--score", "a", "--score", "b", "-m", ids, "--ci-reps", "400",
                   "--engine", engine)
    for m in ids.split(","):
        assert st["metrics"][m]["delta"] == pytest.approx(mem["metrics"][m]["delta"], abs=1e-9)
        assert one["metrics"][m]["delta"] == pytest.approx(mem["metrics"][m]["delta"],
                                                           abs=1e-9)
    for m in ("ece", "ace", "brier"):          # Monte Carlo error of 400 replicates
        for k in ("low", "high"):
            assert st["metrics"][m]["ci"][k] == pytest.approx(mem["metrics"][m]["ci"][k],
                                                              abs=0.25 * abs(
                                                                  mem["metrics"][m]["delta"]))
        assert st["metrics"][m]["verdict"] == mem["metrics"][m]["verdict"] == "worse"
    assert st["metrics"]["tce"]["ci"] is None


def test_by_groups_html_and_api(cli, tmp_path):
    pytest.importorskip("matplotlib")
    po, pn, _, _ = _pair(tmp_path, n=2000)
    _, d = _json(cli, po, pn, "-m", "ece,brier", "--by", "site", "--ci-reps", "100")
    assert set(d["groups"]) == {"a", "b"}
    assert sum(g["n"] for g in d["groups"].values()) == 2000
    out = tmp_path / "cmp.html"
    r = cli(["compare", po, pn, "-m", "ece", "-o", out, "--ci-reps", "100"])
    assert r.code == 0, r.stderr
    text = out.read_text()
    assert "<img" in text and "Change per metric" in text and "<style>" in text
    rep = calcheck.compare(str(po), str(pn), metrics=["ece"], ci_reps=100)
    assert rep.to_dict()["metrics"]["ece"]["verdict"] == "worse"


def test_multiclass(cli, tmp_path):
    rng = np.random.default_rng(3)
    n = 3000
    P = rng.dirichlet([1, 1, 1], n)
    y = (P.cumsum(1) < rng.random(n)[:, None]).sum(1)
    Q = P ** 1.6
    Q /= Q.sum(1, keepdims=True)
    df = pd.DataFrame({**{f"p_{j}": P[:, j] for j in range(3)},
                       **{f"q_{j}": Q[:, j] for j in range(3)}, "label": y})
    f = tmp_path / "mc.parquet"
    df.to_parquet(f)
    _, d = _json(cli, f, "--probs", "p_*", "--probs", "q_*", "-m", "ece_top,sce",
                 "--ci-reps", "200")
    assert d["metrics"]["ece_top"]["verdict"] == "worse"
    _, s = _json(cli, f, "--probs", "p_*", "--probs", "q_*", "-m", "ece_top,sce",
                 "--ci-reps", "200", "--engine", "stream")
    assert s["metrics"]["sce"]["delta"] == pytest.approx(d["metrics"]["sce"]["delta"],
                                                         abs=1e-9)


def test_delta_norm_interval_holds_zero_for_identical_replicates():
    rng = np.random.default_rng(0)
    m = rng.normal(0, 0.01, 10)
    a, b = NormReplicates(m, np.full(10, 0.1), 200), NormReplicates(m, np.full(10, 0.1), 200)
    for r in range(200):
        ms = m + rng.normal(0, 0.01, 10)
        a.add(r, ms)
        b.add(r, ms)
    ci = delta_norm_interval(a, b, "l1", level=0.9, seed=0)
    assert ci.low < 0 < ci.high


def test_metrics_without_a_covering_interval_get_no_verdict(cli, tmp_path):
    """TCE, TCE(Q), PDE (biased estimators), MCE (a maximum) and pc are compared without an
    interval and without a verdict, with the reason; a gate on one is refused."""
    po, pn, _, _ = _pair(tmp_path, n=1500)
    r, d = _json(cli, po, pn, "--ci-reps", "50")
    assert r.code == 0, r.stderr
    for m in ("tce", "tce_q", "pde", "mce", "pc"):
        assert d["metrics"][m]["ci"] is None and d["metrics"][m]["verdict"] is None
    assert any("biased estimator" in n for n in d["notes"])
    assert d["metrics"]["ece"]["ci"] is not None
    r, _ = _json(cli, po, pn, "--ci-reps", "20", "--fail-if-worse", "tce_q")
    assert r.code == 2 and "has no interval" in r.stderr


def test_the_table_fits_80_columns_in_a_pipe(tmp_path):
    import os
    import subprocess
    import sys

    po, pn, _, _ = _pair(tmp_path, n=1500)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERM")}
    out = subprocess.run([sys.executable, "-m", "calcheck", "compare", str(po), str(pn),
                          "--id", "id", "--ci-reps", "50"], capture_output=True, text=True,
                         env=env, timeout=300).stdout
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80
    assert "…" not in out and "..." not in out                 # nothing cut
    assert any(line.startswith("| ece ") for line in lines)     # a table, not a list
    for word in ("better", "worse", "difference"):
        assert not re.search(rf"\b{word[:3]}\b(?!{word[3:]})", out)


def test_html_settings_are_readable(tmp_path):
    po, pn, _, _ = _pair(tmp_path, n=800)
    rep = calcheck.compare(po, pn, id="id", metrics=["ece"], ci_reps=20)
    html = rep.html()
    settings = html.split("<h2>Settings</h2>", 1)[1]
    assert "None" not in settings and "{'" not in settings and "True" not in settings
    assert "<table class='settings'>" in settings and "table class='nested'" in settings
