import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import calcheck
from calcheck.metrics import MetricOptions, MulticlassPrepared, compute_multiclass_metrics

IDS = ["ece_top", "mce_top", "ace_top", "sce", "ace_cw", "tace"]


def random_probs(rng, n, k, sharp=2.0):
    logits = rng.normal(size=(n, k)) * sharp
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (rng.uniform(size=n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    return p, np.minimum(y, k - 1)


def run(p, y, ids=IDS, **opts):
    return compute_multiclass_metrics(MulticlassPrepared(p, y), ids, MetricOptions(**{"bins": 15,
                                                                                       **opts}))


def test_sce_hand_computed():
    p = np.array([[0.7, 0.3], [0.4, 0.6], [0.9, 0.1], [0.2, 0.8]])
    y = np.array([0, 0, 1, 1])
    # bins=2 (edges 0, .5, 1). class 0: p = .7 .4 .9 .2, y0 = 1 1 0 0
    #   bin0 {.4 (1), .2 (0)}: conf .3 acc .5; bin1 {.7 (1), .9 (0)}: conf .8 acc .5 → err .5·.2 + .5·.3
    # class 1 is the mirror image → the same error
    r = run(p, y, ["sce"], bins=2)["sce"]
    assert r.value == pytest.approx(0.25)
    assert [c["error"] for c in r.to_dict()["per_class"]] == pytest.approx([0.25, 0.25])


def test_ace_and_tace_hand_computed():
    p = np.array([[0.995, 0.005], [0.6, 0.4], [0.3, 0.7], [0.2, 0.8]])
    y = np.array([0, 1, 1, 0])
    r = run(p, y, ["ace_cw", "tace"], bins=2)
    # class 0 sorted .2(0) .3(0) | .6(0) .995(1): gaps .25, |.5-.7975| → (2·.25 + 2·.2975)/4
    # class 1 sorted .005(0) .4(1) | .7(1) .8(0): gaps |.5-.2025|, |.5-.75|
    c0 = (2 * 0.25 + 2 * 0.2975) / 4
    c1 = (2 * 0.2975 + 2 * 0.25) / 4
    assert r["ace_cw"].value == pytest.approx((c0 + c1) / 2)
    # TACE drops p < .01 (class 1's .005): class 1 kept .4(1) | .7(1) .8(0) with cuts [0, 1, 3]
    t1 = (1 * 0.6 + 2 * abs(0.5 - 0.75)) / 3
    assert r["tace"].value == pytest.approx((c0 + t1) / 2)
    assert r["tace"].to_dict()["per_class"][1]["kept"] == 3


def test_top_label_equals_binary_metrics_on_the_view():
    rng = np.random.default_rng(0)
    p, y = random_probs(rng, 3000, 5)
    conf = p.max(axis=1)
    correct = (p.argmax(axis=1) == y).astype(int)
    r = run(p, y, ["ece_top", "ace_top", "brier"])
    assert r["ece_top"].value == calcheck.ece(conf, correct, bins=15).value
    assert r["ace_top"].value == calcheck.ace(conf, correct, bins=15).value
    assert r["brier"].value == calcheck.brier(conf, correct).value
    assert r["brier"].settings["view"] == "top-label"


def test_binary_as_two_columns_gives_binary_top_label_numbers():
    rng = np.random.default_rng(1)
    s = rng.uniform(size=2000)
    y = rng.binomial(1, s)
    p = np.column_stack([1 - s, s])
    conf = np.maximum(s, 1 - s)
    pred = (s > 1 - s).astype(int)      # argmax, ties → class 0
    correct = (pred == y).astype(int)
    r = run(p, y, ["ece_top", "mce_top", "ace_top"])
    assert r["ece_top"].value == pytest.approx(calcheck.ece(conf, correct, bins=15).value)
    assert r["mce_top"].value == pytest.approx(calcheck.mce(conf, correct, bins=15).value)
    assert r["ace_top"].value == pytest.approx(calcheck.ace(conf, correct, bins=15).value)


@given(st.integers(2, 6), st.integers(20, 300), st.integers(0, 2**31))
def test_ranges_and_class_permutation(k, n, seed):
    rng = np.random.default_rng(seed)
    p, y = random_probs(rng, n, k)
    p = np.round(p, 3)
    p /= p.sum(axis=1, keepdims=True)
    a = run(p, y)
    for mid in IDS:
        assert 0.0 <= a[mid].value <= 1.0, mid
    perm = rng.permutation(k)
    inv = np.argsort(perm)
    b = run(p[:, perm], inv[y])
    for mid in ("sce", "ace_cw", "tace"):
        assert a[mid].value == pytest.approx(b[mid].value, abs=1e-12), mid


def test_classwise_tce_is_mean_of_binary_tce():
    rng = np.random.default_rng(3)
    p, y = random_probs(rng, 1500, 3)
    r = run(p, y, ["tce_cw"])["tce_cw"]
    per = [calcheck.tce(p[:, k], (y == k).astype(int)).value for k in range(3)]
    assert r.value == pytest.approx(np.mean(per))
    assert r.unit == "percent"


def test_cli_multiclass_score(cli, tmp_path):
    rng = np.random.default_rng(2)
    p, y = random_probs(rng, 1200, 4)
    df = pd.DataFrame({f"prob_{j}": p[:, j] for j in range(4)})
    df["label"] = y
    df["site"] = rng.choice(["a", "b", "c"], size=1200, p=[0.5, 0.45, 0.05])
    df["age"] = rng.uniform(20, 80, 1200)
    path = tmp_path / "mc.parquet"
    df.to_parquet(path)
    r = cli(["score", path, "--json", "--by", "site", "--var", "age", "--bins-table", "ece_top"])
    assert r.code == 0, r.stderr
    rep = json.loads(r.stdout)
    assert list(rep["metrics"]) == ["ece_top", "mce_top", "ace_top", "sce", "ace_cw", "tace",
                                    "tce_cw"]
    assert rep["settings"]["bins"] == 15 and rep["settings"]["convention"] == "calcheck"
    assert rep["input"]["kind"] == "multiclass" and len(rep["metrics"]["ece_top"]["bins"]) == 15
    assert set(rep["groups"]) == {"a", "b", "c"}
    small = rep["groups"]["c"]
    assert small["flagged"] and small["n"] < 100
    sub = df[df.site == "a"]
    expect = run(sub[[f"prob_{j}" for j in range(4)]].to_numpy(), sub["label"].to_numpy(),
                 ["sce"])["sce"].value
    assert rep["groups"]["a"]["metrics"]["sce"]["value"] == pytest.approx(expect)
    assert rep["variables"]["age"]["n"] == 1200
    table = cli(["score", path, "--by", "site"]).stdout
    assert "by site" in table and "c *" in table


def test_groups_binary_with_too_small_group(cli, tmp_path):
    rng = np.random.default_rng(5)
    s = rng.uniform(size=400)
    df = pd.DataFrame({"score": s, "label": rng.binomial(1, s),
                       "g": np.r_[["x"] * 390, ["y"] * 10]})
    path = tmp_path / "b.csv"
    df.to_csv(path, index=False)
    rep = json.loads(cli(["score", path, "--json", "--by", "g", "-m", "ece,tce"]).stdout)
    assert rep["groups"]["y"]["metrics"]["tce"]["value"] is None
    assert "at least 20 rows" in rep["groups"]["y"]["metrics"]["tce"]["error"]
    assert rep["groups"]["y"]["metrics"]["ece"]["value"] is not None


def test_correct_from_binary_and_errors(cli, tmp_path):
    from calcheck.metrics.vece import variables

    rng = np.random.default_rng(9)
    s = rng.uniform(size=600)
    y = rng.binomial(1, s)
    other = rng.binomial(1, 0.5, 600)          # some other model's predictions
    age = rng.uniform(20, 70, 600)
    df = pd.DataFrame({"score": s, "label": y, "pred": other, "age": age})
    path = tmp_path / "c.csv"
    df.to_csv(path, index=False)
    rep = json.loads(cli(["score", path, "--json", "-m", "ece", "--var", "age",
                          "--correct-from", "pred"]).stdout)
    pe = 1.0 - np.maximum(s, 1.0 - s)
    expect = variables(pe, (other != y).astype(float), {"age": age}).results["age"].vece
    assert rep["variables"]["age"]["vece"] == pytest.approx(expect)
    df.loc[4, "pred"] = 7
    df.to_csv(path, index=False)
    bad = cli(["score", path, "-m", "ece", "--var", "age", "--correct-from", "pred"])
    assert bad.code == 2 and "column 'pred': 1 value not a binary prediction; first at row 5" \
        in bad.stderr
    missing = cli(["score", path, "-m", "ece", "--var", "nope"])
    assert missing.code == 2 and "no column 'nope'" in missing.stderr
