"""Reading the report: the summary line, T-Cal's trials, tables that fit, no Python literals,
counts apart, per-class views, figures that match, command-line conventions, notes on stderr,
per-group gates, flat CSV."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck.tuning import Tuning
from tests.conftest import SAMPLE, run_json


def _binary(tmp_path, n=6000, power=1.0, shift=0.0, seed=0, name="b.parquet", **cols):
    rng = np.random.default_rng(seed)
    s = rng.beta(2, 2, n)
    p = np.clip(s ** power + shift, 0, 1)
    df = pd.DataFrame({"score": s, "label": (rng.random(n) < p).astype(int), **cols})
    path = tmp_path / name
    df.to_parquet(path)
    return path, df


# -- 1. the summary ------------------------------------------------------------------------


def test_summary_leads_every_output(cli, tmp_path):
    rep = run_json(cli, SAMPLE / "miscalibrated_50.parquet")
    s = rep["summary"]
    assert s["verdict"] == "miscalibrated" and "over-predicting on average" in s["text"]
    assert s["where"] and "scores" in s["where"][0]
    table = cli(["score", SAMPLE / "miscalibrated_50.parquet"]).stdout
    head = table[:table.index("+-")]                             # before the first table
    assert "MISCALIBRATED" in head and "prevalence=0.4067" in head
    md = cli(["score", SAMPLE / "miscalibrated_50.parquet", "-f", "markdown"]).stdout
    assert md.splitlines()[2].startswith("**Summary:** MISCALIBRATED")
    ok = run_json(cli, SAMPLE / "calibrated_50.parquet")["summary"]
    assert ok["verdict"] == "consistent with calibration" and not ok["direction"]
    t = run_json(cli, SAMPLE / "calibrated_50.parquet", "--method", "all", "--trials", "200",
                 cmd="test")["summary"]
    assert t["verdict"] == "no evidence of miscalibration"


def test_direction_from_cox_slope():
    # over-confident: true probability pulled toward 1/2
    rng = np.random.default_rng(1)
    s = rng.random(20000)
    y = (rng.random(20000) < 0.5 + 0.5 * (s - 0.5)).astype(int)
    rep = calcheck.run_tests(pd.DataFrame({"score": s, "label": y}), method=["cox"])
    assert rep.data["summary"]["verdict"] == "miscalibrated"
    assert any("over-confident" in d for d in rep.data["summary"]["direction"])
    y = (rng.random(20000) < np.clip(0.5 + 1.8 * (s - 0.5), 0, 1)).astype(int)
    rep = calcheck.run_tests(pd.DataFrame({"score": s, "label": y}), method=["cox"])
    assert any("under-confident" in d for d in rep.data["summary"]["direction"])


def test_worst_group_and_variable(tmp_path):
    rng = np.random.default_rng(2)
    n = 6000
    s = rng.random(n)
    site = np.where(np.arange(n) % 2 == 0, "a", "b")
    y = (rng.random(n) < np.where(site == "b", np.clip(s + 0.15, 0, 1), s)).astype(int)
    df = pd.DataFrame({"score": s, "label": y, "site": site, "age": rng.random(n)})
    rep = calcheck.score(df, by="site", var=["age"], metrics=["ece", "ace"])
    where = " ".join(rep.data["summary"]["where"])
    assert "worst group site = b" in where and "worst along age" in where


# -- 2. T-Cal's Monte Carlo floor ------------------------------------------------------------


def test_tcal_raises_its_trials_to_reach_alpha(tmp_path):
    data = SAMPLE / "miscalibrated_50.parquet"        # ECE 0.094, everything else rejects
    rep = calcheck.run_tests(data, alpha=0.01, fail_on_reject=True)
    t = rep.data["tests"]["tcal_adaptive"]
    assert rep.data["settings"]["trials"] >= 20 / 0.01                  # floor below α/10
    assert t["min_attainable_pvalue"] < 0.001 and t["reject"] and rep.exit_code == 1
    assert any("raised" in n for n in rep.data["notes"])
    # an explicit count is kept, said to be too small, and never read as "calibrated"
    few = calcheck.run_tests(data, alpha=0.01, trials=50)
    assert few.data["settings"]["trials"] == 50 and not few.data["tests"]["tcal_adaptive"]["reject"]
    assert any("cannot reject" in n for n in few.data["notes"])
    assert few.data["summary"]["verdict"] == "inconclusive"


def test_per_level_table_shows_the_levels_that_matter(cli):
    out = cli(["test", SAMPLE / "calibrated_01.parquet", "--trials", "200"]).stdout
    assert "finer levels not shown (--details shows all)" in out
    full = cli(["test", SAMPLE / "calibrated_01.parquet", "--trials", "200", "--details"]).stdout
    assert "not shown" not in full and full.count("\n") > out.count("\n")


# -- 3, 4, 5. tables that fit, no Python literals, counts apart ------------------------------


@pytest.mark.parametrize("width", [80, 120])
def test_table_fits_the_width(cli, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    for args in (["score", SAMPLE / "miscalibrated_01.parquet"],
                 ["test", SAMPLE / "miscalibrated_01.parquet", "--method", "all", "--trials",
                  "100"],
                 ["score", SAMPLE / "miscalibrated_01.parquet", "--ci", "--ci-reps", "20"]):
        out = cli(args).stdout
        assert max(len(line) for line in out.splitlines()) <= width, args
        assert out.isascii()                                   # piped: plain ASCII


def test_no_python_literals_anywhere(cli, tmp_path):
    path, _ = _binary(tmp_path, age=np.arange(6000) % 70)
    for fmt in ("table", "markdown"):
        out = cli(["score", path, "--var", "age", "-f", fmt, "--details"]).stdout
        assert not re.search(r"\bNone\b|\bTrue\b|\bFalse\b|\[\'|\{\'", out), fmt
    out = tmp_path / "r.html"
    assert cli(["report", path, "-o", out, "--var", "age", "--trials", "100"]).code == 0
    text = re.sub(r"<[^>]+>", " ", out.read_text().split("<h2>Settings")[1])
    assert not re.search(r"\bNone\b|\bTrue\b|\bFalse\b|\[\'", text)


def test_tiny_p_values_print_the_same_way_everywhere(cli, tmp_path):
    rng = np.random.default_rng(3)
    s = rng.random(200_000)
    y = (rng.random(200_000) < np.clip(s + 0.3, 0, 1)).astype(int)
    path = tmp_path / "big.parquet"
    pd.DataFrame({"score": s, "label": y}).to_parquet(path)
    args = ["test", path, "--method", "hl,spiegelhalter"]
    rep = json.loads(cli([*args, "--json"]).stdout)
    assert rep["tests"]["hosmer_lemeshow"]["pvalue"] < 1e-300
    for fmt in ("table", "csv"):
        assert "< 1e-300" in cli([*args, "-f", fmt]).stdout, fmt
    assert "&lt; 1e-300" in cli([*args, "-f", "markdown"]).stdout     # rendered: < 1e-300
    assert "log_loss" in cli(["score", path, "-m", "log_loss"]).stdout
    assert "nats" in cli(["score", path, "-m", "log_loss"]).stdout


def test_probabilistic_count_is_shown_apart(cli):
    out = cli(["score", SAMPLE / "calibrated_50.parquet"]).stdout
    table = out[:out.index("Probabilistic count:")]
    assert "| pc " not in table and "effectively distinct scores" in out


# -- 7, 8. per class, figures ----------------------------------------------------------------


@pytest.fixture
def multiclass(tmp_path):
    rng = np.random.default_rng(4)
    p = rng.dirichlet([1, 1, 1, 1], 3000)
    y = np.array([rng.choice(4, p=r ** 1.4 / (r ** 1.4).sum()) for r in p])
    names = ["cat", "dog", "bird", "fish"]
    df = pd.DataFrame({f"prob_{c}": p[:, j] for j, c in enumerate(names)})
    df["label"] = [names[i] for i in y]
    path = tmp_path / "mc.parquet"
    df.to_parquet(path)
    return path


def test_per_class_view(cli, multiclass):
    rep = run_json(cli, multiclass, "--probs", "prob_*")
    assert set(rep["metrics"]["sce"]["per_class"]) == set(rep["input"]["classes"])
    out = cli(["score", multiclass, "--probs", "prob_*", "--per-class"]).stdout
    assert "per class (one-vs-rest)" in out
    for name in ("cat", "dog", "bird", "fish"):
        assert re.search(rf"\| {name}\s+\|", out)
    flat = list(csv.DictReader(io.StringIO(
        cli(["score", multiclass, "--probs", "prob_*", "-f", "csv"]).stdout)))
    assert "per_class.cat.error" in flat[0]


def test_figures_match_the_metrics(multiclass, tmp_path, cli):
    pytest.importorskip("matplotlib")
    fig = calcheck.figure(multiclass, kind="reliability", probs=["prob_*"])
    ax = fig.axes[0]
    assert "15" in ax.get_title() and "confidence" in ax.get_xlabel()
    assert "accuracy" in ax.get_ylabel()
    tce = calcheck.figure(multiclass, kind="tce", probs=["prob_*"])
    value = calcheck.score(multiclass, probs=["prob_*"], metrics=["tce"]).value("tce")
    assert f"TCE {value:.2f} %" in tce.axes[0].get_title()      # the report's percent style
    out = tmp_path / "pc.png"
    r = cli(["plot", multiclass, "--probs", "prob_*", "--kind", "reliability", "--per-class",
             "-o", out])
    assert r.code == 0 and out.read_bytes().startswith(b"\x89PNG")


# -- 11. command-line conventions -------------------------------------------------------------


@pytest.mark.parametrize("command", ["score", "test", "plot", "report"])
def test_help_of_every_command(cli, command):
    r = cli([command, "-h"])
    assert r.code == 0
    assert "<str>" not in r.stdout and "{FILE}" not in r.stdout and "FILE" in r.stdout
    assert "Examples:" in r.stdout and r.stdout.rstrip().endswith("130 interrupted.")
    assert "Input:" in r.stdout and "Output:" in r.stdout        # option panels
    v = cli([command, "-V"])
    assert v.code == 0 and v.stdout.startswith("calcheck ")


def test_bare_command_and_completion(cli):
    r = cli([])
    assert r.code == 0 and "Usage:" in r.stdout and "error" not in r.stderr.lower()
    assert "Exit codes" in r.stdout
    # in a fresh process: typer's completion reads process state earlier tests may have set
    # (from a bash, as a user runs it: typer detects the shell from the parent process)
    cmd = f"'{sys.executable}' -m calcheck --show-completion; exit $?"
    r2 = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert r2.returncode == 0 and "complete" in r2.stdout.lower(), r2.stderr


def test_colors_only_on_request_and_never_with_no_color(cli):
    rep = calcheck.run_tests(SAMPLE / "miscalibrated_50.parquet", method=["hl"])
    assert "\x1b[" in rep.render("table", color=True)
    assert "\x1b[" not in rep.render("table", color=False)
    assert "\x1b[" not in cli(["test", SAMPLE / "miscalibrated_50.parquet", "--method",
                               "hl"]).stdout


# -- 12, 13. output paths, notes -------------------------------------------------------------


def test_output_paths(cli, tmp_path):
    deep = tmp_path / "new" / "folder" / "r.json"
    assert cli(["score", SAMPLE / "calibrated_50.csv", "-m", "ece", "-o", deep]).code == 0
    assert json.loads(deep.read_text())["metrics"]["ece"]
    txt = tmp_path / "r.txt"
    assert cli(["score", SAMPLE / "calibrated_50.csv", "-m", "ece", "-o", txt]).code == 0
    assert txt.read_text().splitlines()[0].endswith("prevalence=0.4982")
    bad = cli(["score", SAMPLE / "calibrated_50.csv", "-o", tmp_path / "r.xlsx"])
    assert bad.code == 2 and ".json" in bad.stderr
    rep = cli(["report", SAMPLE / "calibrated_50.csv", "-o", tmp_path / "x.csv"])
    assert rep.code == 2 and ".html" in rep.stderr and not (tmp_path / "x.csv").exists()


def test_quiet_means_nothing_on_stderr(cli):
    r = cli(["score", SAMPLE / "calibrated_50.csv", "-q"])
    assert r.code == 0 and r.stderr == ""
    loud = cli(["score", SAMPLE / "calibrated_50.csv", "--ci", "--ci-reps", "20"])
    assert "note" not in loud.stdout and "pc" in loud.stderr     # notes on stderr only


def test_where_and_column_typos(cli):
    r = cli(["score", SAMPLE / "calibrated_50.csv", "--where", "scor > 0.5"])
    assert r.code == 2 and "'scor'" in r.stderr and "score" in r.stderr
    assert "FieldRef" not in r.stderr
    r = cli(["score", SAMPLE / "calibrated_50.csv", "--label", "lable"])
    assert r.code == 2 and "did you mean 'label'" in r.stderr


# -- 15, 16. per-group gates, flat CSV --------------------------------------------------------


def test_gate_groups(cli, tmp_path):
    rng = np.random.default_rng(5)
    n = 4000
    s = rng.random(n)
    site = np.array(["a"] * 1950 + ["b"] * 1950 + ["c"] * 100)
    y = (rng.random(n) < np.where(site == "b", np.clip(s + 0.2, 0, 1), s)).astype(int)
    path = tmp_path / "g.parquet"
    pd.DataFrame({"score": s, "label": y, "site": site}).to_parquet(path)
    overall = cli(["score", path, "-m", "ece", "--by", "site", "--fail-if", "ece>0.15"])
    assert overall.code == 0
    per = cli(["score", path, "-m", "ece", "--by", "site", "--fail-if", "ece>0.15",
               "--gate-groups", "--min-group-size", "200", "--json"])
    assert per.code == 1
    gates = json.loads(per.stdout)["gates"]
    assert any(g.get("group") == "b" and g["failed"] for g in gates)
    assert not any(g.get("group") == "c" for g in gates)      # flagged small: skipped
    assert "gate failed in group b" in per.stderr and "not gated: c" in per.stderr


def test_csv_has_every_result(cli, tmp_path):
    path, _ = _binary(tmp_path, site=np.where(np.arange(6000) % 3 == 0, "x", "y"),
                      age=np.arange(6000) % 50)
    text = cli(["score", path, "-m", "ece,ace", "--by", "site", "--var", "age",
                "-f", "csv"]).stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {(r["group"], r["metric"]) for r in rows if r["group"]} == \
        {(g, m) for g in ("x", "y") for m in ("ece", "ace")}
    assert {r["metric"] for r in rows if r["variable"] == "age"} == {"vece", "vce_max",
                                                                    "ece_qcut"}
    assert "{" not in text and "settings.bins" in rows[0]


@pytest.mark.parametrize("run_values", [1, 40_000])
def test_a_large_parquet_file_read_by_row_group_is_the_same_table(tmp_path, monkeypatch,
                                                                   run_values):
    """Past Tuning.read_step_values values a file is read row group by row group (small consecutive
    groups together, up to Tuning.read_run_values values: here one group, then two, a read), numeric
    columns into one numpy array each: the same values and types, also for a column that gets
    nulls (or any non-numeric column) partway."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from calcheck.io import source

    rng = np.random.default_rng(4)
    n = 10_000
    late_nulls = pa.array([None if i >= 7_000 and i % 97 == 0 else float(i) for i in range(n)])
    table = pa.table({"score": rng.uniform(size=n), "label": rng.integers(0, 2, n).astype(np.int8),
                      "age": late_nulls, "site": pa.array([f"s{i % 3}" for i in range(n)]),
                      "w": pa.array(rng.integers(0, 9, n), type=pa.int32())})
    path = tmp_path / "big.parquet"
    pq.write_table(table, path, row_group_size=3_000)
    tuning = Tuning(read_step_values=1_000, read_run_values=run_values)
    reads, read = [], pq.ParquetFile.read_row_groups

    def spy(self, groups, **kw):
        reads.append(list(groups))
        return read(self, groups, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", spy)
    src = source.open_source(str(path), "parquet")
    got = source.read_columns(src, ["score", "label", "age", "site", "w"], tuning=tuning)
    assert reads == ([[0], [1], [2], [3]] if run_values == 1 else [[0, 1], [2, 3]])
    assert got.equals(table.select(["score", "label", "age", "site", "w"]))
    assert [str(t) for t in got.schema.types] == ["double", "int8", "double", "string", "int32"]


@pytest.mark.parametrize("case", ["plain", "where", "pos_label", "drop_invalid", "late_nulls",
                                  "float_labels", "multiclass"])
def test_a_large_parquet_file_folds_the_ece_bins_while_it_is_read(tmp_path, monkeypatch, case):
    """Read row group by row group, a binary file's equal-width bins are folded on the way
    (the bins the metrics would compute, bit for bit, and the metric values unchanged); a
    filter, a positive label, dropped rows, labels that are not 0/1 integers or multiclass
    input fold nothing."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from calcheck.binning import uniform_stats
    from calcheck.engines.base import metric_options
    from calcheck.engines.memory import MemoryEngine
    from calcheck.io import source
    from calcheck.io.tabular import load_predictions
    from calcheck.option_checks import parse

    rng = np.random.default_rng(11)
    n = 300_000
    s = rng.uniform(size=n)
    s[:11] = np.linspace(0.0, 1.0, 11)
    y = (rng.uniform(size=n) < s).astype(np.int8)
    cols = {"score": s, "label": y, "split": np.where(np.arange(n) % 3, "a", "b")}
    if case == "drop_invalid":
        cols["score"] = np.where(np.arange(n) == 250_000, np.nan, s)
    if case == "float_labels":
        cols["label"] = y.astype(np.float64)
    if case == "late_nulls":
        cols["label"] = pa.array([None if i == 290_000 else int(v) for i, v in enumerate(y)],
                                 type=pa.int8())
    if case == "multiclass":
        cols = {"prob_0": 1 - s, "prob_1": s, "label": y}
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table(cols), path, row_group_size=70_000)
    tuning = Tuning(read_step_values=1_000, read_run_values=300_000)   # reads of two groups
    kwargs = {"where": "split = 'a'"} if case == "where" else \
        {"pos_label": "1"} if case == "pos_label" else \
        {"drop_invalid": True} if case == "drop_invalid" else {}
    src = source.open_source(str(path), "parquet")
    if case == "late_nulls":
        kwargs = {"drop_invalid": True}
    from calcheck.binning import UniformFold

    data = load_predictions(src, fold=lambda rows: UniformFold(rows, (10, 15)), tuning=tuning,
                            **kwargs)
    if case != "plain":
        assert data.uniform_read == {}
        return
    assert sorted(data.uniform_read) == [10, 15]
    for bins, got in data.uniform_read.items():
        want = uniform_stats(data.scores, data.labels, bins, binary=True)
        assert got.count.tolist() == want.count.tolist()
        assert got.sum_score.tobytes() == want.sum_score.tobytes()
        assert got.sum_label.tolist() == want.sum_label.tolist()
    opts = parse("score", {"metrics": ["ece,mce,ece_l2"]}, style="api")
    mopts = metric_options(opts, False)
    folded = MemoryEngine(data).metrics(["ece", "mce", "ece_l2"], mopts).values
    fresh = load_predictions(source.open_source(str(path), "parquet"))
    assert fresh.uniform_read == {}
    computed = MemoryEngine(fresh).metrics(["ece", "mce", "ece_l2"], mopts).values
    assert {k: r.value for k, r in folded.items()} == {k: r.value for k, r in computed.items()}
    assert mopts.bins == 10


def test_the_bins_folded_while_reading_are_the_runs_own():
    from calcheck.engines import read_options
    from calcheck.option_checks import parse
    from calcheck.options import score_fold_bins

    def bins(**values):
        return score_fold_bins(parse("score", values, style="api"))

    assert bins() == (10,)                                  # ECE is a default metric
    assert bins(metrics=["ece"], bins="15") == (15,)
    assert bins(metrics=["mce,brier"]) == (10,)
    assert bins(metrics=["tce,ace"]) == ()
    assert bins(metrics=["ece"], compat="netcal") == ()
    # only the score pipeline folds: another command's reading options fold nothing
    assert read_options(parse("test", {}, style="api")).fold_bins == ()
