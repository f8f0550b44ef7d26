"""Bootstrap confidence intervals (docs/uncertainty.md): in memory (rows resampled with replacement) and on
the streaming engines (Poisson bootstrap per score unit, reproducible for any partitioning)."""

import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calcheck.binning import stable_argsort
from calcheck.data import Predictions
from calcheck.engines.memory import compute
from calcheck.metrics import MetricOptions
from calcheck.streaming import StreamState
from calcheck.streaming.bootstrap import bootstrap_units, grid_bootstrap
from calcheck.uncertainty import bootstrap, percentile_interval

from .conftest import SAMPLE

GRID_IDS = ["ece", "ece_l2", "ece_debiased", "ece_l2_debiased", "brier", "log_loss", "ace"]


def make(seed, n, slope=1.0):
    rng = np.random.default_rng(seed)
    s = rng.beta(1.2, 2.0, size=n)
    s[:4] = [0.0, 1.0, 0.3, 0.7]
    return s, rng.binomial(1, np.clip(s * slope, 0, 1))


def binary(s, y):
    return Predictions(labels=np.asarray(y, dtype=np.int64), scores=np.asarray(s, float),
                       validate=False)


# -- in memory -------------------------------------------------------------------------------

def test_percentile_interval_and_failures():
    v = np.arange(1.0, 101.0)
    ci = percentile_interval(v, level=0.9, seed=3)
    assert (ci.low, ci.high) == pytest.approx(tuple(np.quantile(v, [0.05, 0.95])))
    assert ci.failed == 0 and ci.se == pytest.approx(np.std(v, ddof=1))
    v[:60] = np.nan                                       # most replicates failed: no interval
    ci = percentile_interval(v, level=0.9, seed=3)
    assert ci.low is None and ci.high is None and ci.failed == 60


def test_seeded_and_reproducible():
    s, y = make(1, 3000, 0.8)
    data, ids, o = binary(s, y), ["ece", "ace", "tce", "brier"], MetricOptions()
    a = bootstrap(data, ids, o, compute, reps=40, seed=5)
    b = bootstrap(data, ids, o, compute, reps=40, seed=5)
    c = bootstrap(data, ids, o, compute, reps=40, seed=6)
    assert a == b
    assert a["ece"].low != c["ece"].low


def test_presorted_replicate_equals_the_plain_resample():
    """A replicate is listed in stable score order; the metrics equal those of the same rows
    listed in input order (the stable sort gives the same table)."""
    s, y = make(2, 2000)
    s[::4] = np.round(s[::4], 2)                          # ties
    data, n = binary(s, y), len(s)
    ids = ["tce", "tce_q", "ece", "ace", "mce_q", "pde", "brier", "log_loss"]
    order = stable_argsort(data.scores)
    counts = np.bincount(np.random.default_rng(0).integers(0, n, n), minlength=n)
    listed = data.subset(np.repeat(order, counts[order]))
    listed.sorted_order = np.arange(n)
    fast = compute(listed, ids, MetricOptions())
    plain = compute(data.subset(np.repeat(np.arange(n), counts)), ids, MetricOptions())
    for m in ids:
        assert fast[m].value == pytest.approx(plain[m].value, rel=1e-12, abs=1e-14), m


def test_brier_interval_matches_normal_theory():
    """The Brier score is a mean: its bootstrap se is sd((s − y)²)/√n."""
    s, y = make(3, 5000, 0.9)
    ci = bootstrap(binary(s, y), ["brier"], MetricOptions(), compute, reps=400, seed=0)["brier"]
    se = np.std((s - y) ** 2) / np.sqrt(len(s))
    assert ci.se == pytest.approx(se, rel=0.15)
    mean = np.mean((s - y) ** 2)
    assert ci.low < mean < ci.high
    assert ci.high - ci.low == pytest.approx(2 * 1.96 * se, rel=0.2)


def test_multiclass_intervals():
    rng = np.random.default_rng(4)
    p = rng.dirichlet([1, 1, 1], size=1500)
    y = np.array([rng.choice(3, p=row) for row in p])
    data = Predictions(labels=y, probs=p)
    cis = bootstrap(data, ["ece_top", "sce", "ace_cw"], MetricOptions(bins=15), compute, reps=30,
                    seed=1)
    vals = compute(data, ["ece_top", "sce"], MetricOptions(bins=15))
    for m in ("ece_top", "sce"):
        assert cis[m].low <= vals[m].value * 1.5 and cis[m].high >= vals[m].value * 0.5
        assert cis[m].failed == 0


# -- CLI ---------------------------------------------------------------------------------------

def test_cli_ci_json_table_and_groups(cli, tmp_path):
    path = SAMPLE / "miscalibrated_50.parquet"
    r = cli(["score", path, "--ci", "--ci-reps", "60", "--seed", "2", "-m", "ece,brier,pc",
             "--json"])
    assert r.code == 0, r.stderr
    rep = json.loads(r.stdout)
    for m in ("ece", "brier"):
        ci = rep["metrics"][m]["ci"]
        assert ci["low"] <= rep["metrics"][m]["value"] <= ci["high"]
        assert (ci["reps"], ci["seed"], ci["level"]) == (60, 2, 0.95)
    assert "ci" not in rep["metrics"]["pc"]
    assert "pc" in r.stderr and rep["settings"]["ci"]["reps"] == 60
    again = json.loads(cli(["score", path, "--ci", "--ci-reps", "60", "--seed", "2", "-m",
                            "ece,brier,pc", "--json"]).stdout)
    assert again["metrics"] == rep["metrics"]
    t = cli(["score", path, "--ci", "--ci-reps", "20", "-m", "ece"])
    assert t.code == 0 and "95% CI" in t.stdout
    c = cli(["score", path, "--ci", "--ci-reps", "20", "--ci-level", "0.9", "-m", "ece",
             "--format", "csv"])
    assert c.stdout.splitlines()[0].startswith("metric,value,unit,n,ci_low,ci_high,ci_level")
    # per group, resampled within the group
    rng = np.random.default_rng(0)
    s, y = make(5, 1200)
    pq.write_table(pa.table({"score": s, "label": y, "site": rng.choice(["a", "b"], 1200)}),
                   tmp_path / "g.parquet")
    g = cli(["score", tmp_path / "g.parquet", "--by", "site", "--ci", "--ci-reps", "20",
             "-m", "ece", "--json"])
    assert g.code == 0, g.stderr
    groups = json.loads(g.stdout)["groups"]
    assert all("ci" in grp["metrics"]["ece"] for grp in groups.values())


@pytest.mark.parametrize("args", [["--ci-reps", "5"], ["--ci-level", "1.2"],
                                  ["--ci-level", "0"]])
def test_cli_bad_ci_options_exit_2(cli, args):
    r = cli(["score", SAMPLE / "calibrated_50.csv", "--ci", *args])
    assert r.code == 2 and "--ci" in r.stderr


# -- streaming ---------------------------------------------------------------------------------

def state(s, y):
    return StreamState(bins=10, ci=True).update(s, y)


def test_stream_bootstrap_units_partition_the_rows():
    s, y = make(6, 20_000)
    u = bootstrap_units(state(s, y))
    assert u["count"].sum() == len(s)
    assert u["count"][u["label"] == 1].sum() == y.sum()
    assert np.all(np.diff(u["bin"]) >= 0)
    assert u["sum_score"].sum() == pytest.approx(s.sum(), rel=1e-12)


def test_stream_bootstrap_any_partitioning_gives_the_same_interval():
    s, y = make(7, 30_000, 0.85)
    ref, ref_settings = grid_bootstrap(state(s, y), GRID_IDS, reps=100, seed=9)
    rnd = random.Random(1)
    for k in (2, 7):
        cuts = sorted(rnd.sample(range(1, len(s)), k - 1))
        parts = [state(a, b) for a, b in zip(np.split(s, cuts), np.split(y, cuts))]
        rnd.shuffle(parts)
        merged = parts[0]
        for p in parts[1:]:
            merged.merge(p)
        got, settings = grid_bootstrap(merged, GRID_IDS, reps=100, seed=9)
        deficit = settings.pop("variance_deficit")       # a difference of near-equal sums
        assert deficit == pytest.approx(ref_settings["variance_deficit"], rel=1e-6)
        assert settings == {k: v for k, v in ref_settings.items() if k != "variance_deficit"}
        for m in GRID_IDS:
            assert got[m].low == pytest.approx(ref[m].low, rel=1e-12), m
            assert got[m].high == pytest.approx(ref[m].high, rel=1e-12), m


def test_stream_bootstrap_agrees_with_the_in_memory_bootstrap():
    """Different draws, same distribution: the standard errors agree."""
    s, y = make(8, 20_000, 0.8)
    mem = bootstrap(binary(s, y), GRID_IDS, MetricOptions(), compute, reps=300, seed=0)
    grid, settings = grid_bootstrap(state(s, y), GRID_IDS, reps=300, seed=0)
    assert settings["variance_deficit"] < 1e-6
    for m in GRID_IDS:
        assert grid[m].se == pytest.approx(mem[m].se, rel=0.25), m
        mid = (mem[m].low + mem[m].high) / 2
        assert abs((grid[m].low + grid[m].high) / 2 - mid) < 0.5 * mem[m].se * 4, m


def test_stream_bootstrap_needs_the_log_likelihood_cells():
    s, y = make(9, 500)
    with pytest.raises(ValueError, match="ci=True"):
        grid_bootstrap(StreamState(bins=10).update(s, y), ["log_loss"], reps=20)


def test_cli_stream_ci(cli, tmp_path):
    s, y = make(10, 40_000, 0.9)
    root = tmp_path / "ds"
    for i, cut in enumerate(np.array_split(np.arange(len(s)), 4)):
        (root / f"part={i}").mkdir(parents=True)
        pq.write_table(pa.table({"score": s[cut], "label": y[cut]}),
                       root / f"part={i}" / "f.parquet")
    args = ["score", root, "--engine", "stream", "--ci", "--ci-reps", "50", "--json", "-m",
            "ece,brier,log_loss,ace,tce"]
    a = cli([*args, "--batch-rows", "7000"])
    b = cli([*args, "--batch-rows", "40000"])
    assert a.code == 0, a.stderr
    ra, rb = json.loads(a.stdout), json.loads(b.stdout)
    for m in ("ece", "brier", "log_loss", "ace"):
        assert ra["metrics"][m]["ci"]["low"] == pytest.approx(rb["metrics"][m]["ci"]["low"],
                                                              rel=1e-12)
    assert "ci" not in ra["metrics"]["tce"] and "none for tce" in a.stderr
    assert ra["settings"]["ci"]["resampling"].startswith("Poisson bootstrap")


def test_stream_quantile_replicate_of_the_data_itself_is_its_ace():
    """With every unit weighted by its own rows (the "replicate" that is the data), the
    re-cut equal-mass bins give the exact ACE and MCE(Q) up to the pro-rata split of the
    10 blocks (2^-12 wide) holding a cut."""
    import calcheck
    from calcheck.unit_bootstrap import unit_quantile_replicates

    s, y = make(12, 50_000, 0.8)
    u = bootstrap_units(state(s, y))
    W = u["count"][None, :].astype(float)
    starts = np.flatnonzero(np.concatenate(([True], np.diff(u["block"]) != 0)))
    ace, mce_q, m = unit_quantile_replicates(W, u, u["sum_score"] / u["count"], starts,
                                             W.sum(axis=1), 10)
    assert np.abs(m[0]).sum() == pytest.approx(ace[0], rel=1e-12)
    assert ace[0] == pytest.approx(calcheck.ace(s, y).value, rel=1e-6)  # gaps keep their sign
    assert mce_q[0] == pytest.approx(calcheck.mce_q(s, y).value, rel=1e-2)  # ~12 rows a block


@pytest.mark.parametrize("n, decimals, bins", [(7, 2, 10), (300, 1, 10), (5000, 3, 15),
                                               (4000, 12, 10)])
def test_intervals_from_counts_equal_the_resampled_copies(monkeypatch, n, decimals, bins):
    """The counts-per-row path (ECE, ECE-l2, MCE, ACE, MCE(Q), Brier, log loss) gives the
    intervals of recomputing every metric on each resampled copy, ties shared included."""
    from calcheck import uncertainty

    rng = np.random.default_rng(n)
    s = np.round(rng.random(n), decimals)
    data = Predictions(scores=s, labels=(rng.random(n) < s).astype(np.int64))
    from calcheck import registry

    ids = [m for m in uncertainty.WeightedReplicates.IDS if registry.METRICS[m].ci]
    opts = MetricOptions(bins=bins)
    fast = uncertainty.bootstrap(data, ids, opts, compute, reps=60, seed=3)
    monkeypatch.setattr(uncertainty.WeightedReplicates, "for_data",
                        classmethod(lambda cls, *a, **k: None))
    slow = uncertainty.bootstrap(data, ids, opts, compute, reps=60, seed=3)
    for mid in ids:
        assert fast[mid].low == pytest.approx(slow[mid].low, rel=1e-9, abs=1e-12), mid
        assert fast[mid].high == pytest.approx(slow[mid].high, rel=1e-9, abs=1e-12), mid
        assert fast[mid].se == pytest.approx(slow[mid].se, rel=1e-9, abs=1e-12), mid
