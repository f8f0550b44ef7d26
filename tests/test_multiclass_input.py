import json

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck.data import top_label_view
from calcheck.errors import InputError
from calcheck.io import load_predictions, open_source


def load_multiclass(path, **kw):
    kw.setdefault("pair_as_binary", False)      # two columns stay two classes here
    return load_predictions(open_source(path), **kw)


def _write(tmp_path, df, name="m.csv"):
    p = tmp_path / name
    if name.endswith(".parquet"):
        df.to_parquet(p, index=False)
    else:
        df.to_csv(p, index=False)
    return p


def _frame(n=600, k=4, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 2
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(k, p=row) for row in p])
    df = pd.DataFrame({f"prob_{j}": p[:, j] for j in range(k)})
    df["label"] = y
    return df, p, y


def test_top_label_view_ties_to_lowest_index():
    probs = np.array([[0.4, 0.4, 0.2], [0.1, 0.3, 0.6], [0.5, 0.25, 0.25]])
    conf, correct = top_label_view(probs, np.array([1, 2, 0]))
    assert conf.tolist() == [0.4, 0.6, 0.5]
    assert correct.tolist() == [0, 1, 1]     # row 0: argmax tie → class 0, label 1


def test_load_multiclass_autodetect_and_names(tmp_path):
    df, _, y = _frame()
    d = load_multiclass(str(_write(tmp_path, df, "m.parquet")))
    assert d.provenance.prob_columns == [f"prob_{j}" for j in range(4)]
    assert d.class_names == ["0", "1", "2", "3"]
    np.testing.assert_array_equal(d.labels, y)
    named = pd.DataFrame({"prob_cat": [0.7, 0.2], "prob_dog": [0.3, 0.8], "target": ["cat", "cat"]})
    d2 = load_multiclass(str(_write(tmp_path, named)), probs=["prob_*"], label="target")
    assert d2.class_names == ["cat", "dog"] and d2.labels.tolist() == [0, 0]


def test_row_sums_checked_and_renormalized(tmp_path):
    df = pd.DataFrame({"prob_0": [0.5, 0.6, 0.2], "prob_1": [0.5, 0.6, 0.8], "label": [0, 1, 1]})
    p = _write(tmp_path, df)
    with pytest.raises(InputError, match=r"1 row of probabilities does not sum to 1 \(within "
                       r"0.0002 = 1e-4 × 2 classes\); first at row 2 \(sum 1.2\).*--renormalize"
                       r".*--probs"):
        load_multiclass(str(p))
    d = load_multiclass(str(p), renormalize=True)
    assert d.provenance.rows_renormalized == 1 and np.allclose(d.probs.sum(axis=1), 1)


def test_rounded_rows_are_renormalized_and_counted(tmp_path):
    # probabilities written with 6 decimals: rows off by up to ~K·5e-7 are valid input
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(10), 3000)
    df = pd.DataFrame({f"prob_{j}": np.round(P[:, j], 6) for j in range(10)})
    df["label"] = rng.integers(0, 10, 3000)
    d = load_multiclass(str(_write(tmp_path, df)))
    assert 0 < d.provenance.rows_renormalized < 3000
    assert np.abs(d.probs.sum(axis=1) - 1).max() <= 1e-6 + 1e-12     # kept as is within 1e-6
    # a real violation is still an error, with the count of rows
    df.loc[::2, "prob_0"] += 0.01
    with pytest.raises(InputError, match=r"1,500 rows of probabilities do not sum to 1"):
        load_multiclass(str(_write(tmp_path, df)))


def test_renormalize_accepts_entries_above_one(tmp_path):
    df = pd.DataFrame({"prob_0": [2.0, 1.0], "prob_1": [2.0, 3.0], "label": [0, 1]})
    d = load_multiclass(str(_write(tmp_path, df)), renormalize=True)
    assert np.allclose(d.probs, [[0.5, 0.5], [0.25, 0.75]])
    with pytest.raises(InputError, match="outside"):
        load_multiclass(str(_write(tmp_path, df)))
    neg = pd.DataFrame({"prob_0": [-0.5, 1.0], "prob_1": [1.5, 3.0], "label": [0, 1]})
    with pytest.raises(InputError, match="negative"):
        load_multiclass(str(_write(tmp_path, neg)), renormalize=True)


def test_probs_naming_the_label_column(tmp_path):
    df = pd.DataFrame({"prob_0": [0.5, 0.4], "prob_1": [0.5, 0.6], "label": [0, 1]})
    with pytest.raises(InputError, match="--probs includes 'label', the label column"):
        load_multiclass(str(_write(tmp_path, df)), probs=["prob_0,label"])


def test_unknown_class_and_drop(tmp_path):
    df = pd.DataFrame({"prob_0": [0.5, 0.4], "prob_1": [0.5, 0.6], "label": [0, 7]})
    p = _write(tmp_path, df)
    with pytest.raises(InputError, match=r"1 value not a class.*row 2"):
        load_multiclass(str(p))
    d = load_multiclass(str(p), drop_invalid=True)
    assert d.provenance.rows_dropped == 1
    assert d.provenance.dropped_by_reason == {"unknown_class": 1}


def test_cli_test_multiclass_is_top_label(cli, tmp_path):
    df, p, y = _frame(n=800)
    path = _write(tmp_path, df, "m.parquet")
    r = cli(["test", path, "--json", "--trials", "300", "--method", "tcal,hl"])
    assert r.code == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["input"]["view"] == "top-label" and rep["input"]["kind"] == "multiclass"
    conf, correct = top_label_view(p, y)
    family = ("pvalue_adjusted", "reject_adjusted", "min_attainable_pvalue_adjusted")
    alone = {m: {k: v for k, v in rep["tests"][m].items() if k not in family}
             for m in ("tcal_adaptive", "hosmer_lemeshow")}      # the two tests are one family
    assert alone["tcal_adaptive"] == calcheck.tcal(conf, correct, trials=300).to_dict()
    assert alone["hosmer_lemeshow"] == calcheck.hosmer_lemeshow(conf, correct, trials=300).to_dict()
    assert rep["tests"]["hosmer_lemeshow"]["pvalue_adjusted"] >= alone["hosmer_lemeshow"]["pvalue"]
    assert "top-label view" in r.stderr
    g = cli(["test", path, "--probs", "prob_*", "--json", "--method", "cox"])
    cox = {k: v for k, v in json.loads(g.stdout)["tests"]["cox"].items() if k not in family}
    assert cox == calcheck.cox(conf, correct).to_dict()


@pytest.mark.parametrize("k", [1, 3, 10, 300])
@pytest.mark.parametrize("n", [0, 1, 6_553, 20_001])
def test_row_major_fill_is_the_column_assignment(k, n):
    from calcheck.io.columns import row_major

    rng = np.random.default_rng(k + n)
    cols = [rng.uniform(size=n) for _ in range(k)]
    want = np.empty((n, k))
    for j, c in enumerate(cols):
        want[:, j] = c
    got = row_major(cols, n)
    assert got.flags.c_contiguous and np.array_equal(got, want)


@pytest.mark.parametrize("labels, type_", [
    (labels, type_) for labels in ([0, 2, 1, 2], [0, 3, -1, 1])
    for type_ in ("int8", "int64", "uint16", "float64") if type_ != "uint16" or min(labels) >= 0])
def test_class_index_of_integer_and_float_labels_agree(labels, type_):
    """Integer labels take a path without the float round trip; same indices, masks and
    (for the error message) values as float labels."""
    import pyarrow as pa

    from calcheck.io.columns import class_index
    from calcheck.io.source import Source

    col = pa.chunked_array([pa.array(labels, type=getattr(pa, type_)())])
    ref = pa.chunked_array([pa.array(labels, type=pa.float64())])
    src = Source("x", "parquet")
    got, want = class_index(src, "label", col, ["a", "b", "c"]), \
        class_index(src, "label", ref, ["a", "b", "c"])
    for a, b in zip(got[:3], want[:3]):
        assert np.array_equal(a, b)
    assert got[0].dtype == np.int64
    if want[2].any():
        assert np.array_equal(got[3], want[3])


def test_two_probability_columns_are_a_binary_score(tmp_path, cli):
    """scikit-learn's predict_proba of a binary model (prob_0, prob_1, 0/1 labels) is read as
    the binary score prob_1 after the two-class checks, with a note; --probs, or a multiclass
    metric named, keeps the two classes."""
    rng = np.random.default_rng(3)
    s = rng.uniform(0.02, 0.98, 4000)
    y = (rng.uniform(size=4000) < s ** 1.1).astype(int)
    pair = _write(tmp_path, pd.DataFrame({"prob_0": 1 - s, "prob_1": s, "label": y}),
                  "pair.parquet")
    one = _write(tmp_path, pd.DataFrame({"score": s, "label": y}), "one.parquet")
    for engine in ("memory", "stream"):
        a = cli(["score", pair, "-m", "ece,ace,brier", "--json", "--engine", engine])
        b = cli(["score", one, "-m", "ece,ace,brier", "--json", "--engine", engine])
        assert a.code == 0 and b.code == 0, a.stderr
        ja, jb = json.loads(a.stdout), json.loads(b.stdout)
        for m in ("ece", "ace", "brier"):
            assert ja["metrics"][m]["value"] == pytest.approx(jb["metrics"][m]["value"],
                                                              rel=1e-12, abs=1e-15)
        assert ja["input"]["score_column"] == "prob_1" and "kind" not in ja["input"]
        assert "read as a binary score (prob_1" in a.stderr
    kept = cli(["score", pair, "--probs", "prob_0,prob_1", "-m", "ece_top", "--json"])
    assert json.loads(kept.stdout)["input"]["kind"] == "multiclass"
    named = cli(["score", pair, "-m", "ece_top", "--json", "--engine", "stream"])
    assert named.code == 0 and json.loads(named.stdout)["input"]["kind"] == "multiclass"
    bad = _write(tmp_path, pd.DataFrame({"prob_0": [0.5, 0.6], "prob_1": [0.5, 0.6],
                                         "label": [0, 1]}), "bad.csv")
    r = cli(["score", bad, "-m", "ece"])
    assert r.code == 2 and "does not sum to 1" in r.stderr
