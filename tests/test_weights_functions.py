"""``weight=`` and ``count=`` on the array functions (``calcheck.ece(s, y, weight=w)`` …).

Each array function takes the rows' weights or counts as ``calcheck.score`` does: counts give
the expanded rows' numbers, weights the numbers ``score(…, weight=w)`` reports; a function
without a weighted form refuses them saying why (docs/weights.md).
"""

from __future__ import annotations

import numpy as np
import pytest

import calcheck
from calcheck.errors import InputError, UsageError

METRICS = ["ece", "mce", "ace", "mce_q", "pde", "brier", "log_loss", "pc", "smece",
           "ece_sweep", "ici"]
TESTS = ["spiegelhalter", "cox", "hosmer_lemeshow", "ks", "kuiper"]
METHOD = {"hosmer_lemeshow": "hl"}


def _rows(n: int = 1200, seed: int = 3):
    rng = np.random.default_rng(seed)
    s = np.round(rng.uniform(0.02, 0.98, n), 3)
    y = (rng.uniform(size=n) < s ** 1.3).astype(int)
    return s, y, rng.integers(0, 4, n), rng.exponential(1.0, n)


@pytest.mark.parametrize("fn", METRICS)
def test_metric_counts_are_expansion_and_weights_match_score(fn):
    s, y, k, w = _rows()
    f = getattr(calcheck, fn)
    assert f(s, y, count=k).value == pytest.approx(f(np.repeat(s, k), np.repeat(y, k)).value,
                                                   abs=1e-9)
    got = calcheck.score(scores=s, labels=y, weight=w, metrics=[fn]).to_dict()["metrics"][fn]
    assert f(s, y, weight=w).value == pytest.approx(got["value"], rel=1e-12)
    assert f(s, y, weight=w * 37.5).value == pytest.approx(got["value"], rel=1e-9)


def test_result_sets_take_counts():
    s, y, k, _ = _rows()
    S, Y = np.repeat(s, k), np.repeat(y, k)
    assert calcheck.tce(s, y, count=k).value == pytest.approx(calcheck.tce(S, Y).value)
    assert calcheck.tce(s, y, count=k).n_samples == int(k.sum())
    assert calcheck.ecce(s, y, count=k)["ecce_r"].value == pytest.approx(
        calcheck.ecce(S, Y)["ecce_r"].value, abs=1e-12)
    assert calcheck.corp(s, y, count=k).mcb == pytest.approx(calcheck.corp(S, Y).mcb, abs=1e-12)


@pytest.mark.parametrize("fn", TESTS)
def test_tests_take_counts_and_weights(fn):
    s, y, k, w = _rows()
    f = getattr(calcheck, fn)
    a, b = f(s, y, count=k), f(np.repeat(s, k), np.repeat(y, k))
    assert a.statistic == pytest.approx(b.statistic, rel=1e-9)
    got = calcheck.run_tests(scores=s, labels=y, weight=w, method=METHOD.get(fn, fn),
                             trials=1000).to_dict()["tests"][fn]
    assert f(s, y, weight=w).pvalue == pytest.approx(got["pvalue"], rel=1e-12)


def test_tcal_takes_weights_as_run_tests_does():
    s, y, _, w = _rows()
    got = calcheck.run_tests(scores=s, labels=y, weight=w, method="tcal", seed=5,
                             trials=300).to_dict()["tests"]["tcal_adaptive"]
    res = calcheck.tcal(s, y, weight=w, rng=5, trials=300)
    assert (res.statistic, res.pvalue) == pytest.approx((got["statistic"], got["pvalue"]))
    fixed = calcheck.tcal(s, y, count=np.ones_like(w, dtype=int), bins=8, rng=5, trials=300)
    assert fixed.statistic == pytest.approx(calcheck.tcal(s, y, bins=8, rng=5,
                                                          trials=300).statistic, rel=1e-9)
    with pytest.raises(UsageError, match="resample"):
        calcheck.tcal(s, y, weight=w, resample="consistency")


def test_evaluate_default_set_leaves_out_what_refuses_weights():
    s, y, _, w = _rows()
    got = calcheck.evaluate(s, y, weight=w)
    assert "tce" not in got and "ece" in got
    with pytest.raises(UsageError, match="tce takes no"):
        calcheck.evaluate(s, y, ["tce"], weight=w)
    assert "tce" in calcheck.evaluate(s, y, count=np.ones(s.shape[0]))


@pytest.mark.parametrize("call, error, text", [
    (lambda s, y, k, w: calcheck.ece(s, y, weight=w, count=k), UsageError, "not both"),
    (lambda s, y, k, w: calcheck.ece(s, y, weight=-w), InputError, "negative"),
    (lambda s, y, k, w: calcheck.ece(s, y, count=k + 0.5), InputError, "whole"),
    (lambda s, y, k, w: calcheck.ece(s, y, weight=w[:9]), UsageError, "9 values"),
    (lambda s, y, k, w: calcheck.ece(s, y, weight=0 * w), InputError, "every weight is zero"),
    (lambda s, y, k, w: calcheck.tce(s, y, weight=w), UsageError, "binomial"),
    (lambda s, y, k, w: calcheck.binomial_discrete(s, y, count=k), UsageError,
     "binomial_discrete"),
    (lambda s, y, k, w: calcheck.skce(s, y, weight=w), UsageError, "skce"),
    (lambda s, y, k, w: calcheck.spiegelhalter(s, y, weight=w, weight_null="x"), UsageError,
     "weight_null"),
])
def test_bad_weights_are_errors(call, error, text):
    s, y, k, w = _rows(200)
    with pytest.raises(error, match=text):
        call(s, y, k, w)
