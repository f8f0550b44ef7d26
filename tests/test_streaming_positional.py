"""Positional bins on a stream: the exact rank search, equal-mass and TCE bins, the row pass."""

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from calcheck.binning import positional_stats, quantile_bounds, stable_argsort
from calcheck.hypotests.classical import hosmer_lemeshow
from calcheck.metrics import MetricOptions, compute_metrics
from calcheck.metrics._data import Prepared
from calcheck.streaming.engine import StateSpec
from calcheck.streaming.heldrows import bound_ranks
from calcheck.streaming.positional import POSITIONAL, PositionalPass, positional_results
from calcheck.streaming.rowpass import RowPassState
from calcheck.streaming.runner import drive
from calcheck.tuning import DEFAULT as TUNING
from calcheck.tuning import Tuning
from tests.arrays import ArraySource
from tests.conftest import run_json, write_dataset


def make(case, n, rng):
    if case == "uniform":
        s = rng.random(n)
    elif case == "rounded":
        s = np.round(rng.random(n), 2)
    elif case == "atom_at_one":
        s = np.where(rng.random(n) < 0.7, 1.0, rng.random(n))
    elif case == "tiny_and_atom":
        s = np.where(rng.random(n) < 0.5, 0.3, rng.random(n) * 1e-6)
    elif case == "all_equal":
        s = np.full(n, 0.25)
    else:
        s = rng.beta(0.3, 3.0, n)
        s[:40] = 0.0
        s[40:50] = -0.0                                       # passes [0, 1] checks; sorts as 0
    y = (rng.random(n) < np.clip(np.abs(s) * 1.1, 0, 1)).astype(np.int8)
    return s, y


def crowded(seed, n, *, rounded, decimals, parts, lift=1.0):
    """Beta(0.2, 20) scores (a rare-event model, crowded into the grid's first cells), a share
    ``rounded`` of them to ``decimals`` places (ties), labels drawn at min(1, lift·s), split
    into ``parts`` + 1 batches: (scores, labels, source, grid state)."""
    rng = np.random.default_rng(seed)
    s = np.where(rng.random(n) < rounded, np.round(rng.beta(0.2, 20, n), decimals),
                 rng.beta(0.2, 20, n))
    y = (rng.random(n) < np.minimum(1.0, s * lift)).astype(np.int8)
    src = ArraySource(s, y, rng.integers(0, n, parts))
    return s, y, src, src.run(StateSpec())[0]


CASES = ["uniform", "rounded", "atom_at_one", "tiny_and_atom", "all_equal", "beta_zeros"]


@pytest.mark.parametrize("ties", ["share", "order"])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("budget", [1 << 21, 40, 1])
def test_rank_search_gives_the_in_memory_bins(case, budget, ties):
    rng = np.random.default_rng(11)
    n = 12_000
    s, y = make(case, n, rng)
    src = ArraySource(s, y, rng.integers(0, n, 7))
    grid = src.run(StateSpec())[0]
    order = stable_argsort(s + 0.0)
    for bins in (10, 7, 3):
        b = quantile_bounds(n, bins)
        pos = PositionalPass(grid, [], id_bound=n, ties=ties, collect_rows=budget)
        before = src.file_passes
        drive(src, pos.scan(bound_ranks(b, n)))
        got = pos.bin_stats(b, "quantile", {})
        ref = positional_stats((s + 0.0)[order], y[order], b, kind="quantile", ties=ties)
        np.testing.assert_array_equal(got.count, ref.count)
        np.testing.assert_allclose(got.sum_label, ref.sum_label, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(got.sum_score, ref.sum_score, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(got.lower, ref.lower)
        np.testing.assert_array_equal(got.upper, ref.upper)
        if budget == 1 and case in ("atom_at_one", "all_equal") and ties == "order":
            assert src.file_passes - before >= 2     # narrowed by score bits, then by row id


def test_shared_ties_collect_four_times_the_rows_in_one_pass():
    """With shared ties the search keeps each collected row as one packed 8-byte key instead
    of (task, score, row id, label), so the same memory collects 4x the rows: ranges over the
    row-id budget but within 4x of it resolve in one pass (with coarse histograms, as 10^8
    rows' 4,096 PAVA blocks get, a histogram pass comes first otherwise), with the same
    bins."""
    assert TUNING.key_share == 4
    tuning = Tuning(hist_buckets=64)                    # 16 sub-ranges of a range
    rng = np.random.default_rng(3)
    n = 200_000
    s = 0.5 + rng.random(n) / 256               # 256 grid cells of ~780 rows
    y = (rng.random(n) < s).astype(np.int8)
    src = ArraySource(s, y, [70_000, 140_000])
    grid = src.run(StateSpec())[0]
    b = quantile_bounds(n, 40)
    ranks = bound_ranks(b, n)
    rows = int(sum(grid.cell_count.reshape(-1, 2).sum(axis=1)[np.unique(
        np.floor(np.sort(s)[ranks] * 65536).astype(int))]))
    budget = rows // 2                          # rows > budget, rows <= 4 budget
    passes, stats = {}, {}
    for ties in ("share", "order"):
        pos = PositionalPass(grid, [], id_bound=n, ties=ties, collect_rows=budget,
                             tuning=tuning)
        before = src.file_passes
        drive(src, pos.scan(ranks))
        passes[ties] = src.file_passes - before
        stats[ties] = pos.bin_stats(b, "quantile", {})
    assert passes["share"] == 1 and passes["order"] >= 2
    order = stable_argsort(s)
    ref = positional_stats(s[order], y[order], b, kind="quantile", ties="share")
    np.testing.assert_array_equal(stats["share"].count, ref.count)
    np.testing.assert_array_equal(stats["share"].upper, ref.upper)
    np.testing.assert_allclose(stats["share"].sum_score, ref.sum_score, rtol=1e-12)


def _held_case(case, seed, n=30_000):
    """(scores, labels, a 6-partition source, its grid state) of ``n`` rows of ``case``: few
    enough for exact PAVA, whose pass holds every row."""
    rng = np.random.default_rng(seed)
    s, y = make(case, n, rng)
    src = ArraySource(s, y, rng.integers(0, n, 5))
    return s, y, src, src.run(StateSpec())[0]


@pytest.mark.parametrize("replay", [True, False])
@pytest.mark.parametrize("ties", ["share", "order"])
@pytest.mark.parametrize("case", CASES)
def test_streamed_positional_metrics_equal_in_memory(case, ties, replay):
    """Every positional metric and HL as in memory; exact PAVA's pass holds every row, and
    the rank search and row pass then run over those rows (``replay``) or over the source
    again — the same values either way, and no pass beyond the held rows' when replayed."""
    s, y, src, grid = _held_case(case, 5)
    ids = list(POSITIONAL)
    got, details = positional_results(src, grid, ids, hl_groups=10, ties=ties,
                                      tuning=Tuning(replay=replay))
    ref = compute_metrics(Prepared(s + 0.0, y, ties=ties), ids, MetricOptions(ties=ties))
    for mid in ids:
        a, b = got[mid], ref[mid]
        assert a.value == pytest.approx(b.value, rel=1e-12, abs=1e-12), mid
        np.testing.assert_array_equal(a.bins.count, b.bins.count)
        np.testing.assert_allclose(a.bins.sum_label, b.bins.sum_label, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(a.bins.lower, b.bins.lower, rtol=0, atol=1e-15)
        for key, col in b.bin_extra.items():
            np.testing.assert_allclose(np.asarray(a.bin_extra[key], float),
                                       np.asarray(col, float), rtol=1e-12, atol=1e-12,
                                       equal_nan=True, err_msg=f"{mid}.{key}")
        assert {k: v for k, v in a.settings.items() if k != "pava_input"} == b.settings, mid
    hl = hosmer_lemeshow(s + 0.0, y, ties=ties)
    assert got["hosmer_lemeshow"].statistic == pytest.approx(hl.statistic, rel=1e-10)
    for a, b in zip(got["hosmer_lemeshow"].details["table"], hl.details["table"]):
        assert a["n"] == b["n"] and a["observed"] == pytest.approx(b["observed"], abs=1e-9)
        assert a["expected"] == pytest.approx(b["expected"], rel=1e-12)
    assert details["extra_passes"] == 1 if replay else 1 <= details["extra_passes"] <= 4


def _same_state(a, b, path="state"):
    """Two pass states equal field by field, arrays bit for bit (caches and specs aside)."""
    import dataclasses

    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            if f.name not in ("spec", "scratch"):
                _same_state(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8)), path
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, z) in enumerate(zip(a, b)):
            _same_state(x, z, f"{path}[{i}]")
    else:
        assert a == b, path


@pytest.mark.parametrize("ties", ["share", "order"])
@pytest.mark.parametrize("case", CASES)
def test_replay_over_held_rows_reads_only_the_cells_a_pass_needs(case, ties, monkeypatch):
    """The search and the row pass over exact PAVA's held rows hand their states only the rows
    of the cells they read (slices of the sorted rows), batch by batch: every state equals the
    one a replay of every held row gives, bit for bit, whatever the batch size."""
    from calcheck.streaming import heldrows

    real, kinds = heldrows.replay, []

    def both(spec, scores, labels, batch):
        assert batch == 4_096
        got = real(spec, scores, labels, batch)
        full = spec.new()
        for a in range(0, scores.shape[0], batch):
            z = slice(a, a + batch)
            full.update(scores[z], labels[z], a)
        kinds.append(type(spec).__name__)
        _same_state(got, full)
        return got

    monkeypatch.setattr(heldrows, "replay", both)
    _, _, src, grid = _held_case(case, 17)
    positional_results(src, grid, list(POSITIONAL), hl_groups=10, ties=ties,
                       tuning=Tuning(replay_rows=4_096))
    assert kinds or case not in ("uniform", "beta_zeros")    # (tied cells need no pass)


@pytest.mark.parametrize("exact_rows", [TUNING.exact_pava_rows, 0])
def test_data_that_change_between_passes_are_refused(exact_rows):
    """A source whose rows change after the grid pass (a file rewritten mid-run) is refused,
    not computed on: by the pass that holds every row (exact PAVA, whose rows then make the
    later passes) or by the row pass (PAVA on blocks)."""
    rng = np.random.default_rng(9)
    n = 6_000
    s = rng.random(n)
    y = (rng.random(n) < s).astype(np.int8)

    class Changing(ArraySource):
        def run(self, spec):
            out = super().run(spec)
            self.scores, self.labels = self.scores[:-3], self.labels[:-3]
            self.cuts = [0, n - 3]
            return out

    src = Changing(s, y)
    grid = src.run(StateSpec())[0]
    with pytest.raises(RuntimeError, match="data changed between passes"):
        positional_results(src, grid, ["tce", "pde"],
                           tuning=Tuning(exact_pava_rows=exact_rows))


@pytest.mark.parametrize("rows", [0, 7, 5_000])
def test_sorted_rows_fill_one_buffer_that_grows_merges_and_pickles_its_keys(rows):
    """Exact PAVA's held rows: packed keys go into one buffer of the rows the grid counted
    (``rows``; grown by doubling when short or unknown), two partial states merge (as Dask
    does), a pickled state carries its filled keys only, and the sorted rows are the sort of
    every row by (score, label), −0.0 as +0.0."""
    import pickle

    from calcheck.streaming.heldrows import SortedRowsSpec

    rng = np.random.default_rng(8)
    n = 5_000
    s = np.round(rng.random(n), 3)
    s[:5] = -0.0
    y = (rng.random(n) < s).astype(np.int8)
    spec = SortedRowsSpec(packed=True, rows=rows)
    cut = 1_800
    parts = []
    for a, b in ((0, cut), (cut, n)):
        st = spec.new()
        for lo in range(a, b, 333):
            st.update(s[lo:min(lo + 333, b)], y[lo:min(lo + 333, b)], lo)
        assert st.filled == b - a and st.keys is not None and st.keys.shape[0] >= st.filled
        parts.append(pickle.loads(pickle.dumps(st)))
        assert parts[-1].keys.shape[0] == b - a                 # the filled keys only
    got_s, got_y = parts[1].merge(parts[0]).sorted_rows()
    order = np.lexsort((y, s + 0.0))
    np.testing.assert_array_equal(got_s, (s + 0.0)[order])
    np.testing.assert_array_equal(got_y, y[order])
    assert not np.signbit(got_s).any()


def test_preloading_the_compiled_scan_waits_for_a_scan_worth_it():
    """The compiled PAVA-BC scan loads on a background thread when the coming scan has
    COMPILE_AT rows or more (overlapping the sort before it), and not for a smaller one — nor
    for rows whose rare positives bound their runs of one label below FEW_RUNS (numba's
    compiler stays out of memory)."""
    import os
    import subprocess
    import sys

    from calcheck.pava import COMPILE_AT, FEW_RUNS

    pytest.importorskip("numba")
    code = ("import sys, threading\n"
            "from calcheck.pava import COMPILE_AT, preload_compiled_pava\n"
            "preload_compiled_pava(*map(int, sys.argv[1:]))\n"
            "for t in threading.enumerate():\n"
            "    if t is not threading.main_thread(): t.join()\n"
            "print('calcheck._pava_compiled' in sys.modules)\n")
    for args, loaded in (((COMPILE_AT - 1,), "False"), ((COMPILE_AT,), "True"),
                         ((10 * COMPILE_AT, FEW_RUNS // 2 - 1), "False"),
                         ((10 * COMPILE_AT, 10 * COMPILE_AT - FEW_RUNS // 2), "True")):
        out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                             text=True, check=True, env={**os.environ, "CALCHECK_NO_NUMBA": ""})
        assert out.stdout.strip() == loaded, (args, out.stderr)


@pytest.mark.parametrize("test", ["binomial", "t"])
def test_tce_rejections_exact_at_any_alpha(test):
    rng = np.random.default_rng(2)
    n = 40_000
    s = rng.beta(2, 5, n)
    y = (rng.random(n) < s ** 0.8).astype(np.int8)
    src = ArraySource(s, y, [10_000, 25_000])
    grid = src.run(StateSpec())[0]
    for alpha in (0.01, 0.05, 0.3):
        got, _ = positional_results(src, grid, ["tce", "tce_q", "tce_u"], alpha=alpha, test=test)
        ref = compute_metrics(Prepared(s, y), ["tce", "tce_q", "tce_u"],
                              MetricOptions(alpha=alpha, test=test))
        for mid in got:
            assert got[mid].value == ref[mid].value, (mid, alpha)
            np.testing.assert_array_equal(got[mid].bin_extra["rejected"],
                                          ref[mid].bin_extra["rejected"])


def test_pava_on_blocks_is_recorded_and_close():
    rng = np.random.default_rng(9)
    n = 200_000
    s = rng.beta(0.5, 2.0, n)
    y = (rng.random(n) < s * 1.2).clip(0, 1).astype(np.int8)
    src = ArraySource(s, y, [n // 3])
    grid = src.run(StateSpec())[0]
    got, _ = positional_results(src, grid, ["tce", "tce_v"],
                                tuning=Tuning(exact_pava_rows=0, pava_blocks=2048))
    ref = compute_metrics(Prepared(s, y), ["tce", "tce_v"], MetricOptions())
    for mid in ("tce", "tce_v"):
        st = got[mid].settings
        assert st["pava_input"].startswith("approximate") and st["pava_blocks"] == 2048
        assert int(got[mid].bins.count.sum()) == n
        # measured: TCE 0.03 points, TCE(V) (plain PAVA's many small bins) 1.7 points
        assert got[mid].value == pytest.approx(ref[mid].value, abs=0.5 if mid == "tce" else 2.5)
    exact, _ = positional_results(src, grid, ["tce"])
    assert exact["tce"].value == ref["tce"].value
    assert exact["tce"].settings["pava_input"].startswith("exact")


# ---------------------------------------------------------------------------------------------
# the CLI on a hive-partitioned dataset with ties


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    root = tmp_path_factory.mktemp("tied")
    rng = np.random.default_rng(4)
    n = 50_000
    s = np.round(rng.beta(1.0, 3.0, n), 3)
    s[rng.random(n) < 0.1] = 1.0
    df = pd.DataFrame({"score": s, "label": rng.binomial(1, s),
                       "part": rng.integers(0, 6, n)})
    write_dataset(root, df, ["part"])
    return root


def test_cli_stream_defaults_match_memory(cli, tied):
    st = run_json(cli, "score", tied / "ds", "--engine", "stream", "--batch-rows", "7000",
                        "--bins-table", "all", cmd=None)
    mem = run_json(cli, "score", tied / "ds", "--bins-table", "all", cmd=None)
    assert list(st["metrics"]) == [m for m in mem["metrics"] if m != "pc"]
    for mid, res in st["metrics"].items():
        assert res["value"] == pytest.approx(mem["metrics"][mid]["value"], rel=1e-12,
                                             abs=1e-12), mid
        if "bins" in mem["metrics"][mid]:
            assert [b["n"] for b in res["bins"]] == [b["n"] for b in mem["metrics"][mid]["bins"]]
    assert st["settings"]["passes"] >= 2


def test_cli_stream_hosmer_lemeshow(cli, tied):
    st = run_json(cli, "test", tied / "ds", "--engine", "stream", "--method", "hl", cmd=None)
    mem = run_json(cli, "test", tied / "ds", "--method", "hl", cmd=None)
    a, b = st["tests"]["hosmer_lemeshow"], mem["tests"]["hosmer_lemeshow"]
    assert a["statistic"] == pytest.approx(b["statistic"], rel=1e-10)
    assert a["df"] == b["df"] and a["pvalue_method"] == b["pvalue_method"]
    if b["pvalue_method"] == "chi2":
        assert a["pvalue"] == pytest.approx(b["pvalue"], rel=1e-8)
    else:        # small expected counts: memory redraws each tie group's labels (exact null),
        # the stream each group's count from Binomial(n_g, mean score) — conservative
        assert "conservative" in a["settings"]["null"] and "exact" in b["settings"]["null"]
        assert a["pvalue"] >= b["pvalue"] - 0.05


def test_cli_notes_pava_on_blocks(cli, tied):
    """Beyond Tuning.exact_pava_rows the stream engine's PAVA-BC runs on equal-mass blocks:
    the metric's settings and a note say so."""
    r = cli(["score", tied / "ds", "--engine", "stream", "-m", "tce", "--json"],
            tuning=Tuning(exact_pava_rows=1000))
    assert r.code == 0, r.stderr
    st = json.loads(r.stdout)["metrics"]["tce"]["settings"]
    assert st["pava_input"] == "approximate: equal-mass blocks" and st["pava_blocks"] == 4096
    assert "n > 1,000 rows, so PAVA ran on 4,096 equal-mass blocks" in r.stderr


@pytest.mark.parametrize("k_extra", [0.0, 0.37])          # a whole and a fractional count
def test_row_pass_decisions_equal_one_test_a_row(k_extra):
    """The row pass bounds runs of 64, then 8 neighbouring predictions of one grid cell before
    testing one by one: every weight must be the one the row's own binomial test gives, on rows
    packed around both rejection boundaries of a large bin (where p-values sit near alpha)."""
    from calcheck.streaming.rowpass import _row_weights, rejection_weight

    rng = np.random.default_rng(11)
    n_bin, k = 3_000_000.0, 1_650_000.0 + k_extra
    phat, sd = k / n_bin, np.sqrt(k / n_bin * (1 - k / n_bin) / n_bin)
    p = np.sort(np.concatenate([phat + side * 1.96 * sd + rng.normal(0, sd / 4, 3000)
                                for side in (-1, 1)] + [rng.uniform(0.5, 0.6, 2000)]))
    N, K = np.full(p.shape, n_bin), np.full(p.shape, k)
    cell = (p * float(1 << 16)).astype(np.intp)
    got = _row_weights(K, N, p, 0.05, "binomial", cell)
    ref = rejection_weight(K, N, p, 0.05, "binomial")
    np.testing.assert_array_equal(got, ref)
    assert 0 < (ref > 0).sum() < p.shape[0]             # both outcomes occur


def test_one_score_cells_are_resolved_from_the_grid():
    """Tied scores (three decimals: every grid cell holds one score) keep the grid's per-cell
    extremes, so every rank — PAVA's blocks, the equal-mass cuts — is resolved without a search
    pass, and no row pass is needed either (each cut's cell is its tie group, counted whole;
    every other cell is decided from the grid): no pass after the grid's, with the numbers
    the passes give bit for bit."""
    rng = np.random.default_rng(3)
    n = 60_000
    s = np.round(rng.beta(2, 5, n), 3)
    y = (rng.random(n) < s).astype(np.int8)
    src = ArraySource(s, y, [20_000, 40_000])
    ids = ["ace", "mce_q", "pde", "tce_q", "tce"]
    options = {"tuning": Tuning(exact_pava_rows=1_000, pava_blocks=256), "ties": "share"}
    grid = src.run(StateSpec())[0]
    values = grid.cell_values()
    assert values is not None and np.isnan(values).sum() < values.shape[0]
    got, details = positional_results(src, grid, ids, **options)
    blind = src.run(StateSpec())[0]
    blind.cell_min = blind.cell_max = None               # as if the extremes were not kept
    ref, ref_details = positional_results(src, blind, ids, **options)
    assert details["extra_passes"] == 0 < ref_details["extra_passes"]
    for mid in ids:
        assert got[mid].value == ref[mid].value, mid
        np.testing.assert_array_equal(got[mid].bins.count, ref[mid].bins.count)
        np.testing.assert_array_equal(got[mid].bins.sum_label, ref[mid].bins.sum_label)
        np.testing.assert_array_equal(got[mid].bins.sum_score, ref[mid].bins.sum_score)
    mem = compute_metrics(Prepared(s, y), ["ace", "mce_q", "pde", "tce_q"], MetricOptions())
    for mid in mem:
        assert got[mid].value == pytest.approx(mem[mid].value, rel=1e-12, abs=1e-12), mid


def test_grid_extremes_kept_only_for_tied_batches_and_merged_conservatively():
    from calcheck.streaming.states import StreamState

    rng = np.random.default_rng(4)
    tied = np.round(rng.random(5_000), 2)
    smooth = rng.random(5_000)
    y = np.zeros(5_000, dtype=np.int8)
    a, b, c = StreamState(), StreamState(), StreamState()
    a.update(tied, y)
    b.update(smooth, y)
    assert a.cell_values() is not None and b.cell_values() is None
    one = a.cell_values()
    cells = np.flatnonzero(~np.isnan(one))                    # each distinct score, in its cell
    np.testing.assert_array_equal(one[cells], np.unique(tied))
    np.testing.assert_array_equal(cells, (np.unique(tied) * 2 ** 16).astype(int))
    c.merge(a)                                                # an empty state takes a's
    assert np.array_equal(c.cell_values(), one, equal_nan=True)
    a.merge(b)                                                # one side did not keep them
    assert a.cell_values() is None
    d = StreamState()
    d.update(np.array([-0.0, 0.0, -0.0, 0.5, 0.5, 0.5]), np.zeros(6, dtype=np.int8))
    v = d.cell_values()
    assert v[0] == 0.0 and np.signbit(v[0]) == False and v[2 ** 15] == 0.5  # noqa: E712


@pytest.mark.parametrize("seed", range(8))
def test_row_pass_bins_by_cell_equal_searchsorted(seed):
    """The row pass bins rows by grid cell, row by row only where a cell holds cut scores: the
    same bins as ``searchsorted(cuts, u, "left")`` and the same rows on a cut's score, with
    repeated cuts, several cuts in one cell, scores 0 and 1 and the placeholders 0 and U_MAX —
    on the uniform grid and on a crowded one's finer cells."""
    from calcheck.streaming.grid import ScoreGrid, UniformGrid
    from calcheck.streaming.rowpass import _cut_bins
    from calcheck.streaming.select import U_MAX

    rng = np.random.default_rng(seed)
    bits = 8 if seed % 2 else 16
    pool = np.concatenate([np.round(rng.random(40), 2), rng.random(20), [0.0, 1.0],
                           rng.beta(0.2, 20.0, 20), 1.0 - rng.beta(0.2, 20.0, 20)])
    cut_vals = np.sort(rng.choice(pool, 12))
    cut_vals = np.concatenate([cut_vals, cut_vals[3:5] + 1e-9])          # two in one cell
    cuts = np.sort(np.concatenate([cut_vals.view(np.uint64),
                                   np.array([0, U_MAX][: seed % 3], dtype=np.uint64)]))
    s = np.concatenate([rng.choice(pool, 3000), rng.random(3000), cut_vals, [0.0, 1.0]])
    u = s.view(np.uint64)
    grid = UniformGrid(bits) if seed < 4 else \
        ScoreGrid(bits, rng.integers(0, 12, 2048).astype(np.uint8).tobytes())
    cells = grid.cells(s).copy()
    bins, on_cut = _cut_bins(tuple(int(c) for c in cuts), grid, cells, u)
    np.testing.assert_array_equal(bins, np.searchsorted(cuts, u, side="left"))
    np.testing.assert_array_equal(on_cut, np.flatnonzero(np.isin(u, cuts)))


@pytest.mark.parametrize("alpha", [0.001, 0.05])
def test_narrowed_test_cells_hold_where_the_exact_test_changes(alpha):
    """Narrowed by exact bounds, the guessed brackets still hold every score where the exact
    test's decision changes (between two neighbouring scores of a fine sweep across each
    bracket) for every whole k of a bin's range, and each k/n — and they are much narrower
    than the brackets near 0 and 1, where the padding spans many crowded rows."""
    import functools

    from calcheck.streaming.prospect import narrowed_test_cells, test_cells
    from calcheck.streaming.rowpass import rejection_weight

    rng = np.random.default_rng(4)
    reject = functools.partial(rejection_weight, alpha=alpha, test="binomial")
    for n in (40, 7_000, 3_400_000):
        k = np.concatenate([[0.0, 1.0, 2.0, 5.0, n - 3.0, float(n)],
                            rng.integers(0, n + 1, 6).astype(np.float64)])
        width = rng.integers(0, 3, k.shape[0]).astype(np.float64)
        least, most = np.clip(k - width, 0, n), np.clip(k + width, 0, n)
        nn = np.full(k.shape, float(n))
        low, high = test_cells(least, most, nn, alpha)
        m = k.shape[0]
        k_lo = np.tile(np.floor(least), 3)
        k_hi = np.tile(np.ceil(most), 3)
        lows, highs = narrowed_test_cells(k_lo, k_hi, np.tile(nn, 3), low, high, alpha)
        assert (highs - lows).sum() < 0.5 * np.clip(high - low, 0, None).sum()
        for i in range(3 * m):
            a, b = max(low[i], 0.0), min(high[i], 1.0)
            if a > b:
                continue
            p = np.linspace(a, b, 4001)
            for kk in np.arange(k_lo[i], k_hi[i] + 1):
                on = reject(np.full(p.shape, kk), np.full(p.shape, float(n)), p) > 0
                flip = np.flatnonzero(on[1:] != on[:-1])
                for j in flip:            # the change lies in [p_j, p_j+1]: some interval meets it
                    meets = (lows <= p[j + 1]) & (highs >= p[j])
                    assert meets.any(), (n, kk, p[j])
                if a <= kk / n <= b:
                    assert ((lows <= kk / n) & (kk / n <= highs)).any()


@pytest.mark.parametrize("ties", ["share", "order"])
@pytest.mark.parametrize("case", CASES)
def test_the_search_keeps_the_row_pass_rows(case, ties, monkeypatch):
    """Past exact PAVA's rows (PAVA on blocks) the first search's pass keeps the rows of the
    cells the row pass will likely read, guessed from the grid alone; when the exact bins'
    cells are among them the row pass runs over those rows: the same values, bit for bit, as
    reading the file again, one pass fewer (continuous scores), and the same values again when
    the guess is wrong (a cell missing: the row pass reads the file)."""
    from calcheck.streaming import positional, prospect

    rng = np.random.default_rng(8)
    n = 40_000
    s, y = make(case, n, rng)
    src = ArraySource(s, y, rng.integers(0, n, 6))
    grid = src.run(StateSpec())[0]
    ids = ["tce", "tce_q", "pde", "ace"]
    opts = {"ties": ties, "n_min": 2_000, "n_max": 12_000}
    knobs = {"exact_pava_rows": 10_000, "pava_blocks": 256}
    runs = {}
    for how in ("kept", "read", "missed"):
        # few rows a cell: keep up to n/2
        tuning = Tuning(prospect_share=2, prospect=how != "read", **knobs)
        if how == "missed":                     # keeps one cell of those guessed
            monkeypatch.setattr(positional, "interval_cells",
                                lambda *a: prospect.interval_cells(*a)[:1])
            tuning = Tuning(prospect_share=2, window_blocks=0, **knobs)     # (no bins moved)
        runs[how] = positional_results(src, grid, ids, tuning=tuning, **opts)
    for how in ("kept", "missed"):
        for mid in ids:
            a, b = runs[how][0][mid], runs["read"][0][mid]
            assert a.value == b.value, (how, mid)
            np.testing.assert_array_equal(a.bins.count, b.bins.count)
            np.testing.assert_array_equal(a.bins.sum_label, b.bins.sum_label)
            for key, col in b.bin_extra.items():
                np.testing.assert_array_equal(np.asarray(a.bin_extra[key], float),
                                              np.asarray(col, float), err_msg=f"{mid}.{key}")
    passes = {how: runs[how][1]["extra_passes"] for how in runs}
    assert passes["missed"] == passes["read"]
    if case == "uniform":             # (scores piled near 0 fill a few cells: too many rows)
        assert passes["kept"] == passes["read"] - 1 == 1


@pytest.mark.parametrize("ties", ["share", "order"])
def test_bins_a_block_off_the_guess_run_over_the_kept_rows(ties, monkeypatch):
    """PAVA-BC's exact bins can end a block away from the grid's guess (the blocks' exact
    positives move a merge).  The first search's pass also keeps the cells of the ranks and
    row pass of the bins a block off, so the search of the exact bins' new ranks and their row
    pass run over the kept rows: the same values, bit for bit, as reading the file, one pass
    fewer than without those cells (``Tuning.window_blocks = 0``)."""
    from calcheck.streaming import positional

    rng = np.random.default_rng(8)
    n = 40_000
    s, y = make("uniform", n, rng)
    src = ArraySource(s, y, rng.integers(0, n, 6))
    grid = src.run(StateSpec())[0]
    ids = ["tce", "tce_q", "pde", "ace"]
    opts = {"ties": ties, "n_min": 2_000, "n_max": 12_000}
    knobs = {"exact_pava_rows": 10_000, "pava_blocks": 256}
    exact_blocks = positional.pava_bc_blocks
    calls = []
    prospecting = [True]

    def guessed_off(count, pos, lo, hi):
        """The guess (the first call of a run) with its later bounds one block on."""
        b = exact_blocks(count, pos, lo, hi)
        if prospecting[0] and len(calls) % 2 == 0 and b.shape[0] >= 4:
            edges = np.concatenate(([0], np.cumsum(count)))
            at = np.searchsorted(edges, b)
            at[b.shape[0] // 2:-1] += 1
            if at[-2] < at[-1]:
                b = edges[at]
        calls.append(b)
        return b

    monkeypatch.setattr(positional, "pava_bc_blocks", guessed_off)
    runs = {}
    for how, window in (("kept", 1), ("narrow", 0), ("read", 1)):
        prospecting[0] = how != "read"
        tuning = Tuning(prospect_share=1, prospect=how != "read",   # (half of it with row ids)
                        window_blocks=window, **knobs)
        calls.clear()
        runs[how] = positional_results(src, grid, ids, tuning=tuning, **opts)
        if how != "read":
            assert not np.array_equal(calls[0], calls[1])        # the guess was off
    for how in ("kept", "narrow"):
        for mid in ids:
            a, b = runs[how][0][mid], runs["read"][0][mid]
            assert a.value == b.value, (how, mid)
            for key, col in b.bin_extra.items():
                np.testing.assert_array_equal(np.asarray(a.bin_extra[key], float),
                                              np.asarray(col, float), err_msg=f"{mid}.{key}")
    passes = {how: runs[how][1]["extra_passes"] for how in runs}
    assert passes["kept"] == passes["narrow"] - 1 == passes["read"] - 1


@pytest.mark.parametrize("case", ["uniform", "rounded", "beta_zeros"])
def test_pde_does_not_depend_on_the_tce_tests_beside_it(case):
    """PDE's equal-mass bins are TCE(Q)'s: the row pass reads the cells either needs, but PDE
    sums its deviations from its own cells alone (P̂'s, the cuts'), so its value and per-bin
    deviations are the same, bit for bit, alone, beside TCE(Q) and at any alpha."""
    rng = np.random.default_rng(5)
    n = 40_000
    s, y = make(case, n, rng)
    src = ArraySource(s, y, rng.integers(0, n, 6))
    grid = src.run(StateSpec())[0]
    opts = {"tuning": Tuning(exact_pava_rows=10_000, pava_blocks=256)}
    alone = positional_results(src, grid, ["pde"], **opts)[0]["pde"]
    for alpha in (0.001, 0.05, 0.3):
        both = positional_results(src, grid, ["pde", "tce_q"], alpha=alpha, **opts)[0]["pde"]
        assert both.value == alone.value, alpha
        np.testing.assert_array_equal(np.asarray(both.bin_extra["mean_abs_deviation"], float),
                                      np.asarray(alone.bin_extra["mean_abs_deviation"], float))


@pytest.mark.parametrize("alpha", [0.001, 0.05, 0.5])
def test_the_guessed_test_cells_hold_the_exact_thresholds(alpha):
    """The intervals the guess keeps hold the exact binomial test's thresholds (where a bin
    of n rows and k positives starts rejecting a prediction p, below and above k/n) for every
    k in the guessed range — found here by bisection on the exact test."""
    import functools

    from calcheck.streaming.prospect import test_cells
    from calcheck.streaming.rowpass import rejection_weight

    rng = np.random.default_rng(2)
    for n in (10, 37, 300, 5_000, 1_500_000):
        k = np.unique(np.concatenate([rng.integers(0, n + 1, 40), [0, 1, n - 1, n]]))
        k = k.astype(np.float64)
        nn = np.full(k.shape, float(n))
        width = rng.integers(0, 3, k.shape[0]).astype(np.float64)
        least, most = np.clip(k - width, 0, n), np.clip(k + width, 0, n)
        lows, highs = test_cells(least, most, nn, alpha)
        reject = functools.partial(rejection_weight, alpha=alpha, test="binomial")
        for kk in (least, k, most):
            phat = kk / n
            for side in (0.0, 1.0):
                live = phat > 0 if side == 0.0 else phat < 1
                a, b = np.full(int(live.sum()), side), phat[live]
                for _ in range(50):
                    mid = (a + b) / 2
                    on = reject(kk[live], nn[live], mid) > 0
                    a, b = np.where(on, mid, a), np.where(on, b, mid)
                t = (a + b) / 2
                inside = (lows[:, None] <= t[None, :]) & (t[None, :] <= highs[:, None])
                assert inside.any(axis=0).all(), (n, alpha, side)


@pytest.mark.parametrize("ties", ["share", "order"])
def test_row_tests_in_pieces_give_the_same_rejections(ties):
    """TCE's row pass tests its pending (bin, score) pairs in pieces of Tuning.pending_rows (bounded
    temporaries): pieces of 97 pairs, whose runs of neighbours are cut anywhere, give the same
    rejections, bit for bit, as one piece — on concentrated scores (most rows tested one by
    one) with ties (fractional k under ``share``)."""
    _, _, src, grid = crowded(8, 40_000, rounded=0.3, decimals=4, parts=4)
    ids = ["tce", "tce_q"]
    results = []
    for pieces in (1 << 30, 97):
        got, _ = positional_results(src, grid, ids, ties=ties,
                                    tuning=Tuning(pending_rows=pieces))
        results.append(got)
    for mid in ids:
        a, b = results[0][mid], results[1][mid]
        assert a.value == b.value, mid
        for key, col in a.bin_extra.items():
            assert np.asarray(col, float).tobytes() == \
                np.asarray(b.bin_extra[key], float).tobytes(), (mid, key)


@pytest.mark.parametrize("pending", [1 << 18, 97])
@pytest.mark.parametrize("ties", ["share", "order"])
def test_decided_score_pieces_give_the_same_rejections(ties, pending, monkeypatch):
    """Cells of many rows that the row pass reads get TCE's test decided on score pieces
    (Tuning.sure_rows): the rejections are those of testing every row — bit for bit, including the
    fractional k of shared ties (its rows are still tested in the same groups) — and equal
    to the in-memory engine's; the pieces decide most of those rows."""

    n = 60_000
    s, y, src, grid = crowded(12, n, rounded=0.2, decimals=5, parts=4, lift=1.3)
    ids = ["tce", "tce_q", "tce_u"]
    decided = []
    original = RowPassState._decided

    def counting(self, j, bins, scores):
        hit = original(self, j, bins, scores)
        decided.append((0 if hit is None else int(hit.sum()), bins.shape[0]))
        return hit

    monkeypatch.setattr(RowPassState, "_decided", counting)
    results = []
    for rows in (1 << 62, 64):
        decided.clear()
        got, _ = positional_results(src, grid, ids, ties=ties,
                                    tuning=Tuning(pending_rows=pending, sure_rows=rows))
        results.append((got, np.sum(decided, axis=0)))
    assert results[0][1][0] == 0 and results[1][1][0] > 0.75 * results[1][1][1] > n // 4
    ref = compute_metrics(Prepared(s, y, ties=ties), ids, MetricOptions(ties=ties))
    for mid in ids:
        a, b = results[0][0][mid], results[1][0][mid]
        assert a.value == b.value, mid
        for key, col in a.bin_extra.items():
            assert np.asarray(col, float).tobytes() == \
                np.asarray(b.bin_extra[key], float).tobytes(), (mid, key)
        assert b.value == pytest.approx(ref[mid].value, rel=1e-12), mid
        np.testing.assert_allclose(b.bin_extra["rejected"], ref[mid].bin_extra["rejected"],
                                   rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("ties", ["share", "order"])
def test_tie_groups_unpacked_in_groups_of_tasks_give_the_same_ranks(ties):
    """The search's collected keys are unpacked a group of tasks at a time (Tuning.tie_rows): any
    grouping resolves every rank to the same row, counts and score sums, bit for bit; and a
    cell of several tasks finds each row's task through the near-bucket table as a search
    over all tasks would."""
    n = 50_000
    s, y, src, grid = crowded(4, n, rounded=0.3, decimals=6, parts=3)
    b = quantile_bounds(n, 400)
    out = []
    for group in (1 << 40, 16):
        pos = PositionalPass(grid, [], id_bound=n, ties=ties, collect_rows=3000,
                             tuning=Tuning(tie_rows=group))
        drive(src, pos.scan(bound_ranks(b, n)))
        out.append((pos.resolved, pos.bin_stats(b, "quantile", {})))
    assert out[0][0] == out[1][0]
    order = stable_argsort(s)
    ref = positional_stats(s[order], y[order], b, kind="quantile", ties=ties)
    np.testing.assert_array_equal(out[1][1].count, ref.count)
    np.testing.assert_allclose(out[1][1].sum_score, ref.sum_score, rtol=1e-12, atol=1e-15)


def test_row_owner_with_several_tasks_a_cell_equals_a_search():
    from calcheck.streaming.grid import UniformGrid
    from calcheck.streaming.select import SelectSpec, Task

    rng = np.random.default_rng(9)
    bits = 16
    tasks = []
    for cell in (0, 3, 900):
        lo = int(np.float64(cell / 2 ** bits).view(np.uint64))
        hi = int(np.float64((cell + 1) / 2 ** bits).view(np.uint64))
        cuts = np.sort(rng.integers(lo, hi, 12, dtype=np.uint64))
        for a, z in zip(cuts[0::2].tolist(), cuts[1::2].tolist()):
            if z > a:
                tasks.append(Task(cell=cell, u_lo=a, u_hi=z, id_lo=0, id_hi=10**9,
                                  collect=True))
    tasks.sort(key=lambda t: t.u_lo)
    state = SelectSpec(UniformGrid(bits), tuple(tasks), by_value=True).new()
    s = np.concatenate([rng.random(4000) / 2 ** 16, (3 + rng.random(4000)) / 2 ** 16,
                        (900 + rng.random(4000)) / 2 ** 16, rng.random(4000)])
    u = s.view(np.uint64)
    u = np.concatenate([u, np.array([t.u_lo for t in tasks] + [t.u_hi - 1 for t in tasks]
                                    + [t.u_hi for t in tasks], dtype=np.uint64)])
    cells = np.floor(u.view(np.float64) * 2 ** bits).astype(np.int64)
    got = state._owner(u, np.arange(u.shape[0]), cells)
    want = np.full(u.shape[0], -1)
    for i, t in enumerate(tasks):
        want[(u >= np.uint64(t.u_lo)) & (u < np.uint64(t.u_hi))] = i
    np.testing.assert_array_equal(got, want)


def test_task_groups_keep_a_tasks_ranks_together():
    """The search unpacks its collected keys a group of tasks at a time: every rank of a task
    in one group (a task larger than the limit with many ranks is unpacked once, not once a
    rank), groups in key order, and each group within the limit unless it is one task."""
    from calcheck.streaming.select import task_groups

    rng = np.random.default_rng(6)
    sizes = rng.choice([1, 5, 40, 300], 60)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    task = rng.integers(0, 60, 500)                     # ranks, several a task, shuffled
    first, last = starts[task], starts[task] + sizes[task]
    for limit in (1, 16, 100, 10**6):
        groups = task_groups(first, last, limit)
        seen = np.concatenate(groups)
        assert np.array_equal(np.sort(seen), np.arange(task.shape[0]))
        owner = {}
        prev_end = -1
        for g, members in enumerate(groups):
            tasks = set(task[members].tolist())
            for t in tasks:
                assert owner.setdefault(t, g) == g            # a task's ranks: one group
            lo, hi = first[members].min(), last[members].max()
            assert lo >= prev_end
            prev_end = hi
            assert hi - lo <= limit or len(tasks) == 1
        if limit == 10**6:
            assert len(groups) == 1


def test_positives_before_positions_are_read_a_chunk_at_a_time():
    from calcheck.streaming.select import _ones_before

    rng = np.random.default_rng(13)
    for _ in range(200):
        m = int(rng.integers(0, 3000))
        keys = np.sort(rng.integers(0, 2**40, m).astype(np.uint64))
        where = np.unique(rng.integers(0, m + 1, int(rng.integers(1, 50))))
        cum = np.concatenate(([0], np.cumsum(keys & np.uint64(1))))
        for chunk in (1, 7, 64, 1 << 16):
            np.testing.assert_array_equal(_ones_before(keys, where, chunk), cum[where])


def test_rows_at_a_cut_score_count_the_cuts_before_them_by_row_id():
    """--ties order: a row scoring a cut's score is past each cut at that score whose row id
    is at most its own (one cut, or several splitting one tie group; the placeholder cut 0
    with id −1 of an empty first bin), as one comparison a cut would count."""
    from calcheck.streaming.rowpass import _cuts_at_or_before

    rng = np.random.default_rng(10)
    for _ in range(500):
        k = int(rng.integers(1, 12))
        vals = np.sort(rng.choice(np.array([0, 5, 5, 7, 9, 9, 9, 11], dtype=np.uint64), k))
        ids = np.zeros(k, dtype=np.int64)
        for v in np.unique(vals):
            m = vals == v
            ids[m] = np.sort(rng.choice(np.arange(-1, 100), int(m.sum()), replace=False))
        cut_u, cut_id = tuple(int(x) for x in vals), tuple(int(x) for x in ids)
        m = int(rng.integers(1, 30))
        u = rng.choice(vals, m).astype(np.uint64)
        rid = rng.integers(-1, 101, m)
        want = np.zeros(m, dtype=np.int64)
        for cu, ci in zip(cut_u, cut_id):
            want += (u == np.uint64(cu)) & (rid >= ci)
        np.testing.assert_array_equal(_cuts_at_or_before(cut_u, cut_id, u, rid), want)


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("case", ["continuous", "some_ties", "rounded"])
def test_held_rows_in_score_then_row_order_whatever_the_sort(case, tied):
    """--ties order's held rows come out in (score, row id) order — the stable argsort's —
    whether the grid saw ties (a stable argsort) or not (a quick argsort, then the tie groups
    put in row-id order), from batches merged out of order."""
    from calcheck.streaming.heldrows import SortedRowsSpec

    rng = np.random.default_rng(len(case))
    n = 20_000
    s = {"continuous": rng.random(n),
         "some_ties": np.where(rng.random(n) < 0.05, 0.5, rng.random(n)),
         "rounded": np.round(rng.random(n), 2)}[case]
    s[:7] = -0.0
    y = (rng.random(n) < s).astype(np.int8)
    spec = SortedRowsSpec(packed=False, tied=tied)
    states = [spec.new() for _ in range(3)]
    cuts = [0, 3_000, 11_000, 15_500, n]
    for j, (a, b) in enumerate(itertools.pairwise(cuts)):
        states[j % 3].update(s[a:b], y[a:b], a)
    states[2].merge(states[0]).merge(states[1])
    got_s, got_y = states[2].sorted_rows()
    order = np.argsort((s + 0.0).view(np.uint64), kind="stable")
    assert got_s.tobytes() == (s + 0.0)[order].tobytes()
    np.testing.assert_array_equal(got_y, y[order])
