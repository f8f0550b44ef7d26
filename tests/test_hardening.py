"""Regression tests from the fuzz audit: output safety, escaping, wrong results on odd input,
no internal error on any input or option, and messages that say what is wrong.

The inputs are the corpus in ``tests/corpus/files`` (made by ``tests/corpus/generate.py``);
each test runs on a copy, so no output can land in the repository.  Item numbers are the
audit's.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import SAMPLE

CORPUS = Path(__file__).resolve().parent / "corpus" / "files"
CONTROL = [chr(c) for c in range(32) if chr(c) not in "\n\t"] + ["\x7f"]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    shutil.copytree(CORPUS, root)
    return root


def clean_run(r, *, code: int | None = None) -> None:
    """No internal error, no traceback, no stray interpreter message, no control character."""
    text = r.stdout + r.stderr
    assert r.code != 3, r.stderr
    assert "Traceback" not in text and "Exception ignored" not in text, r.stderr
    assert "internal error" not in r.stderr, r.stderr
    assert not any(c in text for c in CONTROL), repr(text[:400])
    if code is not None:
        assert r.code == code, (r.code, r.stderr)


def leftovers(folder: Path, before: set[str]) -> set[str]:
    return {p.name for p in folder.iterdir()} - before


# ---------------------------------------------------------------------------------------------
# 1–3: output safety


def test_output_refuses_what_it_must_not_replace(cli, corpus, tmp_path):
    src = str(corpus / "ok.csv")
    out = tmp_path / "out"
    out.mkdir()
    # a FIFO (never opened: the run would block) and a device are refused
    fifo = out / "pipe.json"
    os.mkfifo(fifo)
    r = cli(["score", src, "-o", str(fifo)])
    clean_run(r, code=2)
    assert "not a regular file" in r.stderr and stat.S_ISFIFO(fifo.stat().st_mode)
    r = cli(["score", src, "-o", "/dev/null"])
    clean_run(r, code=2)
    # a read-only file stays as it was (also for root, who may write it)
    ro = out / "ro.json"
    ro.write_text("keep")
    ro.chmod(0o444)
    r = cli(["score", src, "-o", str(ro)])
    clean_run(r, code=2)
    assert "read-only" in r.stderr and ro.read_text() == "keep"
    # a symlink to a regular file is written through, and stays a symlink
    real = out / "real.json"
    real.write_text("{}")
    link = out / "link.json"
    link.symlink_to(real)
    r = cli(["score", src, "-o", str(link)])
    clean_run(r, code=0)
    assert link.is_symlink() and json.loads(real.read_text())["command"] == "score"
    # a 0600 file keeps its mode
    private = out / "private.json"
    private.write_text("{}")
    private.chmod(0o600)
    clean_run(cli(["score", src, "-o", str(private)]), code=0)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert json.loads(private.read_text())["command"] == "score"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_output_is_never_the_input(cli, corpus):
    data = corpus / "ok.csv"
    before = data.read_bytes()
    r = cli(["score", str(data), "-o", str(data)])
    clean_run(r, code=2)
    assert "is the input" in r.stderr and data.read_bytes() == before
    ds = corpus / "dataset_readme"
    r = cli(["score", str(ds), "-o", str(ds / "part.json")])
    clean_run(r, code=2)
    assert "inside the input directory" in r.stderr and not (ds / "part.json").exists()
    r = cli(["score", str(data), "-o", ""])
    clean_run(r, code=2)
    assert "empty string" in r.stderr
    r = cli(["report", str(data), "-o", str(corpus / "x.csv")])
    clean_run(r, code=2)
    assert not (corpus / "x.csv").exists()


def test_signal_during_a_write_leaves_no_temporary_file(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal
        from calcheck.io.output import write_output
        def write(tmp):
            with open(tmp, "w") as fh:
                fh.write("x" * 1_000_000)
            os.kill(os.getpid(), signal.SIGTERM)
        write_output({str(tmp_path / "out.json")!r}, write)
    """)
    for sig in ("SIGTERM", "SIGINT"):
        r = subprocess.run([sys.executable, "-c", script.replace("SIGTERM", sig)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode != 0
        assert list(tmp_path.iterdir()) == [], (sig, r.stderr)


def test_csv_output_has_groups_and_variables(cli, corpus):
    r = cli(["score", str(corpus / "vars.parquet"), "--by", "v_two", "--var", "v_some_nan",
             "-f", "csv"])
    clean_run(r, code=0)
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    rep = json.loads(cli(["score", str(corpus / "vars.parquet"), "--by", "v_two", "--var",
                          "v_some_nan", "--json"]).stdout)
    groups = {row["group"] for row in rows if row["group"]}
    assert groups == set(rep["groups"]) and len(groups) == 2
    for g, body in rep["groups"].items():
        for mid, m in body["metrics"].items():
            if m.get("value") is not None:
                assert any(row["group"] == g and row["metric"] == mid for row in rows)
    assert {row["metric"] for row in rows if row["variable"] == "v_some_nan"} >= {"vece"}


# ---------------------------------------------------------------------------------------------
# 5–6: escaping


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
def test_markup_and_control_characters_from_data(cli, corpus, fmt):
    r = cli(["score", str(corpus / "hostile_values.csv"), "--by", "grp", "-f", fmt])
    clean_run(r, code=0)
    if fmt in ("table", "markdown"):
        assert "[/x]" in r.stdout and "[bold red]x[/]" in r.stdout   # shown, not interpreted
    if fmt == "markdown":
        assert "a\\|b&lt;c&gt;" in r.stdout and "a|b<c>" not in r.stdout
    if fmt == "json":                                                # data keeps its bytes
        assert "\x1b[31mred\x07" in json.loads(r.stdout)["groups"]


def test_colored_table_does_not_interpret_markup(corpus):
    import calcheck

    rep = calcheck.score(corpus / "hostile_values.csv", by="grp")
    text = rep.render("table", color=True)
    assert "[bold red]x[/]" in text and "\x07" not in text and "\x1b[31mred" not in text


def test_control_characters_in_names_and_errors(cli, corpus):
    r = cli(["score", str(corpus / "hostile_column.csv")])
    clean_run(r, code=2)
    assert "\\x1b" in r.stderr
    r = cli(["score", str(corpus / "hostile_column.csv"), "--score", "sc\x1b[2Jore", "-f",
             "markdown"])
    clean_run(r, code=0)
    r = cli(["score", str(corpus / "hostile_var.csv"), "--var", "v[red]|<b>", "-f", "markdown"])
    clean_run(r, code=0)
    assert "v[red]\\|&lt;b&gt;" in r.stdout


# ---------------------------------------------------------------------------------------------
# 7–10: wrong results


def test_adaptive_tcal_can_reject_at_small_alpha(cli, corpus):
    r = cli(["test", str(corpus / "miscalibrated_6000.parquet"), "--adaptive", "--alpha",
             "0.01", "--fail-on-reject", "--seed", "0"])
    clean_run(r, code=1)
    assert "tcal_adaptive" in r.stderr


def test_boolean_labels_and_pos_label(cli, corpus):
    from tests.conftest import run_json

    f = str(corpus / "bool_labels.parquet")
    r = cli(["score", f, "--pos-label", "2"])
    clean_run(r, code=2)
    assert "boolean column" in r.stderr
    plain = run_json(cli, f, "-m", "ece")["metrics"]["ece"]["value"]
    assert run_json(cli, f, "-m", "ece", "--pos-label", "true")["metrics"]["ece"]["value"] == plain
    ref = run_json(cli, str(corpus / "ok.parquet"), "-m", "ece")["metrics"]["ece"]["value"]
    assert plain == pytest.approx(ref, abs=1e-15)


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_null_group_apart_from_a_literal_missing(cli, corpus, engine):
    from tests.conftest import run_json

    rep = run_json(cli, corpus / "by_missing.parquet", "--by", "g", "-m", "ece",
                   "--engine", engine)
    groups = rep["groups"]
    assert {k: g["n"] for k, g in groups.items()} == {"(missing)": 100, "a": 100,
                                                      "(missing)*": 100}


@pytest.mark.parametrize("engine", ["memory", "stream", "dask"])
def test_corrupt_parquet_is_an_error(cli, corpus, engine):
    for name in ("corrupt_page.parquet", "truncated.parquet"):
        r = cli(["score", str(corpus / name), "--engine", engine])
        clean_run(r, code=2)
        assert name in r.stderr
    r = cli(["score", str(corpus / "checksummed.parquet"), "--engine", engine])
    clean_run(r, code=0)


# ---------------------------------------------------------------------------------------------
# 11–15: no internal error


def test_csv_runs_never_abort(corpus):
    """Arrow's CSV threads once outlived a Python callback at exit (abort, exit 134)."""
    procs = [subprocess.Popen([sys.executable, "-m", "calcheck", "score", str(corpus / name),
                               "-m", "ece", "-q"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
             for _ in range(4) for name in ("ok.csv", "ragged.csv", "binary.csv",
                                            "json_as.csv", "ok.csv.gz")]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode in (0, 2), err.decode()
        assert b"terminate called" not in err and b"Exception ignored" not in err


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_subnormal_scores(cli, corpus, engine, tmp_path):
    from tests.conftest import run_json

    f = corpus / ("subnormal.csv" if engine == "memory" else "subnormal.parquet")
    rep = run_json(cli, f, "-m", "tce,ece", "--engine", engine)
    assert 0 <= rep["metrics"]["tce"]["value"] <= 100
    other = run_json(cli, corpus / "subnormal.parquet", "-m", "tce", "--engine",
                     "stream" if engine == "memory" else "memory")
    assert other["metrics"]["tce"]["value"] == rep["metrics"]["tce"]["value"]
    clean_run(cli(["test", str(f), "--engine", engine]), code=0)
    clean_run(cli(["plot", str(f), "--kind", "tce", "--engine", engine,
                   "-o", str(tmp_path / "t.png")]), code=0)
    if engine == "memory":
        clean_run(cli(["report", str(f), "-o", str(tmp_path / "r.html")]), code=0)


def test_bins_are_capped(cli, corpus):
    r = cli(["score", str(corpus / "ok.csv"), "--bins", "1000000000"])
    clean_run(r, code=2)
    assert "--bins" in r.stderr


@pytest.mark.parametrize("column,code", [("v_inf", 2), ("v_ninf", 2), ("v_nan", 2),
                                         ("v_const", 0), ("v_two", 0), ("v_some_nan", 0)])
def test_variables_with_odd_values_agree_on_both_engines(cli, corpus, column, code):
    f = str(corpus / "vars.parquet")
    runs = [cli(["score", f, "--var", column, "-m", "ece", "--json", "--engine", e])
            for e in ("memory", "stream")]
    for r in runs:
        clean_run(r, code=code)
    if code == 2:
        assert runs[0].stderr == runs[1].stderr
        assert column in runs[0].stderr
        return
    a, b = (json.loads(r.stdout)["variables"][column] for r in runs)
    assert a["vece"] == pytest.approx(b["vece"], rel=1e-9, abs=1e-12)
    assert a["n"] == b["n"] and a["excluded_missing"] == b["excluded_missing"]
    assert len(a["bins"]) == len(b["bins"])


def test_option_abuse_exits_2(cli, corpus, tmp_path):
    f = str(corpus / "ok.csv")
    for args in (["score", f, "--ci", "--seed", "-1"], ["test", f, "--seed", "-3"],
                 ["report", f, "--seed", "-1", "-o", str(tmp_path / "r.html")],
                 ["score", str(corpus / "ok.parquet"), "--engine", "stream", "--batch-rows",
                  str(10**12)],
                 ["score", f, "--bins", "0"], ["score", f, "--ci-reps", "-5"]):
        r = cli(args)
        clean_run(r, code=2)
        assert r.stderr.count("\n") == 1, r.stderr         # one line
    assert not (tmp_path / "r.html").exists()


def test_stdout_on_a_full_device(corpus):
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "calcheck", "score", str(corpus / "ok.csv"),
                            "--json"], stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=300)
    assert r.returncode == 2 and "No space left" in r.stderr
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr


def test_plot_creates_its_folder_and_a_full_disk_is_exit_2(cli, corpus, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    target = tmp_path / "new" / "deeper" / "x.png"
    clean_run(cli(["plot", str(corpus / "ok.csv"), "-o", str(target)]), code=0)
    assert target.exists()

    from matplotlib.figure import Figure

    def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full)
    out = tmp_path / "disk"
    out.mkdir()
    for cmd, name in (("plot", "p.png"), ("report", "r.pdf")):
        r = cli([cmd, str(corpus / "ok.csv"), "-o", str(out / name)])
        clean_run(r, code=2)
        assert "No space left" in r.stderr
    monkeypatch.undo()
    import calcheck.io.output as output

    def no_room(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output.os, "replace", no_room)
    r = cli(["report", str(corpus / "ok.csv"), "-o", str(out / "r.html")])
    clean_run(r, code=2)
    assert "No space left" in r.stderr
    assert list(out.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# 16–17: messages


MESSAGES = [
    (["score", "json_as.csv"], 2, "looks like JSON"),
    (["score", "ok.csv.bz2"], 2, "bzip2"),
    (["score", "ok.csv.zst"], 2, "zstd"),
    (["score", "ok.csv.gz.gz"], 2, "gzip-compressed twice"),
    (["score", "truncated.csv.gz"], 2, "truncated or corrupt"),
    (["score", "binary.csv"], 2, "not valid UTF-8"),
    (["score", "semicolon.csv"], 0, "separated by semicolons"),
    (["score", "tabs.csv"], 0, "separated by tabs"),
    (["score", "padded_header.csv"], 2, "spaces around its name"),
    (["score", "header_only.csv"], 2, "no data rows"),
    (["score", "empty.csv"], 2, "file is empty"),
    (["score", "ragged.csv"], 2, "row 2 has 3 fields"),
    (["score", "dataset_readme"], 0, "ignored 1 file(s) that are not Parquet: README.txt"),
    (["score", "dataset_readme", "--engine", "stream"], 0, "README.txt"),
    (["score", "dataset_part_missing"], 2, "b.parquet: this part of"),
    (["score", "dataset_part_missing", "--engine", "stream"], 2, "has no column 'score'"),
    (["score", "duplicate_columns.parquet"], 2, "duplicate column names: 'score'"),
    (["score", "ok.csv", "--where", "score > 5"], 2, "no rows match --where 'score > 5'"),
    (["score", "ok.parquet", "--engine", "stream", "--where", "score > 5"], 2,
     "no rows match --where"),
    (["test", "ok.parquet", "--engine", "stream", "--where", "score > 5"], 2,
     "no rows match --where"),
    (["score", "truncated.parquet", "--engine", "stream"], 2, "not a readable Parquet file"),
    (["score", "ok.csv", "--engine", "stream"], 2, "reads Parquet only"),
    (["score", "small.csv"], 0, "tce not computed: TCE with PAVA-BC bins needs at least 20"),
    (["score", "small.csv", "-m", "tce"], 2, "needs at least 20 rows"),
    (["score", "multiclass_over.csv"], 2, "3 rows of probabilities do not sum to 1"),
    (["score", "multiclass_above_one.csv", "--renormalize"], 0, "renormalized 2 rows"),
    (["score", "multiclass.csv", "--probs", "prob_0,label"], 2, "the label column"),
    (["score", "hostile_values.csv", "--format", "md"], 0, ""),
]


@pytest.mark.parametrize("args,code,text", MESSAGES, ids=[" ".join(m[0]) for m in MESSAGES])
def test_messages(cli, corpus, args, code, text):
    r = cli([args[0], str(corpus / args[1]), *args[2:]])
    clean_run(r, code=code)
    assert text in r.stderr
    if code == 2:
        assert r.stdout == ""


def test_stream_hint_only_for_csv(cli, corpus):
    r = cli(["score", str(corpus / "corrupt_page.parquet"), "--engine", "stream"])
    assert "reads Parquet only" not in r.stderr


def test_small_input_report(cli, corpus, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "small.html"
    r = cli(["report", str(corpus / "small.csv"), "-o", str(out)])
    clean_run(r, code=0)
    assert "tce not computed" in out.read_text()


def test_garbled_counts_are_not_garbled(cli, corpus):
    r = cli(["score", str(corpus / "multiclass_over.csv")])
    assert "values rows" not in r.stderr


# ---------------------------------------------------------------------------------------------
# the whole corpus: no internal error, no traceback, nothing left behind


def _cases() -> list[tuple[str, str]]:
    files = sorted(p.name for p in CORPUS.iterdir())
    return [(name, cmd) for name in files for cmd in ("score", "test")]


@pytest.mark.parametrize("name,cmd", _cases())
def test_corpus_never_crashes(cli, corpus, tmp_path, name, cmd):
    out = tmp_path / "out"
    out.mkdir()
    before = {p.name for p in corpus.iterdir()}
    for engine in ("memory", "stream"):
        target = out / f"{engine}.json"
        r = cli([cmd, str(corpus / name), "--engine", engine, "-o", str(target)])
        clean_run(r)
        assert r.code in (0, 1, 2)
        if r.code == 2:
            assert not target.exists() and r.stderr.startswith("calcheck: error:")
    assert leftovers(corpus, before) == set()
    assert all(not p.name.endswith(".tmp") for p in out.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.iterdir()))
def test_corpus_figures_never_crash(cli, corpus, tmp_path, name):
    pytest.importorskip("matplotlib")
    for args in (["plot", "-o", str(tmp_path / "p.png")],
                 ["report", "-o", str(tmp_path / "r.html")]):
        r = cli([args[0], str(corpus / name), *args[1:]])
        clean_run(r)
        if r.code == 2:
            assert not Path(args[-1]).exists()


def test_signals_default_restored_after_a_write(tmp_path):
    from calcheck.io.output import atomic_write

    before = signal.getsignal(signal.SIGTERM)
    atomic_write(str(tmp_path / "a.txt"), "x")
    assert signal.getsignal(signal.SIGTERM) == before


# ---------------------------------------------------------------------------------------------
# the machine, not the input: a full disk, no threads


def test_a_pdf_report_on_a_full_disk_is_exit_2(cli, tmp_path, monkeypatch):
    """A disk that fills while matplotlib writes the PDF: its cleanup fails again in zlib
    ("Error -2 while flushing"), hiding the reason; the run is exit 2 naming it."""
    import errno

    import matplotlib.backends.backend_pdf as backend
    import matplotlib.cbook as cbook

    original = cbook.to_filehandle

    class Full(io.RawIOBase):
        def __init__(self, fh):
            self.fh, self.n = fh, 0

        def write(self, b):
            if self.n + len(b) > 1000:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.n += len(b)
            return self.fh.write(b)

        def writable(self):
            return True

        def tell(self):
            return self.fh.tell()

        def close(self):
            self.fh.close()

    def to_filehandle(fname, flag="r", return_opened=False, encoding=None):
        fh, opened = original(fname, flag, return_opened=True, encoding=encoding)
        fh = Full(fh) if "w" in flag else fh
        return (fh, opened) if return_opened else fh

    monkeypatch.setattr(backend.cbook, "to_filehandle", to_filehandle)
    out = tmp_path / "r.pdf"
    r = cli(["report", SAMPLE / "miscalibrated_50.parquet", "-o", out, "--no-tcal", "--no-ci"])
    assert r.code == 2 and "No space left on device" in r.stderr
    assert not out.exists() and not list(tmp_path.glob(".r.pdf.*"))


def test_a_reader_out_of_threads_says_memory_ran_out(cli, monkeypatch):
    """pyarrow that cannot start its reader threads: out of memory, with the advice to
    stream — not "cannot read the data"."""
    import pyarrow as pa

    import calcheck.io.source as source

    class Broken:
        def __init__(self, pf):
            self.pf = pf

        def __getattr__(self, name):
            return getattr(self.pf, name)

        def read(self, *a, **k):
            raise pa.ArrowException("Unknown error: Failed to launch worker thread: Resource "
                                    "temporarily unavailable")

        read_row_groups = read

    real = source.parquet_file
    monkeypatch.setattr(source, "parquet_file", lambda src: Broken(real(src)))
    r = cli(["score", SAMPLE / "miscalibrated_50.parquet"])
    assert r.code == 2 and "out of memory" in r.stderr and "--engine stream" in r.stderr


def test_dask_on_one_file_needs_no_thread_pool(cli, tmp_path, monkeypatch):
    """A one-file input runs its Dask passes in this thread: no pool to start, so a loaded
    machine that cannot start threads does not fail it (memory and stream never needed
    one); with several files the failure names the machine, not the data."""
    pytest.importorskip("dask")
    import threading

    import pandas as pd

    one = tmp_path / "one.parquet"
    pd.DataFrame({"score": [0.3], "label": [1]}).to_parquet(one)
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(3):
        pd.DataFrame({"score": [0.2 + 0.1 * i] * 40, "label": [i % 2] * 40}).to_parquet(
            parts / f"p{i}.parquet")
    start = threading.Thread.start

    def no_pool(self):
        if (self.name or "").startswith("ThreadPoolExecutor"):
            raise RuntimeError("can't start new thread")
        return start(self)

    import collections

    import dask.threaded

    # no pool left by an earlier test: the run must start its own threads
    monkeypatch.setattr(dask.threaded, "default_pool", None)
    monkeypatch.setattr(dask.threaded, "pools", collections.defaultdict(dict))
    monkeypatch.setattr(threading.Thread, "start", no_pool)
    assert cli(["score", one, "--engine", "dask", "-m", "ece"]).code == 0
    r = cli(["score", parts, "--engine", "dask", "-m", "ece"])
    assert r.code == 2 and "could not get the threads or memory" in r.stderr
