"""The memory engine at scale: the kernels that avoid arrays of n rows give today's numbers."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import calcheck
from calcheck import binning
from calcheck.metrics import Prepared, scoring
from calcheck.metrics import binned as binned_metrics


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, -0.0, 0.1, 0.25, 0.5, 0.9999, 1.0, 5e-324]),
                          st.integers(0, 1)), min_size=1, max_size=60),
       st.sampled_from([np.int8, np.int64, np.bool_]))
def test_sorted_binary_is_the_sort_by_score_then_label(rows, dtype):
    s = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows]).astype(dtype)
    ss, yy = binning.sorted_binary(s, y)
    order = np.lexsort((y.astype(np.int64), s))
    assert np.array_equal(ss, s[order] + 0.0)           # -0.0 comes back as +0.0
    assert np.array_equal(yy, y[order].astype(np.int8))
    assert yy.dtype == np.int8


def test_prepared_sorts_by_packed_keys_only_for_shared_ties_and_01_labels():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 20, 500) / 20
    y = rng.integers(0, 2, 500)
    shared = Prepared(s, y)
    assert np.array_equal(shared.sorted_scores, np.sort(s))
    assert "order" not in shared.__dict__                 # no argsort was made
    ordered = Prepared(s, y, ties="order")
    assert np.array_equal(ordered.sorted_labels, y[np.argsort(s, kind="stable")])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 80), st.integers(1, 12), st.integers(1, 8), st.integers(0, 2**32 - 1))
def test_shared_prefix_equals_the_full_cumsum(n, distinct, cuts, seed):
    rng = np.random.default_rng(seed)
    s = np.sort(rng.integers(0, distinct, n) / 7.0)
    pos = np.sort(rng.integers(0, n + 1, cuts))
    for v in (rng.integers(0, 2, n).astype(np.int8), rng.random(n)):
        got = binning.shared_prefix(v, s, pos)
        want = binning.shared_cumsum(v, binning.tie_bounds(s), pos)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_block_sums_match_the_one_pass_formulas(chunk):
    """Brier's, log loss's, the probabilistic count's and PDE's sums, taken ``chunk`` rows at a
    time, equal the one-pass formulas (and the metrics, at the default chunk)."""
    rng = np.random.default_rng(chunk)
    for _ in range(30):
        n = int(rng.integers(1, 200))
        s = rng.integers(0, int(rng.integers(1, 12)), n) / 11
        y = rng.integers(0, 2, n)
        data = Prepared(s, y)
        _, counts = np.unique(s, return_counts=True)
        q = counts / n
        value, distinct = scoring.probabilistic_count(data.sorted_scores, chunk)
        assert value == pytest.approx(min(1 / np.dot(q, q), n), rel=1e-12)
        assert distinct == counts.shape[0]
        assert scoring.pc(data).value == pytest.approx(value, rel=1e-12)
        assert scoring.squared_error_sum(data.scores, data.labels, chunk) / n == \
            pytest.approx(np.mean((s - y) ** 2), abs=1e-14)
        assert scoring.brier(data).value == pytest.approx(np.mean((s - y) ** 2), abs=1e-14)
        c = np.clip(s, 1e-15, 1 - 1e-15)
        ll = -np.mean(np.where(y == 1, np.log(c), np.log1p(-c)))
        assert -scoring.log_likelihood_sum(data.scores, data.labels, chunk) / n == \
            pytest.approx(ll, rel=1e-12)
        assert scoring.log_loss(data).value == pytest.approx(ll, rel=1e-12)
        if n >= 10:
            bounds = binning.quantile_bounds(n, 10)
            stats = binned_metrics.quantile_bins(data, 10)
            phat = np.nan_to_num(stats.mean_label)
            want = np.abs(np.sort(s) - phat[binning.row_bin_ids(bounds)]).sum() / n
            sums = binned_metrics.abs_deviation_sums(data.sorted_scores, bounds, phat,
                                                     stats.nonempty, chunk)
            assert sums.sum() / n == pytest.approx(want, abs=1e-14)
            assert binned_metrics.pde(data, bins=10).value == pytest.approx(want, abs=1e-14)


def test_reader_keeps_binary_labels_as_int8(tmp_path):
    from calcheck.io.source import open_source
    from calcheck.io.tabular import load_predictions

    for typ in (pa.int8(), pa.int64(), pa.bool_(), pa.float64()):
        path = tmp_path / f"{typ}.parquet"
        pq.write_table(pa.table({"score": [0.2, 0.7, 0.9],
                                 "label": pa.array([0, 1, 1]).cast(typ)}), path)
        data = load_predictions(open_source(str(path)))
        assert data.labels.dtype == np.int8
        assert data.labels.tolist() == [0, 1, 1]


def test_int8_labels_give_the_int64_numbers(tmp_path):
    rng = np.random.default_rng(3)
    s = np.round(rng.random(3000), 2)                    # ties
    y = (rng.random(3000) < s).astype(np.int8)
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"score": s, "label": y}), path)
    from_file = calcheck.score(str(path))
    from_arrays = calcheck.score(scores=s, labels=y.astype(np.int64))
    assert set(from_file.metrics) == set(from_arrays.metrics)
    for mid in from_arrays.metrics:
        assert from_file.value(mid) == pytest.approx(from_arrays.value(mid), rel=1e-12,
                                                     abs=1e-15), mid


def test_one_blas_thread_limits_blas_inside_only():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from calcheck._threads import one_blas_thread

    before = [i["num_threads"] for i in threadpoolctl.threadpool_info()]
    with one_blas_thread():
        assert all(i["num_threads"] == 1 for i in threadpoolctl.threadpool_info())
    assert [i["num_threads"] for i in threadpoolctl.threadpool_info()] == before


def test_score_ci_offers_only_intervals_that_cover(tmp_path, capsys):
    """`--ci` gives an interval to the metrics whose interval covers their population value
    (the binned errors' norm bootstrap, the means); every other metric gets none, named with
    its reason — also when it is named with -m."""
    from calcheck import registry
    from calcheck.cli import run
    from calcheck.uncertainty import covers_population

    rng = np.random.default_rng(5)
    s = rng.random(400)
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"score": s, "label": (rng.random(400) < s).astype(np.int8)}), path)
    assert run(["score", str(path), "--ci", "--ci-reps", "20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    with_ci = {m for m, r in out["metrics"].items() if "ci" in r}
    assert with_ci == {"ece", "ece_l2", "ace", "brier", "log_loss"}
    assert all(covers_population(m) for m in with_ci)
    for m in ("tce", "tce_q", "pde"):
        assert any(n.startswith(f"{m}: a biased estimator") for n in out["notes"]), m
    assert run(["score", str(path), "-m", "tce,ece", "--ci", "--ci-reps", "20", "--json"]) == 0
    named = json.loads(capsys.readouterr().out)
    assert "ci" not in named["metrics"]["tce"] and "ci" in named["metrics"]["ece"]
    # the registry offers no interval that does not cover
    assert all(covers_population(m) for m, spec in registry.METRICS.items() if spec.ci)


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_group_intervals_are_those_of_the_whole_data(tmp_path, capsys, engine):
    """`--by` with `--ci`: every group gets the intervals the whole data gets."""
    from calcheck.cli import run

    rng = np.random.default_rng(11)
    n = 900
    s = rng.random(n)
    seg = np.array(["a", "b", "c"])[rng.integers(0, 3, n)]
    path = tmp_path / "g.parquet"
    pq.write_table(pa.table({"score": s, "label": (rng.random(n) < s).astype(np.int8),
                             "seg": seg}), path)
    base = ["score", str(path), "--by", "seg", "--ci", "--ci-reps", "20", "--json",
            "--engine", engine]
    assert run(base) == 0
    out = json.loads(capsys.readouterr().out)
    with_ci = {m for m, r in out["metrics"].items() if "ci" in r}
    assert "ece" in with_ci and not with_ci & {"tce", "tce_q", "pde"}
    for g in out["groups"].values():
        assert {m for m, r in g["metrics"].items() if "ci" in r} == with_ci
