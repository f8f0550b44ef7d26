import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import calcheck
from calcheck import registry
from calcheck.errors import InputError, UsageError
from calcheck.metrics import MetricOptions, Prepared, compute_metrics

BINARY = registry.selectable(False)

# hand-computed example: exact 0.0 and 1.0, a tie at 0.2 with different labels
S = np.array([0.0, 0.2, 0.2, 0.6, 1.0])
Y = np.array([0, 1, 0, 1, 1])


def test_hand_computed_two_bins():
    # uniform: bin0 {0, .2, .2} mean s .1333 mean y .3333 gap .2; bin1 {.6, 1} gap .2
    assert calcheck.ece(S, Y, bins=2).value == pytest.approx(0.2)
    assert calcheck.ece(S, Y, bins=2, p=2).value == pytest.approx(0.2)
    assert calcheck.mce(S, Y, bins=2).value == pytest.approx(0.2)
    # quantile cuts [0, 2, 5]; the tie at .2 (labels 1, 0) straddles the cut.
    # --ties order keeps it in input order (y=1 then y=0):
    # bin0 {0 (0), .2 (1)} gap .4; bin1 {.2 (0), .6 (1), 1 (1)} gap 1/15
    assert calcheck.ace(S, Y, bins=2, ties="order").value == pytest.approx(0.4 * 0.4 + 0.6 / 15)
    assert calcheck.mce_q(S, Y, bins=2, ties="order").value == pytest.approx(0.4)
    # PDE: (|0-.5| + |.2-.5| + |.2-2/3| + |.6-2/3| + |1-2/3|) / 5
    assert calcheck.pde(S, Y, bins=2, ties="order").value == pytest.approx((0.8 + 13 / 15) / 5)
    # shared (default): each bin takes one tied row and half its positive:
    # bin0 {0, .2} mean y .25 mean s .1 gap .15; bin1 {.2, .6, 1} mean y 2.5/3, mean s .6
    assert calcheck.ace(S, Y, bins=2).value == pytest.approx(0.4 * 0.15 + 0.6 * (2.5 / 3 - 0.6))
    assert calcheck.mce_q(S, Y, bins=2).value == pytest.approx(2.5 / 3 - 0.6)
    assert calcheck.ace(S[::-1], Y[::-1], bins=2).value == calcheck.ace(S, Y, bins=2).value
    assert calcheck.pde(S, Y, bins=2).value == pytest.approx(
        (0.25 + 0.05 + abs(0.2 - 2.5 / 3) + abs(0.6 - 2.5 / 3) + abs(1 - 2.5 / 3)) / 5)
    assert calcheck.brier(S, Y).value == pytest.approx(0.168)
    ll = -(np.log(0.2) + np.log(0.8) + np.log(0.6)) / 5
    assert calcheck.log_loss(S, Y).value == pytest.approx(ll, abs=1e-12)
    assert calcheck.pc(S, Y).value == pytest.approx(1 / 0.28)


def test_ten_bins_float_edge():
    # 0.3 lies below the float edge 0.30000000000000004 -> bin 2 with 0.25, not with 0.35
    s, y = np.array([0.25, 0.3, 0.35]), np.array([0, 1, 0])
    r = calcheck.ece(s, y)
    assert r.bins.count[2] == 2 and r.bins.count[3] == 1
    assert r.value == pytest.approx((2 * abs(0.5 - 0.275) + abs(0 - 0.35)) / 3)


def test_one_bin_is_mean_gap():
    rng = np.random.default_rng(0)
    s = rng.uniform(size=500)
    y = rng.binomial(1, s)
    assert calcheck.ece(s, y, bins=1).value == pytest.approx(abs(s.mean() - y.mean()))
    assert calcheck.ace(s, y, bins=1).value == pytest.approx(abs(s.mean() - y.mean()))


def test_perfectly_calibrated_is_small():
    rng = np.random.default_rng(1)
    s = rng.uniform(size=200_000)
    y = rng.binomial(1, s)
    assert calcheck.ece(s, y).value < 0.01
    assert calcheck.ace(s, y).value < 0.01


def test_booleans_and_float_labels():
    assert calcheck.ece(S, Y.astype(bool)).value == calcheck.ece(S, Y.astype(float)).value


@pytest.mark.parametrize("bad, match", [
    ((np.array([0.1, np.nan]), np.array([0, 1])), "missing"),
    ((np.array([0.1, np.inf]), np.array([0, 1])), "infinite"),
    ((np.array([0.1, 1.5]), np.array([0, 1])), r"outside \[0, 1\]; first at index 1 \(e.g. 1.5\)"),
    ((np.array([0.1, 0.5]), np.array([0, 2])), "not 0 or 1"),
    ((np.array([0.1, 0.5]), np.array([0, 1, 1])), "inconsistent numbers of samples"),
    ((np.array([]), np.array([])), "no rows"),
])
def test_api_input_errors(bad, match):
    with pytest.raises(InputError, match=match):
        calcheck.ece(*bad)


def test_api_option_errors():
    with pytest.raises(UsageError, match="bins"):
        calcheck.ece(S, Y, bins=0)
    with pytest.raises(UsageError, match="p must be 1 or 2"):
        calcheck.ece(S, Y, p=3)
    with pytest.raises(UsageError, match="unknown metric id"):
        calcheck.evaluate(S, Y, ["nope"])


def test_to_dict_is_json_ready():
    import json

    d = calcheck.ece(S, Y, bins=4).to_dict()
    json.dumps(d, allow_nan=False)
    assert d["value"] == pytest.approx(calcheck.ece(S, Y, bins=4).value)
    assert len(d["bins"]) == 4 and d["settings"] == {"binning": "uniform", "bins": 4, "norm": "l1"}


# --------------------------------------------------------------------------- properties

# TCE has its own properties (tests/test_tce.py) and refuses fewer than 20 rows by default
BASE = [m for m in registry.default_ids(False) if not m.startswith("tce")]

data_st = st.integers(1, 300).flatmap(lambda n: st.tuples(
    st.lists(st.one_of(st.floats(0, 1, allow_nan=False), st.sampled_from([0.0, 1.0, 0.5])),
             min_size=n, max_size=n),
    st.lists(st.integers(0, 1), min_size=n, max_size=n)))


@given(data_st, st.integers(1, 20))
def test_ranges_and_orderings(data, bins):
    s, y = np.array(data[0]), np.array(data[1])
    r = calcheck.evaluate(s, y, BASE, bins=bins)
    for mid in ("ece", "ece_l2", "mce", "ace", "mce_q", "brier", "pde"):
        assert -1e-12 <= r[mid].value <= 1 + 1e-12, mid
    assert r["mce"].value >= r["ece"].value - 1e-12
    assert r["mce_q"].value >= r["ace"].value - 1e-12
    assert r["ece_l2"].value >= r["ece"].value - 1e-12
    assert 1 - 1e-9 <= r["pc"].value <= len(s) + 1e-9
    assert r["log_loss"].value >= 0


@given(data_st, st.integers(1, 20), st.randoms(use_true_random=False))
def test_row_order_does_not_matter(data, bins, rnd):
    s, y = np.array(data[0]), np.array(data[1])
    perm = np.arange(len(s))
    rnd.shuffle(perm)
    a = calcheck.evaluate(s, y, BASE, bins=bins)
    b = calcheck.evaluate(s[perm], y[perm], BASE, bins=bins)
    # shared ties: no value depends on the order of the rows, ties or not
    for mid in BASE:
        np.testing.assert_allclose(a[mid].value, b[mid].value, rtol=1e-12, atol=1e-12,
                                   err_msg=mid)


def test_registry_drives_compute_metrics():
    r = compute_metrics(Prepared(S, Y), BINARY, MetricOptions(bins=3, tce_nmin=1, tce_nmax=3))
    assert list(r) == BINARY
    for mid, res in r.items():
        assert res.id == mid
        assert res.n_samples == len(S)


def test_log_loss_on_two_threads_is_the_one_thread_number(monkeypatch):
    """Log loss's blocks computed on two threads and added in block order give the one-thread
    sum exactly (and sklearn's value to rounding)."""
    import os

    from calcheck.metrics import scoring

    rng = np.random.default_rng(11)
    n = 2 * scoring.CHUNK + 12_345                 # three blocks, the last one short
    s = rng.random(n)
    s[:4] = [0.0, 1.0, 1e-300, 1 - 1e-16]          # clipped at both ends
    y = (rng.random(n) < s).astype(np.int8)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    one = scoring.log_loss(Prepared(s, y)).value
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    two = scoring.log_loss(Prepared(s, y)).value
    assert one == two
    c = np.clip(s, scoring.LOG_LOSS_EPS, 1 - scoring.LOG_LOSS_EPS)
    direct = -np.mean(np.where(y == 1, np.log(c), np.log1p(-c)))
    assert one == pytest.approx(direct, rel=1e-12)
