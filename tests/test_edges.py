"""Correct at every edge: one reading path for --where, bounded work, every option either works
or is refused."""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck.errors import UsageError
from calcheck.where import parse_where

N = 3000


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"score": rng.random(N), "label": rng.integers(0, 2, N),
                         "team": rng.choice(["a and b", "c", "it's"], N),
                         "day": rng.integers(0, 5, N),
                         "note": rng.choice(["x", None], N)})


@pytest.fixture(scope="module")
def sources(frame, tmp_path_factory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("where")
    frame.to_csv(root / "f.csv", index=False)
    frame.to_parquet(root / "f.parquet")
    (root / "dir").mkdir()
    for k, rows in enumerate(np.array_split(np.arange(N), 3)):
        frame.iloc[rows].to_parquet(root / "dir" / f"p{k}.parquet")
    return {"csv": root / "f.csv", "parquet": root / "f.parquet", "directory": root / "dir",
            "dataframe": frame}


FILTERS = {
    "team == 'a and b'": lambda d: d["team"] == "a and b",
    "team = 'a and b' and day >= 2": lambda d: (d["team"] == "a and b") & (d["day"] >= 2),
    "(day < 1 or day > 3) and not team = 'c'": lambda d: ((d["day"] < 1) | (d["day"] > 3))
    & ~(d["team"] == "c"),
    "team in ('c', 'it''s') and day not in (0, 4)": lambda d: d["team"].isin(["c", "it's"])
    & ~d["day"].isin([0, 4]),
    "note is null and score < 0.5": lambda d: d["note"].isna() & (d["score"] < 0.5),
    "NOTE = 'x' or team <> \"c\"": None,                  # a typo'd column: an error
}


@pytest.mark.parametrize("kind", ["csv", "parquet", "directory", "dataframe"])
@pytest.mark.parametrize("text", [t for t, f in FILTERS.items() if f is not None])
def test_where_on_any_column_of_any_source(frame, sources, kind, text):
    """The filter reads columns nothing else reads, on every source kind (one column plan)."""
    want = frame[FILTERS[text](frame)]
    ref = calcheck.ece(want["score"].to_numpy(), want["label"].to_numpy()).value
    rep = calcheck.score(sources[kind], where=text, metrics=["ece"]).data
    assert rep["metrics"]["ece"]["value"] == pytest.approx(ref, rel=1e-12)
    assert rep["metrics"]["ece"]["n"] == len(want)
    if kind in ("parquet", "directory"):
        st = calcheck.score(sources[kind], where=text, metrics=["ece"], engine="stream").data
        assert st["metrics"]["ece"]["value"] == pytest.approx(ref, rel=1e-9)


def test_where_on_stdin(cli, frame):
    text = "team == 'a and b' and day in (1, 2)"
    want = frame[(frame["team"] == "a and b") & frame["day"].isin([1, 2])]
    r = cli(["score", "-", "-m", "ece", "--json", "--where", text],
            stdin=frame.to_csv(index=False).encode())
    assert r.code == 0, r.stderr
    ece = json.loads(r.stdout)["metrics"]["ece"]["value"]
    assert ece == pytest.approx(calcheck.ece(want["score"].to_numpy(),
                                             want["label"].to_numpy()).value, rel=1e-12)


@pytest.mark.parametrize("text, needle", [
    ("team == ", "expected a value (a number or a quoted string), found the end"),
    ("team = a", "is 'a' text that needs quotes?"),
    ("score >> 1", "found '>' at character 8"),
    ("(day = 1", "expected ')'"),
    ("team = 'x", "an unterminated string at character 8"),
    ("day = 1 andd team = 'c'", "expected 'and', 'or' or the end of the filter, found 'andd'"),
    ("day in 1", "expected '('"),
    ("note is 3", "expected 'null'"),
    ("day ~ 3", "unexpected character '~'"),
    ("", "empty filter"),
])
def test_where_errors_point_at_the_token(text, needle):
    with pytest.raises(UsageError) as exc:
        parse_where(text)
    assert needle in str(exc.value)
    if text:
        assert "<<HERE>>" in str(exc.value)


def test_where_typo_names_the_column(cli, sources):
    r = cli(["score", sources["csv"], "--where", "NOTE = 'x' or team <> \"c\""])
    assert r.code == 2 and "names no column 'NOTE'" in r.stderr and "note" in r.stderr


def test_quoted_strings_keep_operators_and_escapes():
    f = parse_where("a = 'x and y (z) >= 1' and b = 'it''s' and `c d` != \"q\"")
    assert f.columns == ["a", "b", "c d"]
    parts = f.tree.parts
    assert parts[0].value == "x and y (z) >= 1" and parts[1].value == "it's"
    assert parse_where("a = \"say \\\"hi\\\"\"").tree.value == 'say "hi"'


def test_where_nesting_is_bounded():
    with pytest.raises(UsageError, match="nested"):
        parse_where("not " * 60 + "a = 1")
    assert sys.getrecursionlimit() > 200


# ---------------------------------------------------------------------------------------------
# every option and keyword either works or is refused


def test_gate_on_a_metric_that_was_not_computed_is_refused(cli, tmp_path):
    path = tmp_path / "small.csv"
    pd.DataFrame({"score": [0.1, 0.4, 0.6, 0.9], "label": [0, 1, 0, 1]}).to_csv(path,
                                                                              index=False)
    r = cli(["score", path, "--fail-if", "tce>0.1"])
    assert r.code == 2 and "tce was not computed" in r.stderr and "20 rows" in r.stderr
    r = cli(["score", path, "--fail-if", "ece_q>0.1"])
    assert r.code == 2 and "unknown metric id 'ece_q'" in r.stderr


@pytest.mark.parametrize("name", ["output", "format", "json", "quiet", "details"])
def test_api_refuses_display_keywords(frame, name):
    value = {"output": "x.json", "format": "json"}.get(name, True)
    with pytest.raises(UsageError, match=f"does not take {name}="):
        calcheck.score(frame, **{name: value})
    with pytest.raises(UsageError, match=f"does not take {name}="):
        calcheck.run_tests(frame, **{name: value})


def test_score_and_probs_exclude_each_other(cli, sources):
    r = cli(["score", sources["csv"], "--score", "score", "--probs", "score,day"])
    assert r.code == 2 and "exclude each other" in r.stderr


@pytest.mark.parametrize("out", ["report", "newdir/", "x.exe"])
def test_output_needs_a_file_name_with_a_known_extension(cli, sources, tmp_path, out):
    r = cli(["score", sources["csv"], "-m", "ece", "-o", str(tmp_path / out)])
    assert r.code == 2 and ("extension" in r.stderr or "folder" in r.stderr)
    assert not (tmp_path / out).exists() or (tmp_path / out).is_dir()
    r = cli(["score", sources["csv"], "-m", "ece", "-o", str(tmp_path / "report"), "--format",
             "json"])
    assert r.code == 0 and json.loads((tmp_path / "report").read_text())["metrics"]["ece"]


@pytest.mark.parametrize("k, n, p, what", [(5, 3, 0.5, "at most n"), (-1, 3, 0.5, "k must"),
                                           (1, 0, 0.5, "n must"), (1, 3, 1.5, "p must"),
                                           (1.5, 3, 0.5, "k must")])
def test_binomtest_pvalue_checks_its_input(k, n, p, what):
    with pytest.raises(UsageError, match=what):
        calcheck.binomtest_pvalue(k, n, p)


def test_booleans_are_not_integers_and_rng_is_checked():
    s = np.linspace(0.01, 0.99, 50)
    y = (np.arange(50) % 2).astype(int)
    with pytest.raises(UsageError):
        calcheck.ece(s, y, bins=True)
    with pytest.raises(UsageError, match="rng"):
        calcheck.tcal(s, y, rng="abc")
    with pytest.raises(UsageError):
        calcheck.score(pd.DataFrame({"score": s, "label": y}), bins=True)


# ---------------------------------------------------------------------------------------------
# deterministic, quiet, careful with suspicious data


def _scores(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    return s, (rng.random(n) < s).astype(int)


@pytest.mark.parametrize("engine", ["memory", "stream"])
@pytest.mark.parametrize("kind", ["percent", "logit"])
def test_other_scales_are_named_with_the_fix(cli, tmp_path, engine, kind):
    s, y = _scores()
    values = s * 100 if kind == "percent" else np.log(s / (1 - s))
    path = tmp_path / "p.parquet"
    pd.DataFrame({"score": values, "label": y}).to_parquet(path)
    for extra in ([], ["--drop-invalid"]):
        r = cli(["score", path, "-m", "ece", "--engine", engine, *extra])
        assert r.code == 2, r.stderr
        assert ("percentages" in r.stderr and "divide the column by 100" in r.stderr) \
            if kind == "percent" else ("logits" in r.stderr and "sigmoid" in r.stderr)


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_no_verdict_when_most_rows_were_dropped(cli, tmp_path, engine):
    s, y = _scores()
    s[:1200] = np.nan
    path = tmp_path / "p.parquet"
    pd.DataFrame({"score": s, "label": y}).to_parquet(path)
    r = cli(["score", path, "-m", "ece", "--drop-invalid", "--engine", engine])
    assert r.code == 2 and "dropped 1,200 of 2,000 rows" in r.stderr and "--max-dropped" in r.stderr
    r = cli(["score", path, "-m", "ece", "--drop-invalid", "--max-dropped", "0.7",
             "--engine", engine])
    assert r.code == 0 and "dropped 1200 of 2000 rows" in r.stderr


def test_no_dependency_warning_reaches_the_user(cli, tmp_path):
    path = tmp_path / "two.csv"
    pd.DataFrame({"score": [0.05] * 50 + [0.95] * 50,
                  "label": [0, 1] * 50}).to_csv(path, index=False)   # empty bins everywhere
    r = cli(["score", path, "-m", "ece,mce,ace,ece_debiased,ece_l2", "--ci", "--ci-reps", "20"])
    assert r.code == 0 and "Warning" not in r.stderr and "warn" not in r.stderr.lower()


@pytest.mark.parametrize("ext", ["svg", "pdf", "png"])
def test_figures_are_byte_identical_between_runs(cli, tmp_path, ext):
    pytest.importorskip("matplotlib")
    from pathlib import Path

    sample = Path(__file__).resolve().parents[1] / "sample_data" / "calibrated_50.csv"
    a, b = tmp_path / f"a.{ext}", tmp_path / f"b.{ext}"
    for out in (a, b):
        assert cli(["plot", sample, "--kind", "reliability", "-o", out]).code == 0
    assert a.read_bytes() == b.read_bytes()


# ---------------------------------------------------------------------------------------------
# bounded work: refuse before allocating, say what it needs


def test_bins_beyond_the_rows_are_refused(cli, tmp_path):
    path = tmp_path / "two.csv"
    pd.DataFrame({"score": [0.2, 0.7], "label": [0, 1]}).to_csv(path, index=False)
    r = cli(["score", path, "--bins", "1000000"])
    assert r.code == 2 and "at most 1,000 bins make sense for 2 rows" in r.stderr


def test_stream_bins_that_cannot_fit_are_refused_before_allocating(cli, tmp_path):
    path = tmp_path / "two.parquet"
    pd.DataFrame({"score": [0.2, 0.7], "label": [0, 1]}).to_parquet(path)
    r = cli(["score", path, "--bins", "100000", "-m", "ece", "--engine", "stream"])
    assert r.code == 2 and "GB of state" in r.stderr and "bins fit" in r.stderr


def test_by_with_too_many_groups_is_refused(cli, tmp_path):
    path = tmp_path / "ids.csv"
    rng = np.random.default_rng(1)
    pd.DataFrame({"score": rng.random(3000), "label": rng.integers(0, 2, 3000),
                  "id": np.arange(3000)}).to_csv(path, index=False)
    r = cli(["score", path, "--by", "id", "-m", "ece"])
    assert r.code == 2 and "3,000 distinct values" in r.stderr and "--max-groups" in r.stderr
    r = cli(["score", path, "--by", "id", "-m", "ece", "--max-groups", "5000", "--json"])
    assert r.code == 0 and len(json.loads(r.stdout)["groups"]) == 3000


@pytest.mark.parametrize("sigma", ["1e-300", "0", "2"])
def test_smece_sigma_has_a_documented_range(cli, tmp_path, sigma):
    path = tmp_path / "p.csv"
    pd.DataFrame({"score": [0.2, 0.7, 0.4], "label": [0, 1, 1]}).to_csv(path, index=False)
    r = cli(["score", path, "-m", "smece", "--smece-sigma", sigma])
    assert r.code == 2 and "[0.0001, 1]" in r.stderr
    with pytest.raises(UsageError):
        calcheck.smece([0.2, 0.7, 0.4], [0, 1, 1], sigma=float(sigma))


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_probability_columns_named_after_the_classes(tmp_path, engine):
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(3), size=2000)
    names = np.array(["cat", "dog", "bird"])
    y = names[np.minimum((P.cumsum(1) < rng.random((2000, 1))).sum(1), 2)]
    df = pd.DataFrame({"id": np.arange(2000), "cat": P[:, 0], "dog": P[:, 1], "bird": P[:, 2],
                       "label": y})
    path = tmp_path / "cls.parquet"
    df.to_parquet(path)
    rep = calcheck.score(path, engine=engine, metrics=["sce"])
    ref = calcheck.score(df, probs=["cat", "dog", "bird"], metrics=["sce"])
    assert rep.data["input"]["classes"] == ["cat", "dog", "bird"]
    assert rep.data["metrics"]["sce"]["value"] == pytest.approx(
        ref.data["metrics"]["sce"]["value"], rel=1e-9)
    assert any("named after the classes of 'label': cat, dog, bird" in n for n in rep.notes)


def test_stdin_refuses_binary_data_and_one_long_line(cli, tmp_path):
    r = cli(["score", "-"], stdin=b"\x00" * (1 << 21))
    assert r.code == 2 and "binary data" in r.stderr
    path = tmp_path / "one.csv"
    path.write_text("score,label" + ",x" * 200_000)
    r = cli(["score", path])
    assert r.code == 2 and "without a complete line after the header" in r.stderr


@pytest.mark.parametrize("args, needle", [
    (["score", "{csv}", "--ci-reps", "50"], "--ci-reps has no effect without --ci"),
    (["score", "{csv}", "--max-dropped", "0.3"], "--max-dropped has no effect without"),
    (["score", "{csv}", "--min-group-size", "5"], "--min-group-size has no effect without --by"),
    (["score", "{csv}", "--smece-sigma", "0.1"], "--smece-sigma has no effect without"),
    (["test", "{csv}", "--hl-df", "fitted"], "--hl-df has no effect without --method hl"),
    (["test", "{csv}", "--bins", "15", "--adaptive-grid", "paper"], "--adaptive-grid has no effect"),
    (["test", "{csv}", "--trials", "100000000"], "GB for the simulated null"),
])
def test_meaningless_or_oversized_options_are_refused(cli, sources, args, needle):
    r = cli([a.replace("{csv}", str(sources["csv"])) for a in args])
    assert r.code == 2 and needle in r.stderr, r.stderr


def test_reps_beyond_the_budget_are_refused():
    from calcheck.uncertainty import check_reps_size

    with pytest.raises(UsageError, match="replicates fit"):
        check_reps_size(10_000_000, 30)
    check_reps_size(1000, 30)


@pytest.mark.parametrize("value, inside", [
    (0.0, True), (-0.0, True), (1.0, True), (5e-324, True), (0.5, True),
    (np.nextafter(1.0, 2.0), False), (-5e-324, False), (-1.0, False), (np.inf, False),
    (-np.inf, False), (np.nan, False), (-np.nan, False), (2.0, False)])
def test_in_unit_is_the_range_check(value, inside):
    """The one-maximum check over bit patterns agrees with 0 <= v <= 1 (NaN outside) for
    every kind of double, in any position of any layout."""
    from calcheck.validation import in_unit

    for arr in (np.array([value]), np.array([0.25, value, 0.75]),
                np.array([[0.2, 0.3], [value, 0.4]]).reshape(-1),
                np.array([0.1, 0.2, value, 0.9])[::2], np.array([value], dtype=np.float32)):
        with np.errstate(invalid="ignore"):
            expected = bool(np.all((arr >= 0.0) & (arr <= 1.0)))   # NaN compares False
        assert in_unit(arr) is expected, (value, arr)
    assert in_unit(np.array([0.3, value])) is inside
    assert in_unit(np.array([], dtype=np.float64))
