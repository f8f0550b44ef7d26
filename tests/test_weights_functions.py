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
    (lambda s, y, k, w: calcheck.binomial_discrete(s, y, weight=w), UsageError,
     "counts labels"),
    (lambda s, y, k, w: calcheck.skce(s, y, count=w), InputError, "whole"),
    (lambda s, y, k, w: calcheck.spiegelhalter(s, y, weight=w, weight_null="x"), UsageError,
     "weight_null"),
])
def test_bad_weights_are_errors(call, error, text):
    s, y, k, w = _rows(200)
    with pytest.raises(error, match=text):
        call(s, y, k, w)


@pytest.mark.parametrize("classes", [1, 3])
def test_skce_counts_are_expansion_and_weights_scale_free(classes):
    rng = np.random.default_rng(11)
    n = 600
    if classes == 1:
        P = np.round(rng.uniform(0.05, 0.95, n), 2)
        y = (rng.uniform(size=n) < P).astype(int)
    else:
        P = rng.dirichlet([2.0] * classes, n)
        y = (rng.uniform(size=n)[:, None] > np.cumsum(P, axis=1)).sum(axis=1)
    k = rng.integers(0, 4, n)
    a, b = calcheck.skce(P, y, count=k), calcheck.skce(np.repeat(P, k, axis=0), np.repeat(y, k))
    assert a.value == pytest.approx(b.value, rel=1e-9, abs=1e-15)
    assert a.settings["bandwidth"] == pytest.approx(b.settings["bandwidth"], rel=1e-12)
    assert a.n_samples == int(k.sum())
    ta = calcheck.skce_test(P, y, count=k, trials=200)
    tb = calcheck.skce_test(np.repeat(P, k, axis=0), np.repeat(y, k), trials=200)
    assert ta.statistic == pytest.approx(tb.statistic, rel=1e-9, abs=1e-15)
    w = rng.exponential(1.0, n)
    c, d = calcheck.skce(P, y, weight=w), calcheck.skce(P, y, weight=w * 40.0)
    assert c.value == pytest.approx(d.value, rel=1e-9)
    tc, td = (calcheck.skce_test(P, y, weight=x, trials=200, rng=2) for x in (w, w * 40.0))
    assert (tc.statistic, tc.pvalue) == pytest.approx((td.statistic, td.pvalue), rel=1e-9)
    # unit weights: the unweighted SKCE at a given bandwidth (the weighted median is the lower
    # middle pair distance, numpy's the mean of the two middle ones)
    assert calcheck.skce(P, y, weight=np.ones(n), bandwidth=0.5).value == pytest.approx(
        calcheck.skce(P, y, bandwidth=0.5).value, rel=1e-9)


def test_skce_count_null_is_the_expanded_null():
    """One null draw of counted rows: its statistic is the expanded rows' SKCE of the same
    drawn labels (so the null is the expanded file's, in distribution)."""
    from calcheck.hypotests import kernel
    from calcheck.metrics import skce
    from calcheck.weights import NullDraws, Weights

    rng = np.random.default_rng(12)
    s = np.round(rng.uniform(0.05, 0.95, 300), 2)
    y = (rng.uniform(size=300) < s).astype(int)
    weights = Weights(rng.integers(0, 4, 300).astype(float), "count")
    kd = skce.kernel_data(s, y, weights=weights)
    nu = skce.median_bandwidth(kd.P, kd.w, True)
    for seed in range(3):
        _, null, _ = kernel._weighted(skce.kernel_matrix(kd.P, nu), kd, weights, 1,
                                      np.random.default_rng(seed))
        drawn, _ = NullDraws.of(Weights(kd.w, "count"), kd.P[:, 1], kd.labels)(
            1, np.random.default_rng(seed))
        pos, k = drawn[0].astype(int), kd.w.astype(int)
        p = kd.P[:, 1]
        expanded = skce.kernel_data(np.r_[np.repeat(p, pos), np.repeat(p, k - pos)],
                                    np.r_[np.ones(pos.sum(), int), np.zeros((k - pos).sum(), int)],
                                    max_rows=None)
        assert null[0] == pytest.approx(skce.statistic(expanded, nu), rel=1e-9, abs=1e-15)


def test_binomial_per_value_of_counted_rows_is_the_expanded_files():
    rng = np.random.default_rng(13)
    s = rng.choice([0.1, 0.3, 0.5, 0.7], 500)
    y = (rng.uniform(size=500) < s).astype(int)
    k = rng.integers(0, 5, 500)
    S, Y = np.repeat(s, k), np.repeat(y, k)
    assert calcheck.binomial_discrete(s, y, count=k).to_dict() == \
        calcheck.binomial_discrete(S, Y).to_dict()
    a = calcheck.run_tests(scores=s, labels=y, count=k, method="tcal", trials=200).to_dict()
    b = calcheck.run_tests(scores=S, labels=Y, method="tcal", trials=200).to_dict()
    drop = ("pvalue_adjusted", "reject_adjusted")     # Holm with T-Cal's Monte Carlo p-value
    assert {k: v for k, v in a["tests"]["binomial_discrete"].items() if k not in drop} == \
        {k: v for k, v in b["tests"]["binomial_discrete"].items() if k not in drop}
    assert a["notes"] == b["notes"]
    w = calcheck.run_tests(scores=s, labels=y, weight=k + 0.5, method="tcal",
                           trials=200).to_dict()
    assert "binomial_discrete" not in w["tests"] and "sampling-weighted" in " ".join(w["notes"])


def test_figures_of_arrays_take_counts():
    import io

    import matplotlib

    def svg(fig) -> str:
        buf = io.StringIO()
        with matplotlib.rc_context({"svg.hashsalt": "calcheck"}):
            fig.savefig(buf, format="svg", metadata={"Date": None})
        return buf.getvalue()

    rng = np.random.default_rng(14)
    s = rng.uniform(0.01, 0.99, 1500)
    y = (rng.uniform(size=1500) < s).astype(int)
    k, v = rng.integers(0, 3, 1500), np.round(rng.normal(size=1500), 2)
    S, Y, V = np.repeat(s, k), np.repeat(y, k), np.repeat(v, k)
    assert svg(calcheck.plot_reliability(s, y, count=k)) == svg(calcheck.plot_reliability(S, Y))
    assert svg(calcheck.plot_variable(s, y, v, count=k)) == svg(calcheck.plot_variable(S, Y, V))
    assert svg(calcheck.plot_reliability(s, y, weight=k + 0.5)) != \
        svg(calcheck.plot_reliability(s, y))
    assert svg(calcheck.plot_tce(s, y, count=k)) == svg(calcheck.plot_tce(S, Y))
    assert svg(calcheck.plot_corp(np.round(s, 2), y, count=k)) == \
        svg(calcheck.plot_corp(np.round(S, 2), Y))
    assert svg(calcheck.plot_tce(np.round(s, 2), y, count=k)) == \
        svg(calcheck.plot_tce(np.round(S, 2), Y))            # tie groups shared across cuts


def test_weighted_corp_band_is_scale_free_and_follows_the_null():
    from calcheck.metrics import corp
    from calcheck.metrics._data import Prepared
    from calcheck.weights import Weights

    rng = np.random.default_rng(15)
    s = np.round(rng.uniform(0.02, 0.98, 3000), 2)
    y = (rng.uniform(size=3000) < s).astype(int)
    w = rng.exponential(1.0, 3000)
    bands = []
    for scale in (1.0, 7.0):
        data = Prepared(s, y, weights=Weights(w * scale, "weight"))
        bands.append(corp.weighted_band(corp.recalibration(data), data, reps=100, seed=4))
    np.testing.assert_allclose(bands[0].low, bands[1].low, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(bands[0].high, bands[1].high, rtol=1e-9, atol=1e-12)
    # a calibrated model's band holds the diagonal nearly everywhere
    inside = (bands[0].low <= bands[0].x + 1e-9) & (bands[0].x <= bands[0].high + 1e-9)
    assert inside.mean() > 0.9
