"""Variable-based calibration (``--var``: VECE, ``ece_qcut``, VCE(v*)) of weighted and
aggregated rows (docs/weights.md, calcheck/metrics/vece.py).

The invariants it relies on, each held here:

* counts are expansion: every number of ``--count`` equals the expanded rows' — qcut edges
  (numpy's linear percentile of the expanded rows), bins, VECE, the LOESS curves, VCE(v*) and
  v*, with distinct values and with equal-count groups — ``test_counts_are_expansion``;
* the LOESS neighbourhood of weighted rows is the smallest window holding the mass asked for
  (brute force) — ``test_mass_bandwidth_is_the_smallest_window``;
* sampling weights: qcut edges are numpy's weighted inverted-CDF percentiles, and a constant
  factor on every weight changes nothing — ``test_weight_edges_are_numpys``,
  ``test_weight_scale_changes_nothing``;
* rows of weight 0 take no part — ``test_zero_weights_take_no_part``;
* ICI, E50, E90, Emax on the same weighted LOESS: counts are expansion, E50/E90 of weights
  numpy's weighted percentiles — ``test_ici_*``.
"""

from __future__ import annotations

import numpy as np
import pytest

import calcheck
from calcheck.metrics import vece
from calcheck.weights import Weights


def _rows(n: int, digits: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    v = np.round(rng.normal(40.0, 10.0, n), digits)
    v[rng.uniform(size=n) < 0.03] = np.nan
    s = rng.uniform(0.01, 0.99, n)
    y = (rng.uniform(size=n) < s ** 1.3).astype(float)
    pe = 1.0 - np.maximum(s, 1.0 - s)
    inc = ((s >= 0.5) != (y == 1)).astype(float)
    return v, pe, inc, rng


@pytest.mark.parametrize("n, digits", [(3000, 0), (3000, 2), (9000, 9)])
def test_counts_are_expansion(n, digits):
    # (9 digits: no two rows share a value, so equal-count groups do not split a tie group by
    # position, which the expanded file would do in its sort order)
    v, pe, inc, rng = _rows(n, digits)
    k = rng.integers(0, 4, n)
    got = vece.variables(pe, inc, {"v": v}, weights=Weights(k.astype(float), "count"))
    exp = vece.variables(np.repeat(pe, k), np.repeat(inc, k), {"v": np.repeat(v, k)})
    a, b = got.results["v"], exp.results["v"]
    assert (a.n, a.excluded_missing) == (b.n, b.excluded_missing) == \
        (int(k[~np.isnan(v)].sum()), int(k[np.isnan(v)].sum()))
    assert a.vece == pytest.approx(b.vece, abs=1e-12)
    assert got.ece_qcut == pytest.approx(exp.ece_qcut, abs=1e-12)
    np.testing.assert_array_equal(a.table.lower, b.table.lower)      # the edges, bit for bit
    np.testing.assert_array_equal(a.table.count, b.table.count)
    assert a.v_star == b.v_star
    assert a.vce_max == pytest.approx(b.vce_max, abs=1e-9)
    np.testing.assert_allclose(a.curve.fit, b.curve.fit, atol=1e-7)   # percentage points
    np.testing.assert_allclose(a.curve.se, b.curve.se, atol=1e-7)
    assert (a.curve.approximation != "") == (digits == 9)


def test_unit_counts_are_no_weights():
    v, pe, inc, _ = _rows(3000, 1)
    a = vece.variables(pe, inc, {"v": v}, weights=Weights(np.ones(v.shape[0]), "count"))
    b = vece.variables(pe, inc, {"v": v})
    assert a.to_dict() == b.to_dict() or a.results["v"].vece == b.results["v"].vece
    np.testing.assert_array_equal(a.results["v"].curve.fit, b.results["v"].curve.fit)


@pytest.mark.parametrize("frequency", [True, False])
def test_mass_bandwidth_is_the_smallest_window(frequency):
    rng = np.random.default_rng(4)
    x = np.unique(np.round(rng.normal(0.0, 1.0, 300), 2))
    c = rng.integers(1, 5, x.shape[0]).astype(float) if frequency else \
        rng.exponential(1.0, x.shape[0])
    rows = vece.MassRows(x, c, frequency)
    x0 = np.r_[np.linspace(x[0] - 0.5, x[-1] + 0.5, 97), x[::7]]
    for span in (0.05, 0.3, 0.75, 1.0):
        h = rows.bandwidth(x0, span)
        need = np.floor(c.sum() * span) if frequency else span * c.sum()
        for j, p in enumerate(x0):
            cand = np.unique(np.abs(x - p))
            held = np.array([c[np.abs(x - p) <= d].sum() for d in cand])
            best = cand[np.argmax(held >= need * (1 - 1e-12))]
            assert h[j] == best, (span, p)


def test_counted_bandwidth_is_the_expanded_neighbour_distance():
    rng = np.random.default_rng(5)
    x = np.unique(np.round(rng.uniform(0, 10, 200), 1))
    k = rng.integers(1, 6, x.shape[0])
    xs = np.repeat(x, k)
    x0 = np.linspace(0, 10, 301)
    for span in (0.1, 0.5, 0.75):
        q = int(np.floor(xs.shape[0] * span))
        np.testing.assert_array_equal(vece.MassRows(x, k.astype(float), True).bandwidth(x0, span),
                                      vece._neighbour_distance(xs, x0, q))


def test_weight_edges_are_numpys():
    v, pe, inc, rng = _rows(2000, 1)
    w = rng.exponential(1.0, v.shape[0])
    ok = ~np.isnan(v)
    res = vece.variables(pe, inc, {"v": v}, weights=Weights(w, "weight")).results["v"]
    edges = np.unique(np.percentile(v[ok], np.linspace(0, 100, 11), weights=w[ok],
                                    method="inverted_cdf"))
    np.testing.assert_array_equal(np.r_[res.table.lower, res.table.upper[-1]], edges)
    rows = res.to_dict()["bins"]
    assert sum(r["weight"] for r in rows) == pytest.approx(w[ok].sum())
    assert sum(r["n"] for r in rows) == res.n == int(ok.sum())
    # VECE = Σ_b |Σ w (pred_error − incorrect)| / Σ w
    b = np.clip(np.searchsorted(edges, v[ok], side="left") - 1, 0, None)
    r = w[ok] * (pe[ok] - inc[ok])
    assert res.vece == pytest.approx(np.abs(np.bincount(b, r)).sum() / w[ok].sum(), rel=1e-12)


def test_weight_scale_changes_nothing():
    v, pe, inc, rng = _rows(6000, 4)
    w = rng.exponential(1.0, v.shape[0])
    a = vece.variables(pe, inc, {"v": v}, weights=Weights(w, "weight")).results["v"]
    b = vece.variables(pe, inc, {"v": v}, weights=Weights(w * 250.0, "weight")).results["v"]
    assert a.vece == pytest.approx(b.vece, rel=1e-12)
    assert (a.v_star, a.vce_max) == pytest.approx((b.v_star, b.vce_max), rel=1e-9)
    np.testing.assert_allclose(a.curve.se, b.curve.se, rtol=1e-8)
    assert a.curve.approximation == "values grouped into 4096 equal-mass groups"


def test_zero_weights_take_no_part():
    v, pe, inc, rng = _rows(3000, 1)
    w = rng.exponential(1.0, v.shape[0])
    w[::5] = 0.0
    keep = w > 0
    a = vece.variables(pe, inc, {"v": v}, weights=Weights(w, "weight")).results["v"]
    b = vece.variables(pe[keep], inc[keep], {"v": v[keep]},
                       weights=Weights(w[keep], "weight")).results["v"]
    assert (a.vece, a.vce_max, a.v_star) == (b.vece, b.vce_max, b.v_star)
    assert a.n == int((~np.isnan(v)).sum())


def test_score_var_with_counts_and_weights_on_every_engine(tmp_path):
    import pandas as pd

    v, _, _, rng = _rows(4000, 0)
    s = rng.uniform(0.01, 0.99, v.shape[0])
    df = pd.DataFrame({"score": s, "label": (rng.uniform(size=s.shape[0]) < s).astype(int),
                       "age": v, "k": rng.integers(0, 4, s.shape[0]),
                       "w": rng.exponential(1.0, s.shape[0])})
    path = tmp_path / "v.parquet"
    df.to_parquet(path)
    expanded = tmp_path / "e.parquet"
    df.loc[df.index.repeat(df.k)].to_parquet(expanded)
    want = calcheck.score(str(expanded), var="age", metrics=["ece"]).to_dict()["variables"]
    for engine in ("memory", "stream"):
        got = calcheck.score(str(path), var="age", count="k", metrics=["ece"],
                             engine=engine).to_dict()["variables"]
        assert got["age"]["vece"] == pytest.approx(want["age"]["vece"], abs=1e-12)
        assert got["age"]["vce_max"] == pytest.approx(want["age"]["vce_max"], abs=1e-9)
        assert got["age"]["n"] == want["age"]["n"]
        wt = calcheck.score(str(path), var="age", weight="w", metrics=["ece"],
                            engine=engine).to_dict()["variables"]["age"]
        assert wt["settings"]["weights"] == "weight" and wt["bins"][0]["weight"] > 0


@pytest.mark.parametrize("digits", [2, 9])
def test_ici_counts_are_expansion(digits):
    rng = np.random.default_rng(8)
    n = 3000 if digits == 2 else 12000
    s = np.round(rng.uniform(0.01, 0.99, n), digits)
    y = (rng.uniform(size=n) < s ** 1.2).astype(int)
    k = rng.integers(0, 4, n)
    a, b = calcheck.ici(s, y, count=k), calcheck.ici(np.repeat(s, k), np.repeat(y, k))
    for m in ("ici", "e50", "e90", "emax"):
        assert a[m].value == pytest.approx(b[m].value, abs=1e-12), m
        assert a[m].n_samples == int(k.sum())
    assert ("approximation" in a["ici"].settings) == (digits == 9)


def test_ici_weighted_percentiles_are_numpys():
    from calcheck.metrics import ici as ici_kernels
    from calcheck.metrics._data import Prepared

    rng = np.random.default_rng(9)
    s = np.round(rng.uniform(0.01, 0.99, 2000), 3)
    y = (rng.uniform(size=2000) < s).astype(int)
    w = rng.exponential(1.0, 2000)
    dist = ici_kernels.distances(Prepared(s, y, weights=Weights(w, "weight")))
    got = calcheck.ici(s, y, weight=w)
    for q, m in ((50, "e50"), (90, "e90")):
        assert got[m].value == np.percentile(dist.d, q, weights=dist.weight,
                                             method="inverted_cdf")
    assert got["ici"].value == pytest.approx(np.sum(dist.d * dist.weight) / w.sum())
    assert calcheck.ici(s, y, weight=w * 9.0)["e90"].value == pytest.approx(got["e90"].value)
