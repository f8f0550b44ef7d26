import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binomtest
from scipy.stats import t as student_t

import calcheck
from calcheck.binning import quantile_bounds, row_bin_ids, segment_sums
from calcheck.binomial import (
    binomtest_pvalue,
    decided_by_pieces,
    decided_pieces,
    interval_bounds,
    rejections_sorted,
    side_ends,
)
from calcheck.errors import InputError
from calcheck.pava import pava_bc_bounds

# ------------------------------------------------------------------ exact binomial p-values


@given(st.integers(1, 400).flatmap(lambda n: st.tuples(
    st.integers(0, n), st.just(n),
    st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0, 0.5, 0.1, 0.3])))))
def test_pvalue_equals_scipy(knp):
    k, n, p = knp
    try:
        ref = binomtest(k, n, p).pvalue
    except OverflowError:
        # scipy's Boost functions overflow on some tiny p (subnormal scores): calcheck then
        # tests p as 1e-300, which cannot change the outcome
        assert 0 < p < 1e-300
        assert binomtest_pvalue(k, n, p)[0] == binomtest(k, n, 1e-300).pvalue
        return
    assert binomtest_pvalue(k, n, p)[0] == ref


@pytest.mark.parametrize("k, n", [(0, 2), (1, 1), (1, 100), (3, 10_000), (0, 10_000)])
@pytest.mark.parametrize("p", [5e-324, 1.1125369292536007e-308, 2.2e-308, 1e-305])
def test_pvalue_of_subnormal_probabilities(k, n, p):
    got = binomtest_pvalue(k, n, p)[0]
    assert (got == 1.0) if k == 0 else (0 <= got < 1e-280)


@pytest.mark.parametrize("k, n, p", [
    (0, 1, 0.0), (1, 1, 0.0), (0, 1, 1.0), (1, 1, 1.0), (0, 1, 0.5), (1, 1, 0.3),
    (0, 10, 0.0), (10, 10, 1.0), (3, 10, 0.3), (0, 10, 1.0), (10, 10, 0.0), (5, 10, 0.5),
    (1, 3, 1 / 3), (2, 7, 2 / 7), (17, 1000, 0.01), (983, 1000, 0.99),
])
def test_pvalue_edge_cases(k, n, p):
    assert binomtest_pvalue(k, n, p)[0] == binomtest(k, n, p).pvalue


def test_pvalue_vectorized_many():
    rng = np.random.default_rng(3)
    n = rng.integers(1, 3000, 2000)
    k = rng.integers(0, n + 1)
    p = np.where(rng.uniform(size=2000) < 0.2, k / n, rng.uniform(size=2000) ** 3)
    ref = [binomtest(int(a), int(b), float(c)).pvalue for a, b, c in zip(k, n, p)]
    np.testing.assert_array_equal(binomtest_pvalue(k, n, p), ref)


def test_binom_functions_are_scipys_without_importing_scipy_stats():
    """The pmf/cdf/sf that the test calls equal scipy.stats.binom's, entry for entry, on a grid
    with every branch of scipy's wrappers: outside the support, fractional and infinite k,
    invalid n and p, boundary and subnormal p (NaN where scipy gives NaN)."""
    from scipy.stats import binom

    from calcheck._binom_dist import BINOM

    rng = np.random.default_rng(11)
    n = np.concatenate([rng.integers(1, 5000, 3000), [0, 1, 2, 10, 10, 10, 7, 7, 5, 5]])
    k = np.concatenate([rng.integers(-2, n[:3000] + 3), [0, 1, 3, 2.5, -np.inf, np.inf,
                                                      np.nan, 7, 5, 4]]).astype(float)
    p = np.concatenate([rng.uniform(size=3000) ** 4, [0.0, 1.0, 0.5, 0.3, 0.3, 0.3, 0.5, 1e-305,
                                                     1.5, -0.1]])
    n = n.astype(float)
    n[-3] = 2.5                                                    # not a whole number
    for name in ("pmf", "cdf", "sf"):
        np.testing.assert_array_equal(getattr(BINOM, name)(k, n, p),
                                      getattr(binom, name)(k, n, p), err_msg=name)
        assert getattr(BINOM, name)(3.0, 10.0, 0.25) == getattr(binom, name)(3.0, 10.0, 0.25)
    with pytest.raises(OverflowError):        # Boost's overflow reaches the caller as in scipy
        BINOM.pmf(1.0, 10.0, 1e-308)


_UFUNCS_ALONE = """
import sys
import numpy as np
from calcheck._binom_dist import BINOM
alone = "scipy.special" not in sys.modules
try:
    BINOM.pmf(1.0, 10.0, 1e-308)
    overflow = False
except OverflowError:
    overflow = True
from scipy.stats import binom
import scipy.special
rng = np.random.default_rng(3)
n = rng.integers(1, 5000, 2000).astype(float)
k = rng.integers(-2, n + 3).astype(float)
p = rng.uniform(size=2000) ** 4
same = all(getattr(BINOM, f)(k, n, p).tobytes() == getattr(binom, f)(k, n, p).tobytes()
           for f in ("pmf", "cdf", "sf"))
print(alone, overflow, same, scipy.special._ufuncs._binom_cdf is BINOM._cdf,
      scipy.special.ndtr(0.0))
"""


def test_binom_ufuncs_load_without_scipy_special_init():
    """In a fresh interpreter the binomial ufuncs load without ``scipy.special``'s
    ``__init__`` (~0.1 s): the values are still scipy.stats.binom's, bit for bit, Boost's
    overflow still raises, and a later ``import scipy.special`` runs as usual over the same
    ufunc objects."""
    import subprocess
    import sys

    import scipy

    from calcheck._hooks import _UFUNC_DEPENDENCIES

    version = tuple(int(x) for x in scipy.__version__.split(".")[:2])
    if version not in _UFUNC_DEPENDENCIES:
        pytest.skip(f"scipy {scipy.__version__} is not in _UFUNC_DEPENDENCIES: the ordinary "
                    "import of scipy.special is used (check its extension modules, add it)")
    out = subprocess.run([sys.executable, "-c", _UFUNCS_ALONE], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["True", "True", "True", "True", "0.5"], out


def test_the_search_probes_pmf_is_scipys():
    """The binomial search's probes (whole k and n, 0 <= p <= 1) get scipy's pmf, entry for
    entry and bit for bit: inside the support without the wrapper's checks, anything else
    (k = −1 or n + 1, where the search can step) through the wrapper."""
    from scipy.stats import binom

    from calcheck._binom_dist import BINOM

    rng = np.random.default_rng(12)
    n = rng.integers(1, 10**7, 5000).astype(float)
    p = np.concatenate([rng.uniform(size=4990) ** 3, [0.0, 1.0, 0.5, 1e-300, 1 - 1e-16] * 2])
    for k in (np.floor(rng.uniform(size=5000) * (n + 1)),           # inside [0, n]
              np.where(np.arange(5000) % 7 == 0, n + 1, np.floor(p * n)),
              np.where(np.arange(5000) % 11 == 0, -1.0, n)):
        got, want = BINOM.pmf_inside(k, n, p), binom.pmf(k, n, p)
        assert got.tobytes() == want.tobytes()


@given(st.integers(0, 2**31), st.sampled_from([0.05, 0.01, 0.5]), st.integers(2, 40))
def test_fast_rejection_equals_exact(seed, alpha, chunk):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 3000))
    s = np.sort(np.round(rng.uniform(size=n) ** rng.uniform(0.3, 4), int(rng.integers(1, 6))))
    y = (rng.uniform(size=n) < s).astype(np.int64)
    b = pava_bc_bounds(y, n // 20, n // 5) if seed % 2 else quantile_bounds(n, 7)
    rb, k, nn = row_bin_ids(b), segment_sums(y, b), np.diff(b)
    exact = binomtest_pvalue(k[rb], nn[rb], s) <= alpha
    for refine in (64, 3):
        counts, mask = rejections_sorted(s, b, k, alpha, chunk=chunk, refine=refine,
                                         return_mask=True)
        np.testing.assert_array_equal(mask, exact)
        np.testing.assert_array_equal(counts, np.bincount(rb, weights=exact,
                                                          minlength=len(nn)).astype(int))


@given(st.integers(0, 2**31))
def test_side_ends_are_the_last_and_first_floats_of_each_side(seed):
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 10**7, 200).astype(np.float64)
    k = np.floor(n * rng.uniform(0, 1, 200) ** rng.uniform(0.2, 5))
    b, c = side_ends(k, n)
    assert np.all(b * n < k) and np.all(np.nextafter(b, 2) * n >= k)
    assert np.all(c * n > k) and np.all(np.nextafter(c, -1) * n <= k)


@given(st.integers(0, 2**31), st.sampled_from([0.05, 0.01, 0.3]))
def test_decided_pieces_decide_each_point_as_its_own_test(seed, alpha):
    """Score pieces decided by the exact bounds hold the decision of every prediction in
    them (their ends, the floats next to the ends, and points inside), are disjoint, ordered,
    and lie inside their intervals; they cover nearly all of a cell-wide interval that a
    test threshold crosses."""
    rng = np.random.default_rng(seed)
    m = 60
    n = rng.integers(1, 200_000, m).astype(np.float64)
    k = np.floor(n * rng.beta(0.3, 3, m))
    below_end, above_end = side_ends(k, n)
    sd = np.sqrt(np.maximum(k, 1.0)) / n
    centre = np.clip(k / n + rng.choice([-1, 1], m) * rng.uniform(0, 4, m) * sd, 0, 1)
    width = rng.choice([2.0 ** -16, 2.0 ** -10, 1e-9], m)
    lo = np.clip(centre - width * rng.uniform(0, 1, m), 0, 1)
    hi = np.clip(lo + width, 0, 1)
    below = centre * n < k
    lo = np.where(below, lo, np.maximum(lo, above_end))
    hi = np.where(below, np.minimum(hi, below_end), hi)
    keep = lo <= hi
    k, n, lo, hi = k[keep], n[keep], lo[keep], hi[keep]
    owner, a, z, rej = decided_pieces(k, n, lo, hi, alpha, (hi - lo) * 1e-6)
    assert np.all(a <= z) and np.all(lo[owner] <= a) and np.all(z <= hi[owner])
    same = owner[1:] == owner[:-1]
    assert np.all(~same | (a[1:] > z[:-1]))              # disjoint, in order
    assert np.all(np.diff(owner) >= 0)
    points = np.concatenate((a, z, np.minimum(np.nextafter(a, 2), z),
                             np.maximum(np.nextafter(z, -1), a), a + (z - a) * 0.37))
    who = np.tile(owner, 5)
    exact = binomtest_pvalue(k[who], n[who], points) <= alpha
    np.testing.assert_array_equal(np.tile(rej, 5), exact)
    covered = np.bincount(owner, weights=z - a, minlength=k.shape[0])
    assert np.all(covered >= (hi - lo) * (1 - 1e-3) - 1e-300)


@given(st.integers(0, 2**31), st.sampled_from([0.05, 0.01]))
def test_decided_by_pieces_decides_only_intervals_whose_every_point_agrees(seed, alpha):
    """An interval decided on its pieces takes the decision of every prediction in it (ends,
    the floats next to them and a spread of points inside); one a threshold crosses — where
    the exact p-values on a fine sample disagree — stays open."""
    rng = np.random.default_rng(seed)
    m = 80
    n = rng.integers(1_000, 5_000_000, m).astype(np.float64)
    k = np.floor(n * np.where(rng.uniform(size=m) < 0.5, rng.beta(0.3, 3, m),
                              1.0 - rng.beta(0.3, 30, m)))
    below_end, above_end = side_ends(k, n)
    sd = np.sqrt(np.maximum(np.minimum(k, n - k), 1.0)) / n
    centre = np.clip(k / n + rng.choice([-1, 1], m) * rng.uniform(0, 4, m) * sd, 0, 1)
    width = sd * rng.choice([0.01, 0.1, 0.5], m)
    lo = np.clip(centre - width * rng.uniform(0, 1, m), 0, 1)
    hi = np.clip(lo + width, 0, 1)
    below = centre * n < k
    lo = np.where(below, lo, np.maximum(lo, above_end))
    hi = np.where(below, np.minimum(hi, below_end), hi)
    keep = lo < hi
    k, n, lo, hi = k[keep], n[keep], lo[keep], hi[keep]
    yes, no = decided_by_pieces(k, n, lo, hi, alpha)
    assert not np.any(yes & no)
    t = np.linspace(0.0, 1.0, 257)
    points = np.concatenate((lo[:, None] + (hi - lo)[:, None] * t[None, :],
                             np.nextafter(lo, 2)[:, None], np.nextafter(hi, -1)[:, None]), axis=1)
    points = np.clip(points, lo[:, None], hi[:, None])
    exact = binomtest_pvalue(np.repeat(k, points.shape[1]), np.repeat(n, points.shape[1]),
                             points.ravel()).reshape(points.shape) <= alpha
    assert np.all(exact[yes]) and not np.any(exact[no])
    crossed = exact.any(axis=1) & ~exact.all(axis=1)
    assert not np.any((yes | no) & crossed)


def _bounds_apart(k, n, p1, p2):
    """interval_bounds' definition, one end and one bound per call."""
    from calcheck.binomial import _pvalue_from_ends, tail_ends

    lo1, hi1, _ = tail_ends(k, n, p1)
    lo2, hi2, _ = tail_ends(k, n, p2)
    return (_pvalue_from_ends(lo1, hi2, n, p1, p_lo=p2, p_hi=p1),
            _pvalue_from_ends(lo2, hi1, n, p1, p_lo=p1, p_hi=p2))


@given(st.integers(0, 2**31), st.booleans())
def test_interval_bounds_equal_their_ends_apart(seed, tiny):
    """Both ends searched in one call and both bounds' tails in one give, bit for bit, what
    one call per end and per bound gives — also where some intervals lie among subnormal
    probabilities, whose calls overflow (each half is then redone as its own call)."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 40))
    n = rng.integers(1, 10 ** int(rng.integers(1, 8)), m).astype(np.float64)
    k = np.floor(rng.uniform(size=m) * (n + 1)).clip(0, n)
    below_end, above_end = side_ends(np.maximum(k, 1.0), n)
    below = (rng.uniform(size=m) < 0.5) & (k > 0)
    a = np.where(below, below_end * rng.uniform(size=m), above_end)
    b = np.where(below, below_end, above_end + (1 - above_end) * rng.uniform(size=m))
    if tiny:                                  # a few intervals down among subnormal scores
        some = rng.uniform(size=m) < 0.4
        a = np.where(some & (k > 0), 1e-310 * rng.uniform(size=m), a)
        b = np.where(some & (k > 0), 2e-308, b)
    k = np.where(below | (a > k / n), k, 0.0)  # (every interval on one side of k/n)
    with np.errstate(all="ignore"):
        got, want = interval_bounds(k, n, a, b), _bounds_apart(k, n, a, b)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_decided_by_pieces_settles_a_cell_beside_the_threshold():
    """A bin of 3·10^6 predictions with 16 negatives: the binomial test's lower threshold is
    near 1 − 8.8·10^-6.  A cell of scores just below it, far narrower than one expected
    negative, is left open by the bounds over the whole cell (the other tail's first value
    as likely as k moves within it) and decided on its halves — as every point's own test
    decides it."""
    k, n = np.array([2_999_984.0]), np.array([3_000_000.0])
    lo, hi = np.array([0.9999912200]), np.array([0.9999912350])
    lower, upper = interval_bounds(k, n, lo, hi)
    assert lower[0] <= 0.05 < upper[0]                       # the whole cell: open
    yes, no = decided_by_pieces(k, n, lo, hi, 0.05)
    exact = binomtest_pvalue(np.repeat(k, 33), np.repeat(n, 33), np.linspace(lo, hi, 33)[:, 0])
    assert (yes[0] and np.all(exact <= 0.05)) or (no[0] and np.all(exact > 0.05))


# ------------------------------------------------------------------ TCE


def test_tce_hand_computed():
    # one quantile bin of 10 rows with 3 positives: reject each s with binomtest(3, 10, s) <= .05
    s = np.array([0.01, 0.05, 0.1, 0.2, 0.3, 0.3, 0.4, 0.6, 0.8, 0.95])
    y = np.array([0, 0, 0, 1, 0, 1, 0, 0, 1, 0])
    expected = sum(binomtest(3, 10, p).pvalue <= 0.05 for p in s)
    assert expected == 4  # 0.01, 0.05, 0.8 and 0.95 (0.6 gives p = 0.10)
    r = calcheck.tce(s, y, binning="quantile", bins=1)
    assert r.value == pytest.approx(100 * expected / 10)
    assert r.unit == "percent" and list(r.bin_extra["rejected"]) == [expected]


def test_tce_brute_force_all_binnings():
    rng = np.random.default_rng(7)
    s = rng.uniform(size=1500) ** 2
    y = rng.binomial(1, np.clip(s * 1.2, 0, 1))
    order = np.argsort(s, kind="stable")
    ss, ys = s[order], y[order]
    for binning, bounds in [("pava-bc", pava_bc_bounds(ys, 75, 300)),
                            ("quantile", quantile_bounds(1500, 10)),
                            ("pava", pava_bc_bounds(ys, 0, 1501))]:
        k, nn = segment_sums(ys, bounds), np.diff(bounds)
        rej = sum(binomtest(int(k[b]), int(nn[b]), float(p)).pvalue <= 0.05
                  for b in range(len(nn)) for p in ss[bounds[b]:bounds[b + 1]])
        assert calcheck.tce(s, y, binning=binning).value == pytest.approx(100 * rej / 1500)


def test_tce_uniform_bins_match_ece_bins():
    rng = np.random.default_rng(2)
    s = rng.uniform(size=800)
    y = rng.binomial(1, s)
    r = calcheck.tce(s, y, binning="uniform")
    assert r.bins.count.tolist() == calcheck.ece(s, y).bins.count.tolist()


def test_t_test_variant():
    s = np.array([0.1, 0.2, 0.3, 0.4, 0.9, 0.05, 0.5, 0.6])
    y = np.array([0, 1, 0, 1, 1, 0, 0, 1])
    phat = y.mean()
    tstat = np.sqrt(8) * np.abs(phat - s) / np.sqrt(phat * (1 - phat))
    expected = (2 * student_t.sf(tstat, 7) <= 0.05).sum()
    r = calcheck.tce(s, y, binning="quantile", bins=1, test="t")
    assert r.value == pytest.approx(100 * expected / 8)
    # a pure bin rejects exactly the predictions that differ from its empirical probability
    r0 = calcheck.tce(np.array([0.0, 0.0, 0.2]), np.array([0, 0, 0]), binning="quantile",
                      bins=1, test="t")
    assert r0.value == pytest.approx(100 / 3)


def test_tce_refuses_tiny_input_unless_sizes_given():
    s, y = np.linspace(0.1, 0.9, 10), np.array([0, 1] * 5)
    with pytest.raises(InputError, match="at least 20 rows"):
        calcheck.tce(s, y)
    assert 0 <= calcheck.tce(s, y, n_min=2, n_max=5).value <= 100
    assert 0 <= calcheck.tce(s, y, binning="pava").value <= 100


@given(st.integers(20, 600), st.integers(0, 2**31), st.sampled_from(
    ["pava-bc", "quantile", "pava", "uniform"]))
def test_tce_range_and_table(n, seed, binning):
    rng = np.random.default_rng(seed)
    s = np.round(rng.uniform(size=n), 2)
    s[:2] = [0.0, 1.0]
    y = rng.binomial(1, s)
    r = calcheck.tce(s, y, binning=binning)
    assert 0.0 <= r.value <= 100.0
    rows = r.bin_rows()
    assert sum(b["n"] for b in rows) == n
    for b in rows:
        if b["n"]:
            assert b["min_score"] <= b["q1_score"] <= b["median_score"] <= b["q3_score"] \
                <= b["max_score"]
            assert 0 <= b["rejected"] <= b["n"]


def test_tce_cli(cli):
    import json

    from tests.conftest import SAMPLE

    r = cli(["score", SAMPLE / "miscalibrated_01.parquet", "--json", "-m", "tce,tce_v,tce_u",
             "--bins-table", "tce", "--alpha", "0.01"])
    assert r.code == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["metrics"]["tce"]["unit"] == "percent"
    assert rep["metrics"]["tce"]["settings"]["alpha"] == 0.01
    assert {"rejected", "rejected_pct", "median_score"} <= set(rep["metrics"]["tce"]["bins"][0])
    t = cli(["score", SAMPLE / "miscalibrated_01.parquet", "--json", "-m", "tce", "--test", "t",
             "--tce-nmin", "100", "--tce-nmax", "2000"])
    m = json.loads(t.stdout)["metrics"]["tce"]["settings"]
    assert m["test"] == "t" and m["n_min"] == 100 and m["n_max"] == 2000
    bad = cli(["score", SAMPLE / "calibrated_50.csv", "--tce-nmin", "10", "--tce-nmax", "5"])
    assert bad.code == 2 and "--tce-nmax" in bad.stderr
