"""Multiclass input on the streaming engines: top-label metrics through the binary engine on the
top-label view, SCE from a mergeable (class, bin) state, ACE/TACE/TCE classwise from each
class's rows held (up to Tuning.hold_rows rows) or a rank search per class; all equal the in-memory
engine."""


import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calcheck.io import open_source
from calcheck.io.stream import plan_stream
from calcheck.metrics.multiclass import MulticlassPrepared, sce_per_class
from calcheck.streaming.classwise import ClasswiseSpec
from calcheck.streaming.views import ALL
from calcheck.tuning import Tuning
from tests.conftest import run_json, write_dataset

K = 4
IDS = ["ece_top", "mce_top", "ace_top", "sce", "brier", "tce", "ece_l2", "ace_cw", "tace",
       "tce_cw"]


def probs(rng, n, k=K):
    P = rng.dirichlet(np.full(k, 0.4), size=n)
    if k <= 10:
        P[::5] = np.round(P[::5], 1)                   # values on the bin edges
        P[::5] /= P[::5].sum(axis=1, keepdims=True)
    return P


def frame(seed, n, k=K):
    rng = np.random.default_rng(seed)
    P = probs(rng, n, k)
    y = (rng.uniform(size=n)[:, None] > np.cumsum(P, axis=1)).sum(axis=1)
    y = np.minimum(y, k - 1)
    df = pd.DataFrame({f"prob_{j}": P[:, j] for j in range(k)})
    df["label"] = y
    return df


@pytest.fixture(scope="module")
def hive(tmp_path_factory):
    root = tmp_path_factory.mktemp("mc")
    df = frame(5, 24_000)
    df["day"] = np.random.default_rng(1).integers(1, 5, len(df))
    return write_dataset(root, df, ["day"])


def same_rows(got, want):
    """Per-class rows equal: integers exactly, errors to 1e-12."""
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-12, abs=1e-15), (a, b)


def test_stream_equals_memory(cli, hive):
    ids = ",".join(IDS)
    mem = run_json(cli, hive, "-m", ids, "--bins-table", "ece_top")
    st = run_json(cli, hive, "-m", ids, "--engine", "stream", "--batch-rows", "2999",
                  "--bins-table", "ece_top")
    assert st["input"]["kind"] == "multiclass"
    assert st["input"]["rows_used"] == mem["input"]["rows_used"] == 24_000
    assert st["input"]["accuracy"] == pytest.approx(mem["input"]["accuracy"], rel=1e-15)
    assert st["settings"]["bins"] == 15                  # the multiclass default, as in memory
    for m in IDS:
        assert st["metrics"][m]["value"] == pytest.approx(mem["metrics"][m]["value"],
                                                          rel=1e-12, abs=1e-15), m
        got = {k: v for k, v in st["metrics"][m]["settings"].items() if k != "pava_input"}
        assert got == mem["metrics"][m]["settings"], m       # view: top-label included
    for m in ("sce", "ace_cw", "tace", "tce_cw"):
        errors = [[c["error"] for c in r["metrics"][m]["per_class"].values()] for r in (st, mem)]
        assert errors[0] == pytest.approx(errors[1], rel=1e-12, abs=1e-15), m
    assert [c["kept"] for c in st["metrics"]["tace"]["per_class"].values()] == \
           [c["kept"] for c in mem["metrics"]["tace"]["per_class"].values()]
    # keyed by the class names of input.classes
    assert list(mem["metrics"]["sce"]["per_class"]) == mem["input"]["classes"]
    assert st["settings"]["tace_threshold"] == 0.01
    for key in ("n", "positives"):                       # exact bin counts
        assert [b[key] for b in st["metrics"]["ece_top"]["bins"]] == \
               [b[key] for b in mem["metrics"]["ece_top"]["bins"]]


def test_default_metrics_are_the_in_memory_ones(cli, hive):
    st = run_json(cli, hive, "--engine", "stream")
    mem = run_json(cli, hive)
    assert list(st["metrics"]) == list(mem["metrics"]) == [
        "ece_top", "mce_top", "ace_top", "sce", "ace_cw", "tace", "tce_cw"]


@pytest.mark.parametrize("args", [
    ["--tace-threshold", "0.9", "--bins", "7"],          # classes with few or no kept values
    ["--test", "t", "--alpha", "0.1", "--tce-nmin", "30", "--tce-nmax", "3000"],
])
@pytest.mark.parametrize("hold", [True, False])
def test_classwise_options_stream_equal_memory(cli, hive, args, hold):
    tuning = None if hold else Tuning(hold_rows=0)
    ids = ["ace_cw", "tace", "tce_cw"]
    mem = run_json(cli, hive, "--where", "day <= 2", "-m", ",".join(ids), *args)
    st = run_json(cli, hive, "--where", "day <= 2", "-m", ",".join(ids), *args,
                  "--engine", "stream", "--batch-rows", "1000", tuning=tuning)
    for m in ids:
        assert st["metrics"][m]["value"] == pytest.approx(mem["metrics"][m]["value"],
                                                          rel=1e-12, abs=1e-15), m
        same_rows(list(st["metrics"][m]["per_class"].values()),
                  list(mem["metrics"][m]["per_class"].values()))


@pytest.mark.parametrize("hold", [True, False])
def test_tiny_classes_and_sub_streams(tmp_path, hold):
    """Every class of a small file through drive_lockstep directly: a class never predicted
    above the threshold keeps no value (TACE adds 0) and ties at p = 0 break by row order.
    Held (the group fits Tuning.hold_rows): one pass keeps every class's rows; else a grid pass and
    the exact PAVA pass, whose held rows then make the rank search and the row pass."""
    from calcheck.metrics.multiclass import ace_cw, tace, tce_cw
    from calcheck.streaming.classwise import classwise_positional
    from calcheck.streaming.engine import StreamSource

    rng = np.random.default_rng(4)
    n = 400
    P = np.zeros((n, 3))
    P[:, 0] = rng.choice([0.0, 0.25, 0.5], n)
    P[:, 1] = 1.0 - P[:, 0]                               # class 2: always 0
    y = rng.integers(0, 3, n)
    pq.write_table(pa.table({"prob_0": P[:, 0], "prob_1": P[:, 1], "prob_2": P[:, 2],
                             "label": y}), tmp_path / "t.parquet")
    src = StreamSource(str(tmp_path / "t.parquet"), batch_rows=37,
                       tuning=Tuning() if hold else Tuning(hold_rows=0))
    by_group = classwise_positional(src, 3, ["ace_cw", "tace", "tce_cw"], sizes={ALL: n},
                                    bins=5)
    got, errors = by_group[ALL]
    assert errors == {}
    data = MulticlassPrepared(P, y)
    want = {"ace_cw": ace_cw(data, bins=5), "tace": tace(data, bins=5), "tce_cw": tce_cw(data)}
    for m, r in want.items():
        assert got[m].value == pytest.approx(r.value, rel=1e-12, abs=1e-15), m
        same_rows(got[m].extra["per_class"], r.extra["per_class"])
    assert got["tace"].extra["per_class"][2] == {"class": 2, "error": 0.0, "kept": 0}
    assert got["tce_cw"].settings["pava_input"] == "exact"
    assert src.file_passes == (1 if hold else 2)


@given(st.integers(0, 2**31), st.integers(3, 1500), st.integers(1, 10), st.randoms())
def test_sce_state_any_partition_any_merge_order(seed, n, k, rnd):
    df = frame(seed, n, 3)
    P, y = df[[f"prob_{j}" for j in range(3)]].to_numpy(), df["label"].to_numpy()
    spec = ClasswiseSpec(3, 15)
    ref = spec.new().update(P, y)
    cuts = sorted(rnd.sample(range(1, n), min(k - 1, n - 1)))
    parts = [spec.new().update(a, b) for a, b in zip(np.split(P, cuts), np.split(y, cuts))]
    rnd.shuffle(parts)
    while len(parts) > 1:
        i = rnd.randrange(len(parts) - 1)
        parts[i:i + 2] = [parts[i].merge(parts[i + 1])]
    got = parts[0]
    np.testing.assert_array_equal(got.count, ref.count)
    np.testing.assert_array_equal(got.hits, ref.hits)
    want = sce_per_class(MulticlassPrepared(P, y), 15)
    np.testing.assert_allclose([r["error"] for r in got.results(["sce"])["sce"].extra["per_class"]],
                               want, rtol=1e-12, atol=1e-15)


def test_test_command_on_the_top_label_view(cli, hive):
    args = [hive, "--bins", "15", "--method", "tcal,spiegelhalter"]
    st = run_json(cli, *args, "--engine", "stream", cmd="test")
    mem = run_json(cli, *args, cmd="test")
    assert st["input"] == {**mem["input"], "batches": st["input"]["batches"]}
    for key in ("statistic", "plugin_l1", "plugin_l2_biased"):
        assert st["tests"]["tcal"][key] == pytest.approx(mem["tests"]["tcal"][key], rel=1e-10)
    assert st["tests"]["spiegelhalter"]["statistic"] == pytest.approx(
        mem["tests"]["spiegelhalter"]["statistic"], rel=1e-10)


def test_class_names_as_labels(cli, tmp_path):
    df = frame(2, 3000, 3).rename(columns={"prob_0": "p_cat", "prob_1": "p_dog",
                                           "prob_2": "p_eel"})
    df["label"] = np.array(["cat", "dog", "eel"])[df["label"]]
    (tmp_path / "d").mkdir()
    df.to_parquet(tmp_path / "d" / "a.parquet", index=False)
    args = [tmp_path / "d", "--probs", "p_*", "-m", "ece_top,sce"]
    st = run_json(cli, *args, "--engine", "stream", "--batch-rows", "700")
    mem = run_json(cli, *args)
    assert st["input"]["classes"] == ["cat", "dog", "eel"]
    for m in ("ece_top", "sce"):
        assert st["metrics"][m]["value"] == pytest.approx(mem["metrics"][m]["value"], rel=1e-12)


def test_bad_rows_name_the_file_and_row_and_drop_counts(cli, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    a, b = frame(3, 1000), frame(4, 1000)
    b.loc[336, "prob_0"] += 0.2                          # row 337 of the second file
    b.loc[900, "label"] = 9                              # not a class (row 1901)
    a.to_parquet(d / "a.parquet", index=False)
    b.to_parquet(d / "b.parquet", index=False)
    r = cli(["score", d, "--engine", "stream", "--batch-rows", "300"])
    assert r.code == 2
    assert "row 1337" in r.stderr and "sum to 1" in r.stderr and "prob_0" in r.stderr
    out = run_json(cli, d, "--engine", "stream", "--drop-invalid", "-m", "ece_top,sce")
    mem = run_json(cli, d, "--drop-invalid", "-m", "ece_top,sce")
    assert out["input"]["rows_dropped"] == mem["input"]["rows_dropped"] == 2
    assert out["input"]["dropped_by_reason"] == mem["input"]["dropped_by_reason"]
    for m in ("ece_top", "sce"):
        assert out["metrics"][m]["value"] == pytest.approx(mem["metrics"][m]["value"], rel=1e-12)
    ren = run_json(cli, d, "--engine", "stream", "--renormalize", "--drop-invalid")
    assert ren["input"]["rows_renormalized"] == 1 and ren["input"]["rows_dropped"] == 1


def test_what_needs_memory_is_refused(cli, hive):
    r = cli(["score", hive, "--engine", "stream", "-m", "pc"])
    assert r.code == 2 and "--engine memory" in r.stderr


@pytest.mark.parametrize("hold", [True, False])
def test_groups_of_multiclass_input_equal_memory(cli, hive, tmp_path, hold):
    """--by on multiclass input: per group the top-label grid and positional metrics, SCE and
    the classwise metrics (each (group, class)'s rows held, or its rank search); a 12-row group
    reports TCE's error, as in memory."""
    df = pq.read_table(hive).to_pandas()
    df["day"] = df["day"].astype(int)
    df["site"] = np.where(np.arange(len(df)) % 2000 == 3, "tiny", "big")
    df.to_parquet(tmp_path / "g.parquet", index=False)
    ids = ["ece_top", "ace_top", "sce", "tce", "ace_cw", "tace", "tce_cw", "brier"]
    for by in ("day", "site"):
        args = [tmp_path / "g.parquet", "--by", by, "-m", ",".join(ids)]
        mem = run_json(cli, *args)
        st = run_json(cli, *args, "--engine", "stream", "--batch-rows", "3000",
                      tuning=None if hold else Tuning(hold_rows=0))
        assert list(st["groups"]) == list(mem["groups"])
        for key, g in mem["groups"].items():
            sg = st["groups"][key]
            assert (sg["n"], sg["flagged"]) == (g["n"], g["flagged"])
            assert list(sg["metrics"]) == list(g["metrics"]), key
            for m, want in g["metrics"].items():
                got = sg["metrics"][m]
                if want["value"] is None:
                    assert got == want, (key, m)
                else:
                    assert got["value"] == pytest.approx(want["value"], rel=1e-12,
                                                         abs=1e-15), (key, m)
    assert mem["groups"]["tiny"]["metrics"]["tce_cw"]["value"] is None


def test_batches_of_many_classes_stay_bounded(tmp_path):
    df = frame(1, 10, 1000)
    df.to_parquet(tmp_path / "wide.parquet", index=False)
    plan = plan_stream(open_source(str(tmp_path / "wide.parquet"), "parquet"))
    assert len(plan.prob_columns) == 1000
    assert plan.batch_size(1_000_000) == 2_000
    assert plan.batch_size(1_500) == 1_500 and plan.batch_size(300) == 300


@given(st.integers(0, 2**31), st.integers(3, 1200), st.integers(1, 8), st.randoms())
def test_sub_stream_states_any_partition_any_merge_order(seed, n, k, rnd):
    """A pass of per-class (and thresholded) sub-streams: any split, merged in any order, gives
    the single pass's grid counts and collected sorted labels."""
    from calcheck.streaming.engine import StateSpec
    from calcheck.streaming.heldrows import SortedRowsSpec
    from calcheck.streaming.views import SubStream, ViewsSpec

    df = frame(seed, n, 3)
    P, y = df[[f"prob_{j}" for j in range(3)]].to_numpy(), df["label"].to_numpy()
    parts_spec = []
    for c in range(3):
        parts_spec += [(SubStream(cls=c), StateSpec(bins=15, log_loss=False)),
                       (SubStream(cls=c, min_score=0.2), SortedRowsSpec())]
    spec = ViewsSpec(tuple(parts_spec), "classes")
    ref = spec.new().update(P, y, 0)
    cuts = sorted(rnd.sample(range(1, n), min(k - 1, n - 1)))
    starts = [0, *cuts]
    parts = [spec.new().update(a, b, s0) for a, b, s0 in
             zip(np.split(P, cuts), np.split(y, cuts), starts)]
    rnd.shuffle(parts)
    while len(parts) > 1:
        i = rnd.randrange(len(parts) - 1)
        parts[i:i + 2] = [parts[i].merge(parts[i + 1])]
    got = parts[0]
    for j, (sub, _) in enumerate(parts_spec):
        if sub.min_score is None:
            np.testing.assert_array_equal(got.states[j].cell_count, ref.states[j].cell_count)
        else:
            p = P[:, sub.cls]
            keep = p >= 0.2
            want = (y[keep] == sub.cls)[np.argsort(p[keep], kind="stable")]
            np.testing.assert_array_equal(got.states[j].sorted_rows()[1], want)
            np.testing.assert_array_equal(ref.states[j].sorted_rows()[1], want)


def _spy_passes(monkeypatch):
    """The ``classes`` each streamed pass was asked to read (None: every column, validated)."""
    import calcheck.io.stream as stream

    seen: list = []
    original = stream.stream_batches

    def spy(plan, **kw):
        seen.append(kw.get("trusted"))
        return original(plan, **kw)

    monkeypatch.setattr(stream, "stream_batches", spy)
    return seen


def test_class_passes_read_only_their_classes_and_give_the_full_passes_numbers(
        cli, tmp_path, monkeypatch):
    """Once a pass has validated every row (none dropped or renormalized), the passes of class
    sub-streams read only their classes' columns, and a top-label pass skips the row checks:
    the report is the same as with every pass reading and validating every column."""
    from calcheck.streaming.engine import StreamSource

    path = tmp_path / "mc.parquet"
    frame(8, 9_000, k=6).to_parquet(path, row_group_size=2_000)
    args = [path, "--engine", "stream", "--batch-rows", "1500", "-m",
            "ece_top,ace_top,sce,ace_cw,tace,tce_cw"]
    seen = _spy_passes(monkeypatch)
    fast = run_json(cli, *args)
    assert seen[0] is None, seen                 # the first pass validates every column
    assert any(c is not None for c in seen), seen   # later passes: their classes' columns
    monkeypatch.setattr(StreamSource, "_trusted", lambda self, spec: None)
    full = run_json(cli, *args)
    for rep in (fast, full):
        rep.pop("timing", None)
        rep.get("engine", {}).pop("seconds", None)
    assert fast["metrics"] == full["metrics"]
    assert fast["input"] == full["input"]


def test_renormalized_rows_keep_every_pass_validating(cli, tmp_path, monkeypatch):
    """Rows renormalized on reading (probabilities written with rounding) are changed by the
    validation, so every pass reads and validates every column again."""
    df = frame(9, 3_000, k=5)
    probs_ = [f"prob_{j}" for j in range(5)]
    df[probs_] = df[probs_].round(4)                     # row sums off by up to ~2.5e-4
    path = tmp_path / "rounded.parquet"
    df.to_parquet(path)
    seen = _spy_passes(monkeypatch)
    rep = run_json(cli, path, "--engine", "stream", "-m", "ace_cw,tce_cw")
    assert rep["input"]["rows_renormalized"] > 0
    assert seen and all(c is None for c in seen)
    mem = run_json(cli, path, "-m", "ace_cw,tce_cw")
    for m in ("ace_cw", "tce_cw"):
        assert rep["metrics"][m]["value"] == pytest.approx(mem["metrics"][m]["value"],
                                                           rel=1e-12, abs=1e-15)


def test_a_file_changed_between_passes_is_an_error(tmp_path):
    """The column-subset reader re-checks what it reads: a value out of [0, 1] (the file was
    rewritten after the validating pass) stops the run with an input error."""
    from calcheck.errors import InputError
    from calcheck.io.stream import StreamStats, _trusted_batches

    path = tmp_path / "mc.parquet"
    frame(3, 100, k=3).to_parquet(path)
    plan = plan_stream(open_source(str(path)))
    good = pa.record_batch({"prob_1": pa.array([0.2, 0.7]), "label": pa.array([0, 2])})
    cols, y = next(_trusted_batches(plan, iter([good]), (1,), StreamStats()))
    assert list(cols) == [1] and cols[1].tolist() == [0.2, 0.7] and y.tolist() == [0, 2]
    bad = pa.record_batch({"prob_1": pa.array([0.2, 1.5]), "label": pa.array([0, 2])})
    with pytest.raises(InputError, match="changed between two passes"):
        list(_trusted_batches(plan, iter([bad]), (1,), StreamStats()))


def test_trusted_top_label_view_is_the_matrix_one():
    """The top-label view built column by column (first largest probability, its class) is
    calcheck.data.top_label_view's, ties between classes included."""
    from calcheck.data import top_label_view
    from calcheck.io.stream import StreamStats, _trusted_batches

    rng = np.random.default_rng(12)
    P = np.round(rng.dirichlet(np.full(4, 0.3), size=3_000), 1)    # many equal maxima
    P[:50] = 0.25
    P = P / P.sum(axis=1, keepdims=True)
    y = rng.integers(0, 4, len(P))
    batch = pa.record_batch({**{f"prob_{j}": P[:, j] for j in range(4)}, "label": y})
    df = pd.DataFrame({f"prob_{j}": P[:, j] for j in range(4)})
    df["label"] = y
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        df.to_parquet(f"{d}/p.parquet")
        plan = plan_stream(open_source(f"{d}/p.parquet"))
    conf, correct = next(_trusted_batches(plan, iter([batch]), (0, 1, 2, 3), StreamStats(),
                                          top=True))
    want_conf, want_correct = top_label_view(P, y)
    assert np.array_equal(conf, want_conf) and np.array_equal(correct, want_correct)


@pytest.mark.parametrize("k", [2, 3, 10, 33])
def test_top_label_columns_are_the_matrix_view(k):
    """The top-label view of K columns (in pieces of rows) is top_label_view's of the (n, K)
    matrix: the same confidences, and the first class reaching the maximum."""
    from calcheck.data import ClassColumns, top_label_columns, top_label_view

    rng = np.random.default_rng(k)
    n = 40_001                                          # several pieces and a short last one
    P = np.round(rng.dirichlet(np.full(k, 0.3), size=n), 2)      # many equal maxima
    P[:100] = 1.0 / k
    P = P / P.sum(axis=1, keepdims=True)
    y = rng.integers(0, k, n)
    want = top_label_view(P, y)
    cols = tuple(np.ascontiguousarray(P[:, j]) for j in range(k))
    for got in (top_label_columns(cols, y), ClassColumns(cols).top_label(y)):
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    rows = np.flatnonzero(rng.uniform(size=n) < 0.3)
    part = ClassColumns(cols)[rows]
    assert part.shape == (rows.shape[0], k)
    assert np.array_equal(part.top_label(y[rows])[0], want[0][rows])


def _old_row_checks(P, tol_rounding):
    """The row-sum rule on the (n, K) matrix, as it read before the columns were kept apart:
    (rounded rows, far rows, sums)."""
    from calcheck.data import ROW_SUM_TOL

    finite = np.isfinite(P).all(axis=1)
    sums = np.where(finite, P.sum(axis=1), 1.0)
    dev = np.abs(sums - 1.0)
    off = finite & (dev > ROW_SUM_TOL)
    rounded = off & (dev <= tol_rounding)
    return rounded, off & ~rounded, sums


@pytest.mark.parametrize("k", [3, 10, 129])
def test_class_columns_decide_rows_as_the_matrix_sums(k):
    """The columns' running sum only screens the rows; each screened row's sum is the matrix
    row's, so the rows renormalized, dropped or refused — and the renormalized values — are
    those of the (n, K) matrix's row sums, also at the tolerances' edges."""
    from calcheck.io.columns import class_columns, rounding_tolerance, row_major
    from calcheck.io.source import Source

    rng = np.random.default_rng(k)
    n = 3_000
    P = rng.dirichlet(np.full(k, 0.5), size=n)
    off_by = np.array([0.0, 4.9e-7, 5.1e-7, 9.99e-7, 1.001e-6, 3e-5, rounding_tolerance(k) * 0.999,
                       rounding_tolerance(k) * 1.001, 0.3])
    rows = rng.choice(n, size=(len(off_by), 20), replace=False)
    for d, r in zip(off_by, rows):
        P[r, 0] += d                               # row sums 1 + d (up to rounding)
    P[rows[-1][:3], 1] = np.nan                    # not finite: a problem of its own
    y = rng.integers(0, k, n)
    table = pa.table({**{f"p{j}": P[:, j] for j in range(k)}, "label": y})
    names = [f"p{j}" for j in range(k)]
    rounded, far, sums = _old_row_checks(P, rounding_tolerance(k))
    src = Source(name="t", fmt="parquet", path="t")
    cols, yy, keep, dropped, _, renorm = class_columns(
        src, table, names, "label", [str(j) for j in range(k)], renormalize=False,
        drop_invalid=True)
    bad = far | ~np.isfinite(P).all(axis=1)
    assert np.array_equal(keep, ~bad) and dropped == int(bad.sum())
    assert renorm == int(rounded.sum())
    want = P.copy()
    want[rounded] /= sums[rounded, None]
    np.testing.assert_array_equal(row_major(list(cols), int(yy.shape[0])), want[~bad])
    cols, yy, keep, *_ = class_columns(src, table, names, "label", [str(j) for j in range(k)],
                                       renormalize=True, drop_invalid=True)
    fixed = (rounded | far) & (sums > 0)
    want = P.copy()
    want[fixed] /= sums[fixed, None]
    finite = np.isfinite(P).all(axis=1)
    np.testing.assert_array_equal(row_major(list(cols), int(yy.shape[0])), want[finite])


def test_classwise_sums_of_columns_are_one_bincount_over_the_matrix():
    """Per (class, bin) counts and Σ p, class by class over columns, are bit for bit the old
    single bincount over the raveled (n, K) matrix."""
    from calcheck.binning import uniform_assign
    from calcheck.metrics.multiclass import classwise_uniform_sums

    rng = np.random.default_rng(4)
    n, k, bins = 20_000, 7, 15
    P = probs(rng, n, k)
    y = rng.integers(0, k + 2, n)                  # labels beyond the block's classes too
    for first, width in ((0, k), (2, 3)):
        block = P[:, first:first + width]
        key = uniform_assign(block, bins) + bins * np.arange(width)[None, :]
        cls = y - first
        inside = np.flatnonzero((cls >= 0) & (cls < width))
        want = (np.bincount(key.ravel(), minlength=bins * width),
                np.bincount(key.ravel(), weights=block.ravel(), minlength=bins * width),
                np.bincount(key[inside, cls[inside]], minlength=bins * width))
        cols = [np.ascontiguousarray(block[:, j]) for j in range(width)]
        for got in (classwise_uniform_sums(block, y, first, bins),
                    classwise_uniform_sums(cols, y, first, bins)):
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b)


def test_held_top_label_view_gives_the_file_passes_numbers(cli, tmp_path):
    """A small file keeps its top-label view in the first pass, and the top-label metrics'
    later passes fold those batches: the report is the one of passes reading the file, with
    fewer file passes."""
    path = tmp_path / "mc.parquet"
    frame(14, 20_000, k=5).to_parquet(path, row_group_size=3_000)
    args = [path, "--engine", "stream", "--batch-rows", "2500", "-m",
            "ece_top,ace_top,mce_q,tce,pde,sce,tce_cw"]
    held = run_json(cli, *args)
    read = run_json(cli, *args, tuning=Tuning(hold_top_rows=0))
    assert held["metrics"] == read["metrics"] and held["input"] == read["input"]
    assert held["settings"]["passes"] < read["settings"]["passes"]


def test_sce_from_the_held_classes_is_the_first_pass_sce(cli, tmp_path, monkeypatch):
    """With the classes held whole for ace_cw / tce_cw, the first pass leaves SCE's (class, bin)
    sums out and each held class gives its SCE error from its sorted rows: the same bins and
    counts, the sums in another order — equal to the first pass's SCE and the in-memory one to
    ~1e-15.  Alone, or with --by, SCE still comes from the first pass."""
    path = tmp_path / "mc.parquet"
    frame(21, 12_000, k=6).to_parquet(path, row_group_size=2_500)
    made: list = []
    original = ClasswiseSpec.new

    def spy(self):
        made.append(self.sce)
        return original(self)

    monkeypatch.setattr(ClasswiseSpec, "new", spy)
    later = run_json(cli, path, "--engine", "stream", "--batch-rows", "1000", "-m",
                     "sce,ace_cw,tce_cw")
    assert made and not any(made)                  # the first pass skipped SCE's sums
    made.clear()
    first = run_json(cli, path, "--engine", "stream", "--batch-rows", "1000", "-m", "sce")
    assert made and all(made)
    made.clear()
    grouped = run_json(cli, path, "--engine", "stream", "-m", "sce,ace_cw", "--by", "label")
    assert made and all(made)
    memory = run_json(cli, path, "-m", "sce,ace_cw")
    for rep in (first, memory):
        assert later["metrics"]["sce"]["value"] == pytest.approx(rep["metrics"]["sce"]["value"],
                                                                 rel=1e-12, abs=1e-15)
        got, want = later["metrics"]["sce"]["per_class"], rep["metrics"]["sce"]["per_class"]
        assert got.keys() == want.keys()
        for k in got:
            assert got[k]["error"] == pytest.approx(want[k]["error"], rel=1e-12, abs=1e-15)
    assert later["metrics"]["sce"]["settings"] == first["metrics"]["sce"]["settings"]
    assert later["metrics"]["ace_cw"]["value"] == pytest.approx(
        memory["metrics"]["ace_cw"]["value"], rel=1e-12)
    assert grouped["metrics"]["sce"]["value"] == pytest.approx(first["metrics"]["sce"]["value"],
                                                               rel=1e-12)


def test_class_passes_slice_the_labels_the_first_pass_kept(cli, tmp_path, monkeypatch):
    """The first pass keeps every row's class (1 byte a row); the class passes then read their
    probability columns alone and slice those labels: the same report as reading the label
    column in every pass, and a stream whose rows do not add up to the kept labels is an
    error."""
    import calcheck.io.stream as stream
    from calcheck.errors import InputError
    from calcheck.io.stream import StreamStats, _trusted_batches
    from calcheck.streaming.classwise import ClasswiseState

    path = tmp_path / "mc.parquet"
    frame(17, 9_000, k=5).to_parquet(path, row_group_size=2_000)
    args = [path, "--engine", "stream", "--batch-rows", "1500", "-m", "sce,ace_cw,tace,tce_cw"]
    read: list = []
    original = stream.fragment_batches

    def spy(plan, fr, batch_rows, *more, columns=None):
        read.append(columns)
        return original(plan, fr, batch_rows, *more, columns=columns)

    monkeypatch.setattr(stream, "fragment_batches", spy)
    sliced = run_json(cli, *args)
    class_reads = [c for c in read if c is not None]
    assert class_reads and all("label" not in c for c in class_reads), read
    read.clear()
    monkeypatch.setattr(ClasswiseState, "take_held_labels", lambda self: None)
    column = run_json(cli, *args)
    assert all("label" in c for c in read if c is not None), read
    assert sliced["metrics"] == column["metrics"] and sliced["input"] == column["input"]

    plan = plan_stream(open_source(str(path)))
    good = pa.record_batch({"prob_1": pa.array([0.2, 0.7])})
    cols, y = next(_trusted_batches(plan, iter([good]), (1,), StreamStats(),
                                    labels=np.array([0, 2], dtype=np.int8)))
    assert cols[1].tolist() == [0.2, 0.7] and y.tolist() == [0, 2]
    with pytest.raises(InputError, match="changed between two passes"):   # one row short
        list(_trusted_batches(plan, iter([good]), (1,), StreamStats(),
                              labels=np.array([0], dtype=np.int8)))
    with pytest.raises(InputError, match="changed between two passes"):   # one row more
        list(_trusted_batches(plan, iter([good]), (1,), StreamStats(),
                              labels=np.array([0, 2, 1], dtype=np.int8)))
