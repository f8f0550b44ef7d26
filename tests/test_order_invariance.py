"""No number depends on the order of the rows: every metric, bin table, interval and test
statistic of tie-heavy binary and multiclass data is the same (1e-12) after shuffling the rows,
on every engine — and ``--ties order`` keeps the reference codes' row-order split."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import calcheck

N = 3000


def binary_frame(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    s = np.round(rng.beta(1.2, 2.0, N), 2)                   # ~100 distinct scores
    s[rng.random(N) < 0.05] = 0.0
    s[rng.random(N) < 0.05] = 1.0
    y = (rng.random(N) < np.clip(s * 1.3, 0, 1)).astype(np.int64)
    y[s == 1.0] = (rng.random(int((s == 1.0).sum())) < 0.9).astype(np.int64)
    return pd.DataFrame({"score": s, "label": y, "site": rng.choice(["a", "b", "c"], N)})


def multiclass_frame(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    table = np.round(rng.dirichlet(np.ones(4) * 0.6, 12), 3)  # 12 distinct rows: heavy ties
    table[:, -1] = 1.0 - table[:, :-1].sum(axis=1)
    table = np.clip(table, 0, 1)
    table /= table.sum(axis=1, keepdims=True)
    P = table[rng.integers(0, 12, N)]
    y = np.array([rng.choice(4, p=p) for p in P])
    df = pd.DataFrame({f"prob_{j}": P[:, j] for j in range(4)})
    df["label"] = y
    return df


def close(a, b, path=""):
    """Every number of two reports equal to 1e-12 (relative), every other value equal."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            close(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, z) in enumerate(zip(a, b)):
            close(x, z, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, (int, float)):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12), (path, a, b)
    else:
        assert a == b, (path, a, b)


def numbers(rep):
    d = rep.to_dict()
    return {k: d[k] for k in ("metrics", "tests", "groups") if k in d}


SCORE = {"metrics": ["all"], "ci": True, "ci_reps": 30, "seed": 1}
TESTS = {"method": ["all"], "trials": 100, "seed": 2}


@pytest.mark.parametrize("engine", ["memory", "stream"])
@settings(max_examples=4, deadline=None)
@given(perm_seed=st.integers(0, 2**31 - 1))
def test_binary_shuffled_rows_same_numbers(engine, perm_seed):
    df = binary_frame()
    shuffled = df.sample(frac=1.0, random_state=perm_seed).reset_index(drop=True)
    for opts, run in ((SCORE, calcheck.score), (TESTS, calcheck.run_tests)):
        a = run(df, engine=engine, **opts)
        b = run(shuffled, engine=engine, **opts)
        close(numbers(a), numbers(b))
    by = {"metrics": ["ace", "mce_q", "pde", "tce", "tce_q", "tce_v"], "by": "site"}
    close(numbers(calcheck.score(df, engine=engine, **by)),
          numbers(calcheck.score(shuffled, engine=engine, **by)))


@pytest.mark.parametrize("engine", ["memory", "stream"])
@settings(max_examples=3, deadline=None)
@given(perm_seed=st.integers(0, 2**31 - 1))
def test_multiclass_shuffled_rows_same_numbers(engine, perm_seed):
    df = multiclass_frame()
    shuffled = df.sample(frac=1.0, random_state=perm_seed).reset_index(drop=True)
    opts = {"metrics": ["ece_top", "ace_top", "sce", "ace_cw", "tace", "tce_cw", "mce_q"]}
    if engine == "memory":
        opts.update(ci=True, ci_reps=20)
    close(numbers(calcheck.score(df, engine=engine, **opts)),
          numbers(calcheck.score(shuffled, engine=engine, **opts)))
    close(numbers(calcheck.run_tests(df, engine=engine, **TESTS)),
          numbers(calcheck.run_tests(shuffled, engine=engine, **TESTS)))


@pytest.mark.slow
def test_dask_files_in_any_row_order(tmp_path):
    df = binary_frame()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    shuffled = df.sample(frac=1.0, random_state=7).reset_index(drop=True)
    for folder, frame, parts in ((a_dir, df, 3), (b_dir, shuffled, 5)):
        for k, rows in enumerate(np.array_split(np.arange(N), parts)):
            frame.iloc[rows].to_parquet(folder / f"p{k}.parquet", index=False)
    opts = {"metrics": ["ace", "mce_q", "pde", "tce", "tce_q", "tce_v", "ece"], "engine": "dask"}
    close(numbers(calcheck.score(str(a_dir), **opts)), numbers(calcheck.score(str(b_dir), **opts)))
    mem = numbers(calcheck.score(df, metrics=opts["metrics"]))["metrics"]
    dask = numbers(calcheck.score(str(b_dir), **opts))["metrics"]
    close({m: r["value"] for m, r in mem.items()}, {m: r["value"] for m, r in dask.items()})


def test_ties_order_keeps_the_row_order_split():
    """``ties="order"`` reproduces the reference split: values that move with the order."""
    df = binary_frame()
    shuffled = df.sample(frac=1.0, random_state=3).reset_index(drop=True)
    ids = ["ace", "mce_q", "tce", "tce_q", "tce_v", "pde"]
    a = calcheck.score(df, metrics=ids, ties="order").to_dict()["metrics"]
    b = calcheck.score(shuffled, metrics=ids, ties="order").to_dict()["metrics"]
    assert any(a[m]["value"] != b[m]["value"] for m in ids)
    assert a["ace"]["settings"]["ties"] == "order"
    # the shared default sits between them and is the same for both
    shared = calcheck.score(df, metrics=ids).to_dict()
    assert shared["settings"]["ties"] == "share"
    assert shared["metrics"]["ace"]["settings"]["ties"] == "share"


def test_stream_equals_memory_with_both_tie_conventions():
    df = binary_frame()
    ids = ["ace", "mce_q", "pde", "tce", "tce_q", "tce_v", "tce_u"]
    for ties in ("share", "order"):
        mem = calcheck.score(df, metrics=ids, ties=ties, bins_table=["all"]).to_dict()
        st_ = calcheck.score(df, metrics=ids, ties=ties, bins_table=["all"],
                             engine="stream").to_dict()
        for m in ids:
            s_ = {k: v for k, v in st_["metrics"][m]["settings"].items() if k != "pava_input"}
            assert s_ == mem["metrics"][m]["settings"], (ties, m)
            close(st_["metrics"][m]["value"], mem["metrics"][m]["value"], f"{ties}/{m}")
            close(st_["metrics"][m]["bins"], mem["metrics"][m]["bins"], f"{ties}/{m}")
