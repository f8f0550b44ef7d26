import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import calcheck
from calcheck.hypotests.tcal import dpe
from calcheck.streaming import FixedBinState


def data(seed, n):
    rng = np.random.default_rng(seed)
    s = rng.uniform(size=n) ** rng.uniform(0.5, 2)
    s[:3] = [0.0, 1.0, 0.3]
    return s, rng.binomial(1, s)


def single(s, y, bins=10, m=15):
    return FixedBinState(bins=bins, m=m).update(s, y).finalize()


@given(st.integers(0, 2**31), st.integers(5, 3000), st.integers(1, 12), st.randoms())
def test_any_partition_any_merge_order(seed, n, k, rnd):
    s, y = data(seed, n)
    ref = single(s, y)
    cuts = sorted(rnd.sample(range(1, n), min(k - 1, n - 1)))
    parts = [FixedBinState().update(a, b) for a, b in zip(np.split(s, cuts), np.split(y, cuts))]
    rnd.shuffle(parts)
    while len(parts) > 1:                                 # a random merge tree
        i = rnd.randrange(len(parts) - 1)
        parts[i:i + 2] = [parts[i].merge(parts[i + 1])]
    got = parts[0].finalize()
    assert got["n"] == n
    for key in ("count", "positives"):
        np.testing.assert_array_equal(got["bins"][key], ref["bins"][key])   # bit-identical
    for key in ("ece", "ece_l2", "mce", "brier", "log_loss", "spiegelhalter_z", "tcal_dpe",
                "tcal_plugin_l1"):
        assert got[key] == pytest.approx(ref[key], rel=1e-12, abs=1e-12), key


def test_equals_the_in_memory_engine():
    s, y = data(3, 20_000)
    st_ = single(s, y)
    assert st_["ece"] == pytest.approx(calcheck.ece(s, y).value, rel=1e-12)
    assert st_["ece_l2"] == pytest.approx(calcheck.ece(s, y, p=2).value, rel=1e-12)
    assert st_["mce"] == pytest.approx(calcheck.mce(s, y).value, rel=1e-12)
    assert st_["brier"] == pytest.approx(calcheck.brier(s, y).value, rel=1e-12)
    assert st_["log_loss"] == pytest.approx(calcheck.log_loss(s, y).value, rel=1e-12)
    assert st_["spiegelhalter_z"] == pytest.approx(calcheck.spiegelhalter(s, y).statistic,
                                                   rel=1e-12)
    ref = dpe(s, y, 15)
    assert st_["tcal_dpe"] == pytest.approx(ref.dpe, rel=1e-10, abs=1e-15)
    assert st_["tcal_plugin_l1"] == pytest.approx(ref.plugin_l1, rel=1e-12)


def test_merge_refuses_different_settings():
    with pytest.raises(ValueError):
        FixedBinState(bins=10).merge(FixedBinState(bins=15))
