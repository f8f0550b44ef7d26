"""Sampling weights (``--weight``) streamed beyond ``Tuning.hold_weighted_rows``
(calcheck/engines/weighted.py, calcheck/streaming/weighted.py): every metric and test the
weighted passes compute is the in-memory engine's number, on ``stream`` and on Dask; what they
do not compute is refused before any pass, with a message naming the limit.

Invariants the passes rely on, each held by a test here:

* a cut of the mass axis falls inside (or at the start of) exactly one tie group, which the
  mass search finds whatever the histogram's and the collected ranges' float sums
  (``test_mass_search_finds_the_unit_of_every_cut``);
* no cut falls inside a gap between two cut units, so the coarsened axis gives the in-memory
  kernels' bin tables (``test_streamed_weights_give_the_in_memory_numbers``, bins included);
* a row's place among the units by the 2^16-cell table equals ``searchsorted``
  (``test_slots_agree_with_searchsorted``);
* ``--ci``'s bootstrap units never straddle an equal-width bin edge and come in score order
  (a block meets at most two bins: ``test_bootstrap_units_lie_in_one_bin``), so every
  replicate's equal-width bin sums are exact.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calcheck.tuning import Tuning

SMALL = Tuning(hold_weighted_rows=100)       # every file below is beyond it: streamed
TIGHT = Tuning(hold_weighted_rows=100, exact_pava_rows=1000)  # ... and beyond the rows held


def _file(tmp_path, n=5000, seed=0, name="w.parquet", decimals=3, beta=(2.0, 5.0)):
    rng = np.random.default_rng(seed)
    s = rng.beta(*beta, n)
    s = np.round(s, decimals) if decimals else s
    y = (rng.random(n) < np.clip(s * 1.2, 0, 1)).astype(np.int8)
    path = tmp_path / name
    pq.write_table(pa.table({
        "score": s, "label": y,
        "w": np.where(y == 1, 1.0, 10.0) * rng.choice([1.0, 1.0, 2.5, 0.0], n),   # any
        "cw": np.where(y == 1, 1.0, 10.0),                                         # classes
        "iw": rng.gamma(2.0, 1.5, n),                                              # continuous
        "n": rng.integers(0, 6, n).astype(np.float64),                             # counts
        "g": rng.integers(0, 3, n)}), path)
    return path


def _close(a, b, path=""):
    """``a`` and ``b`` (parsed JSON) equal, floats to 1e-9 relative."""
    if isinstance(a, dict):
        assert set(a) == set(b), (path, set(a) ^ set(b))
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert b == pytest.approx(a, rel=1e-9, abs=1e-12), path
    else:
        assert a == b, path


@pytest.mark.parametrize("column", ["w", "cw", "iw"])
@pytest.mark.parametrize("decimals", [3, 0])
def test_streamed_weights_give_the_in_memory_numbers(tmp_path, cli, column, decimals):
    path = _file(tmp_path, decimals=decimals)
    for cmd, key, extra in (("score", "metrics", ["--bins-table", "all"]),
                            ("test", "tests", ["--method", "hl,spiegelhalter,cox"])):
        args = [cmd, path, "--weight", column, "--json", *extra]
        mem = json.loads(cli(args).stdout)
        r = cli([*args, "--engine", "stream"], tuning=SMALL)
        assert r.code == 0, r.stderr
        got = json.loads(r.stdout)
        assert "weighted" in got["settings"] and "held" not in got["settings"]
        assert set(got[key]) == set(mem[key]) - {"tce", "tce_q", "pc"}
        for mid, entry in got[key].items():
            ref = dict(mem[key][mid])
            if key == "tests":          # the streamed fit's own settings
                for k in ("engine_fit", "passes"):
                    entry["settings"].pop(k, None)
            _close(ref, entry, mid)
        _close(mem["input"], got["input"], "input")


def test_hosmer_lemeshow_small_counts_streamed(tmp_path, cli):
    """Expected counts under 5 on the effective group sizes: in memory the exact null by
    simulation; streamed (the rows not at hand) each group's Binomial on its effective size —
    the same statistic, a p-value near the exact one, and the settings say which."""
    path = _file(tmp_path, beta=(1.0, 6.0))
    args = ["test", path, "--weight", "w", "--method", "hl", "--json", "--trials", "2000"]
    mem = json.loads(cli(args).stdout)["tests"]["hosmer_lemeshow"]
    got = json.loads(cli([*args, "--engine", "stream"], tuning=SMALL).stdout)
    got = got["tests"]["hosmer_lemeshow"]
    assert mem["pvalue_method"] == got["pvalue_method"] == "monte carlo"
    assert got["statistic"] == pytest.approx(mem["statistic"], rel=1e-9)
    assert got["settings"]["null"].startswith("per group") and "exact" in mem["settings"]["null"]
    assert abs(got["pvalue"] - mem["pvalue"]) < 0.02


@pytest.mark.parametrize("engine", ["stream", "dask"])
def test_counts_beyond_the_budget_take_the_weighted_passes_when_they_serve(tmp_path, cli,
                                                                           engine):
    """Counted rows beyond the budget: a run that names only what the weighted passes compute
    reads the file's rows with the counts as weights (the expanded file's numbers, n the
    expanded rows); TCE per group streams them expanded."""
    if engine == "dask":
        pytest.importorskip("dask")
    path = _file(tmp_path)
    for cmd, key, extra in (
            ("score", "metrics", ["-m", "ece,ece_l2,mce,ace,mce_q,pde,brier,log_loss",
                                  "--bins-table", "ace,pde,ece"]),
            ("test", "tests", ["--method", "hl,spiegelhalter,cox"])):
        args = [cmd, path, "--count", "n", "--json", *extra]
        mem = json.loads(cli(args).stdout)
        r = cli([*args, "--engine", engine], tuning=SMALL)
        assert r.code == 0, r.stderr
        got = json.loads(r.stdout)
        assert "weighted" in got["settings"] and "expanded" not in got["settings"]
        assert "expanded file's" in got["settings"]["weighted"]["note"]
        for entry in got[key].values():
            entry.get("settings", {}).pop("engine_fit", None)
            entry.get("settings", {}).pop("passes", None)
        _close(mem[key], got[key], key)
        _close(mem["input"], got["input"], "input")
    r = cli(["score", path, "--count", "n", "--json", "--engine", engine, "--by", "g"],
            tuning=SMALL)                   # TCE per group: not from the rows held
    assert "expanded" in json.loads(r.stdout)["settings"], r.stderr


@pytest.mark.parametrize("engine", ["stream", "dask"])
def test_counted_defaults_beyond_the_budget_hold_the_rows_for_tce(tmp_path, cli, engine):
    """Counted rows beyond the budget, the default metric set (TCE and TCE(Q); pc when named,
    as on the unweighted streaming engines) and the default test (adaptive T-Cal): the
    passes' metrics, TCE and pc by the in-memory kernels on the rows held (up to
    ``Tuning.exact_pava_rows``) — the in-memory engine's report, headline included; beyond
    that budget the rows stream expanded."""
    if engine == "dask":
        pytest.importorskip("dask")
    path = _file(tmp_path)
    for extra in ([], ["--bins-table", "all", "-m", "tce,tce_q,tce_v,tce_u,pc,ece"]):
        args = ["score", path, "--count", "n", "--json", *extra]
        mem = json.loads(cli(args).stdout)
        r = cli([*args, "--engine", engine], tuning=SMALL)
        got = json.loads(r.stdout)
        assert "weighted" in got["settings"] and "expanded" not in got["settings"]
        if not extra:       # the streaming engines' default set: pc only when named
            assert "pc left out of the default set" in r.stderr
            del mem["metrics"]["pc"]
        _close(mem["metrics"], got["metrics"], "metrics")
        _close(mem["input"], got["input"], "input")
        assert got["summary"]["text"] == mem["summary"]["text"]
    test = json.loads(cli(["test", path, "--count", "n", "--json", "--engine", engine],
                          tuning=SMALL).stdout)
    assert "weighted" in test["settings"] and "tcal_adaptive" in test["tests"]
    few = Tuning(hold_weighted_rows=100, exact_pava_rows=1000)
    got = json.loads(cli(["score", path, "--count", "n", "--json", "--engine", engine],
                         tuning=few).stdout)
    assert "expanded" in got["settings"] and "tce" in got["metrics"]


def test_streamed_weights_on_dask(tmp_path, cli):
    pytest.importorskip("dask")
    path = _file(tmp_path, n=3000)
    docs = {}
    for engine in ("memory", "stream", "dask"):
        args = ["test", path, "--weight", "iw", "--method", "hl,spiegelhalter,cox", "--json",
                "--engine", engine]
        r = cli(args, tuning=SMALL)
        assert r.code == 0, r.stderr
        docs[engine] = json.loads(r.stdout)
        docs[engine]["tests"]["cox"]["settings"].pop("engine_fit", None)
        docs[engine]["tests"]["cox"]["settings"].pop("passes", None)
    _close(docs["memory"]["tests"], docs["dask"]["tests"])
    _close(docs["stream"]["tests"], docs["dask"]["tests"])


def test_the_default_test_runs_what_the_passes_have(tmp_path, cli):
    path = _file(tmp_path)
    r = cli(["test", path, "--weight", "cw", "--json", "--engine", "stream"], tuning=SMALL)
    assert r.code in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert set(doc["tests"]) == {"tcal_adaptive"}
    assert "not per row" in r.stderr and "left out" not in r.stderr
    assert doc["input"]["weights"]["null"] == "labels"
    assert doc["summary"]["verdict"] in ("miscalibrated", "no evidence of miscalibration",
                                         "inconclusive")


@pytest.mark.parametrize("extra,tuning", [
    (["-m", "ecce_mad"], TIGHT), (["--ties", "order"], SMALL), (["-m", "ici"], TIGHT),
    (["-m", "ece,ici", "--by", "g"], TIGHT)])
def test_what_the_weighted_passes_do_not_compute_is_refused(tmp_path, cli, extra, tuning):
    """Beyond the passes (and, for the other metrics, beyond the rows held):
    exit 2 before any pass, naming the limit and ``--engine memory``."""
    path = _file(tmp_path)
    r = cli(["score", path, "--weight", "w", "--engine", "stream", *extra], tuning=tuning)
    assert r.code == 2, (r.code, r.stdout)
    assert "--engine memory" in r.stderr and r.stdout == ""


@pytest.mark.parametrize("kind,column", [("--weight", "cw"), ("--weight", "iw"),
                                         ("--count", "n")])
def test_streamed_intervals_are_the_in_memory_bootstraps(tmp_path, cli, kind, column):
    """``--ci`` on the weighted passes: the Poisson bootstrap per score unit (each unit's mass
    scale·Poisson(effective rows); counts: the expanded rows' Poisson(Σk)) gives the
    in-memory row bootstrap's intervals up to Monte Carlo noise, the same on Dask (the same
    units whatever the partitioning), and nothing for the metrics it cannot resample."""
    path = _file(tmp_path, n=20000, decimals=0)
    ids = "ece,ece_l2,ace,brier,log_loss,mce"
    args = ["score", path, kind, column, "-m", ids, "--ci", "--json", "--seed", "3"]
    mem = json.loads(cli(args).stdout)["metrics"]
    r = cli([*args, "--engine", "stream"], tuning=SMALL)
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    got = doc["metrics"]
    assert "weighted" in doc["settings"] and doc["settings"]["ci"]["units"] > 1000
    assert "mce: a maximum over bins" in r.stderr and "ci" not in got["mce"]   # as in memory
    for m in ("ece", "ece_l2", "ace", "brier", "log_loss"):
        a, b = mem[m]["ci"], got[m]["ci"]
        assert got[m]["value"] == pytest.approx(mem[m]["value"], rel=1e-9)
        width = a["high"] - a["low"]
        assert abs(b["low"] - a["low"]) < 0.2 * width, (m, a, b)
        assert abs(b["high"] - a["high"]) < 0.2 * width, (m, a, b)
    if kind == "--weight":                  # a constant factor on the weights changes nothing
        t = pq.read_table(path)
        scaled = tmp_path / "scaled.parquet"
        pq.write_table(t.set_column(t.schema.get_field_index(column), column,
                                    pa.array(t[column].to_numpy() * 7.25)), scaled)
        again = json.loads(cli(["score", scaled, *args[2:], "--engine", "stream"],
                               tuning=SMALL).stdout)["metrics"]
        for m in ("ece", "ace", "brier"):
            _close(got[m]["ci"], again[m]["ci"])
    if kind == "--count":
        pytest.importorskip("dask")
        r = cli([*args, "--engine", "dask"], tuning=SMALL)
        assert r.code == 0, r.stderr
        _close(got, json.loads(r.stdout)["metrics"])


def test_streamed_tolerance_reads_the_streamed_interval(tmp_path, cli):
    path = _file(tmp_path, n=20000)
    args = ["score", path, "--weight", "iw", "-m", "ece,ace", "--tolerance", "ece:0.5",
            "--json"]
    mem = json.loads(cli(args).stdout)["summary"]["tolerance"]
    r = cli([*args, "--engine", "stream"], tuning=SMALL)
    assert r.code in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert "weighted" in doc["settings"]
    got = doc["summary"]["tolerance"]
    assert got["verdict"] == mem["verdict"] == "within tolerance"
    assert abs(got["high"] - mem["high"]) < 0.2 * (mem["high"] - mem["low"])


def _grouped_file(tmp_path, n=12000, seed=4):
    """Rows in four groups — one all weight zero — and missing group values, over five
    days."""
    rng = np.random.default_rng(seed)
    s = np.round(rng.beta(2.0, 5.0, n), 3)
    y = (rng.random(n) < np.clip(s * 1.2, 0, 1)).astype(np.int8)
    g = rng.integers(0, 4, n).astype(str).astype(object)
    g[rng.random(n) < 0.02] = None
    iw = rng.gamma(2.0, 1.5, n)
    iw[g == "3"] = 0.0
    ts = np.datetime64("2026-01-01") + rng.integers(0, 5 * 86400, n).astype("timedelta64[s]")
    path = tmp_path / "g.parquet"
    pq.write_table(pa.table({"score": s, "label": y, "iw": iw,
                             "n": rng.integers(0, 6, n).astype(np.float64),
                             "g": pa.array(list(g), pa.string()), "ts": ts}), path)
    return path


@pytest.mark.parametrize("kind,column", [("--weight", "iw"), ("--count", "n")])
@pytest.mark.parametrize("grouping", [["--by", "g"], ["--time", "ts", "--window", "1d"]])
def test_streamed_groups_and_windows_give_the_in_memory_numbers(tmp_path, cli, kind, column,
                                                                grouping):
    """``score --by`` and ``--time … --window`` on the weighted passes: every group's (window's)
    metrics and verdict are the in-memory engine's — a group whose weights are all zero
    reports why, as in memory — from one grouped first pass and the groups' passes in
    lockstep (the passes of one set of rows, not one per group)."""
    path = _grouped_file(tmp_path)
    args = ["score", path, kind, column, "-m", "ece,ece_l2,mce,ace,mce_q,pde,brier,log_loss",
            "--json", *grouping]
    mem = json.loads(cli(args).stdout)
    r = cli([*args, "--engine", "stream"], tuning=SMALL)
    assert r.code == 0, r.stderr
    got = json.loads(r.stdout)
    assert "weighted" in got["settings"] and "expanded" not in got["settings"]
    key = "groups" if grouping[0] == "--by" else "windows"
    _close(mem[key], got[key], key)
    _close(mem["metrics"], got["metrics"], "metrics")
    if key == "groups" and kind == "--weight":
        assert "weight 0" in got["groups"]["3"]["metrics"]["ece"]["error"]
    # the overall passes and the groups' (the most search rounds of any group), not per group
    assert got["settings"]["passes"] <= 2 * 6, got["settings"]["passes"]


def test_streamed_groups_with_intervals_and_on_dask(tmp_path, cli):
    pytest.importorskip("dask")
    path = _grouped_file(tmp_path)
    args = ["score", path, "--weight", "iw", "-m", "ece,ace,brier", "--ci", "--json",
            "--by", "g", "--seed", "2"]
    mem = json.loads(cli(args).stdout)["groups"]
    docs = []
    for engine in ("stream", "dask"):
        r = cli([*args, "--engine", engine], tuning=SMALL)
        assert r.code == 0, r.stderr
        docs.append(json.loads(r.stdout)["groups"])
    _close(docs[0], docs[1])                      # the same units, draws and intervals
    for g in ("0", "1", "2"):
        for m in ("ece", "ace", "brier"):
            a, b = mem[g]["metrics"][m]["ci"], docs[0][g]["metrics"][m]["ci"]
            width = a["high"] - a["low"]
            assert abs(b["low"] - a["low"]) < 0.2 * width and \
                abs(b["high"] - a["high"]) < 0.2 * width, (g, m, a, b)


def test_streamed_cox_takes_few_newton_passes(tmp_path, cli):
    """At the optimum a Newton step whose log-likelihood change is rounding (ℓ ≈ −17,000 here)
    is accepted, not halved pass after pass (it took 21 passes; the fit is the in-memory
    engine's)."""
    path = _grouped_file(tmp_path)
    args = ["test", path, "--count", "n", "--method", "cox", "--json"]
    mem = json.loads(cli(args).stdout)["tests"]["cox"]
    got = json.loads(cli([*args, "--engine", "stream"], tuning=SMALL).stdout)["tests"]["cox"]
    assert got["settings"]["passes"] <= 6, got["settings"]
    assert got["statistic"] == pytest.approx(mem["statistic"], rel=1e-9)


@pytest.mark.parametrize("kind,column", [("--weight", "iw"), ("--weight", "cw"),
                                         ("--count", "n")])
def test_streamed_tcal_is_the_in_memory_statistic(tmp_path, cli, kind, column):
    """T-Cal on the weighted passes: a fixed m's statistic is the in-memory engine's (the
    units never straddle a bin), its p-value the same up to Monte Carlo noise (the units'
    null); adaptive T-Cal tests the dyadic levels, each the in-memory statistic at that m."""
    path = _file(tmp_path, n=8000, decimals=0, beta=(2.0, 2.0))
    t = pq.read_table(path)
    rng = np.random.default_rng(7)                    # calibrated labels: p-values spread
    s = t["score"].to_numpy()
    y = (rng.random(s.shape[0]) < s).astype(np.int8)
    calibrated = tmp_path / "cal.parquet"
    pq.write_table(t.set_column(t.schema.get_field_index("label"), "label", pa.array(y)),
                   calibrated)
    for m in ("10", "16"):
        args = ["test", calibrated, kind, column, "--method", "tcal", "--bins", m, "--json",
                "--trials", "2000"]
        mem = json.loads(cli(args).stdout)["tests"]["tcal"]
        r = cli([*args, "--engine", "stream"], tuning=SMALL)
        assert r.code in (0, 1), r.stderr
        got = json.loads(r.stdout)["tests"]["tcal"]
        assert got["statistic"] == pytest.approx(mem["statistic"], rel=1e-9, abs=1e-15)
        assert abs(got["pvalue"] - mem["pvalue"]) < 0.05, (m, got["pvalue"], mem["pvalue"])
        assert abs(got["settings"]["null_variance_excess"]) < 1e-3
    r = cli(["test", calibrated, kind, column, "--method", "tcal", "--json", "--engine",
             "stream"], tuning=SMALL)
    got = json.loads(r.stdout)["tests"]["tcal_adaptive"]
    if kind == "--count":                     # the same units and draws on Dask
        pytest.importorskip("dask")
        r = cli(["test", calibrated, kind, column, "--method", "tcal", "--json", "--engine",
                 "dask"], tuning=SMALL)
        _close(got, json.loads(r.stdout)["tests"]["tcal_adaptive"])
    assert got["settings"]["levels"].startswith("2^1..2^")
    for level in got["levels"]:
        assert level["m"] & (level["m"] - 1) == 0                   # a power of two
        mem = json.loads(cli(["test", calibrated, kind, column, "--method", "tcal", "--bins",
                              str(level["m"]), "--json", "--trials", "100"]).stdout)
        assert level["dpe"] == pytest.approx(mem["tests"]["tcal"]["statistic"], rel=1e-9,
                                             abs=1e-15), level


def test_too_many_streamed_groups_is_an_error(tmp_path, cli):
    rng = np.random.default_rng(1)
    n = 3000
    path = tmp_path / "many.parquet"
    pq.write_table(pa.table({"score": rng.random(n), "label": rng.integers(0, 2, n),
                             "w": rng.random(n), "g": rng.integers(0, 100, n)}), path)
    r = cli(["score", path, "--weight", "w", "-m", "ece", "--by", "g", "--engine", "stream"],
            tuning=SMALL)
    assert r.code == 2 and "more than 64 groups" in r.stderr and r.stdout == "", r.stderr


def test_bootstrap_units_lie_in_one_bin():
    from calcheck.binning import uniform_assign
    from calcheck.streaming.weighted import FirstSpec, unit_bits

    rng = np.random.default_rng(5)
    for bins in (1, 7, 10, 15, 100, 1000, 5000):
        edges = np.arange(bins + 1) / bins
        s = np.concatenate([rng.random(20000), edges, np.nextafter(edges, 0.0).clip(0, 1),
                            np.nextafter(edges, 1.0).clip(0, 1), [0.0, 1.0, 0.3]])
        y = rng.integers(0, 2, s.shape[0])
        state = FirstSpec((bins,), units=bins).new().update(s, y, 0, np.ones(s.shape[0]))
        u = state.unit_table()
        assert u["mass"].sum() == s.shape[0]
        ids = uniform_assign(s, bins)
        # each unit's rows: one bin, the unit's; units in score order (blocks, then bins)
        assert np.all(np.diff(u["block"]) >= 0) and np.all(np.diff(u["bin"]) >= 0)
        per_bin = np.bincount(ids, minlength=bins)
        assert np.array_equal(np.bincount(u["bin"], weights=u["mass"], minlength=bins),
                              per_bin)
        score = np.bincount(ids, weights=s, minlength=bins)
        assert np.allclose(np.bincount(u["bin"], weights=u["score"], minlength=bins), score)
        assert (1 << unit_bits(bins)) >= 2 * bins


@pytest.mark.parametrize("argv", [["test", "--method", "ks"],
                                  ["test", "--method", "kuiper", "--by", "g"],
                                  ["plot", "--kind", "corp", "-o", "OUT.png"],
                                  ["report", "--ties", "order", "-o", "OUT.html"]])
def test_tests_and_figures_without_weighted_passes_are_refused(tmp_path, cli, argv):
    path = _file(tmp_path)
    out = tmp_path / "OUT"
    argv = [str(out) + a[3:] if a.startswith("OUT") else a for a in argv]
    r = cli([argv[0], path, *argv[1:], "--weight", "w", "--engine", "stream"], tuning=TIGHT)
    assert r.code == 2 and "--engine memory" in r.stderr, r.stderr
    assert not list(tmp_path.glob("OUT*"))                   # nothing half written


def test_streamed_weights_with_a_where_filter(tmp_path, cli):
    path = _file(tmp_path)
    args = ["score", path, "--weight", "iw", "--json", "--where", "g >= 1", "-m", "ace,pde,ece"]
    mem = json.loads(cli(args).stdout)
    got = json.loads(cli([*args, "--engine", "stream"], tuning=SMALL).stdout)
    _close(mem["metrics"], got["metrics"])
    _close(mem["input"], got["input"])
    r = cli(["score", path, "--weight", "iw", "--where", "g > 5", "--engine", "stream"],
            tuning=SMALL)
    assert r.code == 2 and "no rows" in r.stderr, r.stderr


def test_bad_and_zero_weights_streamed(tmp_path, cli):
    path = _file(tmp_path)
    t = pq.read_table(path)
    w = t["w"].to_numpy().copy()
    w[1234] = -1.0
    bad = tmp_path / "bad.parquet"
    pq.write_table(t.set_column(t.schema.get_field_index("w"), "w", pa.array(w)), bad)
    r = cli(["score", bad, "--weight", "w", "--engine", "stream"], tuning=SMALL)
    assert r.code == 2 and "'w'" in r.stderr and "1235" in r.stderr, r.stderr
    dropped = json.loads(cli(["score", bad, "--weight", "w", "--engine", "stream", "--json",
                              "--drop-invalid"], tuning=SMALL).stdout)
    mem = json.loads(cli(["score", bad, "--weight", "w", "--json", "--drop-invalid"]).stdout)
    assert dropped["input"]["dropped_by_reason"] == {"invalid_weight": 1}
    _close(mem["input"], dropped["input"])
    assert dropped["metrics"]["ace"]["value"] == pytest.approx(mem["metrics"]["ace"]["value"],
                                                               rel=1e-12)
    zero = tmp_path / "zero.parquet"
    pq.write_table(t.set_column(t.schema.get_field_index("w"), "w",
                                pa.array(np.zeros(len(w)))), zero)
    r = cli(["score", zero, "--weight", "w", "--engine", "stream"], tuning=SMALL)
    assert r.code == 2 and "zero" in r.stderr


def test_mass_search_finds_the_unit_of_every_cut():
    from calcheck.streaming.ranks import key_value
    from calcheck.streaming.weighted import FirstSpec, MassPassSpec, MassSearch
    from tests.arrays import ArraySource

    rng = np.random.default_rng(3)
    for trial in range(6):
        n = int(rng.integers(50, 4000))
        s = np.round(rng.random(n), int(rng.integers(1, 5)))
        w = rng.choice([0.0, 1.0, 3.0, 0.25], n) if trial % 2 else rng.gamma(1.0, 1.0, n)
        y = (rng.random(n) < s).astype(np.int8)
        src = ArraySource(s, y, (n // 3, n // 2), w,
                          tuning=Tuning(rank_collect_rows=64 * (trial + 1)))
        first, _ = src.run(FirstSpec((10,)))
        total = float(w.sum())
        cuts = list(np.linspace(0, total, 12)[1:-1])
        search = MassSearch(cuts, src.tuning)
        search.first(first.hist_mass, first.hist_rows)
        while not search.done:
            search.absorb(src.run(MassPassSpec(search.ranges()))[0])
        order = np.argsort(s, kind="stable")
        vals, starts = np.unique(s[order], return_index=True)
        mass = np.add.reduceat(w[order], starts)
        below = np.concatenate(([0.0], np.cumsum(mass)))
        for c in search.cuts:
            assert c.key is not None
            u = int(np.searchsorted(vals, key_value(c.key)))
            assert vals[u] == key_value(c.key) and mass[u] > 0
            assert below[u] - 1e-9 * total <= c.mass <= below[u + 1] + 1e-9 * total


def test_slots_agree_with_searchsorted():
    from calcheck.streaming.weighted import slot_table, slots

    rng = np.random.default_rng(1)
    for _ in range(20):
        units = np.unique(np.round(rng.random(int(rng.integers(1, 30))), 4))
        s = np.concatenate([rng.random(2000), units, [0.0, 1.0], np.nextafter(units, 2)])
        got = slots(s, units, slot_table(units))
        k = np.searchsorted(units, s, side="left")
        at = (k < units.shape[0]) & (units[np.minimum(k, units.shape[0] - 1)] == s)
        assert np.array_equal(got, np.where(at, units.shape[0] + 1 + k, k))


@pytest.mark.parametrize("kind,column", [("--weight", "iw"), ("--count", "n")])
def test_streamed_debiased_eces_are_the_in_memory_ones(tmp_path, cli, kind, column):
    """The debiased ECE and ECE-l2 from one pass of their bins' residual sums (Σw²-terms for
    sampling weights): the in-memory kernel's values, with no row held (beyond
    ``Tuning.exact_pava_rows`` too), per ``--by`` group as well."""
    path = _grouped_file(tmp_path)
    args = ["score", path, kind, column, "-m", "ece_debiased,ece_l2_debiased,ece", "--json",
            "--by", "g"]
    mem = json.loads(cli(args).stdout)
    r = cli([*args, "--engine", "stream"], tuning=TIGHT)
    assert r.code == 0, r.stderr
    got = json.loads(r.stdout)
    assert "weighted" in got["settings"] and "held" not in got["settings"]
    _close(mem["metrics"], got["metrics"], "metrics")
    _close(mem["groups"], got["groups"], "groups")


@pytest.mark.parametrize("kind,column", [("--weight", "iw"), ("--count", "n")])
def test_streamed_smooth_ece_is_the_in_memory_one(tmp_path, cli, kind, column):
    """The smooth ECE from T-Cal's unit pass — the 2^16 score cells' weighted sums the
    in-memory kernel sums (sampling weights scaled to the rows of positive weight) — at any
    size (beyond the rows held too), at its fixed point or a given bandwidth, per group."""
    path = _grouped_file(tmp_path)
    for extra in ([], ["--smece-sigma", "0.05"], ["--by", "g"]):
        args = ["score", path, kind, column, "-m", "smece,ece", "--json", *extra]
        mem = json.loads(cli(args).stdout)
        r = cli([*args, "--engine", "stream"], tuning=TIGHT)
        assert r.code == 0, r.stderr
        got = json.loads(r.stdout)
        assert "weighted" in got["settings"] and "held" not in got["settings"]
        for key in ("metrics", "groups"):
            if key in mem:
                _close(mem[key], got[key], key)


def test_metrics_all_names_why_each_is_left_out(tmp_path, cli):
    """``-m all`` on the passes: the metrics the weights refuse are left out with the
    weights' reason (as in memory), not as needing ``--engine memory``."""
    path = _file(tmp_path)
    r = cli(["score", path, "--weight", "w", "-m", "all", "--engine", "stream"], tuning=TIGHT)
    assert r.code == 0, r.stderr
    memory_line = next(ln for ln in r.stderr.splitlines() if "--engine memory" in ln)
    assert "tce" not in memory_line.split(";")[1] and "ici" in memory_line
    assert "--weight: tce, tce_q" in r.stderr and "left out" in r.stderr
