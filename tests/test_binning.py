import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calcheck.binning import (
    distinct,
    positional_edges,
    positional_stats,
    quantile_bounds,
    quantile_stats,
    uniform_assign,
    uniform_bounds,
    uniform_stats,
)

scores_st = st.lists(st.one_of(st.sampled_from([0.0, 1.0, 0.3, 0.5, 0.1]),
                               st.floats(0, 1, allow_nan=False)), min_size=1, max_size=200)


def test_uniform_assign_edges_as_the_papers_code():
    s = np.array([0.0, 0.1, 0.29999, 0.3, 0.30000000000000004, 0.95, 1.0])
    # 0.3 < edge 0.30000000000000004 -> bin 2; exactly 1.0 -> last bin
    assert uniform_assign(s, 10).tolist() == [0, 1, 2, 2, 3, 9, 9]


@given(st.integers(1, 5000), st.integers(0, 2**32 - 1))
def test_uniform_assign_is_searchsorted_on_the_float_edges(bins, seed):
    """The fast ⌊n·s⌋ rule with its edge correction gives searchsorted's bin for every float,
    including the edges and their neighbours."""
    rng = np.random.default_rng(seed)
    e = np.linspace(0.0, 1.0, bins + 1)
    s = np.concatenate([rng.uniform(size=500), e, np.nextafter(e, -1.0).clip(0, 1),
                        np.nextafter(e, 2.0).clip(0, 1), [0.0, 1.0, 5e-324]])
    np.testing.assert_array_equal(uniform_assign(s, bins),
                                  np.searchsorted(e[1:-1], s, side="right"))
    np.testing.assert_array_equal(uniform_assign(s.reshape(1, -1), bins)[0],
                                  uniform_assign(s, bins))
    out = np.full(s.shape[0], -7, dtype=np.int64)             # reused buffers: the same bins
    work = (np.full(s.shape[0], np.nan), np.ones(s.shape[0], dtype=bool))
    assert uniform_assign(s, bins, out=out, work=work) is out
    np.testing.assert_array_equal(out, np.searchsorted(e[1:-1], s, side="right"))


def test_uniform_stats_hand_computed():
    s = np.array([0.05, 0.15, 0.12, 0.95, 1.0])
    y = np.array([0, 1, 0, 1, 1])
    st_ = uniform_stats(s, y, 10)
    assert st_.count.tolist() == [1, 2, 0, 0, 0, 0, 0, 0, 0, 2]
    assert st_.sum_label.tolist() == [0, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    np.testing.assert_allclose(st_.mean_score[[0, 1, 9]], [0.05, 0.135, 0.975])
    assert np.isnan(st_.mean_score[2])
    np.testing.assert_allclose(st_.gap[[0, 1, 2, 9]], [0.05, 0.365, 0.0, 0.025])


@pytest.mark.parametrize("n", [0, 1, 65_535, 65_536, 65_537, 300_001])
def test_uniform_stats_on_two_threads_are_the_one_thread_sums(n, monkeypatch):
    """The blocks shared by two threads give the same floating-point sums as one thread
    adding them in order (per-block sums, added in block order)."""
    import calcheck.binning as binning

    rng = np.random.default_rng(n)
    s = rng.random(n)
    s[: min(n, 11)] = np.linspace(0.0, 1.0, 11)[: min(n, 11)]      # the edges themselves
    y = (rng.random(n) < s).astype(np.int8)
    one = uniform_stats(s, y, 10, binary=True)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)        # (a machine fact)
    two = uniform_stats(s, y, 10, binary=True, threads_from=1)
    expected = np.zeros(10)
    for start in range(0, n, binning.UNIFORM_CHUNK):     # block sums, in block order
        part = slice(start, start + binning.UNIFORM_CHUNK)
        expected += np.bincount(uniform_assign(s[part], 10), weights=s[part], minlength=10)
    for st_ in (one, two):
        assert st_.count.tolist() == np.bincount(uniform_assign(s, 10), minlength=10).tolist()
        assert st_.sum_label.tolist() == np.bincount(uniform_assign(s, 10), weights=y,
                                                     minlength=10).tolist()
    assert one.sum_score.tobytes() == two.sum_score.tobytes()
    np.testing.assert_allclose(one.sum_score, expected, rtol=1e-13, atol=1e-12)


def test_quantile_bounds_split_by_index():
    assert quantile_bounds(10, 3).tolist() == [0, 3, 6, 10]
    assert quantile_bounds(5, 10).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5]


def test_quantile_ties_straddle_cut_and_edges_are_midpoints():
    s = np.array([0.1, 0.2, 0.2, 0.2, 0.9, 1.0])
    y = np.array([0, 0, 1, 0, 1, 1])
    # the reference split: the tie group 0.2 (labels 0 1 0 in row order) is cut after its
    # second row
    st_ = quantile_stats(s, y, 2, ties="order")
    assert st_.count.tolist() == [3, 3]
    assert st_.sum_label.tolist() == [1, 2]
    # shared: the group's one positive is split 2/3 : 1/3 between the bins, whatever the
    # order of its rows
    for yy in (y, np.array([0, 1, 0, 0, 1, 1]), np.array([0, 0, 0, 1, 1, 1])):
        sh = quantile_stats(s, yy, 2)
        assert sh.count.tolist() == [3, 3]
        np.testing.assert_allclose(sh.sum_label, [2 / 3, 2 + 1 / 3])
    np.testing.assert_allclose(st_.lower, [0.0, 0.2])
    np.testing.assert_allclose(st_.upper, [0.2, 1.0])


def test_positional_edges_empty_bins():
    s = np.array([0.2, 0.4])
    lo, hi = positional_edges(s, np.array([0, 0, 1, 2]))
    np.testing.assert_allclose(lo, [0.0, 0.0, 0.3])
    np.testing.assert_allclose(hi, [0.0, 0.3, 1.0])


@given(scores_st, st.integers(1, 25))
def test_every_row_in_exactly_one_bin(scores, bins):
    s = np.array(scores)
    y = (np.arange(len(s)) % 2).astype(np.int64)
    a = uniform_assign(s, bins)
    assert a.min() >= 0 and a.max() < bins
    ss = np.sort(s, kind="stable")
    b = uniform_bounds(ss, bins)
    assert b[0] == 0 and b[-1] == len(s) and np.all(np.diff(b) >= 0)
    # the sorted (positional) path gives the same bins as the assignment path
    ys = y[np.argsort(s, kind="stable")]
    u1, u2 = uniform_stats(s, y, bins), positional_stats(ss, ys, b, kind="uniform")
    assert u1.count.tolist() == u2.count.tolist()
    assert u1.sum_label.tolist() == u2.sum_label.tolist()
    np.testing.assert_allclose(u1.sum_score, u2.sum_score, rtol=1e-12, atol=1e-12)
    q = quantile_stats(ss, ys, bins)
    assert q.count.sum() == len(s)


def test_bin_rows_are_json_ready():
    st_ = uniform_stats(np.array([0.1, 0.9]), np.array([0, 1]), 3)
    rows = st_.rows()
    assert rows[1]["mean_score"] is None and rows[1]["n"] == 0
    assert rows[0] == pytest.approx({"bin": 0, "lower": 0.0, "upper": 1 / 3, "n": 1,
                                     "positives": 0, "mean_score": 0.1, "mean_label": 0.0,
                                     "gap": 0.1, })


@given(st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.5, 1.0]) | st.floats(0, 1), max_size=300))
def test_stable_argsort_equals_numpy_stable(values):
    from calcheck.binning import stable_argsort

    s = np.array(values, dtype=np.float64)
    np.testing.assert_array_equal(stable_argsort(s), np.argsort(s, kind="stable"))


def test_stable_argsort_few_ties_path():
    from calcheck.binning import stable_argsort

    rng = np.random.default_rng(0)
    s = rng.uniform(size=10_000)
    s[rng.integers(0, 10_000, 300)] = 0.5  # a minority of ties: the lexsort repair path
    np.testing.assert_array_equal(stable_argsort(s), np.argsort(s, kind="stable"))


@pytest.mark.parametrize("case", ["tenths", "hundredths", "one_atom", "halves", "continuous"])
def test_pava_bc_on_tie_group_runs_equals_the_per_row_scan(case):
    """With heavily tied scores PAVA-BC walks the runs of equal tie-group means directly: the
    same runs as the per-row shared labels and the same blocks, for any n_min / n_max."""
    from calcheck import binning, pava

    rng = np.random.default_rng(len(case))
    make = {"tenths": lambda n: np.round(rng.random(n), 1),
            "hundredths": lambda n: np.round(rng.random(n), 2),
            "one_atom": lambda n: np.where(rng.random(n) < 0.95, 0.5, rng.random(n)),
            "halves": lambda n: rng.integers(0, 3, n) / 2.0,
            "continuous": lambda n: rng.random(n)}[case]
    for _ in range(40):
        n = int(rng.integers(1, 4_000))
        s = np.sort(make(n))
        y = (rng.random(n) < s).astype(np.int8)
        runs = pava.tied_label_runs(s, y)
        per_row = binning.shared_labels(s, y)
        if case == "continuous" or np.unique(s).shape[0] > n // 8:
            assert runs is None                     # many tie groups: the per-row scan
        else:
            assert runs == pava.label_runs(per_row)
        lo = int(rng.integers(0, n // 10 + 1))
        hi = int(rng.integers(lo, n + 2))
        want = np.concatenate(([0], np.cumsum(pava.pava_bc_weights(per_row, lo, hi))))
        np.testing.assert_array_equal(pava.pava_bc_bounds(y, lo, hi, sorted_scores=s), want)


@given(st.integers(0, 2**31))
def test_shared_label_runs_are_the_runs_of_the_shared_labels(seed):
    """Rare positives (or rare negatives) with some tied scores: the runs built from the label
    changes and the tie groups are those :func:`label_runs` finds in the per-row shared labels
    (values bit for bit), and PAVA-BC over them gives the per-row scan's blocks."""
    from calcheck import binning, pava

    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 3_000))
    s = np.sort(np.round(rng.random(n) ** rng.uniform(0.2, 5), int(rng.integers(2, 6))))
    if rng.random() < 0.2:
        s[: int(rng.integers(1, n + 1))] = 0.0                 # a group at the start
    if rng.random() < 0.2:
        s[-int(rng.integers(1, n + 1)):] = 1.0                 # ... and at the end
    s = np.sort(s)
    p = rng.choice([0.003, 0.02, 0.98, 0.997])
    y = (rng.random(n) < p).astype(rng.choice([np.int8, np.int64, np.float64, bool]))
    runs = pava.shared_label_runs(s, y)
    per_row = binning.shared_labels(s, y)
    changes = np.count_nonzero(y[1:] != y[:-1])
    if changes > n // pava.FEW_CHANGES or not np.any(s[1:] == s[:-1]):
        assert runs is None
        return
    assert runs is not None
    values, lengths = runs
    want_v, want_l = pava.label_runs(per_row)
    assert lengths.tolist() == want_l
    np.testing.assert_array_equal(values, np.asarray(want_v, dtype=np.float64))
    lo = int(rng.integers(0, n // 10 + 1))
    hi = int(rng.integers(lo, n + 2))
    assert pava.pava_bc_run_weights(values, lengths, lo, hi) == \
        pava.pava_bc_weights(per_row, lo, hi)
    want = np.concatenate(([0], np.cumsum(pava.pava_bc_weights(per_row, lo, hi))))
    np.testing.assert_array_equal(pava.pava_bc_bounds(y, lo, hi, sorted_scores=s), want)


@given(st.integers(0, 2**31))
def test_shared_labels_are_each_tie_groups_mean_label(seed):
    """Every sorted row's label replaced by its tie group's mean (float64), found from the
    tied neighbours alone: groups at either end, groups that meet, and no ties at all (the
    labels themselves, in their own dtype)."""
    from calcheck import binning

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    s = np.sort(np.round(rng.random(n) ** 3, int(rng.integers(0, 5))))
    y = (rng.random(n) < 0.4).astype(rng.choice([np.int8, np.int64, np.float64, bool]))
    got = binning.shared_labels(s, y)
    _, group = np.unique(s, return_inverse=True)
    counts = np.bincount(group)
    want = (np.bincount(group, weights=y.astype(np.float64)) / counts)[group]
    if counts.max() == 1:
        assert got.dtype == y.dtype
    else:
        assert got.dtype == np.float64
    np.testing.assert_array_equal(got.astype(np.float64), want)


def _fed(n, bins, steps, s, y, step=8):
    """A UniformFold (threads taking ``step`` blocks at a time) fed the rows in ``steps`` (rows
    so far after each step), finished."""
    from calcheck.binning import UniformFold

    fold = UniformFold(n, bins, step)
    for rows in steps:
        fold.feed(s, y, rows)
    return fold.finish()


@pytest.mark.parametrize("n", [1, 65_535, 65_536, 200_001, 1_100_000])
@pytest.mark.parametrize("step", [1, 8])
def test_uniform_fold_while_rows_arrive_is_uniform_stats(n, step):
    """Rows folded as they arrive (in uneven steps, by two threads at the end) give the bins of
    uniform_stats bit for bit: each block's sums are 2·bin + label keyed, added in block
    order."""
    rng = np.random.default_rng(n + step)
    s = rng.random(n)
    s[: min(n, 31)] = np.linspace(0.0, 1.0, 31)[: min(n, 31)]      # edges of 10, 15 and 30 bins
    y = (rng.random(n) < s).astype(np.int8)
    steps = sorted({*rng.integers(1, n + 1, size=7).tolist(), n})
    got = _fed(n, (10, 15, 7), steps, s, y, step)
    assert got is not None and sorted(got) == [7, 10, 15]
    for bins, st_ in got.items():
        want = uniform_stats(s, y, bins, binary=True)
        assert st_.count.tolist() == want.count.tolist()
        assert st_.sum_label.tolist() == want.sum_label.tolist()
        assert st_.sum_score.tobytes() == want.sum_score.tobytes()
        key = 2 * uniform_assign(s, bins) + y                       # the keys themselves
        assert st_.count.tolist() == np.bincount(key, minlength=2 * bins).reshape(-1, 2)\
            .sum(axis=1).tolist()


@pytest.mark.parametrize("bad", ["nan", "above", "negative", "label2", "float_labels",
                                 "float32", "stopped", "short"])
def test_uniform_fold_gives_up_on_rows_it_cannot_fold(bad):
    """Anything but float64 scores in [0, 1] with 0/1 integer labels, every row fed, stops the
    fold (None): the reader's own validation then decides."""
    from calcheck.binning import UniformFold

    n = 300_000
    rng = np.random.default_rng(9)
    s, y = rng.random(n), rng.integers(0, 2, n).astype(np.int8)
    if bad == "nan":
        s[250_000] = np.nan
    elif bad == "above":
        s[123] = 1.5
    elif bad == "negative":
        s[-1] = -0.0 - 1e-9
    elif bad == "label2":
        y[70_000] = 2
    elif bad == "float_labels":
        y = y.astype(np.float64)
    elif bad == "float32":
        s = s.astype(np.float32)
    fold = UniformFold(n, (10,))
    fold.feed(s, y, n // 2)
    if bad == "stopped":
        fold.stop()
    if bad != "short":
        fold.feed(s, y, n)
    assert fold.finish() is None


def test_uniform_fold_raises_what_went_wrong(monkeypatch):
    import calcheck.binning as binning

    def broken(*args):
        raise MemoryError("no room")

    monkeypatch.setattr(binning.UniformSums, "run", broken)
    fold = binning.UniformFold(10, (10,))
    fold.feed(np.full(10, 0.5), np.zeros(10, dtype=np.int8), 10)
    with pytest.raises(MemoryError, match="no room"):
        fold.finish()


@given(st.one_of(st.lists(st.integers(-5, 5), max_size=60),
                 st.lists(st.floats(allow_nan=False), max_size=60)))
def test_distinct_is_numpys_unique(values):
    arr = np.asarray(values)
    got, want = distinct(arr), np.unique(arr)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
