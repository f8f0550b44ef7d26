"""Weighted and aggregated rows on every engine: ``--engine stream`` and ``dask`` hold the
weighted rows in memory within ``Tuning.hold_weighted_rows`` and give the in-memory engine's
numbers (calcheck/engines/held.py), and beyond it stream counted rows expanded (the expanded
file's numbers) and sampling weights by their weighted passes (tests/test_weights_stream.py);
and the two kernels whose speed weighted runs rely on give
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


def test_weights_beyond_the_budget_are_refused_before_reading(tmp_path, cli):
    """Sampling weights with a metric beyond the passes' beyond ``Tuning.exact_pava_rows`` on
    a streaming engine, and KS per ``test --by`` group, are refused before any read; counts stream expanded
    (below), and the other runs' weights — ``score --by``, ``test --by``'s T-Cal, HL,
    Spiegelhalter and Cox, ``compare`` — go to the weighted passes
    (tests/test_weights_stream.py, tests/test_weights_stream_group_tests.py,
    tests/test_weights_stream_compare.py)."""
    path = _file(tmp_path)
    small = Tuning(hold_weighted_rows=1000, exact_pava_rows=2000)
    r = cli(["score", path, "-m", "ici", "--weight", "w", "--engine", "stream"], tuning=small)
    assert r.code == 2, r.stderr
    assert "ici" in r.stderr and "--engine memory" in r.stderr
    assert r.stdout == ""
    r = cli(["test", path, "--by", "g", "--method", "ks", "--weight", "w", "--engine",
             "stream"], tuning=small)
    assert r.code == 2 and "--engine memory" in r.stderr and r.stdout == "", r.stderr
    assert cli(["score", path, "--weight", "w"], tuning=small).code == 0   # (memory: no budget)
    assert cli(["score", path, "--engine", "stream"], tuning=small).code == 0  # (unweighted)


def _expanded(tmp_path, path, name="expanded.parquet"):
    """The file ``path`` with every row repeated in place as often as its count ``n`` says."""
    t = pq.read_table(path)
    rows = np.repeat(np.arange(t.num_rows), t["n"].to_numpy().astype(np.int64))
    out = tmp_path / name
    pq.write_table(t.drop(["n"]).take(pa.array(rows)), out)
    return out


@pytest.mark.parametrize("engine", ["stream", "dask"])
def test_counts_beyond_the_budget_stream_the_expanded_file(tmp_path, cli, engine):
    """Counted rows beyond the budget are streamed expanded (calcheck.io.stream._expanded):
    every metric, bin, interval, group, variable and test of the expanded file on the same
    engine — the same rows in the same order, so the same states (the fixed-bin sums in
    other pieces: values to 1e-12) and the same Monte Carlo draws — with n the expanded
    rows, and the input section the in-memory engine's."""
    if engine == "dask":
        pytest.importorskip("dask")
    path = _file(tmp_path)
    expanded = _expanded(tmp_path, path)
    # beyond the rows held too (within them --var and KS, Kuiper, SKCE read the rows held:
    # tests/test_weights_stream_held.py)
    small = Tuning(hold_weighted_rows=1000, exact_pava_rows=2000)
    for cmd, key, extra in (
            ("score", "metrics", ["--by", "g", "--ci", "--ci-reps", "40", "--var", "g"]),
            ("test", "tests", ["--method", "all", "--trials", "99"])):
        common = [*extra, "--engine", engine, "--json", "--seed", "4"]
        r = cli([cmd, path, "--count", "n", *common], tuning=small)
        assert r.code == 0, r.stderr
        got = json.loads(r.stdout)
        ref = json.loads(cli([cmd, expanded, *common], tuning=small).stdout)   # (the same
        assert set(got[key]) == set(ref[key])                                # PAVA budget)
        for m, e in got[key].items():
            for field in ("value", "statistic", "pvalue", "n_samples"):
                if e.get(field) is not None:
                    assert e[field] == pytest.approx(ref[key][m][field], rel=1e-12, abs=1e-15)
            if e.get("ci"):
                for end in ("low", "high"):
                    assert e["ci"][end] == pytest.approx(ref[key][m]["ci"][end], rel=1e-9)
        if cmd == "score":
            for g, entry in got["groups"].items():
                for m, e in entry["metrics"].items():
                    assert e["value"] == pytest.approx(ref["groups"][g]["metrics"][m]["value"],
                                                       rel=1e-12, abs=1e-15)
            assert got["variables"]["g"]["vece"] == pytest.approx(
                ref["variables"]["g"]["vece"], rel=1e-12)
        mem = json.loads(cli([cmd, path, "--count", "n", "--json", "--seed", "4"]).stdout)
        assert got["input"]["weights"] == pytest.approx(mem["input"]["weights"])
        assert got["input"]["rows_used"] == mem["input"]["rows_used"] == 4000
        assert got["settings"]["expanded"]["expanded_rows"] == mem["input"]["weights"]["sum"]
        assert "held" not in got["settings"]


@pytest.mark.parametrize("engine", ["stream", "dask"])
def test_compare_of_one_counted_file_beyond_the_budget_streams_it_expanded(tmp_path, cli,
                                                                         engine):
    """compare on one file holding both models' scores (--score OLD --score NEW) with counts
    beyond the budget: both sides expand the same rows by the same counts, so every number —
    both models' metrics, the paired intervals and p-values — is the expanded file's on the
    same engine; the input section carries the counts.  Two files stay refused (above)."""
    if engine == "dask":
        pytest.importorskip("dask")
    path = _file(tmp_path)
    t = pq.read_table(path)
    pq.write_table(t.append_column("new", pa.array(np.clip(t["score"].to_numpy() * 1.3, 0, 1))),
                   path)
    expanded = _expanded(tmp_path, path)
    common = ["--score", "score", "--score", "new", "--engine", engine, "--json", "--seed", "4",
              "--ci-reps", "60"]
    r = cli(["compare", path, "--count", "n", *common], tuning=Tuning(hold_weighted_rows=1000))
    assert r.code == 0, r.stderr
    got, ref = json.loads(r.stdout), json.loads(cli(["compare", expanded, *common]).stdout)
    assert got["metrics"].keys() == ref["metrics"].keys()
    for m, e in got["metrics"].items():
        for field in ("old", "new", "delta", "pvalue", "pvalue_adjusted"):
            if e.get(field) is not None:
                assert e[field] == pytest.approx(ref["metrics"][m][field], rel=1e-12), m
        if e.get("ci"):
            for end in ("low", "high"):
                assert e["ci"][end] == pytest.approx(ref["metrics"][m]["ci"][end], rel=1e-9)
        if e.get("test"):
            assert e["test"]["statistic"] == pytest.approx(ref["metrics"][m]["test"]["statistic"],
                                                           rel=1e-9)
    assert got["summary"]["verdict"] == ref["summary"]["verdict"]
    for side in ("old", "new"):
        assert got["input"][side]["weights"]["expanded_rows"] == \
            ref["input"][side]["rows_used"]
    assert got["settings"]["expanded"]["rows"] == 4000 and "held" not in got["settings"]


def test_counts_streamed_expanded_multiclass_and_bad_counts(tmp_path, cli):
    """Multiclass counted rows stream expanded too (the top-label view and the class passes);
    a negative or fractional count is an error naming the column and the row, dropped and
    counted with --drop-invalid; counts all zero are an error."""
    rng = np.random.default_rng(5)
    n = 3000
    p = rng.dirichlet([2, 1, 1], n)
    y = np.array([rng.choice(3, p=r) for r in p])
    k = rng.integers(0, 4, n).astype(np.int64)
    path = tmp_path / "mc.parquet"
    pq.write_table(pa.table({"prob_0": p[:, 0], "prob_1": p[:, 1], "prob_2": p[:, 2],
                             "label": y, "n": k}), path)
    small = Tuning(hold_weighted_rows=1000)
    common = ["-m", "ece_top,ace_top,sce,ace_cw,tce_cw,brier", "--engine", "stream", "--json"]
    got = json.loads(cli(["score", path, "--count", "n", *common], tuning=small).stdout)
    ref = json.loads(cli(["score", _expanded(tmp_path, path), *common]).stdout)
    for m, e in got["metrics"].items():
        assert e["value"] == pytest.approx(ref["metrics"][m]["value"], rel=1e-12), m
    mem = json.loads(cli(["score", path, "--count", "n", "--json"]).stdout)["input"]
    for key in ("accuracy", "rows_used", "weights"):
        assert got["input"][key] == pytest.approx(mem[key]), key
    bad = tmp_path / "bad.parquet"
    kb = k.astype(np.float64)
    kb[1234] = -1.0
    kb[2000] = 1.5
    pq.write_table(pa.table({"score": p[:, 0], "label": (y == 0).astype(np.int8), "n": kb}), bad)
    r = cli(["score", bad, "--count", "n", "--engine", "stream"], tuning=small)
    assert r.code == 2 and "'n'" in r.stderr and "1235" in r.stderr, r.stderr
    r = cli(["score", bad, "--count", "n", "--engine", "stream", "--drop-invalid", "--json"],
            tuning=small)
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["input"]["rows_dropped"] == 2
    assert doc["input"]["dropped_by_reason"] == {"invalid_count": 2}
    assert doc["input"]["weights"]["sum"] == int(k.sum()) - k[1234] - k[2000]
    zero = tmp_path / "zero.parquet"
    pq.write_table(pa.table({"score": p[:, 0], "label": (y == 0).astype(np.int8),
                             "n": np.zeros(n)}), zero)
    r = cli(["score", zero, "--count", "n", "--engine", "stream"], tuning=small)
    assert r.code == 2 and "every count in column 'n' is zero" in r.stderr, r.stderr


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
        ref = wt.dpe(*(wt._bin_sums(c, where[m]) for c in cum)) / ws.sum(axis=1)
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


def test_expanded_pieces_are_the_rows_repeated_in_place():
    """Invariant of the expanded stream (calcheck.io.stream._expanded): its pieces, joined, are
    every row repeated in place as often as its count says (np.repeat), rows of count 0
    gone, each piece at most max(EXPAND_ROWS, the batch's rows) rows — whatever the counts,
    a count larger than a piece included — and the statistics count the rows, not the
    pieces."""
    from calcheck.io import stream

    rng = np.random.default_rng(0)
    for case in range(200):
        n = int(rng.integers(1, 50))
        k = (rng.choice([0, 1, 3, 200_000], n) if case % 3 == 0 else
             rng.integers(0, 5, n)).astype(np.float64)
        x = np.arange(n)
        st = stream.StreamStats()
        parts = list(stream._expanded((x, [x * 2], (["a"], x % 2)), k, st, x % 2))
        got = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
        assert np.array_equal(got, np.repeat(x, k.astype(np.int64))), case
        for p in parts:
            assert p[0].shape[0] <= max(stream.EXPAND_ROWS, n)
            assert np.array_equal(p[1][0], p[0] * 2) and np.array_equal(p[2][1], p[0] % 2)
        assert (st.counted_rows, st.count_sum) == (n, int(k.sum()))
        assert st.zero_counts == int((k == 0).sum())
        assert st.counted_positives == int((x % 2).sum())
