"""``calcheck test --by`` / ``--time … --window`` of weighted and counted rows on the weighted
passes (beyond ``Tuning.hold_weighted_rows``; calcheck/engines/weighted.py ``group_tests``):
every group's (window's) T-Cal, Hosmer–Lemeshow, Spiegelhalter and Cox statistics are the
in-memory engine's test of that group, the groups flagged or left untested are memory's, the
Monte Carlo family counts the same groups, and the groups' passes run in lockstep (the passes
of one set of rows, not one set per group).

The p-values of the deterministic tests (Spiegelhalter, Cox) are memory's to 1e-9; T-Cal's and
Hosmer–Lemeshow's small-count p-values are Monte Carlo (the passes' nulls are the score
units' and the groups', docs/weights.md), compared up to that noise.
"""

from __future__ import annotations

import json

import pytest

from tests.test_weights_stream import SMALL, TIGHT, _close, _file, _grouped_file

EXACT = ("statistic", "df", "groups", "reject", "mean_score", "mean_label", "direction",
         "intercept", "slope", "intercept_se", "slope_se", "intercept_ci", "slope_ci",
         "calibration_intercept", "calibration_intercept_se", "calibration_intercept_ci",
         "likelihood_ratio", "min_expected", "table")


def _exact(test_id, entry):
    """The fields of a test entry the passes give exactly (the Monte Carlo p-values aside)."""
    keep = {k: v for k, v in entry.items() if k in EXACT}
    if test_id == "tcal":                      # its verdict reads a Monte Carlo p-value
        keep.pop("reject", None)
    if test_id == "hosmer_lemeshow":
        keep.pop("reject", None)
        keep["table"] = [{k: v for k, v in row.items() if k != "pvalue"}
                         for row in keep.get("table", [])]
    if test_id in ("spiegelhalter", "cox"):     # (adjusted: with the Monte Carlo ones)
        keep["pvalue"] = entry["pvalue"]
    return keep


def _entries(doc, key):
    groups = doc[key]
    return dict(enumerate(groups)) if isinstance(groups, list) else groups


@pytest.mark.parametrize("kind,column", [("--weight", "iw"), ("--count", "n")])
@pytest.mark.parametrize("grouping", [["--by", "g"], ["--time", "ts", "--window", "1d"]])
def test_streamed_group_tests_are_the_in_memory_tests(tmp_path, cli, kind, column, grouping):
    path = _grouped_file(tmp_path)
    args = ["test", path, kind, column, "--method", "tcal,hl,spiegelhalter,cox", "--bins",
            "10", "--trials", "2000", "--json", *grouping]
    mem = json.loads(cli(args).stdout)
    r = cli([*args, "--engine", "stream"], tuning=SMALL)
    assert r.code in (0, 1), r.stderr
    got = json.loads(r.stdout)
    assert "weighted" in got["settings"] and "held" not in got["settings"]
    key = "groups" if grouping[0] == "--by" else "windows"
    a, b = _entries(mem, key), _entries(got, key)
    assert set(a) == set(b)
    tested = 0
    for g in a:
        assert (a[g]["n"], a[g]["flagged"]) == (b[g]["n"], b[g]["flagged"]), g
        assert set(a[g]["tests"]) == set(b[g]["tests"]), g
        tested += bool(a[g]["tests"])
        for tid, entry in a[g]["tests"].items():
            other = b[g]["tests"][tid]
            _close(_exact(tid, entry), _exact(tid, other), f"{g}.{tid}")
            if tid in ("tcal", "hosmer_lemeshow"):
                assert abs(entry["pvalue"] - other["pvalue"]) < 0.05, (g, tid)
            # the same family (every tested group's tests and the whole file's): the same
            # Monte Carlo trials
            assert other["settings"].get("trials") == entry["settings"].get("trials"), (g, tid)
    if key == "groups" and kind == "--weight":
        assert b["3"]["tests"] == {}                   # every weight zero: no test, as in memory
    assert tested >= 3
    for tid, entry in mem["tests"].items():           # the whole file's tests, unchanged
        _close(_exact(tid, entry), _exact(tid, got["tests"][tid]), tid)
    # the whole file's passes and the groups' in lockstep (Newton's passes the most of any
    # group's), not one set of passes per group
    assert got["settings"]["passes"] <= 2 * 10, got["settings"]["passes"]


def test_streamed_group_tests_flag_small_groups_as_memory_does(tmp_path, cli):
    path = _file(tmp_path, n=6000)
    args = ["test", path, "--weight", "w", "--method", "spiegelhalter,cox", "--by", "g",
            "--min-group-size", "1990", "--json"]
    mem = json.loads(cli(args).stdout)["groups"]
    got = json.loads(cli([*args, "--engine", "stream"], tuning=SMALL).stdout)["groups"]
    assert {g: (e["n"], e["flagged"]) for g, e in mem.items()} == \
        {g: (e["n"], e["flagged"]) for g, e in got.items()}
    assert any(e["flagged"] for e in got.values()) and not all(e["flagged"]
                                                               for e in got.values())
    for g, e in mem.items():
        for tid, entry in e["tests"].items():
            _close(_exact(tid, entry), _exact(tid, got[g]["tests"][tid]), f"{g}.{tid}")


def test_streamed_group_tests_on_dask_are_the_stream_engines(tmp_path, cli):
    """The same units, passes and draws on Dask: the same report."""
    pytest.importorskip("dask")
    path = _grouped_file(tmp_path)
    args = ["test", path, "--weight", "iw", "--by", "g", "--json", "--seed", "3"]
    docs = []
    for engine in ("stream", "dask"):
        r = cli([*args, "--engine", engine], tuning=SMALL)
        assert r.code in (0, 1), r.stderr
        docs.append(json.loads(r.stdout))
    _close(docs[0]["groups"], docs[1]["groups"])
    assert docs[0]["groups"]["0"]["tests"]["tcal_adaptive"]["levels"]


@pytest.mark.parametrize("tuning", [SMALL, TIGHT])
def test_tests_without_weighted_passes_are_refused_per_group(tmp_path, cli, tuning):
    """KS, Kuiper and SKCE come from the rows held, for the whole file only: per group they
    are an error naming the limit, before any pass."""
    path = _file(tmp_path)
    r = cli(["test", path, "--weight", "w", "--method", "tcal,ks", "--by", "g", "--engine",
             "stream"], tuning=tuning)
    assert r.code == 2, r.stderr
    assert "ks" in r.stderr and "--engine memory" in r.stderr
    if tuning is SMALL:
        assert "--method ks per --by group" in r.stderr
