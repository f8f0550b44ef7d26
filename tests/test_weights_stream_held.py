"""Weighted rows beyond ``Tuning.hold_weighted_rows`` but within ``Tuning.exact_pava_rows``
on ``stream`` and Dask (calcheck/engines/weighted.py): what the weighted passes lack — the
other metrics that take the weights, ``--var`` (VECE, VCE(v*)) and its figure, and for counts
TCE — comes from the in-memory kernels on the rows held (one pass, in the file's order), so
every number is the in-memory engine's; the passes' metrics stay the passes'.  A ``--by``
group gets the held metrics as an error naming why (the whole file's only)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calcheck.streaming.weighted import HeldRowsSpec
from tests.test_weights_stream import SMALL, _close, _file


def _with_variables(tmp_path):
    path = _file(tmp_path)
    t = pq.read_table(path)
    rng = np.random.default_rng(5)
    n = t.num_rows
    age = rng.integers(18, 90, n).astype(float)
    age[::37] = np.nan
    t = t.append_column("age", pa.array(age)).append_column("x", pa.array(rng.normal(size=n)))
    pq.write_table(t, path)
    return path


def _both(cli, args, engine="stream"):
    mem = json.loads(cli(args).stdout)
    r = cli([*args, "--engine", engine], tuning=SMALL)
    assert r.code == 0, r.stderr
    return mem, json.loads(r.stdout)


@pytest.mark.parametrize("kind,column", [("--weight", "iw"), ("--weight", "w"),
                                         ("--count", "n")])
def test_every_metric_of_weighted_rows_held_is_the_in_memory_one(tmp_path, cli, kind, column):
    path = _file(tmp_path)
    mem, got = _both(cli, ["score", path, kind, column, "-m", "all", "--json"])
    assert "weighted" in got["settings"] and "expanded" not in got["settings"]
    assert set(got["metrics"]) == set(mem["metrics"])
    _close(mem["metrics"], got["metrics"], "metrics")
    for key in ("verdict", "basis"):          # ("where": equal-width bins on the passes)
        assert got["summary"][key] == mem["summary"][key]


@pytest.mark.parametrize("kind,column", [("--weight", "w"), ("--weight", "cw"),
                                         ("--count", "n")])
def test_variables_of_weighted_rows_held_are_the_in_memory_ones(tmp_path, cli, kind, column):
    """``--var`` (a variable of few values with missing ones, a continuous one) on the rows
    held, on stream and on Dask: every VECE, bin, curve point and setting."""
    pytest.importorskip("dask")
    path = _with_variables(tmp_path)
    args = ["score", path, kind, column, "--var", "age", "--var", "x", "-m", "ece,ace",
            "--json"]
    for engine in ("stream", "dask"):
        mem, got = _both(cli, args, engine)
        _close(mem["variables"], got["variables"], "variables")
        _close(mem["metrics"], got["metrics"], "metrics")


def test_held_metrics_per_group_say_why(tmp_path, cli):
    path = _with_variables(tmp_path)
    mem, got = _both(cli, ["score", path, "--weight", "iw", "--by", "g", "--var", "age",
                           "-m", "ece,ace,pde,pc", "--json"])
    _close(mem["variables"], got["variables"], "variables")
    _close(mem["metrics"], got["metrics"], "metrics")
    for g, entry in got["groups"].items():
        assert "whole file only" in entry["metrics"]["pc"]["error"]
        for mid in ("ece", "ace", "pde"):
            _close(mem["groups"][g]["metrics"][mid], entry["metrics"][mid], mid)


@pytest.mark.parametrize("kind,column", [("--weight", "iw"), ("--count", "n")])
def test_variable_figure_of_rows_held_is_the_in_memory_one(tmp_path, cli, kind, column):
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    path = _with_variables(tmp_path)
    argv = ["plot", path, kind, column, "--kind", "variable", "--var", "age"]
    png = []
    for engine, tuning in (("memory", None), ("stream", SMALL)):
        r = cli([*argv, "--engine", engine, "-o", tmp_path / f"{engine}.png"], tuning=tuning)
        assert r.code == 0, r.stderr
        png.append((tmp_path / f"{engine}.png").read_bytes())
    assert png[0] == png[1]


def test_rows_are_held_in_the_files_order():
    """Batches merged out of order (threads, Dask) are put back by their first row id, so the
    in-memory kernels — and their Monte Carlo draws — see the file's rows in order."""
    rng = np.random.default_rng(2)
    s, y, w = rng.random(90), rng.integers(0, 2, 90), rng.random(90)
    v = rng.normal(size=(90, 2))
    spec = HeldRowsSpec(("a", "b"))
    parts = [spec.new().update(s[a:a + 30], y[a:a + 30], a, v[a:a + 30], w[a:a + 30])
             for a in (0, 30, 60)]
    whole = parts[2].merge(parts[0]).merge(parts[1]).arrays()
    for got, ref in zip(whole, (s, y, w, v)):
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("kind,column", [("--weight", "iw"), ("--weight", "cw"),
                                         ("--count", "n")])
def test_every_test_of_weighted_rows_held(tmp_path, cli, kind, column):
    """``test --method all``: T-Cal, HL, Spiegelhalter and Cox on the passes; KS, Kuiper and
    SKCE by the in-memory tests on the rows held, read in the whole run's family with T-Cal's
    trials — their statistics and p-values the in-memory engine's."""
    path = _file(tmp_path)
    mem, got = _both(cli, ["test", path, kind, column, "--method", "all", "--json"])
    assert "weighted" in got["settings"] and set(got["tests"]) == set(mem["tests"])
    for t in ("ks", "kuiper", "skce", "hosmer_lemeshow", "spiegelhalter"):
        for key in ("statistic", "pvalue", "pvalue_adjusted"):
            assert got["tests"][t][key] == pytest.approx(mem["tests"][t][key], rel=1e-9), t


def test_held_tests_without_tcal_read_the_in_memory_family(tmp_path, cli):
    """Without T-Cal the in-memory engine counts counted rows' binomial test per value in the
    family (it has not looked at the scores): so do the held tests."""
    path = _file(tmp_path)
    mem, got = _both(cli, ["test", path, "--count", "n", "--method", "hl,ks", "--json"])
    for t in ("ks", "hosmer_lemeshow"):
        for key in ("statistic", "pvalue", "pvalue_adjusted"):
            assert got["tests"][t][key] == pytest.approx(mem["tests"][t][key], rel=1e-9), t


def test_held_metrics_with_intervals_say_why_not(tmp_path, cli):
    """``--ci``: the passes' metrics get their per-unit bootstrap; a held metric none (its
    replicates would need the rows resampled), with a message — per group too."""
    path = _file(tmp_path)
    r = cli(["score", path, "--weight", "iw", "--by", "g", "--ci", "-m", "ece,ace_debiased",
             "--json", "--engine", "stream"], tuning=SMALL)
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert "ci" in doc["metrics"]["ece"] and "ci" not in doc["metrics"]["ace_debiased"]
    assert "no interval for ace_debiased" in r.stderr
    assert "ci" in doc["groups"]["0"]["metrics"]["ece"]
