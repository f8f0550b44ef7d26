"""--engine stream: hive-partitioned datasets, --where push-down, bounded memory."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import calcheck
from tests.conftest import run_json, write_dataset

STREAM_IDS = ["ece", "ece_l2", "mce", "brier", "log_loss"]


@pytest.fixture(scope="module")
def hive(tmp_path_factory):
    root = tmp_path_factory.mktemp("hive")
    rng = np.random.default_rng(0)
    n = 60_000
    s = rng.uniform(size=n)
    df = pd.DataFrame({"score": s, "label": rng.binomial(1, s ** 1.3),
                       "split": rng.choice(["train", "test"], n), "day": rng.integers(1, 4, n)})
    write_dataset(root, df, ["split", "day"])
    df.to_parquet(root / "all.parquet", index=False)
    return root, df


def metrics_of(cli, args):
    return run_json(cli, *args)


@pytest.mark.parametrize("batch_rows", ["997", "1000000"])
def test_stream_equals_in_memory(cli, hive, batch_rows):
    root, df = hive
    stream = metrics_of(cli, [root / "ds", "--engine", "stream", "--batch-rows", batch_rows,
                              "--bins-table", "ece"])
    memory = metrics_of(cli, [root / "all.parquet", "-m", ",".join(STREAM_IDS),
                              "--bins-table", "ece"])
    for mid in STREAM_IDS:
        assert stream["metrics"][mid]["value"] == pytest.approx(memory["metrics"][mid]["value"],
                                                                rel=1e-12, abs=1e-15)
    sb, mb = stream["metrics"]["ece"]["bins"], memory["metrics"]["ece"]["bins"]
    assert [b["n"] for b in sb] == [b["n"] for b in mb]
    assert [b["positives"] for b in sb] == [b["positives"] for b in mb]
    assert stream["input"]["rows_read"] == len(df) and stream["settings"]["engine"] == "stream"


def test_where_is_pushed_down_in_both_engines(cli, hive):
    root, df = hive
    sub = df[(df.split == "test") & (df.day >= 2)]
    where = "split = 'test' and day >= 2"
    stream = metrics_of(cli, [root / "ds", "--engine", "stream", "--where", where, "-m", "ece"])
    memory = metrics_of(cli, [root / "ds", "--where", where, "-m", "ece"])
    import calcheck

    ref = calcheck.ece(sub["score"].to_numpy(), sub["label"].to_numpy()).value
    assert stream["metrics"]["ece"]["value"] == pytest.approx(ref, rel=1e-12)
    assert memory["metrics"]["ece"]["value"] == pytest.approx(ref, rel=1e-12)
    assert stream["input"]["rows_read"] == len(sub)


def test_stream_errors_name_the_global_row(cli, tmp_path):
    d = tmp_path / "parts"
    d.mkdir()
    s = np.linspace(0.01, 0.99, 3000)
    s[2500] = 1.7
    pq.write_table(pa.table({"score": s, "label": np.zeros(3000, dtype=np.int8)}),
                   d / "p.parquet", row_group_size=1000)
    r = cli(["score", d, "--engine", "stream", "--batch-rows", "400"])
    assert r.code == 2 and "1 value outside [0, 1]; first at row 2501 (e.g. 1.7)" in r.stderr
    ok = cli(["score", d, "--engine", "stream", "--drop-invalid", "--json", "-m", "brier"])
    assert ok.code == 0 and json.loads(ok.stdout)["input"]["rows_dropped"] == 1


@pytest.mark.parametrize("args, needle", [
    (["--engine", "stream", "-m", "pc"], "need(s) --engine memory"),
    (["--engine", "stream", "--var", "x"], "no column 'x'"),
    (["--engine", "warp"], "unknown --engine"),
    (["--engine", "stream", "--input-format", "csv"], "reads Parquet only"),
    (["--engine", "stream", "--compat", "nixon"], "needs --engine memory"),
    (["--where", "score >> 3"], "expected a value (a number or a quoted string), found '>'"),
    (["--batch-rows", "0"], "--batch-rows must be"),
])
def test_stream_usage_errors(cli, hive, args, needle):
    root, _ = hive
    r = cli(["score", root / "ds", *args])
    assert r.code == 2 and needle in r.stderr, r.stderr


PROBE = textwrap.dedent("""
    import resource, sys
    cap = int(sys.argv[1])
    if cap:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    from calcheck.cli import run
    rc = run(sys.argv[2:])
    peak = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmPeak')][0]
    sys.stderr.write(f'VMPEAK={peak}\\n')
    sys.exit(rc)
""")


def probe(cap, *args):
    return subprocess.run([sys.executable, "-c", PROBE, str(cap), *map(str, args)],
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
def test_streams_a_dataset_larger_than_a_memory_cap(tmp_path):
    rng = np.random.default_rng(1)
    big = tmp_path / "big"
    big.mkdir()
    for i in range(4):                                   # 20 M rows
        s = rng.uniform(size=5_000_000)
        pq.write_table(pa.table({"score": s, "label": (rng.uniform(size=s.size) < s)
                                 .astype(np.int8)}), big / f"part-{i}.parquet")
    tiny = tmp_path / "tiny.parquet"
    pq.write_table(pa.table({"score": [0.2, 0.8], "label": [0, 1]}), tiny)
    base = probe(0, "score", tiny, "--engine", "stream", "-m", "ece", "--json")
    assert base.returncode == 0, base.stderr
    baseline = int(base.stderr.split("VMPEAK=")[1].split()[0]) * 1024
    cap = baseline + 300 * 2**20
    stream = probe(cap, "score", big, "--engine", "stream", "--batch-rows", "250000",
                   "-m", "ece,brier,ace,tce_q", "--json")
    assert stream.returncode == 0, stream.stderr[-500:]
    assert json.loads(stream.stdout)["input"]["rows_read"] == 20_000_000
    # VECE along a continuous variable: rank search over 20 M values, 4,096 LOESS groups
    var = probe(cap, "score", big, "--engine", "stream", "--batch-rows", "250000", "-m", "ece",
                "--var", "score", "--json")
    assert var.returncode == 0, var.stderr[-500:]
    assert json.loads(var.stdout)["variables"]["score"]["n"] == 20_000_000
    # no in-memory contrast any more: the memory engine now holds ~18 bytes a row and, without
    # numba's compiled scan (it cannot load under the cap), runs PAVA-BC in the Python loop
    # for minutes instead of failing; the stream engine's bound is what this test checks


@pytest.mark.parametrize("extra", [["-m", "brier"], ["--probs-test"]])
def test_stream_text_plot_equals_memory(cli, hive, tmp_path, extra):
    """score --plot on the streaming engine draws the in-memory terminal diagram (ECE's bin
    table; ece_top for multiclass input)."""
    root, _ = hive
    path = root / "ds"
    if extra == ["--probs-test"]:
        rng = np.random.default_rng(5)
        p = rng.dirichlet(np.ones(3), size=3000)
        path = tmp_path / "mc.parquet"
        pq.write_table(pa.table({"prob_0": p[:, 0], "prob_1": p[:, 1], "prob_2": p[:, 2],
                                 "label": rng.integers(0, 3, 3000)}), path)
        extra = ["-m", "sce"]
    mem = cli(["score", path, *extra, "--plot"])
    st = cli(["score", path, *extra, "--plot", "--engine", "stream", "--batch-rows", "999"])
    assert mem.code == 0 and st.code == 0, st.stderr
    plot = mem.stdout[mem.stdout.index("reliability diagram"):]
    assert "####" in plot and st.stdout.endswith(plot)


def test_stream_names_what_it_cannot_read(cli, tmp_path):
    csv = tmp_path / "p.csv"
    csv.write_text("score,label\n0.2,0\n0.7,1\n")
    r = cli(["score", csv, "--engine", "stream"])
    assert r.code == 2 and "reads Parquet only" in r.stderr


def calibrated_file(path, n, *, seed, row_group_size):
    """n uniform scores with Bernoulli(score) int8 labels, in row groups of that size."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(size=n)
    pq.write_table(pa.table({"score": s, "label": (rng.uniform(size=n) < s).astype("i1")}),
                   path, row_group_size=row_group_size)
    return path


def even_batches(files, batch_rows):
    """The batch sizes of files of row groups (``files``: each file's group sizes): within a
    file, consecutive groups read together while their rows stay within ``batch_rows`` (a
    larger group alone), and each such run in the nearest whole number of parts of
    ``batch_rows`` rows (at least one), all of one size but the run's last."""
    out = []
    for groups in files:
        runs, rows = [], 0
        for g in groups:
            if rows and rows + g > batch_rows:
                runs.append(rows)
                rows = 0
            rows += g
        runs += [rows] if rows else []
        for r in runs:
            size = -(-r // max(1, round(r / batch_rows)))
            out += [size] * (r // size) + ([r % size] if r % size else [])
    return out


@pytest.mark.parametrize("batch_rows", [1_000, 1_500, 10_000])
def test_a_single_file_streams_without_pyarrow_dataset(tmp_path, batch_rows):
    """A single file without --where is read with pyarrow.parquet, its row groups in runs of at
    most ``batch_rows`` rows (a larger group alone), each run in equal batches of about
    ``batch_rows`` rows (never a short remainder beside full batches): the rows of a
    pyarrow.dataset scan, in its order, and the object pickles (a Dask worker scans it)."""
    import pickle

    import pyarrow.dataset as pads

    from calcheck.io import open_source
    from calcheck.io.source import parquet_format
    from calcheck.io.stream import FileFragment, fragment_batches, plan_stream

    path = calibrated_file(tmp_path / "f.parquet", 7_300, seed=4, row_group_size=2_000)
    plan = plan_stream(open_source(str(path)))
    assert [type(f) for f in plan.fragments] == [FileFragment]
    got = [b for f in plan.fragments for b in fragment_batches(plan, f, batch_rows)]
    ds = pads.dataset(str(path), format=parquet_format())
    want = [b for part in next(iter(ds.get_fragments())).split_by_row_group(None, schema=ds.schema)
            for b in part.to_batches(columns=["score", "label"], batch_size=batch_rows)]
    assert [b.num_rows for b in got] == even_batches([[2_000, 2_000, 2_000, 1_300]],
                                                      batch_rows)
    assert pa.Table.from_batches(got).equals(pa.Table.from_batches(want))
    again = pickle.loads(pickle.dumps(plan.fragments[0]))
    assert again.metadata.num_rows == 7_300
    # with --where the dataset scan (and its row-group pruning) is used
    assert not isinstance(plan_stream(open_source(str(path)), where="score > 0.5").fragments[0],
                          FileFragment)


def test_small_row_groups_are_read_together(tmp_path):
    """Row groups smaller than a batch are read a few at a time (DuckDB writes 122,880-row
    groups: a batch of each cost the default stream a quarter of its time), a larger group
    alone, and a batch spans the groups of its run: the file's rows, in order, and the same
    metrics as a file of one group."""
    from calcheck.io import open_source
    from calcheck.io.source import row_group_runs
    from calcheck.io.stream import fragment_batches, plan_stream

    assert row_group_runs([100] * 7, 350) == [([0, 1, 2], 300), ([3, 4, 5], 300), ([6], 100)]
    assert row_group_runs([100, 100, 1_000, 100, 0, 100], 350) == [
        ([0, 1], 200), ([2], 1_000), ([3, 4, 5], 200)]
    assert row_group_runs([], 350) == []
    small = calibrated_file(tmp_path / "small.parquet", 7_000, seed=9, row_group_size=100)
    whole = calibrated_file(tmp_path / "whole.parquet", 7_000, seed=9, row_group_size=7_000)
    plan = plan_stream(open_source(str(small)))
    got = [b for f in plan.fragments for b in fragment_batches(plan, f, 1_000)]
    assert [b.num_rows for b in got] == [1_000] * 7
    assert pa.Table.from_batches(got).equals(pq.read_table(whole, columns=["score", "label"]))
    a = calcheck.score(str(small), engine="stream", batch_rows=1_000)
    b = calcheck.score(str(whole), engine="stream", batch_rows=1_000)
    assert {k: m["value"] for k, m in a.metrics.items()} == \
        {k: m["value"] for k, m in b.metrics.items()}


def test_streaming_a_single_file_imports_no_pandas(tmp_path):
    """pyarrow.dataset's import loads pandas (~0.15 s, 50 MB): a single file is streamed
    without it."""
    rng = np.random.default_rng(5)
    s = rng.uniform(size=5_000)
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"score": s, "label": (rng.uniform(size=s.size) < s).astype("i1")}),
                   path)
    code = ("import sys; from calcheck.cli import run\n"
            "try:\n    run(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('PANDAS=%s' % ('pandas' in sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, "score", str(path), "--engine", "stream",
                        "--json"], capture_output=True, text=True, check=True)
    assert r.stderr.strip().splitlines()[-1] == "PANDAS=False", r.stderr


def test_a_plain_directory_streams_part_by_part_without_pyarrow_dataset(tmp_path):
    """A directory without hive partitions (and without --where) is read part by part with
    pyarrow.parquet: the dataset's rows in the dataset's order, each row group in equal
    batches; a hive tree still goes
    through pyarrow.dataset (its keys are columns)."""
    import pyarrow.dataset as pads

    from calcheck.io import open_source
    from calcheck.io.source import parquet_format
    from calcheck.io.stream import FileFragment, fragment_batches, plan_stream

    rng = np.random.default_rng(6)
    root = tmp_path / "parts"
    (root / "sub").mkdir(parents=True)
    for i, (n, group) in enumerate([(2_500, 1_000), (700, 300), (4_000, 4_000)]):
        s = rng.uniform(size=n)
        where = root / ("sub" if i == 1 else ".") / f"part-{i}.parquet"
        pq.write_table(pa.table({"score": s, "label": (rng.uniform(size=n) < s).astype("i8")}),
                       where, row_group_size=group)
    plan = plan_stream(open_source(str(root)))
    assert all(isinstance(f, FileFragment) for f in plan.fragments)
    got = [b for f in plan.fragments for b in fragment_batches(plan, f, 800)]
    ds = pads.dataset(sorted(str(p) for p in root.rglob("*.parquet")), format=parquet_format())
    want = [b for fr in ds.get_fragments()
            for part in fr.split_by_row_group(None, schema=ds.schema)
            for b in part.to_batches(columns=["score", "label"], batch_size=800)]
    assert [b.num_rows for b in got] == even_batches([[1_000, 1_000, 500], [4_000],
                                                      [300, 300, 100]], 800)
    assert pa.Table.from_batches(got).equals(pa.Table.from_batches(want))

    hive = tmp_path / "hive" / "day=1"
    hive.mkdir(parents=True)
    pq.write_table(pa.table({"score": [0.2, 0.7], "label": [0, 1]}), hive / "p.parquet")
    plan = plan_stream(open_source(str(tmp_path / "hive")))
    assert not any(isinstance(f, FileFragment) for f in plan.fragments)
    assert "day" in plan.schema.names


def test_streaming_a_plain_directory_imports_no_pandas(tmp_path):
    rng = np.random.default_rng(7)
    for i in range(3):
        s = rng.uniform(size=2_000)
        pq.write_table(pa.table({"score": s, "label": (rng.uniform(size=s.size) < s)
                                 .astype("i1")}), tmp_path / f"p{i}.parquet")
    code = ("import sys; from calcheck.cli import run\n"
            "try:\n    run(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('PANDAS=%s' % ('pandas' in sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, "score", str(tmp_path), "--engine", "stream",
                        "-m", "ece,ace,tce", "--json"], capture_output=True, text=True,
                       check=True)
    assert json.loads(r.stdout)["input"]["rows_used"] == 6_000
    assert r.stderr.strip().splitlines()[-1] == "PANDAS=False", r.stderr


def test_each_pass_hands_arrows_cached_memory_back_once_read(tmp_path, monkeypatch):
    """When a pass has read its last batch, the reader releases what Arrow's memory pool keeps
    of the decoded batches (tens of MB at 10^7 rows), before the next phase allocates: once
    per pass, after the last batch."""
    from calcheck.io import open_source
    from calcheck.io import stream as io_stream
    from calcheck.io.stream import plan_stream, stream_batches

    calls = []

    class Pool:
        def release_unused(self):
            calls.append("release")

    monkeypatch.setattr(io_stream.pa, "default_memory_pool", lambda: Pool())
    path = calibrated_file(tmp_path / "f.parquet", 3_000, seed=2, row_group_size=1_000)
    plan = plan_stream(open_source(str(path)))
    for _ in stream_batches(plan, batch_rows=1_000):
        calls.append("batch")
    assert calls == ["batch"] * 3 + ["release"]


@pytest.mark.parametrize("bad", [0.5, 2.0, 300.0, np.nan, -1.0])
def test_float_labels_stream_as_int8_and_bad_ones_are_named(tmp_path, cli, bad):
    """0.0/1.0 float labels take the reader's fast path as int8 (the same report as integer
    labels); any other float — 0.5, 2, a value an int8 wraps, NaN, −1 — falls back to the full
    checks, which name the file, column and first bad row."""
    rng = np.random.default_rng(12)
    n = 5_000
    s = rng.uniform(size=n)
    y = (rng.uniform(size=n) < s).astype(np.int8)
    ints, floats = tmp_path / "ints.parquet", tmp_path / "floats.parquet"
    pq.write_table(pa.table({"score": s, "label": y}), ints)
    pq.write_table(pa.table({"score": s, "label": y.astype(np.float64)}), floats)
    got = run_json(cli, floats, "--engine", "stream")
    want = run_json(cli, ints, "--engine", "stream")
    assert got["metrics"] == want["metrics"]
    wrong = y.astype(np.float64)
    wrong[3_210] = bad
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"score": s, "label": wrong}), path)
    r = cli(["score", str(path), "--engine", "stream"])
    assert r.code == 2 and "'label'" in r.stderr and "row 3211" in r.stderr, r.stderr


def test_every_pass_spec_and_state_pickles(cli, hive, monkeypatch):
    """Dask workers receive each pass's spec and send back its partial state: every spec a
    stream run hands a pass — the grid, rank searches, row passes, sub-streams, variables,
    groups, tests, figures' bins — and every state it returns survive pickling, and the run
    computes the same report through the round trips (a spy on ``StreamSource.run``)."""
    import pickle

    from calcheck.streaming.engine import StreamSource
    from calcheck.tuning import Tuning

    root, _ = hive
    real, kinds = StreamSource.run, set()

    def through_pickle(self, spec, labels=None):
        state, stats = real(self, pickle.loads(pickle.dumps(spec)), labels)
        kinds.add(type(spec).__name__)
        return pickle.loads(pickle.dumps(state)), stats

    args = [root / "all.parquet", "--engine", "stream", "--batch-rows", "7000"]
    runs = [(["-m", "all", "--var", "day"], "score"), (["--by", "split", "--ci", "--seed", "3"],
                                                     "score"),
            (["--method", "all", "--adaptive"], "test")]
    knobs = Tuning(replay=False, prospect=False)         # every pass reads the source
    plain = [run_json(cli, *args, *extra, cmd=cmd, tuning=knobs) for extra, cmd in runs]
    monkeypatch.setattr(StreamSource, "run", through_pickle)
    pickled = [run_json(cli, *args, *extra, cmd=cmd, tuning=knobs) for extra, cmd in runs]
    for a, b in zip(plain, pickled):
        a.pop("timing", None), b.pop("timing", None)
        assert json.dumps(a, sort_keys=True, default=str) == \
            json.dumps(b, sort_keys=True, default=str)
    # (row passes run inside a ViewsSpec, beside a search)
    assert {"StateSpec", "ViewsSpec", "SelectSpec", "RankSpec", "CoxSpec", "GroupedSpec",
            "SortedRowsSpec"} <= kinds, kinds


def test_the_reported_passes_are_the_reads_of_the_data(cli, hive, tmp_path, monkeypatch):
    """One counter of passes: ``settings.passes`` is the number of times a run read the data
    (a spy on the reader), whatever served the other passes — exact PAVA's held rows, the first
    search's kept cells, a small multiclass file's held top-label view — and whichever
    computation asked (rank searches, groups, variables, tests, Cox's Newton passes)."""
    import calcheck.io.stream as io_stream

    root, _ = hive
    rng = np.random.default_rng(5)
    P = rng.dirichlet(np.ones(4) * 0.7, 3_000)
    y = (rng.random(3_000)[:, None] > np.cumsum(P, axis=1)).sum(axis=1).clip(0, 3)
    pq.write_table(pa.table({**{f"prob_{j}": P[:, j] for j in range(4)}, "label": y}),
                   tmp_path / "mc.parquet")
    real, reads = io_stream.stream_batches, [0]

    def counting(*args, **kwargs):
        reads[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(io_stream, "stream_batches", counting)
    runs = [([root / "all.parquet", "-m", "all", "--var", "day"], "score"),
            ([root / "all.parquet", "--by", "split", "-m", "ece,ace,tce"], "score"),
            ([root / "all.parquet", "--method", "all", "--adaptive"], "test"),
            ([tmp_path / "mc.parquet", "-m", "ece,ace,tce,ace_cw,tace,tce_cw"], "score")]
    for args, cmd in runs:
        reads[0] = 0
        got = run_json(cli, *args, "--engine", "stream", "--batch-rows", "7000", cmd=cmd)
        assert got["settings"]["passes"] == reads[0] > 1, (args, reads[0])


def test_the_kept_row_budgets_together_stay_within_the_memory_goal():
    """The budgets of rows kept in memory live in one Tuning, and their worst case at once
    (phase by phase of a run) is bounded: the defaults fit ``kept_goal``; a Tuning whose
    budgets would not is refused when made, naming both numbers."""
    from calcheck.tuning import DEFAULT, Tuning

    assert 0 < DEFAULT.kept_bytes() <= DEFAULT.kept_goal
    base = DEFAULT.kept_bytes()
    more = Tuning(hold_top_rows=DEFAULT.hold_top_rows + 1_000_000)   # 10 bytes a row more
    assert more.kept_bytes() == base + 10_000_000
    assert Tuning(prospect=False).kept_bytes() == base             # PAVA's rows are the larger
    with pytest.raises(ValueError, match="kept_goal"):
        Tuning(exact_pava_rows=10 ** 8)
    assert Tuning(exact_pava_rows=10 ** 8, kept_goal=2 << 30).exact_pava_rows == 10 ** 8
