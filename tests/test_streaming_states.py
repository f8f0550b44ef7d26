import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import calcheck
from calcheck.hypotests.tcal import dpe
from calcheck.streaming import StreamState
from calcheck.streaming.states import binned


def data(seed, n):
    rng = np.random.default_rng(seed)
    s = rng.uniform(size=n) ** rng.uniform(0.5, 2)
    s[:3] = [0.0, 1.0, 0.3]
    return s, rng.binomial(1, s)


def spec(**kw):
    return StreamState(bins=10, tcal_m=15, spiegelhalter=True, **kw)


def single(s, y):
    return spec().update(s, y).finalize()


@given(st.integers(0, 2**31), st.integers(5, 3000), st.integers(1, 12), st.randoms())
def test_any_partition_any_merge_order(seed, n, k, rnd):
    s, y = data(seed, n)
    ref = single(s, y)
    cuts = sorted(rnd.sample(range(1, n), min(k - 1, n - 1)))
    parts = [spec().update(a, b) for a, b in zip(np.split(s, cuts), np.split(y, cuts))]
    rnd.shuffle(parts)
    while len(parts) > 1:                                 # a random merge tree
        i = rnd.randrange(len(parts) - 1)
        parts[i:i + 2] = [parts[i].merge(parts[i + 1])]
    got = parts[0].finalize()
    assert got["n"] == n
    for key in ("count", "positives"):
        np.testing.assert_array_equal(got["bins"][key], ref["bins"][key])   # bit-identical
    for key in ("ece", "ece_l2", "mce", "brier", "log_loss", "spiegelhalter_num",
                "spiegelhalter_den", "tcal_dpe", "tcal_plugin_l1"):
        assert got[key] == pytest.approx(ref[key], rel=1e-12, abs=1e-12), key


def test_equals_the_in_memory_engine():
    s, y = data(3, 20_000)
    st_ = single(s, y)
    assert st_["ece"] == pytest.approx(calcheck.ece(s, y).value, rel=1e-12)
    assert st_["ece_l2"] == pytest.approx(calcheck.ece(s, y, p=2).value, rel=1e-12)
    assert st_["mce"] == pytest.approx(calcheck.mce(s, y).value, rel=1e-12)
    assert st_["brier"] == pytest.approx(calcheck.brier(s, y).value, rel=1e-12)
    assert st_["log_loss"] == pytest.approx(calcheck.log_loss(s, y).value, rel=1e-12)
    z = st_["spiegelhalter_num"] / np.sqrt(st_["spiegelhalter_den"])
    assert z == pytest.approx(calcheck.spiegelhalter(s, y).statistic, rel=1e-12)
    ref = dpe(s, y, 15)
    assert st_["tcal_dpe"] == pytest.approx(ref.dpe, rel=1e-10, abs=1e-15)
    assert st_["tcal_plugin_l1"] == pytest.approx(ref.plugin_l1, rel=1e-12)


def test_merge_refuses_different_settings():
    with pytest.raises(ValueError):
        StreamState(bins=10).merge(StreamState(bins=15))


@pytest.mark.parametrize("bins, m", [(10, 15), (15, 10), (7, 100), (3, 1)])
def test_edge_scores_land_in_the_in_memory_bins(bins, m):
    """Scores on and next to every float edge: bin counts bit-identical to the in-memory rules."""
    from calcheck.binning import uniform_assign, uniform_edges
    from calcheck.hypotests.tcal import bin_ids

    e = np.unique(np.concatenate([uniform_edges(bins), np.arange(m + 1) / m]))
    s = np.clip(np.concatenate([e, np.nextafter(e, 0), np.nextafter(e, 1),
                                np.random.default_rng(0).uniform(size=5000)]), 0, 1)
    y = (np.arange(s.size) % 3 == 0).astype(np.int8)
    st_ = StreamState(bins=bins, tcal_m=m)
    st_.update(s, y)
    got = binned(st_, "ece")
    np.testing.assert_array_equal(got["count"], np.bincount(uniform_assign(s, bins),
                                                            minlength=bins))
    np.testing.assert_array_equal(got["positives"], np.bincount(uniform_assign(s, bins),
                                                                weights=y, minlength=bins))
    t = binned(st_, "tcal")
    np.testing.assert_array_equal(t["count"], np.bincount(bin_ids(s, m), minlength=m + 1))


def test_update_refuses_unvalidated_batches():
    with pytest.raises(ValueError):
        StreamState().update(np.array([0.2, 1.5]), np.array([0, 1]))
    with pytest.raises(ValueError):
        StreamState().update(np.array([0.2, 0.5]), np.array([0, 2]))
