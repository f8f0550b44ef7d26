"""Weighted and aggregated rows on every engine: ``--engine stream`` and ``dask`` hold the
weighted rows in memory within ``Tuning.hold_weighted_rows`` and give the in-memory engine's
numbers (calcheck/engines/held.py); and the two kernels whose speed weighted runs rely on give
the same numbers as their plain forms (the invariants next to each test)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calcheck.tuning import Tuning


def _file(tmp_path, n=4000, seed=0, name="w.parquet"):
    rng = np.random.default_rng(seed)
    s = np.round(rng.beta(1, 6, n), 3)
    y = (rng.random(n) < np.clip(s * 1.2, 0, 1)).astype(np.int8)
    k = rng.integers(0, 5, n).astype(np.float64)
    w = np.where(y == 1, 1.0, 10.0) * rng.choice([1.0, 1.0, 2.5], n)
    path = tmp_path / name
    pq.write_table(pa.table({"score": s, "label": y, "n": k, "w": w,
                             "g": rng.integers(0, 3, n)}), path)
    return path


def _numbers(doc, key):
    return {m: (e.get("value"), e.get("statistic"), e.get("pvalue"))
            for m, e in doc[key].items()}


@pytest.mark.parametrize("weighting", [["--count", "n"], ["--weight", "w"]])
def test_stream_and_dask_give_the_in_memory_weighted_numbers(tmp_path, cli, weighting):
    pytest.importorskip("dask")
    path = _file(tmp_path)
    for cmd, key, extra in (("score", "metrics", ["--ci", "--ci-reps", "40"]),
                            ("test", "tests", ["--method", "all", "--trials", "99"])):
        docs = {}
        for engine in ("memory", "stream", "dask"):
            r = cli([cmd, path, *weighting, "--engine", engine, "--json", "--seed", "4",
                     *extra])
            assert r.code == 0, r.stderr
            docs[engine] = json.loads(r.stdout)
        ref = _numbers(docs["memory"], key)
        for engine in ("stream", "dask"):
            got = _numbers(docs[engine], key)
            assert got and set(got) <= set(ref)          # (planned as that engine plans)
            assert got == {m: ref[m] for m in got}       # to the bit
            assert docs[engine]["input"]["weights"] == docs["memory"]["input"]["weights"]
            held = docs[engine]["settings"]["held"]
            assert held["rows"] == 4000 and "memory" in held["note"]
        if cmd == "score":          # (test: the streaming engines run fewer of "all", so
            #                            the family's adjusted p-values differ)
            for engine in ("stream", "dask"):
                assert docs[engine]["summary"] == docs["memory"]["summary"]
                assert docs[engine]["metrics"]["ece"]["ci"] == docs["memory"]["metrics"]["ece"]["ci"]


def test_weighted_groups_and_compare_on_the_stream_engine(tmp_path, cli):
    path = _file(tmp_path)
    a = json.loads(cli(["score", path, "--count", "n", "--by", "g", "--json"]).stdout)
    b = json.loads(cli(["score", path, "--count", "n", "--by", "g", "--json", "--engine",
                        "stream"]).stdout)
    for g, entry in b["groups"].items():
        for m, e in entry["metrics"].items():
            assert e["value"] == a["groups"][g]["metrics"][m]["value"]
    new = _file(tmp_path, seed=0, name="new.parquet")
    tbl = pq.read_table(new)
    pq.write_table(tbl.set_column(0, "score", pa.array(np.clip(
        tbl["score"].to_numpy() * 0.8, 0, 1))), new)
    c = {e: cli(["compare", path, new, "--weight", "w", "--engine", e, "--json", "--seed", "2",
                 "--ci-reps", "50"]) for e in ("memory", "stream")}
    assert all(r.code == 0 for r in c.values()), c["stream"].stderr
    m, s = (json.loads(c[e].stdout) for e in ("memory", "stream"))
    assert s["settings"]["engine"] == "stream" and "held" in s["settings"]
    for mid, e in s["metrics"].items():
        assert (e["old"], e["new"], e["ci"]) == (m["metrics"][mid]["old"],
                                                 m["metrics"][mid]["new"], m["metrics"][mid]["ci"])


def test_weighted_rows_beyond_the_budget_are_refused_before_reading(tmp_path, cli):
    path = _file(tmp_path)
    small = Tuning(hold_weighted_rows=1000)
    for cmd in (["score", path], ["test", path], ["compare", path, path]):
        r = cli([*cmd, "--count", "n", "--engine", "stream"], tuning=small)
        assert r.code == 2, r.stderr
        assert "4,000 rows" in r.stderr and "1,000" in r.stderr and "--engine memory" in r.stderr
        assert r.stdout == ""
    assert cli(["score", path, "--count", "n"], tuning=small).code == 0    # (memory: no budget)
    assert cli(["score", path, "--engine", "stream"], tuning=small).code == 0  # (unweighted)


def test_logistic_sums_in_blocks_are_the_sums_of_one_block():
    """Invariant of the blocked Cox sums (calcheck.hypotests.classical.logistic_sums): the
    blocks' sums added in numpy's pairwise order are bit for bit the sums of one block holding
    every row, whatever the block size — so Cox's fit, and every report, keep their digits."""
    from calcheck.hypotests.classical import _logistic_block, logistic_sums

    rng = np.random.default_rng(1)
    for n in (1, 9, 4096, 4097, 100_003, 262_147):
        x, y = rng.standard_normal(n) * 3, (rng.random(n) < 0.3).astype(np.float64)
        w = rng.exponential(size=n)
        beta = np.array([0.3, 0.8])
        for weights in (None, w):
            one = _logistic_block(x, y, beta, weights)
            for block in (8, 1000, 1 << 12, 1 << 15):
                assert np.array_equal(logistic_sums(x, y, beta, weights, block=block), one)


@pytest.mark.parametrize("classes", [False, True])
def test_weighted_tcal_null_by_label_coefficients_equals_the_row_by_row_draws(classes):
    """Invariant of weighted T-Cal's null (calcheck.hypotests.weighted._weighted_null): each
    row's terms are linear in its drawn label, so summing the drawn labels times fixed
    coefficients gives the null statistics of the same draws formed row by row (weight, label
    mass, w(s − y*)) — to rounding."""
    from calcheck.hypotests import weighted as wt
    from calcheck.hypotests.tcal_null import level_bounds
    from calcheck.weights import NullDraws, Weights

    rng = np.random.default_rng(3)
    n = 3000
    s = np.sort(rng.beta(1, 4, n))
    y = (rng.random(n) < s).astype(np.float64)
    w = np.where(y == 1, 1.0, 5.0) if classes else rng.exponential(size=n)
    w[:7] = 0.0
    weights = Weights(w, "weight")
    ms = [2, 5, 16]
    bounds = {m: level_bounds(s, m) for m in ms}
    starts = np.unique(np.concatenate(list(bounds.values())))[:-1]
    where = {m: np.searchsorted(starts, bounds[m][:-1]) for m in ms}
    N_run = wt._level_sums(w, starts)
    got = np.empty((len(ms), 300))
    wt._weighted_null(got, s, y, weights, starts, where, ms, N_run, np.random.default_rng(9))
    draws, r = NullDraws.of(weights, s, y), np.random.default_rng(9)
    assert (draws.classes is not None) == classes
    mass, ws = draws(300, r)
    ystar = np.divide(mass, ws, out=np.zeros_like(mass), where=ws > 0)
    A = ws * (s - ystar)
    cum = [wt._running(wt._level_sums(v, starts)) for v in (A, A * A, ws)]
    for i, m in enumerate(ms):
        ref = wt._dpe(*(wt._bin_sums(c, where[m]) for c in cum)) / ws.sum(axis=1)
        np.testing.assert_allclose(got[i], ref, rtol=1e-9, atol=1e-12)


def test_variance_loss_of_the_shared_units_alone_is_the_full_tables():
    """Invariant of MassAxis.variance_loss (the weighted Hosmer–Lemeshow's pro-rata loss): only
    the units a cut falls in have 0 < f < 1; summing those alone, in unit order, gives the
    bits of the units × groups table over every unit (whose other rows are exactly 0)."""
    from calcheck.weights import MassAxis, mass_cuts

    def full(ax, cuts, unit_var):
        lo, hi = ax.M[:-1][:, None], ax.M[1:][:, None]
        size = hi - lo
        over = np.clip(np.minimum(hi, cuts[None, 1:]) - np.maximum(lo, cuts[None, :-1]), 0,
                       None)
        f = np.divide(over, size, out=np.zeros_like(over), where=size > 0)
        return (f * (1.0 - f) * unit_var[:, None]).sum(axis=0)

    rng = np.random.default_rng(0)
    for trial in range(120):
        n = int(rng.integers(1, 2000))
        s = np.sort(np.round(rng.random(n), int(rng.integers(1, 4))))
        y = (rng.random(n) < s).astype(np.float64)
        counted = trial % 2 == 1
        w = rng.integers(0, 6, n).astype(np.float64) if counted else \
            rng.exponential(size=n) * (rng.random(n) < 0.9)
        if w.sum() == 0:
            continue
        for ties in ("share", "order"):
            ax = MassAxis.of(s, y, w, w, ties)
            unit_var = np.diff(ax.V) * ax.scores * (1.0 - ax.scores)
            for groups in (1, 3, 10, int(rng.integers(1, 40))):
                cuts = mass_cuts(ax.total, groups, counted)
                assert np.array_equal(ax.variance_loss(cuts, unit_var), full(ax, cuts, unit_var))
