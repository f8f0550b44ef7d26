import gzip
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import calcheck
from tests.conftest import SAMPLE

CSV = SAMPLE / "miscalibrated_50.csv"
PARQUET = SAMPLE / "miscalibrated_50.parquet"


def sample_arrays():
    df = pd.read_parquet(PARQUET)
    return df["score"].to_numpy(), df["label"].to_numpy()


def test_score_table_default(cli):
    r = cli(["score", CSV])
    assert r.code == 0, r.stderr
    assert "n=6,000" in r.stdout and "ECE" in r.stdout and "ACE" in r.stdout
    assert r.stderr == ""


def test_json_equals_api(cli):
    r = cli(["score", PARQUET, "--json", "--bins-table", "all"])
    assert r.code == 0
    rep = json.loads(r.stdout)
    assert rep["schema_version"] == "1" and rep["command"] == "score"
    assert rep["input"]["rows_read"] == 6000 and rep["input"]["rows_dropped"] == 0
    s, y = sample_arrays()
    assert rep["metrics"]["ece"] == calcheck.ece(s, y).to_dict()
    assert rep["metrics"]["ace"] == calcheck.ace(s, y).to_dict()
    assert rep["metrics"]["brier"] == calcheck.brier(s, y).to_dict()
    assert rep["metrics"]["tce"] == calcheck.tce(s, y).to_dict()
    assert set(rep["metrics"]) == {"tce", "tce_q", "ece", "ece_l2", "mce", "ace", "mce_q", "brier",
                                   "log_loss", "pde", "pc"}


def test_csv_and_parquet_agree(cli):
    a = json.loads(cli(["score", CSV, "--json"]).stdout)["metrics"]
    b = json.loads(cli(["score", PARQUET, "--json"]).stdout)["metrics"]
    assert a == b


def test_bins_option_and_metric_selection(cli):
    rep = json.loads(cli(["score", CSV, "--json", "-m", "ece,mce", "--bins", "15",
                          "--bins-table", "ece"]).stdout)
    assert list(rep["metrics"]) == ["ece", "mce"]
    assert rep["metrics"]["ece"]["settings"]["bins"] == 15
    assert len(rep["metrics"]["ece"]["bins"]) == 15
    assert "bins" not in rep["metrics"]["mce"]


def test_formats(cli):
    out = cli(["score", CSV, "--format", "csv", "-m", "ece,ace"]).stdout.splitlines()
    assert out[0].startswith("metric,value,unit,n,settings.binning,settings.bins")
    assert out[1].startswith("ece,") and "{" not in "".join(out)
    bins = cli(["score", CSV, "--format", "csv", "--bins-table", "ace"]).stdout.splitlines()
    assert bins[0].startswith("metric,bin,lower,upper,n") and len(bins) == 11
    md = cli(["score", CSV, "--format", "markdown", "-m", "ece"]).stdout
    assert "| ece | ECE |" in md


def test_output_file_written_atomically(cli, tmp_path):
    out = tmp_path / "report.json"
    r = cli(["score", CSV, "-o", out, "-m", "ece"])
    assert r.code == 0 and "ECE" in r.stdout  # table on stdout, JSON in the file
    assert json.loads(out.read_text())["metrics"]["ece"]["value"] > 0
    out_csv = tmp_path / "report.csv"
    cli(["score", CSV, "-o", out_csv, "-m", "ece"])
    assert out_csv.read_text().startswith("metric,value")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_stdin_csv_parquet_and_gzip(cli):
    ref = json.loads(cli(["score", CSV, "--json"]).stdout)["metrics"]
    for payload in (CSV.read_bytes(), PARQUET.read_bytes(), gzip.compress(CSV.read_bytes())):
        r = cli(["score", "-", "--json"], stdin=payload)
        assert r.code == 0, r.stderr
        rep = json.loads(r.stdout)
        assert rep["metrics"] == ref and rep["input"]["path"] == "<stdin>"


def test_gates(cli):
    r = cli(["score", CSV, "--json", "-m", "ece", "--fail-if", "ece>0.01", "--fail-if",
             "brier<0.0001"])
    assert r.code == 1
    rep = json.loads(r.stdout)
    assert [g["failed"] for g in rep["gates"]] == [True, False]
    assert "brier" in rep["metrics"]  # a gate's metric is computed even if not selected
    assert "gate failed: ece>0.01" in r.stderr
    assert cli(["score", CSV, "-m", "ece", "--fail-if", "ece >= 0.9"]).code == 0


def test_pos_label_and_string_labels(cli, tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("prob,outcome\n0.2,no\n0.7,yes\n0.9,yes\n0.1,no\n")
    r = cli(["score", p, "--pos-label", "yes", "--json", "-m", "ece"])
    assert r.code == 0, r.stderr
    ref = calcheck.ece([0.2, 0.7, 0.9, 0.1], [0, 1, 1, 0]).value
    assert json.loads(r.stdout)["metrics"]["ece"]["value"] == pytest.approx(ref)
    b = tmp_path / "b.csv"
    b.write_text("score,label\n0.2,false\n0.7,true\n")
    assert cli(["score", b, "-m", "ece"]).code == 0


def test_drop_invalid_counts_rows(cli, tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("score,label\n0.2,0\n,1\n1.5,1\n0.7,1\n0.4,7\nabc,0\n")
    r = cli(["score", p, "--drop-invalid", "--json", "-m", "ece"])
    assert r.code == 2 and "more than --max-dropped 0.5" in r.stderr     # 4 of 6 dropped
    r = cli(["score", p, "--drop-invalid", "--max-dropped", "0.7", "--json", "-m", "ece"])
    assert r.code == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["input"]["rows_read"] == 6 and rep["input"]["rows_dropped"] == 4
    assert rep["input"]["dropped_by_reason"] == {"non_numeric_score": 1, "missing_score": 1,
                                                "out_of_range_score": 1, "non_binary_label": 1}
    assert "dropped 4 of 6 rows" in r.stderr


def test_single_class_warns(cli, tmp_path):
    p = tmp_path / "one.csv"
    p.write_text("score,label\n0.2,0\n0.3,0\n")
    r = cli(["score", p, "-m", "ece"])
    assert r.code == 0 and "only one class" in r.stderr


def test_auto_detect_ambiguous_and_explicit(cli, tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("p,y_prob,label\n0.1,0.2,0\n0.8,0.9,1\n")
    r = cli(["score", p])
    assert r.code == 2 and "p, y_prob" in r.stderr and "--score" in r.stderr
    assert cli(["score", p, "--score", "y_prob", "-m", "ece"]).code == 0


# --------------------------------------------------------------------------- bad input matrix

def _write(tmp_path, name, content):
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return p


def _truncated_gzip():
    rng = np.random.default_rng(0)
    text = "score,label\n" + "".join(f"{s:.12f},{y}\n" for s, y in
                                       zip(rng.uniform(size=5000), rng.integers(0, 2, 5000)))
    data = gzip.compress(text.encode())
    return data[: len(data) // 2]


BAD = {
    "missing file": (lambda t: t / "nope.csv", [], "no such file"),
    "corrupt parquet": (lambda t: _write(t, "c.parquet", b"PAR1 this is not parquet PAR1"), [],
                        "not a readable Parquet"),
    "empty file": (lambda t: _write(t, "e.csv", b""), [], "empty"),
    "header only": (lambda t: _write(t, "h.csv", "score,label\n"), [], "no data rows"),
    "missing column": (lambda t: _write(t, "m.csv", "score,label\n0.1,0\n"),
                       ["--score", "conf"], "no column 'conf'"),
    "ambiguous column": (lambda t: _write(t, "a.csv", "score,prob,label\n0.1,0.1,0\n"), [],
                         "several columns could be the score column"),
    "nan": (lambda t: _write(t, "n.csv", "score,label\n0.1,0\nnan,1\n"), [],
            "column 'score': 1 value missing"),
    "inf": (lambda t: _write(t, "i.csv", "score,label\n0.1,0\ninf,1\n"), [],
            "column 'score': 1 value infinite; first at row 2"),
    "out of range": (lambda t: _write(t, "o.csv", "score,label\n0.1,0\n0.5,1\n1.37,1\n"), [],
                     "column 'score': 1 value outside [0, 1]; first at row 3 (e.g. 1.37)"),
    "non-binary label": (lambda t: _write(t, "l.csv", "score,label\n0.1,0\n0.5,2\n"), [],
                         "column 'label': 1 value not 0 or 1"),
    "string labels": (lambda t: _write(t, "s.csv", "score,label\n0.1,cat\n0.5,dog\n"), [],
                      "--pos-label"),
    "ragged row": (lambda t: _write(t, "r.csv", "score,label\n0.1,0\n0.2,1,9\n"), [],
                   "row 2 has 3 fields"),
    "text in numeric": (lambda t: _write(t, "x.csv", "score,label\n0.1,0\nhigh,1\n"), [],
                        "column 'score': 1 value not numeric; first at row 2 (e.g. 'high')"),
    "non-utf8": (lambda t: _write(t, "u.csv", b"score,label\n0.1,0\n0.2,\xff\xfe\n"), [],
                 "not valid UTF-8; first at row 2"),
    "truncated gzip": (lambda t: _write(t, "t.csv.gz", _truncated_gzip()), [], "truncated"),
    "unknown metric": (lambda t: CSV, ["-m", "ece,zzz"], "unknown metric id 'zzz'"),
    "bins 0": (lambda t: CSV, ["--bins", "0"], "--bins must be an integer >= 1"),
    "alpha out of range": (lambda t: CSV, ["--alpha", "1.5"], "--alpha must be in the open"),
    "bad gate": (lambda t: CSV, ["--fail-if", "ece=>0.1"], "cannot parse --fail-if"),
    "bad format": (lambda t: CSV, ["--format", "xml"], "unknown --format"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_exits_2_with_one_line(cli, tmp_path, case):
    make, extra, needle = BAD[case]
    path = make(tmp_path)
    out = tmp_path / "out" / "report.json"
    out.parent.mkdir()
    r = cli(["score", path, *extra, "-o", out])
    assert r.code == 2, (r.code, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert needle in lines[0], lines[0]
    assert list(out.parent.iterdir()) == []  # no (half) report left behind


def test_error_names_file(cli, tmp_path):
    p = _write(tmp_path, "o.csv", "score,label\n0.1,0\n1.37,1\n")
    assert str(p) in cli(["score", p]).stderr


def test_usage_error_from_parser_is_one_line(cli):
    r = cli(["score", CSV, "--no-such-flag"])
    assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1


def test_internal_error_exit_3(cli, monkeypatch):
    import calcheck.engines.memory

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(calcheck.engines.memory, "compute", boom)
    r = cli(["score", CSV])
    assert r.code == 3 and "internal error" in r.stderr


def test_console_script_and_module():
    r = subprocess.run([sys.executable, "-m", "calcheck", "score", str(CSV), "--json", "-m",
                        "ece"], capture_output=True, text=True, check=False)
    assert r.returncode == 0 and json.loads(r.stdout)["metrics"]["ece"]["value"] > 0


def test_help_imports_no_heavy_modules():
    code = ("import sys; from calcheck.cli import run; run(['--help']); "
            "print('HEAVY=' + ','.join(m for m in ('numpy', 'pandas', 'pyarrow', 'scipy') "
            "if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "score" in r.stdout
    assert r.stdout.strip().splitlines()[-1] == "HEAVY="


def _imported(argv: list[str]) -> set[str]:
    """The top-level packages (and scipy.stats) a CLI run imports, in a fresh interpreter."""
    code = ("import sys; from calcheck.cli import run\n"
            "try:\n    run(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "mods = {m.split('.')[0] for m in sys.modules} | "
            "({'scipy.stats'} if 'scipy.stats' in sys.modules else set())\n"
            "print('MODS=' + ','.join(sorted(mods)), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                       check=True)
    return set(r.stderr.strip().splitlines()[-1].removeprefix("MODS=").split(","))


def _after_main(var, preset, report):
    """The last lines ``report`` (code run after ``main``) writes to stderr, when the console
    script's ``main`` scored the sample file in a fresh interpreter with the environment
    variable ``var`` unset or, with ``preset``, set to it; ``before`` tells ``report``
    whether numpy was loaded before ``main`` ran."""
    import os

    env = {k: v for k, v in os.environ.items() if k != var}
    if preset is not None:
        env[var] = preset
    code = ("import os, sys; from calcheck.cli import main\n"
            "before = 'numpy' in sys.modules\n"
            "sys.argv = ['calcheck', 'score', sys.argv[1], '-m', 'ece', '--json']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n" + report)
    r = subprocess.run([sys.executable, "-c", code, str(SAMPLE / "calibrated_50.parquet")],
                       capture_output=True, text=True, check=True, env=env)
    return r.stderr.strip().splitlines()


@pytest.mark.parametrize("preset, want", [(None, "False"), ("1", "True")])
def test_cli_turns_numpys_huge_page_advice_off_unless_the_user_set_it(preset, want):
    """The console script sets NUMPY_MADVISE_HUGEPAGE=0 before numpy is imported (first
    touches of large arrays stalled on the kernel's memory compaction); a user's own value
    wins."""
    lines = _after_main("NUMPY_MADVISE_HUGEPAGE", preset,
                        "import numpy\n"
                        "core = getattr(numpy, '_core', None) or numpy.core\n"
                        "print('HUGE=' + str(core.multiarray._get_madvise_hugepage()), "
                        "file=sys.stderr)")
    assert lines[-1] == f"HUGE={want}"


@pytest.mark.parametrize("preset, want", [(None, "4"), ("12", "12")])
def test_cli_sends_openblas_threads_to_sleep_unless_the_user_set_it(preset, want):
    """The console script sets OPENBLAS_THREAD_TIMEOUT=4 before numpy (and scipy) load their
    OpenBLAS, whose idle threads would otherwise spin ~0.1 s at load; a user's own value
    wins.  numpy is not loaded yet when ``main`` sets it."""
    lines = _after_main("OPENBLAS_THREAD_TIMEOUT", preset,
                        "print('NUMPY_BEFORE=' + str(before), file=sys.stderr)\n"
                        "print('TIMEOUT=' + os.environ['OPENBLAS_THREAD_TIMEOUT'], "
                        "file=sys.stderr)")
    assert lines[-2:] == ["NUMPY_BEFORE=False", f"TIMEOUT={want}"]


def test_version_imports_no_numeric_library():
    mods = _imported(["-V"])
    assert not mods & {"numpy", "pandas", "pyarrow", "scipy", "matplotlib", "dask", "rich",
                       "pydantic"}


def test_simple_score_imports_no_pandas_and_no_scipy_stats(tmp_path):
    mods = _imported(["score", str(SAMPLE / "calibrated_50.parquet"), "-m", "ece", "--json"])
    assert "numpy" in mods and "pyarrow" in mods
    # nor pydantic, which typer's coercion of -h and the completion options would load
    assert not mods & {"pandas", "scipy.stats", "matplotlib", "dask", "pydantic"}, mods


def test_default_score_imports_no_scipy_stats():
    """TCE's binomial test calls scipy's binomial ufuncs without ``import scipy.stats``
    (~0.45 s of start-up) where scipy keeps them in scipy.special (1.14 and later)."""
    import scipy

    if tuple(int(x) for x in scipy.__version__.split(".")[:2]) < (1, 14):
        pytest.skip("scipy < 1.14 keeps the binomial ufuncs in scipy.stats")
    mods = _imported(["score", str(SAMPLE / "miscalibrated_50.parquet"), "--json"])
    assert "scipy" in mods and not mods & {"pandas", "scipy.stats"}, mods


def test_stream_score_does_not_load_numpy_ma():
    """``numpy.unique``'s first call imports ``numpy.ma`` (~6 ms): the stream engine's
    positional passes take distinct values without it (``binning.distinct``)."""
    code = ("import sys; from calcheck.cli import run\n"
            "try:\n    run(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('MA=' + str('numpy.ma' in sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, "score",
                        str(SAMPLE / "miscalibrated_50.parquet"), "--engine", "stream", "--json"],
                       capture_output=True, text=True, check=True)
    assert r.stderr.strip().splitlines()[-1] == "MA=False"


def test_parquet_directory(cli, tmp_path):
    s, y = sample_arrays()
    d = tmp_path / "parts"
    d.mkdir()
    for i, idx in enumerate(np.array_split(np.arange(len(s)), 3)):
        pd.DataFrame({"score": s[idx], "label": y[idx]}).to_parquet(d / f"part-{i}.parquet")
    rep = json.loads(cli(["score", d, "--json", "-m", "ece"]).stdout)
    assert rep["metrics"]["ece"]["value"] == pytest.approx(calcheck.ece(s, y).value, rel=1e-12)
