"""The positional passes' cells: the uniform grid and the finer cells of crowded scores."""

import numpy as np
import pytest

from calcheck.streaming.engine import StateSpec
from calcheck.streaming.grid import (
    ONE_BITS,
    ScoreGrid,
    UniformGrid,
    cells_of,
    crowded_grid,
)
from calcheck.streaming.positional import PositionalPass
from calcheck.streaming.runner import drive
from calcheck.tuning import Tuning
from tests.arrays import ArraySource


def bisect_lower(grid):
    """The smallest float of each cell by bisection over bit patterns with the cell function
    itself (the reference for ScoreGrid's step points)."""
    c = np.arange(grid.n_cells, dtype=np.int64)
    lo = np.zeros(c.shape[0], dtype=np.uint64)
    hi = np.full(c.shape[0], ONE_BITS, dtype=np.uint64)
    for _ in range(64):
        o = np.flatnonzero(hi - lo > 1)
        if o.shape[0] == 0:
            break
        mid = lo[o] + (hi[o] - lo[o]) // np.uint64(2)
        big = grid.cells_of(mid.view(np.float64)) >= c[o]
        hi[o[big]] = mid[big]
        lo[o[~big]] = mid[~big]
    first = np.where(grid.cells_of(lo.view(np.float64)) >= c, lo, hi)
    first[0] = 0
    return first


def awkward_scores(rng, n):
    """Scores at the places a cell function can go wrong: 0, −0.0, subnormals, tiny values,
    1/2 and its neighbours, 1 − 2^-53, 1, and crowded ones near both ends."""
    special = np.array([0.0, -0.0, 5e-324, 1e-310, 2.0 ** -1022, 1e-300, 2.0 ** -53,
                        np.nextafter(0.5, 0.0), 0.5, np.nextafter(0.5, 1.0), 0.75,
                        1.0 - 2.0 ** -53, 1.0 - 2.0 ** -52, 1.0])
    return np.concatenate([special, rng.random(n), rng.beta(0.2, 20.0, n),
                           1.0 - rng.beta(0.2, 20.0, n), np.ldexp(rng.random(n), -60)])


@pytest.mark.parametrize("seed", range(12))
def test_score_grid_cells_are_score_intervals(seed):
    """Every ScoreGrid cell is an interval of scores, in order: the cells of sorted scores
    never decrease; each cell's lower bound (from its step points) equals a bisection with the
    cell function; a score's cell is the one whose [lower, next lower) holds its bits; the
    interval and key range of each occupied cell hold exactly its scores; s = 1 is alone in
    the last cell."""
    rng = np.random.default_rng(seed)
    bits = int(rng.integers(1, 9))
    r = rng.integers(0, 4, 2048).astype(np.uint8)
    r[rng.integers(0, 2048, 6)] = rng.integers(4, 13, 6)
    if seed % 3 == 0:                       # the binades next to 1/2, on both sides
        r[1019:1024] = rng.integers(0, 12, 5)
        r[2043:] = rng.integers(0, 12, 5)
    grid = ScoreGrid(bits, r.tobytes())
    lower = grid._lower_bits
    np.testing.assert_array_equal(lower[:-1], bisect_lower(grid))
    s = awkward_scores(rng, 4000)
    cells = grid.cells_of(s)
    order = np.argsort(s, kind="stable")
    assert np.all(np.diff(cells[order]) >= 0)
    u = (s + 0.0).view(np.uint64)
    np.testing.assert_array_equal(np.searchsorted(lower, u, side="right") - 1, cells)
    occ = np.unique(cells)
    lo, hi = grid.interval(occ)
    np.testing.assert_array_equal(grid.cells_of(lo), occ)
    np.testing.assert_array_equal(grid.cells_of(hi), occ)
    a, b = grid.key_range(occ)
    np.testing.assert_array_equal(a, lo.view(np.uint64).astype(np.int64))
    np.testing.assert_array_equal(b, hi.view(np.uint64).astype(np.int64) + 1)
    assert grid.cells_of(np.array([1.0]))[0] == grid.n_cells - 1
    assert grid.cells_of(np.array([np.nextafter(1.0, 0.0)]))[0] < grid.n_cells - 1
    np.testing.assert_array_equal(cells_of(grid, np.array([-0.5, 2.0])), [0, grid.n_cells - 1])


def test_uniform_grid_is_the_grid_states_cells():
    rng = np.random.default_rng(2)
    s = awkward_scores(rng, 3000)
    for bits in (4, 16):
        grid = UniformGrid(bits)
        cells = grid.cells(s).copy()
        np.testing.assert_array_equal(cells, np.floor((s + 0.0) * 2 ** bits).astype(np.int64))
        occ = np.unique(cells)
        lo, hi = grid.interval(occ)
        np.testing.assert_array_equal(np.floor(lo * 2 ** bits).astype(np.int64), occ)
        np.testing.assert_array_equal(cells_of(grid, hi), occ)
        a, b = grid.key_range(occ)
        np.testing.assert_array_equal(a, lo.view(np.uint64).astype(np.int64))
        np.testing.assert_array_equal(b, hi.view(np.uint64).astype(np.int64) + 1)


def test_crowded_grid_only_for_crowded_continuous_scores():
    rng = np.random.default_rng(3)
    n = 1 << 17
    spread = [rng.random(n), 1 / (1 + np.exp(-(0.3 + 1.7 * rng.normal(size=n)))),
              rng.beta(2, 5, n)]
    for s in spread:
        assert crowded_grid(s, 16) is None
    assert crowded_grid(rng.beta(0.2, 20, 1000), 16) is None            # too few to judge
    assert crowded_grid(np.round(rng.beta(0.2, 20, n), 3), 16) is None  # tied
    ordered = np.sort(rng.beta(0.2, 20, n))                             # a sorted file
    assert crowded_grid(ordered, 16) is None and crowded_grid(ordered[::-1], 16) is None
    for s in (rng.beta(0.2, 20, n), rng.beta(20, 0.2, n),
              1 / (1 + np.exp(-(-3 + 2 * rng.normal(size=n)))),
              np.where(rng.random(n) < 0.5, rng.beta(50, 1, n), rng.beta(1, 50, n))):
        grid = crowded_grid(s, 16)
        assert isinstance(grid, ScoreGrid)
        # the rows sharing a cell with a random row (what a rank's cell holds): ≥ 3x fewer
        fine = np.bincount(grid.cells_of(s)).astype(np.float64)
        coarse = np.bincount(np.floor(s * 2 ** 16).astype(np.int64)).astype(np.float64)
        assert 3 * np.dot(fine, fine) < np.dot(coarse, coarse)


def concentrated(seed, n):
    rng = np.random.default_rng(seed)
    s = np.concatenate([rng.beta(0.2, 20, n // 2), 1 - rng.beta(0.3, 30, n - n // 2)])
    s[rng.integers(0, n, 40)] = 1.0
    y = (rng.random(n) < s).astype(np.int8)
    return s, y, ArraySource(s, y, rng.integers(0, n, 3))


@pytest.mark.parametrize("ties", ["share", "order"])
def test_finer_cells_give_the_uniform_grids_bins(ties):
    """The positional metrics on crowded scores from the finer cells equal those from the
    uniform grid: every rank's row, every bin's count and positives exactly, Σ score to
    ~1e-15, TCE's rejections exactly — and they need fewer passes."""
    n = 60_000
    s, _, src = concentrated(5, n)
    ids = ["tce", "tce_q", "tce_v", "ace", "mce_q", "pde"]
    out, passes = {}, {}
    for fine in (False, True):
        spec = StateSpec().prepared(s) if fine else StateSpec()
        state = src.run(spec)[0]
        assert (state.pos_grid is not None) == fine
        pos = PositionalPass(state, ids, id_bound=n, ties=ties, collect_rows=2000,
                             tuning=Tuning(exact_pava_rows=1000, pava_blocks=512))
        before = src.file_passes
        out[fine] = drive(src, pos.run())[0]
        passes[fine] = src.file_passes - before
    res_u, res_f = out[False], out[True]
    for mid in ids:
        a, b = res_u[mid], res_f[mid]
        assert b.value == pytest.approx(a.value, rel=1e-12, abs=1e-15), mid
        ta, tb = a.bins, b.bins
        if ta is not None:
            np.testing.assert_array_equal(tb.count, ta.count)
            np.testing.assert_array_equal(tb.sum_label, ta.sum_label)
            np.testing.assert_allclose(tb.sum_score, ta.sum_score, rtol=1e-13)
            np.testing.assert_array_equal(tb.lower, ta.lower)
    assert passes[True] < passes[False]


def test_the_stream_engine_uses_finer_cells_on_crowded_scores(cli, tmp_path):
    """End to end: a crowded Parquet file streams with the finer cells (recorded in the
    report) and gives the in-memory engine's metrics — TCE exactly, the rest to ~1e-10 (sums
    of ~10^4 scores near 1 whose differences are ~10^-3) —; a file of the same scores sorted
    does not get them (its first batch is not a sample)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.conftest import run_json

    n = 80_000
    s, y, _ = concentrated(8, n)
    path = tmp_path / "crowded.parquet"
    pq.write_table(pa.table({"score": s, "label": y}), path)
    ids = "tce,tce_q,ace,mce_q,pde,ece"
    stream = run_json(cli, path, "--engine", "stream", "-m", ids)
    memory = run_json(cli, path, "-m", ids)
    assert stream["settings"]["grid"]["positional_cells"] > 2 ** 16
    for mid in ids.split(","):
        a, b = stream["metrics"][mid]["value"], memory["metrics"][mid]["value"]
        assert a == pytest.approx(b, rel=1e-10, abs=1e-15), mid
    assert stream["metrics"]["tce"]["value"] == memory["metrics"]["tce"]["value"]
    order = np.argsort(s, kind="stable")
    ordered = tmp_path / "sorted.parquet"
    pq.write_table(pa.table({"score": s[order], "label": y[order]}), ordered)
    again = run_json(cli, ordered, "--engine", "stream", "-m", ids)
    assert "positional_cells" not in again["settings"]["grid"]
    assert again["metrics"]["tce"]["value"] == stream["metrics"]["tce"]["value"]
