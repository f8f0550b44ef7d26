"""--engine dask: the streaming states on a Dask LocalCluster equal the stream and in-memory
engines on a generated hive-partitioned dataset.  Skips (with the reason) without the
``calcheck[dask]`` extra; CI installs it."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import write_dataset

pytestmark = pytest.mark.slow   # long engine-parity runs: pytest -m "not slow" skips them

dask = pytest.importorskip("dask", reason="the Dask extra is not installed "
                                          "(pip install 'calcheck[dask]')")
distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed "
                                                        "(pip install 'calcheck[dask]')")

IDS = ["ece", "ece_l2", "mce", "brier", "log_loss", "ace", "mce_q", "pde", "tce", "tce_q",
       "tce_v", "tce_u"]


@pytest.fixture(scope="module")
def hive(tmp_path_factory):
    root = tmp_path_factory.mktemp("dask_hive")
    rng = np.random.default_rng(7)
    n = 80_000
    s = rng.beta(0.6, 1.4, size=n)
    s[::3] = np.round(s[::3], 2)                 # ties across files: row order matters
    s[:4] = [0.0, 1.0, 0.3, 0.7]                 # exact edges of both binnings
    df = pd.DataFrame({"score": s, "label": rng.binomial(1, np.clip(s * 1.1, 0, 1)),
                       "region": rng.choice(["eu", "us", "apac"], n),
                       "day": rng.integers(1, 6, n)})
    write_dataset(root, df, ["region", "day"])
    df.to_parquet(root / "all.parquet", index=False)
    return root, df


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, processes=False, threads_per_worker=1,
                      dashboard_address=None) as c:
        yield c


def report(cli, *args):
    r = cli(["score", *map(str, args), "--json", "--bins-table", "ece", "--bins-table", "ace"])
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("where", [None, "region != 'us' and day >= 2 and score > 0.05"])
def test_dask_stream_and_memory_agree(cli, hive, cluster, where):
    root, _ = hive
    extra = ["--where", where] if where else []
    dk = report(cli, root / "ds", "--engine", "dask", "--scheduler", cluster.scheduler_address,
                "-m", ",".join(IDS), *extra)
    st = report(cli, root / "ds", "--engine", "stream", "--batch-rows", "3001",
                "-m", ",".join(IDS), *extra)
    mem = report(cli, root / "ds", "-m", ",".join(IDS), *extra)
    assert dk["input"]["rows_read"] == st["input"]["rows_read"] == mem["input"]["rows_used"]
    for mid in IDS:
        ref = mem["metrics"][mid]["value"]
        assert dk["metrics"][mid]["value"] == pytest.approx(ref, rel=1e-12, abs=1e-15), mid
        assert st["metrics"][mid]["value"] == pytest.approx(ref, rel=1e-12, abs=1e-15), mid
    for key in ("n", "positives"):                      # bin counts are exact integers
        for mid in ("ece", "ace"):
            assert ([b[key] for b in dk["metrics"][mid]["bins"]]
                    == [b[key] for b in mem["metrics"][mid]["bins"]])
    assert dk["settings"]["engine"] == "dask"


def test_dask_local_threads_without_scheduler(cli, hive):
    root, _ = hive
    dk = report(cli, root / "ds", "--engine", "dask", "-m", "ece")
    st = report(cli, root / "ds", "--engine", "stream", "-m", "ece")
    assert dk["metrics"]["ece"]["value"] == pytest.approx(st["metrics"]["ece"]["value"],
                                                          rel=1e-12)


def test_dask_local_run_does_not_import_distributed(hive):
    """Without --scheduler and without a client, a Dask run takes its local threads without
    importing distributed (~0.2 s): no client can exist before distributed is imported."""
    import subprocess
    import sys

    root, _ = hive
    code = ("import sys; from calcheck.cli import run\n"
            "try:\n    run(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('DISTRIBUTED=%s' % ('distributed' in sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, "score", str(root / "ds"), "--engine",
                        "dask", "-m", "ece", "--json"], capture_output=True, text=True,
                       check=True)
    assert '"ece"' in r.stdout
    assert r.stderr.strip().splitlines()[-1] == "DISTRIBUTED=False", r.stderr


def test_dask_errors_name_the_file_and_row(cli, tmp_path, cluster):
    d = tmp_path / "bad"
    for i in range(3):
        (d / f"day={i}").mkdir(parents=True)
        s = np.linspace(0.1, 0.9, 500)
        if i == 2:
            s[41] = np.nan
        pq.write_table(pa.table({"score": s, "label": np.ones(500, dtype=np.int8)}),
                       d / f"day={i}" / "p.parquet")
    r = cli(["score", d, "--engine", "dask", "--scheduler", cluster.scheduler_address])
    assert r.code == 2, r.stderr
    assert "day=2" in r.stderr and "row 42" in r.stderr and "'score'" in r.stderr
    ok = cli(["score", d, "--engine", "dask", "--drop-invalid", "--json", "-m", "ece"])
    assert ok.code == 0 and json.loads(ok.stdout)["input"]["rows_dropped"] == 1


def test_unreachable_scheduler_is_a_usage_error(cli, hive):
    from calcheck.tuning import Tuning

    root, _ = hive
    r = cli(["score", root / "ds", "--engine", "dask", "--scheduler", "tcp://127.0.0.1:9"],
            tuning=Tuning(connect_timeout=2))
    assert r.code == 2 and "Dask scheduler" in r.stderr


def test_missing_extra_is_named(cli, hive, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.bag", None)       # as if Dask were not installed
    root, _ = hive
    r = cli(["score", root / "ds", "--engine", "dask"])
    assert r.code == 2 and "pip install 'calcheck[dask]'" in r.stderr


def test_bootstrap_intervals_do_not_depend_on_the_engine(cli, hive, cluster):
    """--ci draws per score unit, keyed by the seed only: the cluster, the partitioning and the
    batch size do not change the interval."""
    root, _ = hive
    ids = "ece,ece_l2,ece_debiased,brier,log_loss"
    common = ["--ci", "--ci-reps", "80", "--seed", "4", "-m", ids]
    dk = report(cli, root / "ds", "--engine", "dask", "--scheduler", cluster.scheduler_address,
                *common)
    st = report(cli, root / "ds", "--engine", "stream", "--batch-rows", "5000", *common)
    one = report(cli, root / "all.parquet", "--engine", "stream", *common)
    for mid in ids.split(","):
        for other in (st, one):
            for key in ("low", "high", "se"):
                assert dk["metrics"][mid]["ci"][key] == pytest.approx(
                    other["metrics"][mid]["ci"][key], rel=1e-12), (mid, key)


def test_dask_groups_equal_the_stream_groups(cli, hive, cluster):
    root, _ = hive
    args = ["-m", "ece,brier,log_loss,ace,tce", "--by", "region"]
    dk = report(cli, root / "ds", "--engine", "dask", "--scheduler", cluster.scheduler_address,
                *args)
    st = report(cli, root / "ds", "--engine", "stream", *args)
    assert list(dk["groups"]) == list(st["groups"]) == ["apac", "eu", "us"]
    for key, g in st["groups"].items():
        assert dk["groups"][key]["n"] == g["n"]
        for m in ("ece", "brier", "log_loss", "ace", "tce"):
            assert dk["groups"][key]["metrics"][m]["value"] == pytest.approx(
                g["metrics"][m]["value"], rel=1e-12), (key, m)


def test_dask_multiclass_equals_memory(cli, tmp_path, cluster):
    """Multiclass input on Dask: the top-label view, SCE's classwise state and the rank search
    per class (row ids of another form than the stream's), per file."""
    rng = np.random.default_rng(8)
    for part in range(3):
        P = rng.dirichlet(np.full(3, 0.5), size=4000)
        y = (rng.uniform(size=4000)[:, None] > np.cumsum(P, axis=1)).sum(axis=1).clip(0, 2)
        d = tmp_path / "mc" / f"part={part}"
        d.mkdir(parents=True)
        pq.write_table(pa.table({"prob_0": P[:, 0], "prob_1": P[:, 1], "prob_2": P[:, 2],
                                 "label": y}), d / "f.parquet")
    ids = ["ece_top", "mce_top", "ace_top", "sce", "ace_cw", "tace", "tce_cw"]
    r = cli(["score", tmp_path / "mc", "--engine", "dask", "--scheduler",
             cluster.scheduler_address, "-m", ",".join(ids), "--json"])
    assert r.code == 0, r.stderr
    dk = json.loads(r.stdout)
    mem = report(cli, tmp_path / "mc", "-m", ",".join(ids))
    assert dk["input"]["rows_used"] == 12_000
    for mid in ids:
        assert dk["metrics"][mid]["value"] == pytest.approx(mem["metrics"][mid]["value"],
                                                            rel=1e-12), mid


def test_dask_variables_equal_stream_and_memory(cli, hive, cluster):
    """--var on Dask: a partition column (exact LOESS aggregate) and the score itself (more
    than 4,096 values: grouped) give the stream engine's numbers; VECE equals memory's."""
    root, _ = hive
    args = ["-m", "ece", "--var", "day", "--var", "score", "--json"]
    out = {}
    for name, extra in (("dask", ["--engine", "dask", "--scheduler", cluster.scheduler_address]),
                        ("stream", ["--engine", "stream", "--batch-rows", "2999"]),
                        ("memory", [])):
        r = cli(["score", str(root / "ds"), *args, *extra])
        assert r.code == 0, r.stderr
        out[name] = json.loads(r.stdout)["variables"]
    for v in ("day", "score"):
        dk, st, mem = out["dask"][v], out["stream"][v], out["memory"][v]
        assert [b["n"] for b in dk["bins"]] == [b["n"] for b in mem["bins"]]
        assert dk["vece"] == pytest.approx(mem["vece"], rel=1e-12, abs=1e-15)
        assert dk["ece_qcut"] == pytest.approx(mem["ece_qcut"], rel=1e-12, abs=1e-15)
        assert dk["vce_max"] == pytest.approx(st["vce_max"], rel=1e-9)
        assert dk["vce_max"] == pytest.approx(mem["vce_max"], abs=1e-12 if v == "day" else 1e-4)


def test_dask_cox_and_hl_equal_memory(cli, hive, cluster):
    root, _ = hive
    args = ["--method", "cox,hl", "--json"]
    dk = cli(["test", str(root / "ds"), "--engine", "dask", "--scheduler",
              cluster.scheduler_address, *args])
    mem = cli(["test", str(root / "all.parquet"), *args])
    assert dk.code == 0 and mem.code == 0, dk.stderr
    d, m = json.loads(dk.stdout)["tests"], json.loads(mem.stdout)["tests"]
    for k in ("intercept", "slope"):
        assert d["cox"][k] == pytest.approx(m["cox"][k], rel=1e-9)
    assert d["cox"]["statistic"] == pytest.approx(m["cox"]["statistic"], rel=1e-9)
    assert d["hosmer_lemeshow"]["statistic"] == pytest.approx(
        m["hosmer_lemeshow"]["statistic"], rel=1e-9)


def test_dask_engine_in_a_plain_script(hive, tmp_path):
    """No ``if __name__ == "__main__":`` guard: the default Dask run uses threads, so nothing
    re-imports the script (a process pool would, and die with BrokenProcessPool)."""
    root, _ = hive
    script = tmp_path / "plain.py"
    script.write_text("import calcheck\n"
                      f"r = calcheck.score({str(root / 'ds')!r}, engine='dask', metrics=['ece'])\n"
                      "print('ECE', r.value('ece'))\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ECE ") and "Traceback" not in r.stderr


def test_dask_takes_the_streams_finer_cells_on_crowded_scores(cli, tmp_path):
    """On crowded scores the Dask engine prepares the grid pass on the first file's first
    batch, as the stream engine does: the same finer cells in every partition (merged), and
    the stream's numbers (TCE exactly; sums merged in another order to ~1e-12)."""
    from tests.conftest import run_json

    rng = np.random.default_rng(21)
    root = tmp_path / "crowded"
    root.mkdir()
    for i in range(3):
        s = rng.beta(0.2, 20.0, 30_000)
        pq.write_table(pa.table({"score": s, "label": (rng.random(30_000) < s).astype(np.int8)}),
                       root / f"part-{i}.parquet")
    ids = "tce,tce_q,ace,pde,ece"
    stream = run_json(cli, root, "--engine", "stream", "-m", ids)
    on_dask = run_json(cli, root, "--engine", "dask", "-m", ids)
    cells = stream["settings"]["grid"]["positional_cells"]
    assert cells > 2 ** 16 and on_dask["settings"]["grid"]["positional_cells"] == cells
    for mid in ids.split(","):
        assert on_dask["metrics"][mid]["value"] == pytest.approx(
            stream["metrics"][mid]["value"], rel=1e-12, abs=1e-15), mid
    assert on_dask["metrics"]["tce"]["value"] == stream["metrics"]["tce"]["value"]


def test_an_in_memory_table_on_dask_is_refused_weighted_or_not():
    import calcheck
    from calcheck.errors import UsageError

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"score": rng.random(50), "label": rng.integers(0, 2, 50), "n": 2})
    for kw in ({}, {"count": "n"}):
        with pytest.raises(UsageError, match="reads Parquet files or directories"):
            calcheck.score(df, engine="dask", metrics=["ece"], **kw)
    assert calcheck.score(df, engine="stream", metrics=["ece"], count="n").to_dict()[
        "input"]["weights"]["expanded_rows"] == 100
