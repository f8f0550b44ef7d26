"""Weighted multiclass input on the weighted passes (``--engine stream``/``dask`` beyond
``Tuning.hold_weighted_rows``; calcheck/engines/weighted_classes.py): the top-label view's
metrics, tests and diagrams, and SCE, classwise ACE and TACE from every class's passes in
lockstep, each the in-memory engine's number — per ``--by`` group and ``--time`` window
too; what needs the rows (a matrix the passes do not hold) is refused before any pass.

Invariants the classwise passes rely on, each held by a test here:

* a class sub-stream is that class's one-vs-rest view with the rows' weights (TACE's: the rows
  at or above the threshold), so its weighted passes give the binary kernel's numbers on
  it (``test_streamed_multiclass_weights_give_the_in_memory_numbers``);
* a class whose kept rows weigh nothing adds 0, and TACE's ``kept`` is each class's mass
  (``test_a_class_that_weighs_nothing_adds_zero``);
* the weights reach every view of the reader (top-label and columns): a later pass never
  takes the reader's trusted path, which carries no weights
  (``test_streamed_multiclass_weights_give_the_in_memory_numbers``, several passes).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calcheck.tuning import Tuning
from tests.test_weights_stream import _close

SMALL = Tuning(hold_weighted_rows=100)       # every file below is beyond it: streamed
METRICS = "ece_top,mce_top,ace_top,sce,ace_cw,tace,ece,ace,mce_q,pde,brier,log_loss"


def _multiclass(tmp_path, n=6000, k=4, seed=0, decimals=3, name="m.parquet"):
    """Class probabilities (rounded: ties), labels drawn from them, weights of three kinds, a
    group column (group "3" all weight zero; some values missing) and five days."""
    rng = np.random.default_rng(seed)
    p = np.exp(rng.normal(size=(n, k)) * 1.5)
    p /= p.sum(axis=1, keepdims=True)
    if decimals:
        p = np.round(p, decimals)
        p[:, -1] = 1.0 - p[:, :-1].sum(axis=1)
        p[p[:, -1] < 0] = 1.0 / k
    cum = np.cumsum(np.clip(p, 0, None), axis=1)
    y = np.minimum((rng.random(n)[:, None] * cum[:, -1:] > cum).sum(axis=1), k - 1)
    g = rng.integers(0, 4, n).astype(str).astype(object)
    g[rng.random(n) < 0.02] = None
    iw = rng.gamma(2.0, 1.5, n)
    iw[g == "3"] = 0.0
    ts = np.datetime64("2026-01-01") + rng.integers(0, 5 * 86400, n).astype("timedelta64[s]")
    cols = {f"prob_{j}": p[:, j] for j in range(k)}
    cols.update({"label": y, "w": np.where(y == 0, 1.0, 5.0) * rng.choice([1.0, 2.5, 0.0], n),
                 "iw": iw, "n": rng.integers(0, 4, n).astype(np.float64),
                 "g": pa.array(list(g), pa.string()), "ts": ts})
    path = tmp_path / name
    pq.write_table(pa.table(cols), path)
    return path


def _pair(cli, args, engine="stream"):
    mem = json.loads(cli([*args, "--json"]).stdout)
    r = cli([*args, "--json", "--engine", engine], tuning=SMALL)
    assert r.code == 0, r.stderr
    got = json.loads(r.stdout)
    assert "weighted" in got["settings"] and "held" not in got["settings"]
    return mem, got


@pytest.mark.parametrize("column", ["w", "iw"])
@pytest.mark.parametrize("decimals", [3, 0])
def test_streamed_multiclass_weights_give_the_in_memory_numbers(tmp_path, cli, column,
                                                                decimals):
    path = _multiclass(tmp_path, decimals=decimals)
    mem, got = _pair(cli, ["score", path, "--weight", column, "-m", METRICS,
                           "--bins-table", "all"])
    _close(mem["metrics"], got["metrics"], "metrics")
    _close(mem["input"], got["input"], "input")
    mem, got = _pair(cli, ["score", path, "--weight", column])      # the default set
    assert list(got["metrics"]) == ["ece_top", "mce_top", "ace_top", "sce", "ace_cw", "tace"]
    _close(mem["metrics"], got["metrics"], "metrics")
    _close(mem["summary"], got["summary"], "summary")


def test_streamed_multiclass_tests_are_the_top_label_views(tmp_path, cli):
    """The tests of multiclass input run on its top-label view, as in memory."""
    path = _multiclass(tmp_path)
    mem, got = _pair(cli, ["test", path, "--weight", "iw", "--method",
                           "hl,spiegelhalter,cox"])
    for entry in got["tests"].values():
        for k in ("engine_fit", "passes"):
            entry["settings"].pop(k, None)
    _close(mem["tests"], got["tests"], "tests")
    _close(mem["input"], got["input"], "input")
    assert got["input"]["view"] == "top-label"
    mem, got = _pair(cli, ["test", path, "--weight", "iw", "--method", "tcal", "--bins", "8"])
    assert got["tests"]["tcal"]["statistic"] == pytest.approx(mem["tests"]["tcal"]["statistic"],
                                                              rel=1e-9)


@pytest.mark.parametrize("grouping", [["--by", "g"], ["--time", "ts", "--window", "1d"]])
def test_streamed_multiclass_groups_and_windows(tmp_path, cli, grouping):
    """Every group's (window's) top-label and classwise metrics are the in-memory ones; the
    group whose weights are all zero says why, as in memory."""
    path = _multiclass(tmp_path)
    mem, got = _pair(cli, ["score", path, "--weight", "iw", "-m", METRICS, *grouping])
    key = "groups" if grouping[0] == "--by" else "windows"
    _close(mem[key], got[key], key)
    _close(mem["metrics"], got["metrics"], "metrics")
    if key == "groups":
        assert "weight 0" in got["groups"]["3"]["metrics"]["sce"]["error"]


def test_a_class_that_weighs_nothing_adds_zero(tmp_path, cli):
    """A class never at or above TACE's threshold among rows of positive weight: its error is
    0 and its kept mass 0, as in memory; the other classes' are the in-memory ones."""
    path = _multiclass(tmp_path, k=3)
    t = pq.read_table(path).to_pandas()
    t.loc[t["prob_2"] >= 0.3, "iw"] = 0.0
    t.to_parquet(path)
    mem, got = _pair(cli, ["score", path, "--weight", "iw", "-m", "tace,ace_cw,sce",
                           "--tace-threshold", "0.3"])
    _close(mem["metrics"], got["metrics"], "metrics")
    tace = got["metrics"]["tace"]["per_class"]
    assert tace["2"]["kept"] == 0.0 and tace["2"]["error"] == 0.0


def test_streamed_multiclass_intervals_and_dask(tmp_path, cli):
    """``--ci``: the top-label metrics get the streamed bootstrap's intervals, SCE says why it
    has none; Dask gives stream's numbers."""
    pytest.importorskip("dask")
    path = _multiclass(tmp_path)
    args = ["score", path, "--weight", "iw", "-m", "ece_top,ace_top,sce", "--ci",
            "--ci-reps", "200", "--json", "--engine"]
    st = json.loads(cli([*args, "stream"], tuning=SMALL).stdout)
    dk = json.loads(cli([*args, "dask"], tuning=SMALL).stdout)
    for mid in ("ece_top", "ace_top"):
        ci = st["metrics"][mid]["ci"]
        assert ci["low"] <= st["metrics"][mid]["value"] <= ci["high"]
    assert "ci" not in st["metrics"]["sce"]
    assert any(n.startswith("--ci with --engine stream: no interval for sce")
               for n in st["notes"]), st["notes"]
    _close(st["metrics"], dk["metrics"], "metrics")


def test_streamed_multiclass_reliability_diagrams_are_the_in_memory_ones(tmp_path, cli):
    """The top-label reliability diagram (its bins the passes', the histogram weighted) and
    its ``--by`` overlay are the in-memory PNGs byte for byte; the per-class diagram is
    refused before anything is written."""
    pytest.importorskip("matplotlib")
    path = _multiclass(tmp_path)
    for extra in ([], ["--binning", "quantile"], ["--by", "g"]):
        mem, st = tmp_path / "mem.png", tmp_path / "st.png"
        base = ["plot", path, "--weight", "iw", "--kind", "reliability", *extra, "-o"]
        assert cli([*base, mem]).code == 0
        r = cli([*base, st, "--engine", "stream"], tuning=SMALL)
        assert r.code == 0, r.stderr
        assert mem.read_bytes() == st.read_bytes()
    out = tmp_path / "pc.png"
    r = cli(["plot", path, "--weight", "iw", "--per-class", "-o", out, "--engine", "stream"],
            tuning=SMALL)
    assert r.code == 2 and "--engine memory" in r.stderr and not out.exists()


@pytest.mark.parametrize("extra", [["-m", "smece_cw"], ["-m", "ici"], ["-m", "tce_cw"]])
def test_what_multiclass_passes_do_not_compute_is_refused(tmp_path, cli, extra):
    """Beyond the passes' own: exit 2 before any pass, naming the limit (TCE: why weights
    refuse it)."""
    path = _multiclass(tmp_path)
    r = cli(["score", path, "--weight", "iw", "--engine", "stream", *extra], tuning=SMALL)
    assert r.code == 2 and r.stdout == "", (r.code, r.stdout)
    assert "--engine memory" in r.stderr or "--count" in r.stderr, r.stderr


def test_streamed_multiclass_compare(tmp_path, cli):
    """``compare --weight`` of two multiclass files: each model's metrics are its passes'
    (the in-memory numbers) and the paired units of the top-label views carry the weights,
    so the top-label ECE's interval of the change is there, near memory's."""
    old = _multiclass(tmp_path)
    t = pq.read_table(old).to_pandas()
    cols = [c for c in t if c.startswith("prob_")]
    p = t[cols].to_numpy() ** 1.3
    p /= p.sum(axis=1, keepdims=True)
    t[cols] = p
    new = tmp_path / "new.parquet"
    t.to_parquet(new)
    mem, got = _pair(cli, ["compare", old, new, "--weight", "iw"])
    for mid, entry in mem["metrics"].items():
        for side in ("old", "new"):
            assert got["metrics"][mid][side] == pytest.approx(entry[side], rel=1e-9), mid
    ci, ref = got["metrics"]["ece_top"]["ci"], mem["metrics"]["ece_top"]["ci"]
    assert "same weights" in ci["resampling"]
    assert ci["se"] == pytest.approx(ref["se"], rel=0.25)


def test_counted_multiclass_input_takes_the_passes_when_they_serve(tmp_path, cli):
    """Counted multiclass rows beyond the budget: a run asking only for what the passes
    compute reads the file's rows with the counts as weights (every number, ``n`` and TACE's
    ``kept`` the expanded file's); one that asks for more (the default set's classwise TCE)
    streams them expanded, as before."""
    path = _multiclass(tmp_path)
    for cmd, key, extra in (("score", "metrics", ["-m", METRICS, "--by", "g"]),
                            ("test", "tests", ["--method", "hl,spiegelhalter,cox"])):
        mem, got = _pair(cli, [cmd, path, "--count", "n", *extra])
        assert "expanded file's" in got["settings"]["weighted"]["note"]
        for entry in got[key].values():
            entry.get("settings", {}).pop("engine_fit", None)
            entry.get("settings", {}).pop("passes", None)
        for part in (key, "input", *(["groups"] if cmd == "score" else [])):
            _close(mem[part], got[part], part)
    r = cli(["score", path, "--count", "n", "--json", "--engine", "stream"], tuning=SMALL)
    assert r.code == 0, r.stderr
    got = json.loads(r.stdout)
    assert "expanded" in got["settings"] and "tce_cw" in got["metrics"]


def test_passes_classwise_ids_are_the_engines():
    """The classwise ids the options route to the passes are those the engine computes."""
    from calcheck.engines.base import PASSES_CLASSWISE
    from calcheck.engines.weighted_classes import CLASSWISE

    assert tuple(CLASSWISE) == PASSES_CLASSWISE
