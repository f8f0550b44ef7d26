"""Weighted and aggregated rows (--weight, --count; docs/weights.md).

The invariants the weighted kernels rely on, each held here:

* counts are expansion: every number of ``count=k`` equals that of the file with each row
  repeated k times (deterministic values to 1e-9, bin tables included; the Monte Carlo
  p-values with the same draws where the draws are per row) — ``test_counts_are_expansion_*``;
* unit weights are no weights: ``weight=1`` gives the unweighted numbers (Cox excepted: a
  weight makes it the robust Wald test) — ``test_unit_weights_*``;
* class weights: the labels' null is the kept rows' rate q(s) — ``test_class_weights_*``;
* scale: multiplying every weight by a constant changes nothing — ``test_weight_scale_*``;
* zero weights: a row of weight 0 is counted in ``n`` and nowhere else —
  ``test_zero_weight_rows_count_nowhere``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck import registry

IDS = sorted(m for m, spec in registry.METRICS.items() if spec.weights == "any"
             and spec.kind == registry.BINARY)
COUNTED = sorted(m for m, spec in registry.METRICS.items() if spec.weights
                 and spec.kind == registry.BINARY)
METHODS = sorted(m for m, spec in registry.TESTS.items() if spec.weights == "any")


def _data(n: int = 1500, seed: int = 0, digits: int = 2):
    rng = np.random.default_rng(seed)
    s = np.round(rng.beta(2, 4, n), digits)
    y = (rng.uniform(size=n) < s ** 1.1).astype(int)
    return s, y, rng


@pytest.mark.parametrize("ties", ["share", "order"])
@pytest.mark.parametrize("digits", [2, 5])
def test_counts_are_expansion_metrics(ties, digits):
    s, y, rng = _data(digits=digits)
    k = rng.integers(0, 5, s.shape[0])
    a = calcheck.score(scores=s, labels=y, count=k, metrics=COUNTED, ties=ties,
                       bins_table="all").to_dict()["metrics"]
    b = calcheck.score(scores=np.repeat(s, k), labels=np.repeat(y, k), metrics=COUNTED,
                       ties=ties, bins_table="all").to_dict()["metrics"]
    for m in COUNTED:
        assert a[m]["value"] == pytest.approx(b[m]["value"], abs=1e-9), m
        assert a[m]["n"] == b[m]["n"] == int(k.sum())
        assert len(a[m].get("bins", [])) == len(b[m].get("bins", []))
        for ra, rb in zip(a[m].get("bins", []), b[m].get("bins", [])):
            for key in ("n", "positives", "mean_score", "mean_label", "lower", "upper",
                        "rejected", "min_score", "q1_score", "median_score", "q3_score",
                        "max_score"):
                if key not in rb:
                    continue
                assert ra[key] == pytest.approx(rb[key], abs=1e-9, nan_ok=True), (m, key)


@pytest.mark.parametrize("method", METHODS)
def test_counts_are_expansion_tests(method):
    s, y, rng = _data(n=800, seed=1, digits=3)
    k = rng.integers(1, 4, s.shape[0])
    a = calcheck.run_tests(scores=s, labels=y, count=k, method=method, trials=199,
                           seed=4).to_dict()["tests"]
    b = calcheck.run_tests(scores=np.repeat(s, k), labels=np.repeat(y, k), method=method,
                           trials=199, seed=4).to_dict()["tests"]
    for tid, res in a.items():
        assert res["statistic"] == pytest.approx(b[tid]["statistic"], rel=1e-7, abs=1e-9), tid
        assert res.get("statistic_name") == b[tid].get("statistic_name"), tid   # named alike
        if res.get("pvalue_method") != "monte carlo" and method != "tcal":
            # (a Monte Carlo null: the same law, not the same draws)
            assert res["pvalue"] == pytest.approx(b[tid]["pvalue"], rel=1e-6, abs=1e-12)


def test_counted_tcal_null_matches_expanded_in_distribution():
    """T-Cal on counts draws Binomial(k, s) per row; on the expanded file, k Bernoulli(s):
    the same law.  Their null critical values agree within Monte Carlo error."""
    s, y, rng = _data(n=400, seed=2, digits=3)
    k = rng.integers(1, 6, s.shape[0])
    a = calcheck.run_tests(scores=s, labels=y, count=k, method="tcal", bins=8, trials=4000,
                           seed=1).to_dict()["tests"]["tcal"]
    b = calcheck.run_tests(scores=np.repeat(s, k), labels=np.repeat(y, k), method="tcal",
                           bins=8, trials=4000, seed=2).to_dict()["tests"]["tcal"]
    assert a["statistic"] == pytest.approx(b["statistic"], rel=1e-9)
    assert a["critical_value"] == pytest.approx(b["critical_value"],
                                                           rel=0.1)


def test_unit_weights_are_no_weights():
    s, y, _ = _data(seed=3)
    a = calcheck.score(scores=s, labels=y, metrics=IDS).to_dict()["metrics"]
    b = calcheck.score(scores=s, labels=y, metrics=IDS,
                       weight=np.ones(s.shape[0])).to_dict()["metrics"]
    for m in IDS:
        if m == "ece_sweep":     # its b bins need not divide n: weights cut at j·n/b exactly
            continue
        assert a[m]["value"] == pytest.approx(b[m]["value"], abs=1e-12), m
    for method in ("hl", "spiegelhalter", "tcal"):
        ta = calcheck.run_tests(scores=s, labels=y, method=method, trials=199).to_dict()
        tb = calcheck.run_tests(scores=s, labels=y, method=method, trials=199,
                                weight=np.ones(s.shape[0])).to_dict()
        for tid, res in ta["tests"].items():
            other = tb["tests"].get(tid)
            if other is None:
                continue
            if tid == "tcal_adaptive":              # its own draws: compare the statistics
                assert [lv["dpe"] for lv in res["levels"]] == pytest.approx(
                    [lv["dpe"] for lv in other["levels"]], rel=1e-9, abs=1e-15)
                continue
            assert res["statistic"] == pytest.approx(other["statistic"], rel=1e-9,
                                                     abs=1e-12), tid
            assert res["pvalue"] == pytest.approx(other["pvalue"], rel=1e-9)


def test_weight_scale_changes_nothing():
    s, y, rng = _data(seed=4)
    w = rng.exponential(1.0, s.shape[0])
    a = calcheck.score(scores=s, labels=y, metrics=IDS, weight=w).to_dict()["metrics"]
    b = calcheck.score(scores=s, labels=y, metrics=IDS, weight=w * 1234.5).to_dict()["metrics"]
    for m in IDS:
        assert a[m]["value"] == pytest.approx(b[m]["value"], rel=1e-9, abs=1e-12), m
    for method in METHODS:
        ta = calcheck.run_tests(scores=s, labels=y, method=method, weight=w, trials=199)
        tb = calcheck.run_tests(scores=s, labels=y, method=method, weight=w * 0.01, trials=199)
        for tid, res in ta.to_dict()["tests"].items():
            other = tb.to_dict()["tests"][tid]
            assert res["statistic"] == pytest.approx(other["statistic"], rel=1e-6, abs=1e-12)
            assert res["pvalue"] == pytest.approx(other["pvalue"], rel=1e-6, abs=1e-12)


def test_weighted_means_equal_sklearn():
    """scikit-learn 1.9.1's brier_score_loss and log_loss with sample_weight on these rows
    (computed once with the library; its weighted mean Σw·loss/Σw)."""
    rng = np.random.default_rng(11)
    n = 500
    s = np.round(rng.uniform(0.001, 0.999, n), 4)
    y = (rng.uniform(size=n) < s).astype(int)
    w = np.round(rng.exponential(2, n), 3)
    rep = calcheck.score(scores=s, labels=y, weight=w, metrics=["brier", "log_loss"])
    assert rep.value("brier") == pytest.approx(0.1635347716945317, rel=1e-12)
    assert rep.value("log_loss") == pytest.approx(0.5025557354411078, rel=1e-12)


def test_zero_weight_rows_count_nowhere():
    s, y, rng = _data(seed=5)
    w = rng.exponential(1.0, s.shape[0])
    w[::3] = 0.0
    a = calcheck.score(scores=s, labels=y, metrics=IDS, weight=w).to_dict()
    keep = w > 0
    b = calcheck.score(scores=s[keep], labels=y[keep], metrics=IDS,
                       weight=w[keep]).to_dict()
    for m in IDS:
        if m == "ecce_r" or m == "ecce_mad":
            continue                     # read at tie-group ends: a zero-weight group adds a point
        assert a["metrics"][m]["value"] == pytest.approx(b["metrics"][m]["value"], abs=1e-12), m
    assert a["input"]["rows_used"] == s.shape[0]
    assert a["input"]["weights"]["zero_rows"] == int((~keep).sum())


def test_weighted_equal_mass_bins_hold_equal_weight():
    s, y, rng = _data(seed=6, digits=6)
    w = rng.exponential(1.0, s.shape[0])
    bins = calcheck.score(scores=s, labels=y, weight=w, metrics=["ace"],
                          bins_table="ace").to_dict()["metrics"]["ace"]["bins"]
    masses = np.array([b["n"] for b in bins])
    assert masses == pytest.approx(np.full(10, w.sum() / 10), rel=1e-9)


def test_report_says_what_was_done(tmp_path, cli):
    s, y, rng = _data(seed=7)
    k = rng.integers(1, 9, s.shape[0])
    path = tmp_path / "agg.csv"
    pd.DataFrame({"score": s, "label": y, "n": k}).to_csv(path, index=False)
    r = cli(["score", path, "--count", "n", "--json"])
    assert r.code == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["input"]["weights"] == {**rep["input"]["weights"], "kind": "count",
                                       "column": "n", "expanded_rows": int(k.sum())}
    assert rep["metrics"]["ece"]["n"] == int(k.sum())
    assert set(rep["metrics"]) == set(registry.default_ids(False))     # TCE on counts too
    assert "aggregated: n counts" in cli(["score", path, "--count", "n"]).stdout
    t = cli(["score", path, "--weight", "n"])
    assert t.code == 0, t.stderr
    assert "weighted by n" in t.stdout and "effective n" in t.stdout
    assert "tce" in t.stderr and "left out" in t.stderr   # the default set leaves it out


@pytest.mark.parametrize("values,what", [
    ([1, 2, -1, 3], "negative"), ([1, 2, "", 3], "missing"), ([1, 2, "inf", 3], "infinite"),
    ([1, "x", 1, 3], "not numeric")])
@pytest.mark.parametrize("flag", ["--weight", "--count"])
def test_bad_weights_exit_2_naming_column_and_row(tmp_path, cli, values, what, flag):
    path = tmp_path / "bad.csv"
    pd.DataFrame({"score": [0.1, 0.5, 0.7, 0.9], "label": [0, 1, 1, 0],
                  "w": values}).to_csv(path, index=False)
    r = cli(["score", path, flag, "w"])
    assert r.code == 2
    assert "'w'" in r.stderr and what in r.stderr and "row" in r.stderr
    d = cli(["score", path, flag, "w", "--drop-invalid", "--max-dropped", "0.9", "--json",
             "-m", "ece"])
    assert d.code == 0, d.stderr
    rep = json.loads(d.stdout)
    kind = flag[2:]
    assert rep["input"]["rows_dropped"] == 1
    assert rep["input"]["dropped_by_reason"] == {f"invalid_{kind}": 1}


def test_fractional_count_and_all_zero_and_both(tmp_path, cli):
    path = tmp_path / "w.csv"
    pd.DataFrame({"score": [0.1, 0.5, 0.7], "label": [0, 1, 1], "w": [1.0, 1.5, 2.0],
                  "z": [0, 0, 0]}).to_csv(path, index=False)
    r = cli(["score", path, "--count", "w"])
    assert r.code == 2 and "whole number" in r.stderr and "row 2" in r.stderr
    assert cli(["score", path, "--count", "w", "--weight", "w"]).code == 2
    z = cli(["score", path, "--weight", "z"])
    assert z.code == 2 and "zero" in z.stderr
    missing = cli(["score", path, "--weight", "nope"])
    assert missing.code == 2 and "nope" in missing.stderr


def test_refused_metric_named_is_exit_2_with_reason(tmp_path, cli):
    path = tmp_path / "w.csv"
    s, y, rng = _data(n=200, seed=8)
    pd.DataFrame({"score": s, "label": y, "w": rng.exponential(1, 200)}).to_csv(path,
                                                                             index=False)
    r = cli(["score", path, "--weight", "w", "-m", "tce"])
    assert r.code == 2 and "tce" in r.stderr and "binomial" in r.stderr
    t = cli(["test", path, "--weight", "w", "--method", "skce", "--json", "--trials", "99"])
    assert t.code == 0 and "weights held fixed" in json.loads(t.stdout)["tests"]["skce"][
        "settings"]["weights"]
    a = cli(["test", path, "--weight", "w", "--method", "all", "--json", "--trials", "99"])
    assert a.code == 0, a.stderr
    assert set(json.loads(a.stdout)["tests"]) == {"tcal_adaptive", "hosmer_lemeshow",
                                                  "spiegelhalter", "cox", "ks", "kuiper",
                                                  "skce"}
    e = cli(["score", path, "--weight", "w", "--engine", "stream"])
    assert e.code == 2 and "Parquet only" in e.stderr    # (a CSV file: the streaming engines
    #                                                        read Parquet, weighted or not)


def test_groups_windows_and_ci_honour_weights():
    s, y, rng = _data(n=2000, seed=9)
    k = rng.integers(0, 4, s.shape[0])
    g = rng.integers(0, 3, s.shape[0])
    a = calcheck.score(scores=s, labels=y, count=k, by=g, metrics=["ece", "ace"]).to_dict()
    for key, entry in a["groups"].items():
        sel = g == int(key)
        b = calcheck.score(scores=np.repeat(s[sel], k[sel]), labels=np.repeat(y[sel], k[sel]),
                           metrics=["ece", "ace"]).to_dict()
        for m in ("ece", "ace"):
            assert entry["metrics"][m]["value"] == pytest.approx(b["metrics"][m]["value"],
                                                                 abs=1e-9)
    ci = calcheck.score(scores=s, labels=y, weight=rng.exponential(1, s.shape[0]), ci=True,
                        ci_reps=50, metrics=["ece", "brier"], seed=3).to_dict()["metrics"]
    for m in ("ece", "brier"):
        c = ci[m]["ci"]
        assert c["low"] <= ci[m]["value"] <= c["high"] or m == "ece"
        assert "weight" in c["resampling"]


def test_compat_sklearn_weighted_brier_and_log_loss():
    """--compat sklearn with weights: brier_score_loss and log_loss with sample_weight
    (scikit-learn 1.9.1's values on these rows); its binned ids take no weights: refused."""
    rng = np.random.default_rng(11)
    n = 500
    s = np.round(rng.uniform(0.001, 0.999, n), 4)
    y = (rng.uniform(size=n) < s).astype(int)
    w = np.round(rng.exponential(2, n), 3)
    rep = calcheck.score(scores=s, labels=y, weight=w, compat="sklearn",
                         metrics=["brier", "log_loss"])
    assert rep.value("brier") == pytest.approx(0.1635347716945317, rel=1e-12)
    assert rep.value("log_loss") == pytest.approx(0.5025557354411078, rel=1e-12)
    with pytest.raises(calcheck.UsageError, match="takes no row weights"):
        calcheck.score(scores=s, labels=y, weight=w, compat="sklearn", metrics=["ece"])


@pytest.mark.parametrize("ties", ["share", "order"])
def test_multiclass_counts_are_expansion(ties):
    rng = np.random.default_rng(12)
    P = np.round(rng.dirichlet(np.ones(4) * 0.5, 1500), 2)
    P = P / P.sum(axis=1, keepdims=True)
    Y = np.array([rng.choice(4, p=row) for row in P])
    k = rng.integers(0, 4, 1500)
    ids = registry.default_ids(True)
    a = calcheck.score(probs=P, labels=Y, count=k, ties=ties).to_dict()["metrics"]
    b = calcheck.score(probs=np.repeat(P, k, axis=0), labels=np.repeat(Y, k),
                       ties=ties).to_dict()["metrics"]
    assert set(a) == set(ids)                     # the whole default set on counts
    more = ["smece_cw", "ecce_mad_cw", "ecce_r_cw", "ece_sweep_cw"]
    a.update(calcheck.score(probs=P, labels=Y, count=k, ties=ties,
                            metrics=more).to_dict()["metrics"])
    b.update(calcheck.score(probs=np.repeat(P, k, axis=0), labels=np.repeat(Y, k), ties=ties,
                            metrics=more).to_dict()["metrics"])
    for m in [*ids, *more]:
        assert a[m]["value"] == pytest.approx(b[m]["value"], abs=1e-9), m
    t = calcheck.run_tests(probs=P, labels=Y, count=k, method="spiegelhalter").to_dict()
    u = calcheck.run_tests(probs=np.repeat(P, k, axis=0), labels=np.repeat(Y, k),
                           method="spiegelhalter").to_dict()
    assert t["tests"]["spiegelhalter"]["statistic"] == pytest.approx(
        u["tests"]["spiegelhalter"]["statistic"], rel=1e-9)


def test_class_weights_null_is_the_kept_rows_rate():
    """Every positive kept, negatives at f = 0.1 with weight 10 (class weights): Spiegelhalter's
    variance is Σ (1 − 2s)²[q·w₁²(1 − s)² + (1 − q)·w₀²s²] with q = (s/w₁)/(s/w₁ + (1 − s)/w₀),
    written out here; --weight-null fixed uses w²·s(1 − s) instead; labels on weights that
    vary within a class is a usage error."""
    rng = np.random.default_rng(13)
    pop = 40_000
    s = rng.beta(0.6, 15, pop)
    y = (rng.uniform(size=pop) < s).astype(int)
    keep = (y == 1) | (rng.uniform(size=pop) < 0.1)
    s, y = s[keep], y[keep]
    w = np.where(y == 1, 1.0, 10.0)
    rep = calcheck.run_tests(scores=s, labels=y, weight=w, method="spiegelhalter").to_dict()
    q = (s / 1.0) / (s / 1.0 + (1 - s) / 10.0)
    t = 1 - 2 * s
    var = np.sum(t * t * (q * (1 - s) ** 2 + (1 - q) * 100 * s * s))
    z = np.sum(w * (y - s) * t) / np.sqrt(var)
    assert rep["tests"]["spiegelhalter"]["statistic"] == pytest.approx(z, rel=1e-10)
    assert "class weights" in rep["tests"]["spiegelhalter"]["settings"]["weights"]
    fixed = calcheck.run_tests(scores=s, labels=y, weight=w, method="spiegelhalter",
                               weight_null="fixed").to_dict()["tests"]["spiegelhalter"]
    zf = np.sum(w * (y - s) * t) / np.sqrt(np.sum(t * t * w * w * s * (1 - s)))
    assert fixed["statistic"] == pytest.approx(zf, rel=1e-10)
    with pytest.raises(calcheck.UsageError, match="class weights"):
        calcheck.run_tests(scores=s, labels=y, weight=w * rng.uniform(1, 2, s.shape[0]),
                           method="spiegelhalter", weight_null="labels")
    tc = calcheck.run_tests(scores=s, labels=y, weight=w, method="tcal", trials=199,
                            seed=2).to_dict()["tests"]["tcal_adaptive"]
    assert 0.0 < tc["pvalue"] <= 1.0 and "class weights" in tc["settings"]["weights"]


def test_compare_counts_are_expansion(tmp_path):
    rng = np.random.default_rng(14)
    n = 1500
    s = np.round(rng.uniform(size=n), 2)
    y = (rng.uniform(size=n) < s).astype(int)
    k = rng.integers(0, 4, n)
    s2 = s ** 1.3
    agg = pd.DataFrame({"old": s, "new": s2, "label": y, "k": k})
    wide = pd.DataFrame({"old": np.repeat(s, k), "new": np.repeat(s2, k),
                         "label": np.repeat(y, k)})
    a = calcheck.compare(agg, score=["old", "new"], count="k", ci_reps=50).to_dict()["metrics"]
    b = calcheck.compare(wide, score=["old", "new"], ci_reps=50).to_dict()["metrics"]
    assert set(a) == set(b)
    for m in a:
        assert a[m]["old"] == pytest.approx(b[m]["old"], abs=1e-9)
        assert a[m]["new"] == pytest.approx(b[m]["new"], abs=1e-9)
        if "test" in b[m]:                # the squared-error test: the expanded rows' sums
            assert a[m]["test"]["statistic"] == pytest.approx(b[m]["test"]["statistic"],
                                                              rel=1e-9)


def test_compare_weights_must_agree(tmp_path, cli):
    rng = np.random.default_rng(15)
    n = 400
    s = rng.uniform(size=n)
    y = (rng.uniform(size=n) < s).astype(int)
    w = rng.exponential(1, n)
    pd.DataFrame({"id": np.arange(n), "score": s, "label": y, "w": w}).to_csv(
        tmp_path / "old.csv", index=False)
    w2 = w.copy()
    w2[7] += 1
    pd.DataFrame({"id": np.arange(n)[::-1], "score": s[::-1] ** 1.1, "label": y[::-1],
                  "w": w2[::-1]}).to_csv(tmp_path / "new.csv", index=False)
    r = cli(["compare", tmp_path / "old.csv", tmp_path / "new.csv", "--id", "id", "--weight",
             "w", "-m", "ece"])
    assert r.code == 2 and "same weight" in r.stderr
    pd.DataFrame({"id": np.arange(n)[::-1], "score": s[::-1] ** 1.1,
                  "label": y[::-1]}).to_csv(tmp_path / "new2.csv", index=False)
    ok = cli(["compare", tmp_path / "old.csv", tmp_path / "new2.csv", "--id", "id",
              "--weight", "w", "-m", "ece,brier", "--ci-reps", "50", "--json"])
    assert ok.code == 0, ok.stderr
    rep = json.loads(ok.stdout)
    assert rep["input"]["old"]["weights"]["column"] == "w"


@pytest.mark.parametrize("kind", ["weight", "count"])
def test_weighted_bootstrap_fast_path_equals_recomputing(kind):
    """The invariant behind --ci's fast path on weighted rows: the replicate's binary means
    and binned errors from prefix sums of its weights over the sorted rows equal the metrics
    recomputed on the replicate (values and norm-bootstrap vectors)."""
    from calcheck.data import Predictions
    from calcheck.engines.base import metric_options
    from calcheck.engines.memory import compute
    from calcheck.option_checks import parse
    from calcheck.uncertainty import RowWeightReplicates, canonical_order, replicate_weights
    from calcheck.weights import Weights

    rng = np.random.default_rng(16)
    n = 2000
    s = np.round(rng.beta(2, 5, n), 2)
    y = (rng.uniform(size=n) < s).astype(np.int8)
    w = rng.exponential(1, n) if kind == "weight" else rng.integers(0, 4, n).astype(float)
    data = Predictions(scores=s, labels=y, weights=Weights(w, kind, "w"))
    base = data.subset(canonical_order(data))
    ids = ["ece", "ece_l2", "mce", "ace", "mce_q", "brier", "log_loss"]
    mopts = metric_options(parse("score", {}), False)
    fast = RowWeightReplicates(base, ids, mopts, compute, 4, listed_sorted=True)
    slow = RowWeightReplicates(base, ids, mopts, compute, 4, listed_sorted=True)
    assert fast.fast is not None
    slow.fast, slow.slow = None, ids
    draws = np.random.default_rng(1)
    for r in range(4):
        new = replicate_weights(base.weights, draws)
        fast.add(r, new)
        slow.add(r, new)
    assert fast.values == pytest.approx(slow.values, abs=1e-12)
    for m in fast.vectors:
        assert fast.vectors[m].dev["l1"] == pytest.approx(slow.vectors[m].dev["l1"], abs=1e-12)


def test_per_class_diagrams_take_counts(tmp_path):
    """The per-class reliability diagrams of counted rows are the expanded rows' (they once
    ignored the counts)."""
    rng = np.random.default_rng(21)
    P = rng.dirichlet([1.0, 1.0, 1.0], 900)
    y = (rng.uniform(size=900)[:, None] > np.cumsum(P, axis=1)).sum(axis=1)
    k = rng.integers(0, 3, 900)
    out = []
    for name, kw in (("counted", {"probs": P, "labels": y, "count": k}),
                     ("expanded", {"probs": np.repeat(P, k, axis=0), "labels": np.repeat(y, k)}),
                     ("plain", {"probs": P, "labels": y})):
        path = tmp_path / f"{name}.svg"
        calcheck.figure(kind="reliability", per_class=True, output=str(path), **kw)
        out.append(path.read_bytes())
    assert out[0] == out[1] != out[2]


def test_test_based_and_corp_diagrams_of_counted_rows(tmp_path, cli):
    """``plot --kind tce --count`` draws the expanded file's test-based diagram (every
    engine), ``--kind corp --count`` its CORP diagram; TCE's refuses sampling weights; the
    report draws both for counts."""
    s, y, rng = _data(n=1500, seed=22)
    k = rng.integers(0, 4, s.shape[0])
    counted, expanded = tmp_path / "c.parquet", tmp_path / "e.parquet"
    pd.DataFrame({"score": s, "label": y, "k": k, "w": k + 0.5}).to_parquet(counted)
    pd.DataFrame({"score": np.repeat(s, k), "label": np.repeat(y, k)}).to_parquet(expanded)
    want = tmp_path / "want.svg"
    assert cli(["plot", expanded, "--kind", "tce", "-o", want]).code == 0
    for engine in ("memory", "stream"):
        got = tmp_path / f"{engine}.svg"
        r = cli(["plot", counted, "--kind", "tce", "--count", "k", "--engine", engine, "-o", got])
        assert r.code == 0, r.stderr
        assert got.read_bytes() == want.read_bytes()
    r = cli(["plot", counted, "--kind", "tce", "--weight", "w", "-o", tmp_path / "x.svg"])
    assert r.code == 2 and "TCE takes counts" in r.stderr
    corp = tmp_path / "corp.svg", tmp_path / "corp_expanded.svg"
    assert cli(["plot", counted, "--kind", "corp", "--count", "k", "-o", corp[0]]).code == 0
    assert cli(["plot", expanded, "--kind", "corp", "-o", corp[1]]).code == 0
    assert corp[0].read_bytes() == corp[1].read_bytes()
    r = cli(["plot", counted, "--kind", "corp", "--weight", "w", "-o", tmp_path / "x.svg"])
    assert r.code == 0, r.stderr                 # sampling weights: the weighted band
    page = tmp_path / "r.html"
    assert cli(["report", counted, "--count", "k", "-o", page, "-q"]).code == 0
    text = page.read_text(encoding="utf-8")
    assert "Test-based reliability diagram" in text and "CORP reliability diagram" in text


def test_plot_of_sampling_weights_defaults_to_the_reliability_diagram(tmp_path, cli):
    """``plot f --weight w`` just works: without ``--kind`` the figure is the reliability
    diagram (TCE's test-based one counts predictions), its histogram axis reads "weight"."""
    s, y, rng = _data(n=800, seed=23)
    path = tmp_path / "w.parquet"
    pd.DataFrame({"score": s, "label": y, "w": rng.exponential(1, 800)}).to_parquet(path)
    out = tmp_path / "f.svg"
    r = cli(["plot", path, "--weight", "w", "-o", out])
    assert r.code == 0, r.stderr
    text = out.read_text(encoding="utf-8")
    assert "Reliability diagram" in text and "weight" in text
    fig = calcheck.figure(str(path), weight="w")
    assert fig.axes[0].get_title().startswith("Reliability diagram")


def test_class_weights_looks_at_every_row():
    """:func:`calcheck.weights.class_weights` looks at the first rows first (a shortcut for
    weights that vary within a class): whatever it finds there, its answer is that of every
    row — weights varying only past the first rows, one class only at first, zero weights,
    equal class weights."""
    from calcheck.weights import class_weights

    def reference(w: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
        pos, neg = w[(y == 1) & (w > 0)], w[(y == 0) & (w > 0)]
        if not pos.size or not neg.size or len(set(pos)) > 1 or len(set(neg)) > 1 \
                or pos[0] == neg[0]:
            return None
        return float(neg[0]), float(pos[0])

    rng = np.random.default_rng(3)
    for case in range(40):
        n = int(rng.choice([10, 5000, 20_000]))
        y = (rng.uniform(size=n) < rng.choice([0.0, 0.01, 0.5])).astype(np.int8)
        if case % 5 == 0:
            y[: min(n, 4096)] = 1                     # one class in the first rows only
        w = np.where(y == 1, 1.0, float(rng.choice([1.0, 10.0])))
        w[rng.uniform(size=n) < 0.05] = 0.0
        if case % 3 == 0:
            w[int(rng.integers(0, n))] *= 2.0         # one row breaks it, anywhere
        assert class_weights(w, y) == reference(w, y), case
