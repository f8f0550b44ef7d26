"""``--var`` (VECE, ``ece_qcut``, VCE(v*)) of sampling-weighted rows beyond the rows held, from
passes (calcheck/streaming/weighted_variables.py) on ``stream`` and Dask.

Invariants the passes rely on, each held by a test here:

* every percentile is numpy's weighted ``inverted_cdf`` one, found by a mass search that
  compares cumulative shares as the in-memory function does, so the qcut edges (and the
  LOESS grid's ends) are the in-memory ones bit for bit — with whole-number weights too,
  whose shares land exactly on the cut shares, whatever the ranges the search collects
  (``test_edges_are_the_in_memory_ones_whatever_the_search``);
* a variable with at most ``MAX_GROUPS`` distinct values is aggregated by value, so its LOESS
  curve is the in-memory one (``test_variables_beyond_the_rows_held_are_the_in_memory_ones``);
* beyond that the groups are cut at values (an approximation, recorded), and the curve stays
  within 1e-3 of the in-memory one (``test_many_values_are_grouped_and_say_so``).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calcheck.tuning import Tuning
from tests.conftest import shared_path
from tests.test_weights_stream import TIGHT, _close, _file

COLLECT = Tuning(hold_weighted_rows=100, exact_pava_rows=1000, rank_collect_rows=50)


def _with_variables(tmp_path, n=6000, seed=5):
    path = _file(tmp_path, n=n)
    t = pq.read_table(path)
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 90, n).astype(float)
    age[::37] = np.nan
    x = rng.normal(size=n)
    x[::53] = np.nan
    t = t.append_column("age", pa.array(age)).append_column("x", pa.array(x))
    t = t.append_column("one", pa.array(np.ones(n))).append_column(
        "three", pa.array(rng.integers(1, 4, n).astype(float)))
    pq.write_table(t, path)
    return path


def _both(cli, args, engine="stream", tuning=TIGHT):
    mem = json.loads(cli(args).stdout)
    r = cli([*args, "--engine", engine], tuning=tuning)
    assert r.code == 0, r.stderr
    got = json.loads(r.stdout)
    assert "weighted" in got["settings"] and "held" not in got["settings"]
    return mem, got


def _without_curves(doc):
    return {name: {k: v for k, v in entry.items() if k not in ("curve", "vce_max", "v_star",
                                                               "settings")}
            for name, entry in doc.items()}


@pytest.mark.parametrize("column", ["w", "iw", "cw"])
def test_variables_beyond_the_rows_held_are_the_in_memory_ones(tmp_path, cli, column):
    """A variable of few values (with missing ones, and rows of weight 0): every VECE, bin,
    curve point and setting is the in-memory engine's, on stream and on Dask; the qcut ECE
    over the predicted error too."""
    pytest.importorskip("dask")
    path = _with_variables(tmp_path)
    args = ["score", path, "--weight", column, "--var", "age", "-m", "ece", "--json"]
    for engine in ("stream", "dask"):
        mem, got = _both(cli, args, engine)
        _close(mem["variables"], got["variables"], "variables")
        assert got["settings"]["variable_passes"] == 2       # scan and bins: no search


@pytest.mark.parametrize("column", ["one", "three", "w", "iw"])
def test_edges_are_the_in_memory_ones_whatever_the_search(tmp_path, cli, column):
    """A continuous variable and the predicted error: the qcut edges, bins, VECE, ece_qcut and
    the grid's ends equal memory's whether the search collects early or histograms first —
    with whole-number weights, whose cumulative shares hit the cut shares exactly."""
    path = _with_variables(tmp_path, n=12000)
    args = ["score", path, "--weight", column, "--var", "x", "-m", "ece", "--json"]
    for tuning in (TIGHT, COLLECT):
        mem, got = _both(cli, args, tuning=tuning)
        _close(_without_curves(mem["variables"]), _without_curves(got["variables"]))
        for key in ("v",):
            assert got["variables"]["x"]["curve"][key] == mem["variables"]["x"]["curve"][key]


def test_many_values_are_grouped_and_say_so(tmp_path, cli):
    """Beyond 4,096 distinct values: LOESS groups cut at values (recorded in the settings), the
    curve and VCE(v*) within 1e-3 of memory's pro-rata groups; multiplying the weights by a
    constant changes nothing."""
    path = _with_variables(tmp_path, n=12000)
    args = ["score", path, "--weight", "iw", "--var", "x", "-m", "ece", "--json"]
    mem, got = _both(cli, args)
    m, g = mem["variables"]["x"], got["variables"]["x"]
    assert "grouped by value" in g["settings"]["loess_approximation"]
    for key in ("error_rate", "predicted_error", "error_rate_lo", "predicted_error_hi"):
        assert np.max(np.abs(np.subtract(m["curve"][key], g["curve"][key]))) < 1e-3
    assert g["vce_max"] == pytest.approx(m["vce_max"], abs=1e-3)
    assert g["settings"]["effective_n"] == pytest.approx(m["settings"]["effective_n"], 1e-9)
    t = pq.read_table(path)
    scaled = tmp_path / "scaled.parquet"
    pq.write_table(t.set_column(t.schema.get_field_index("iw"), "iw",
                                pa.array(t["iw"].to_numpy() * 7.5)), scaled)
    r = cli(["score", scaled, *args[2:], "--engine", "stream"], tuning=TIGHT)
    other = json.loads(r.stdout)["variables"]["x"]
    assert other["vece"] == pytest.approx(g["vece"], rel=1e-9)
    assert other["vce_max"] == pytest.approx(g["vce_max"], rel=1e-6)


def test_multiclass_variables_on_the_top_label_view(tmp_path, cli):
    """Multiclass input (no rows held): the top-label view's predicted error and correctness
    along the variable, the in-memory numbers."""
    rng = np.random.default_rng(2)
    n, k = 3000, 4
    p = rng.dirichlet(np.ones(k), n)
    y = np.array([rng.choice(k, p=row) for row in p])
    path = tmp_path / "mc.parquet"
    pq.write_table(pa.table({**{f"prob_{j}": p[:, j] for j in range(k)}, "label": y,
                             "w": rng.gamma(2.0, 1.0, n),
                             "age": rng.integers(18, 60, n).astype(float)}), path)
    mem, got = _both(cli, ["score", path, "--weight", "w", "--var", "age", "-m", "ece",
                           "--json"])
    _close(mem["variables"], got["variables"], "variables")


def test_variable_figure_and_report_from_the_passes(tmp_path, cli):
    path = _with_variables(tmp_path)
    png, html = tmp_path / "v.png", tmp_path / "r.html"
    r = cli(["plot", path, "--weight", "iw", "--kind", "variable", "--var", "x", "-o", png,
             "--engine", "stream"], tuning=TIGHT)
    assert r.code == 0 and png.stat().st_size > 10_000, r.stderr
    r = cli(["report", path, "--weight", "iw", "--var", "age", "-o", html, "--engine",
             "stream"], tuning=TIGHT)
    assert r.code == 0 and "age" in html.read_text(), r.stderr


@pytest.mark.parametrize("values,weight,message", [
    (np.nan, "iw", "every value is missing"),
    ("zero-weight", "w", "no row with a value has a positive weight")])
def test_a_variable_without_weighted_values_is_an_error(tmp_path, cli, values, weight,
                                                        message):
    path = _file(tmp_path)
    t = pq.read_table(path)
    w = t[weight].to_numpy()
    v = np.where(w == 0, 1.0, np.nan) if isinstance(values, str) else \
        np.full(t.num_rows, np.nan)              # (a value only where the weight is 0)
    pq.write_table(t.append_column("v", pa.array(v)), path)
    for engine in ("memory", "stream"):
        r = cli(["score", path, "--weight", weight, "--var", "v", "--engine", engine],
                tuning=TIGHT)
        assert r.code == 2 and message in r.stderr and r.stdout == "", (engine, r.stderr)


@pytest.mark.parametrize("tuning", [TIGHT, Tuning(hold_weighted_rows=100)])
def test_correct_from_on_the_passes(tmp_path, cli, tuning):
    """``--correct-from``: incorrect = 1[that column ≠ label] in the bins pass — the in-memory
    VECE, bins and (few values) curve, beyond the rows held and within them (the held rows
    carry no such column: the passes serve it there too)."""
    path = _with_variables(tmp_path)
    t = pq.read_table(path)
    pq.write_table(t.append_column("pred", pa.array(
        (t["score"].to_numpy() > 0.3).astype(np.int64))), path)
    args = ["score", path, "--weight", "iw", "--var", "age", "--correct-from", "pred", "-m",
            "ece", "--json"]
    mem, got = _both(cli, args, tuning=tuning)
    _close(mem["variables"], got["variables"], "variables")
    own = json.loads(cli(args[:6] + args[8:]).stdout)["variables"]["age"]["vece"]
    assert got["variables"]["age"]["vece"] != pytest.approx(own, rel=1e-3)


def test_census_weights_of_the_adult_data(cli):
    """The VECE paper's Adult test split weighted by its census weight ``fnlwgt`` (a real
    sampling weight), on the passes: the variables of few values (age, years of education,
    hours per week, capital gain) are the in-memory numbers, curves included; the census
    weight as a variable (thousands of values) has the in-memory VECE and bins, its curve
    within 1e-3, and ``--correct-from pred`` takes the same route."""
    path = shared_path("vece", "adult_test.parquet")
    args = ["score", path, "--weight", "fnlwgt", "--var", "age", "--var", "education_num",
            "--var", "hours_per_week", "--var", "capital_gain", "-m", "ece", "--json"]
    mem, got = _both(cli, args)
    _close(mem["variables"], got["variables"], "variables")
    args = ["score", path, "--weight", "fnlwgt", "--var", "fnlwgt", "--correct-from", "pred",
            "-m", "ece", "--json"]
    mem, got = _both(cli, args)
    _close(_without_curves(mem["variables"]), _without_curves(got["variables"]))
    m, g = mem["variables"]["fnlwgt"], got["variables"]["fnlwgt"]
    assert abs(m["vce_max"] - g["vce_max"]) < 1e-3
