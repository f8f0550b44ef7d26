"""--by on the streaming engines: a grid state per group, equal to the in-memory engine's
per-group fixed-bin metrics, for any partitioning; positional metrics per group from a rank
search per group (sub-streams in shared passes)."""

import json
import random

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from calcheck.io.stream import group_codes
from calcheck.streaming.engine import StateSpec
from calcheck.streaming.groups import MAX_GROUPS, GroupedSpec
from tests.conftest import run_json, write_dataset

GRID = ["ece", "ece_l2", "mce", "brier", "log_loss"]
POSITIONAL = ["ace", "mce_q", "pde", "tce", "tce_q", "tce_v", "tce_u"]


@pytest.fixture(scope="module")
def hive(tmp_path_factory):
    root = tmp_path_factory.mktemp("groups")
    rng = np.random.default_rng(11)
    n = 30_000
    s = rng.beta(0.7, 1.3, size=n)
    s[:3] = [0.0, 1.0, 0.3]
    df = pd.DataFrame({"score": s, "label": rng.binomial(1, np.clip(s * 1.15, 0, 1)),
                       "region": rng.choice(["eu", "us", "apac"], n),
                       "day": rng.integers(1, 4, n),
                       "seg": rng.choice([1.5, 2.0, np.nan], n),
                       "rare": np.where(np.arange(n) % 2000 == 7, "few", "many"),
                       "many": rng.integers(0, MAX_GROUPS + 5, n)})
    return write_dataset(root, df, ["region", "day"])


@pytest.mark.parametrize("by", ["region", "day", "seg", "rare"])
def test_stream_groups_equal_the_in_memory_groups(cli, hive, by):
    ids = [*GRID, *POSITIONAL]
    mem = run_json(cli, hive, "--by", by, "-m", ",".join(ids))
    st = run_json(cli, hive, "--by", by, "-m", ",".join(ids), "--engine", "stream",
                  "--batch-rows", "4000")
    assert list(st["groups"]) == list(mem["groups"])          # same keys, same order
    for key, g in mem["groups"].items():
        sg = st["groups"][key]
        assert (sg["n"], sg["flagged"]) == (g["n"], g["flagged"])
        assert list(sg["metrics"]) == list(g["metrics"]), key
        for m in ids:
            want, got = g["metrics"][m], sg["metrics"][m]
            if want["value"] is None:                          # e.g. TCE of a 15-row group
                assert got == want, (key, m)
                continue
            assert got["value"] == pytest.approx(want["value"], rel=1e-12, abs=1e-15), (key, m)
    if by == "rare":
        assert mem["groups"]["few"]["metrics"]["tce"]["value"] is None
    for m in ids:                                              # overall metrics unchanged
        assert st["metrics"][m]["value"] == pytest.approx(mem["metrics"][m]["value"],
                                                          rel=1e-12, abs=1e-15)
    assert st["settings"]["group_metrics"] == ids


def test_grouped_state_any_partition_any_merge_order():
    rng = np.random.default_rng(3)
    n = 12_000
    s = rng.uniform(size=n)
    y = rng.binomial(1, s)
    g = pa.array(rng.choice(["a", "b", None, "c"], n))
    spec = GroupedSpec(StateSpec(bins=10), "g")
    ref = spec.new().update(s, y, 0, group_codes(g))
    rnd = random.Random(5)
    cuts = sorted(rnd.sample(range(1, n), 6))
    parts = []
    for lo, hi in zip([0, *cuts], [*cuts, n]):
        parts.append(spec.new().update(s[lo:hi], y[lo:hi], lo, group_codes(g.slice(lo, hi - lo))))
    rnd.shuffle(parts)
    merged = parts[0]
    for p in parts[1:]:
        merged.merge(p)
    assert set(merged.groups) == set(ref.groups) == {None, "a", "b", "c"}
    for key, st in ref.groups.items():
        np.testing.assert_array_equal(merged.groups[key].cell_count, st.cell_count)
        got, want = merged.groups[key].finalize(), st.finalize()
        for m in GRID:
            assert got[m] == pytest.approx(want[m], rel=1e-12), (key, m)
    assert merged.overall().n == n


def test_stream_groups_with_intervals(cli, hive):
    rep = run_json(cli, hive, "--by", "region", "-m", "ece,brier,ace,tce", "--engine", "stream",
                   "--ci", "--ci-reps", "30")
    for g in rep["groups"].values():
        for m in ("ece", "ace"):
            ci = g["metrics"][m]["ci"]
            assert ci["low"] <= g["metrics"][m]["value"] <= ci["high"]
        assert "ci" not in g["metrics"]["tce"]


def test_stream_groups_errors(cli, hive):
    r = cli(["score", hive, "--engine", "stream", "--by", "many", "-m", "ece"])
    assert r.code == 2 and f"more than {MAX_GROUPS} groups" in r.stderr
    r = cli(["score", hive, "--engine", "stream", "--by", "nope", "-m", "ece"])
    assert r.code == 2 and "'nope'" in r.stderr
    ok = cli(["score", hive, "--engine", "stream", "--by", "many", "--where", "many < 10",
              "-m", "ece", "--json"])
    assert ok.code == 0 and len(json.loads(ok.stdout)["groups"]) == 10
