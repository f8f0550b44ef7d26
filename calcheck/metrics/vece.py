"""Variable-based calibration (Kelly & Smyth, AAAI 2023; docs/multiclass.md).

* **VECE** = Σ_b (n_b/n)·|mean_b(pred_error) − mean_b(incorrect)| over 10 equal-mass bins of a
  variable V, with ``pandas.qcut(v, 10, duplicates="drop")`` semantics: edges are the linearly
  interpolated percentiles at i/10, duplicate edges dropped, intervals right-closed (a, b] with
  the minimum in the first.  An empty interior bin (possible when ties meet interpolated
  edges; the reference returns NaN) is skipped and counted.
* ``ece_qcut``: the same formula with the bins over pred_error (the VECE paper's ECE column).
* **VCE(v\\*)** (eq. 8; the reference's ``max_diff``): LOESS fits (local quadratic, tricube
  weights, span 0.75, no robustness iterations) of 100·incorrect and 100·pred_error against v,
  on 500 points evenly spaced between the 5% and 95% percentiles of v; the largest absolute
  difference (reported as a fraction) and where it occurs.  ±1.96·SE bands are returned for
  plotting.

**Weighted and aggregated rows** (docs/weights.md): every sum is a mass sum (Σw per bin, Σw·x
per LOESS value).  Counts (``frequency``) give the expanded rows' numbers: numpy's linear
percentile of the expanded rows (bit for bit), their neighbourhoods and equal-count groups (a
row of k copies shared between groups copy by copy).  Sampling weights give the weighted
population's: qcut edges are numpy's weighted inverted-CDF percentiles (the smallest v whose
cumulative weight share reaches i/10 — linear interpolation has no weighted form invariant to
the weights' scale), bins right-closed as without weights; LOESS takes the weights as prior
weights of the local fits and its neighbourhood as the smallest window around x holding a
fraction span of the weight; groups are equal-mass.  Rows of weight 0 take no part.

LOESS is computed on the data aggregated by distinct value of v, which is exact (rows tied with
an evaluation point's q-th-neighbour distance get tricube weight 0).  Beyond 4,096 distinct
values the values are grouped into 4,096 equal-count groups at their mean (an approximation,
recorded in the result) — the reference's kd-tree interpolation is approximate as well.  The
residual variance behind the ±1.96·SE bands uses fits at up to 1,024 distinct values,
interpolated linearly between them.

References
----------
.. [1] Kelly, Smyth. Variable-based calibration for machine learning classifiers. AAAI 2023.
.. [2] Cleveland. Robust locally weighted regression and smoothing scatterplots. Journal of the
       American Statistical Association 74(368), 1979 (LOESS).
.. [3] Cleveland, Devlin. Locally weighted regression: an approach to regression analysis by
       local fitting. Journal of the American Statistical Association 83(403), 1988.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.weights import Weights

GRID_POINTS = 500
MAX_GROUPS = 4096
RESIDUAL_POINTS = 1024      # fits feeding the residual variance (standard errors) only


def percentile_plan(n: int, percents: list[float] | FloatArray) -> tuple[IntArray, IntArray,
                                                                          FloatArray]:
    """numpy's linear percentile of ``n`` sorted values at ``percents``: the ranks (below,
    above) it reads and the interpolation weight, computed as ``np.percentile`` computes them."""
    q = np.true_divide(np.asarray(percents, dtype=np.float64), 100)
    virtual = (n - 1) * q
    below = np.floor(virtual)
    above = below + 1
    top = virtual >= n - 1
    below[top] = n - 1
    above[top] = n - 1
    gamma = virtual - below
    return below.astype(np.int64), above.astype(np.int64), gamma


def lerp(a: FloatArray, b: FloatArray, t: FloatArray) -> FloatArray:
    """numpy's percentile interpolation (``_lerp``), bit for bit."""
    diff = b - a
    out = np.add(a, diff * t)
    np.subtract(b, diff * (1 - t), out=out, where=t >= 0.5)
    return out


def mass_percentiles(vs: FloatArray, mass: FloatArray, percents: FloatArray,
                     frequency: bool) -> FloatArray:
    """Percentiles of sorted values ``vs`` whose rows carry positive ``mass``: for counts
    (``frequency``) numpy's linear percentile of the expanded rows, bit for bit; for weights
    numpy's weighted ``inverted_cdf`` percentile (``np.percentile(v, q, weights=w,
    method="inverted_cdf")``)."""
    if frequency:
        rows = RankedRows(vs, mass)
        below, above, gamma = percentile_plan(rows.shape[0], percents)
        return lerp(rows[below], rows[above], gamma)
    cdf = np.cumsum(mass)
    cdf /= cdf[-1]
    at = np.searchsorted(cdf, np.true_divide(np.asarray(percents, dtype=np.float64), 100),
                         side="left")
    return np.asarray(vs[np.minimum(at, vs.shape[0] - 1)], dtype=np.float64)


def qcut_edges(v: FloatArray, bins: int = 10) -> FloatArray:
    """``pandas.qcut(v, bins, duplicates="drop")`` edges: percentiles at i/bins, unique.

    Computed as pandas 2.x does (``np.percentile(v, 100·i/bins)``), the version the authors'
    reference values were made with; pandas 3 takes ``np.quantile(v, i/bins)``, which can
    differ in the last bit of an edge.
    """
    return np.unique(np.percentile(v, np.linspace(0.0, 1.0, bins + 1) * 100.0))


def qcut_assign(v: FloatArray, edges: FloatArray) -> IntArray:
    """Bin of every value: right-closed (a, b], the minimum in the first bin."""
    ids = np.searchsorted(edges, v, side="left") - 1
    ids[v == edges[0]] = 0
    return ids.astype(np.int64)


@dataclass(frozen=True)
class QcutTable:
    """VECE-style bin table over some variable."""

    lower: FloatArray
    upper: FloatArray
    count: IntArray
    mean_pred_error: FloatArray
    mean_incorrect: FloatArray
    value: float
    empty_bins: int
    weight: FloatArray | None = None       # Σw per bin, for sampling weights

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for b in range(self.count.shape[0]):
            n = int(self.count[b])
            out.append({"bin": b, "lower": float(self.lower[b]), "upper": float(self.upper[b]),
                        "n": n, **({} if self.weight is None else
                                   {"weight": float(self.weight[b])}),
                        "mean_pred_error": float(self.mean_pred_error[b]) if n else None,
                        "mean_incorrect": float(self.mean_incorrect[b]) if n else None,
                        "gap": float(abs(self.mean_pred_error[b] - self.mean_incorrect[b]))
                        if n else None})
        return out


def _qcut_sorted(vs: FloatArray, pe: FloatArray, inc: FloatArray, bins: int) -> QcutTable:
    """:func:`qcut_calibration` for rows already sorted by v: bins are runs of the rows."""
    n = vs.shape[0]
    edges = qcut_edges(vs, bins)
    if edges.shape[0] == 1:
        bounds = np.array([0, n])
    else:
        # (a, b] bins with the minimum in the first: bin j ends after the last v <= edges[j+1]
        inner = np.searchsorted(vs, edges[1:-1], side="right")
        bounds = np.r_[0, inner, n]
    cnt = np.diff(bounds)
    nonempty = cnt > 0
    starts = bounds[:-1][nonempty]
    se = np.zeros(cnt.shape[0])
    si = np.zeros(cnt.shape[0])
    se[nonempty] = np.add.reduceat(pe, starts)
    si[nonempty] = np.add.reduceat(inc, starts)
    return qcut_table(edges, cnt, se, si)


def _qcut_mass(vs: FloatArray, pe: FloatArray, inc: FloatArray, mass: FloatArray, bins: int,
               frequency: bool) -> QcutTable:
    """:func:`_qcut_sorted` of rows with counts or sampling weights ``mass`` (all positive;
    module docstring): mass-weighted edges and sums; ``n`` per bin is the expanded rows for
    counts, the rows (and ``weight`` their Σw) for weights."""
    edges = np.unique(mass_percentiles(vs, mass, np.linspace(0.0, 1.0, bins + 1) * 100.0,
                                       frequency))
    n = vs.shape[0]
    inner = np.searchsorted(vs, edges[1:-1], side="right")
    bounds = np.r_[0, inner, n] if edges.shape[0] > 1 else np.array([0, n])
    rows = np.diff(bounds)
    starts = bounds[:-1][rows > 0]
    m, se, si = (np.zeros(rows.shape[0]) for _ in range(3))
    for out, x in ((m, mass), (se, mass * pe), (si, mass * inc)):
        out[rows > 0] = np.add.reduceat(x, starts)
    if frequency:
        return qcut_table(edges, np.round(m).astype(np.int64), se, si)
    return qcut_table(edges, rows, se, si, mass=m)


def qcut_table(edges: FloatArray, cnt: IntArray, se: FloatArray, si: FloatArray,
               mass: FloatArray | None = None) -> QcutTable:
    """The bin table of qcut ``edges`` (one edge: every value in one bin) from each bin's row
    count and sums of pred_error and incorrect (``mass``: each bin's Σw when the rows carry
    sampling weights, the sums being weighted)."""
    if edges.shape[0] == 1:
        edges = np.array([edges[0], edges[0]])
    m = cnt if mass is None else mass
    nonempty = m > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        me = np.where(nonempty, se / np.where(nonempty, m, 1), np.nan)
        mi = np.where(nonempty, si / np.where(nonempty, m, 1), np.nan)
    total = int(cnt.sum()) if mass is None else float(mass.sum())
    value = float(np.sum(np.abs(me[nonempty] - mi[nonempty]) * m[nonempty]) / total)
    return QcutTable(lower=edges[:-1].copy(), upper=edges[1:].copy(), count=cnt, mean_pred_error=me,
                     mean_incorrect=mi, value=value, empty_bins=int((~nonempty).sum()),
                     weight=mass)


def qcut_calibration(v: FloatArray, pred_error: FloatArray, incorrect: FloatArray,
                     bins: int = 10) -> QcutTable:
    """Σ_b (n_b/n)|mean(pred_error) − mean(incorrect)| over qcut bins of ``v``."""
    order = np.argsort(v)          # bins are runs of the sorted values; tie order is irrelevant
    return _qcut_sorted(v[order], pred_error[order], np.asarray(incorrect, float)[order], bins)


# ---------------------------------------------------------------------------------------------
# LOESS


class RankedRows:
    """The sorted rows of an aggregate — value ``x[j]`` repeated ``c[j]`` times — indexed by
    rank without expanding them (the streaming engine's stand-in for all rows' x, sorted)."""

    def __init__(self, x: FloatArray, c: FloatArray) -> None:
        self.x = x
        self.cum = np.cumsum(c).astype(np.int64)
        self.shape = (int(self.cum[-1]) if self.cum.shape[0] else 0,)

    def __getitem__(self, idx: Any) -> Any:
        i = np.asarray(idx)
        i = np.where(i < 0, i + self.shape[0], i)
        return self.x[np.searchsorted(self.cum, i, side="right")]

    def searchsorted(self, v: FloatArray) -> IntArray:
        """Rows with x < v (``numpy.searchsorted`` on the expanded rows, side left)."""
        return np.asarray(np.r_[0, self.cum][np.searchsorted(self.x, v, side="left")],
                          dtype=np.int64)


class MassRows:
    """Distinct values ``x`` (ascending) with masses ``c`` (counts or sampling weights, all
    positive): the LOESS neighbourhood of x0 is the smallest closed window [x0 − h, x0 + h]
    holding mass ``need`` — for counts ⌊N·span⌋ expanded rows, the unweighted q-th neighbour
    distance of the expanded file; for weights the fraction span of Σw."""

    def __init__(self, x: FloatArray, c: FloatArray, frequency: bool) -> None:
        self.x = x
        self.cum = np.cumsum(c)
        self.before = self.cum - c
        self.frequency = frequency

    def __getitem__(self, idx: Any) -> Any:
        return self.x[idx]

    def bandwidth(self, x0: FloatArray, span: float) -> FloatArray:
        total = float(self.cum[-1])
        if self.frequency:
            need = float(min(max(int(np.floor(round(total) * span)), 1), round(total)))
        else:
            need = min(span * total, total)
        u = self.x.shape[0]
        # the window starting at value L ends at the first value R holding the mass
        end = np.searchsorted(self.cum, self.before + need, side="left")
        last = int(np.searchsorted(end, u, side="left")) - 1       # the last start that fills
        last = max(last, 0)
        end = np.minimum(end, u - 1)
        # g(L) = x0 − x[L] falls and r(L) = x[end L] − x0 rises with L: the best L is where
        # they cross; bisection for the first L ≤ last with r ≥ g
        lo = np.zeros(x0.shape[0], dtype=np.int64)
        hi = np.full(x0.shape[0], last + 1, dtype=np.int64)
        while True:
            open_ = lo < hi
            if not open_.any():
                break
            mid = (lo + hi) // 2
            crossed = (self.x[end[mid]] - x0) >= (x0 - self.x[mid])
            hi = np.where(open_ & crossed, mid, hi)
            lo = np.where(open_ & ~crossed, mid + 1, lo)
        at = np.minimum(lo, last)
        h = np.where(lo <= last, self.x[end[at]] - x0, np.inf)
        before = np.maximum(lo - 1, 0)
        return np.asarray(np.where(lo > 0, np.minimum(h, x0 - self.x[before]), h),
                          dtype=np.float64)


@dataclass
class _Aggregated:
    x: FloatArray            # distinct values (or group means), ascending
    c: FloatArray            # rows per value (weighted rows: mass Σw per value)
    sy: FloatArray           # Σ y per value, one column per response (weighted: Σ w·y)
    syy: FloatArray          # Σ y² per value (weighted: Σ w·y²)
    xs: Any                  # all rows' x, sorted (for neighbour distances), RankedRows or MassRows
    grouped: bool
    c2: FloatArray | None = None    # Σ w² per value, for sampling weights
    kish: float | None = None       # (Σw)²/Σw², for sampling weights


def _aggregate(x: FloatArray, ys: list[FloatArray], *, presorted: bool = False,
               max_groups: int = MAX_GROUPS) -> _Aggregated:
    if presorted:
        xs, cols = x, ys
    else:
        order = np.argsort(x)              # tie order does not matter for these sums
        xs, cols = x[order], [y[order] for y in ys]
    change = xs[1:] != xs[:-1]
    grouped = int(change.sum()) + 1 > max_groups
    if grouped:
        starts = np.unique((np.arange(max_groups) * xs.shape[0]) // max_groups)
    else:
        starts = np.r_[0, np.flatnonzero(change) + 1]
    del change
    c = np.diff(np.r_[starts, xs.shape[0]]).astype(np.float64)
    # a group sits at its mean; a distinct value at itself
    x_at = np.add.reduceat(xs, starts) / c if grouped else xs[starts]
    sy = np.column_stack([np.add.reduceat(y, starts) for y in cols])
    syy = np.column_stack([np.add.reduceat(y * y, starts) for y in cols])
    return _Aggregated(x=x_at, c=c, sy=sy, syy=syy, xs=xs, grouped=grouped)


def _aggregate_mass(xs: FloatArray, cols: list[FloatArray], mass: FloatArray, frequency: bool,
                    max_groups: int = MAX_GROUPS) -> _Aggregated:
    """:func:`_aggregate` of sorted rows with positive counts or sampling weights ``mass``:
    mass sums by distinct value, or by ``max_groups`` equal-mass groups (the expanded file's
    equal-count groups for counts) with a row straddling a cut shared pro rata."""
    change = np.flatnonzero(xs[1:] != xs[:-1]) + 1
    starts = np.r_[0, change]
    distinct = MassRows(xs[starts], np.add.reduceat(mass, starts), frequency)
    # per row: the value of each sum per unit of mass (Σ w·y, Σ w·y², and Σ w² for weights)
    per_mass = list(cols) + [y * y for y in cols] + ([] if frequency else [mass])
    if starts.shape[0] <= max_groups:
        c = np.add.reduceat(mass, starts)
        sums = [np.add.reduceat(mass * z, starts) for z in per_mass]
        x_at = xs[starts]
    else:
        total = float(distinct.cum[-1])
        cuts = ((np.arange(max_groups + 1) * round(total)) // max_groups).astype(np.float64) \
            if frequency else np.linspace(0.0, 1.0, max_groups + 1) * total
        cuts[-1] = total
        # the rows cut at the groups' bounds: each piece lies in one row and one group, so the
        # groups' sums add pieces (no differences of running sums; exact shares for counts)
        M = np.r_[0.0, np.cumsum(mass)]
        M[-1] = total
        at = np.union1d(M[:-1], cuts[:-1])
        piece = np.diff(np.r_[at, total])
        row = np.searchsorted(M, at, side="right") - 1
        first = np.searchsorted(at, cuts[:-1])
        c = np.diff(cuts)
        x_at = np.add.reduceat(piece * xs[row], first) / c
        sums = [np.add.reduceat(piece * z[row], first) for z in per_mass]
    k = len(cols)
    total_sq = float(np.dot(mass, mass))
    return _Aggregated(x=x_at, c=c, sy=np.column_stack(sums[:k]),
                       syy=np.column_stack(sums[k:2 * k]), xs=distinct,
                       grouped=starts.shape[0] > max_groups,
                       c2=None if frequency else sums[2 * k],
                       kish=None if frequency else float(mass.sum()) ** 2 / total_sq)


def _neighbour_distance(xs: FloatArray, x0: FloatArray, q: int) -> FloatArray:
    """Distance from each x0 to its q-th nearest row (rows sorted): the LOESS bandwidth."""
    n = xs.shape[0]
    q = min(max(q, 1), n)
    pos = xs.searchsorted(x0)
    lo = np.clip(pos - q, 0, n - q)
    hi = np.clip(pos, 0, n - q)
    while True:                                  # the best window [L, L+q) by bisection
        open_ = lo < hi
        if not open_.any():
            break
        mid = (lo + hi) // 2
        right_better = (x0 - xs[mid]) > (xs[np.minimum(mid + q, n - 1)] - x0)
        right_better &= mid + q < n
        lo = np.where(open_ & right_better, mid + 1, lo)
        hi = np.where(open_ & ~right_better, mid, hi)
    return np.maximum(x0 - xs[lo], xs[lo + q - 1] - x0)


def _local_fits(agg: _Aggregated, x0: FloatArray, span: float, *,
                want_se: bool = False) -> tuple[FloatArray, FloatArray | None, FloatArray]:
    """Local quadratic WLS fits at x0 for every response column; also Σ l_i² and [A⁻¹]₀₀."""
    if isinstance(agg.xs, MassRows):
        h = agg.xs.bandwidth(x0, span)
    else:
        h = _neighbour_distance(agg.xs, x0, int(np.floor(agg.xs.shape[0] * span)))
    # all q nearest rows tied with x0: keep only that value (a tiny positive bandwidth)
    tiny = 1e-9 * max(float(agg.xs[-1] - agg.xs[0]), 1e-300)
    h = np.where(h > 0, h, tiny)
    out = np.empty((x0.shape[0], agg.sy.shape[1]))
    sl2 = np.empty(x0.shape[0]) if want_se else None
    a00 = np.empty(x0.shape[0])
    step = max(1, 2_000_000 // max(agg.x.shape[0], 1))
    for s0 in range(0, x0.shape[0], step):
        xe, he = x0[s0:s0 + step, None], h[s0:s0 + step, None]
        d = (agg.x[None, :] - xe) / he                         # scaled, centred
        ad = np.abs(d)
        w = np.clip(1.0 - ad * ad * ad, 0.0, None) ** 3        # tricube
        wc = w * agg.c[None, :]
        d2 = d * d
        powers = [d, d2, d2 * d, d2 * d2]                     # d^1 .. d^4
        m = [wc.sum(axis=1)] + [(wc * dk).sum(axis=1) for dk in powers]  # Σ w c d^k
        A = np.stack([np.stack([m[i + j] for j in range(3)], axis=-1) for i in range(3)], axis=-2)
        # fewer than three distinct values in the window: the quadratic is not identified, so
        # the fit there is the weighted mean (degree 0)
        flat = (w > 0).sum(axis=1) < 3
        m0 = np.where(m[0] > 0, m[0], 1.0)
        A[flat] = np.eye(3)[None] * m0[flat, None, None]
        Ainv = np.linalg.pinv(A / m0[:, None, None], rcond=1e-10) / m0[:, None, None]
        Ainv[flat, 0, 1:] = 0.0
        for r in range(agg.sy.shape[1]):
            wy = w * agg.sy[None, :, r]
            b = np.stack([wy.sum(axis=1), (wy * d).sum(axis=1), (wy * d2).sum(axis=1)], -1)
            out[s0:s0 + step, r] = np.einsum("ij,ij->i", Ainv[:, 0, :], b)
        a00[s0:s0 + step] = Ainv[:, 0, 0]
        empty = m[0] <= 0                 # no weight at all: the mean at the nearest value
        if empty.any():
            near = np.abs(agg.x[None, :] - xe[empty]).argmin(axis=1)
            out[s0:s0 + step][empty] = agg.sy[near] / agg.c[near, None]
        if want_se:
            wwc = w * wc if agg.c2 is None else w * w * agg.c2[None, :]
            m2 = [wwc.sum(axis=1)] + [(wwc * dk).sum(axis=1) for dk in powers]
            B = np.stack([np.stack([m2[i + j] for j in range(3)], -1) for i in range(3)], -2)
            e = Ainv[:, 0, :]
            assert sl2 is not None
            sl2[s0:s0 + step] = np.einsum("ij,ijk,ik->i", e, B, e)
    return out, sl2, a00


@dataclass
class LoessCurve:
    """LOESS fits of several responses on a grid, with standard errors."""

    grid: FloatArray
    fit: FloatArray                  # (grid, responses)
    se: FloatArray                   # (grid, responses)
    span: float
    approximation: str = ""
    sigma: FloatArray = field(default_factory=lambda: np.zeros(0))


def loess_curves(x: FloatArray, ys: list[FloatArray], grid: FloatArray,
                 span: float = 0.75, *, presorted: bool = False) -> LoessCurve:
    """LOESS (degree 2, tricube, no robustness iterations) of each y against x, on ``grid``."""
    return loess_aggregate(_aggregate(x, ys, presorted=presorted), grid, span)


def loess_aggregate(agg: _Aggregated, grid: FloatArray, span: float = 0.75) -> LoessCurve:
    """:func:`loess_curves` of rows aggregated by distinct value (or group).

    The residual variance uses the fits at the distinct values (or groups):
    σ² = RSS / (n − trace of the smoother).
    """
    fit, sl2, _ = _local_fits(agg, grid, span, want_se=True)
    if agg.x.shape[0] > RESIDUAL_POINTS:
        # fits at the distinct values only feed σ²: fit at quantile-spaced ones, interpolate
        pick = np.unique(np.linspace(0, agg.x.shape[0] - 1, RESIDUAL_POINTS).astype(np.int64))
        f_pick, _, a_pick = _local_fits(agg, agg.x[pick], span)
        at_x = np.column_stack([np.interp(agg.x, agg.x[pick], f_pick[:, r])
                                for r in range(f_pick.shape[1])])
        a00 = np.interp(agg.x, agg.x[pick], a_pick)
    else:
        at_x, _, a00 = _local_fits(agg, agg.x, span)
    rss = np.sum(agg.syy - 2.0 * at_x * agg.sy + agg.c[:, None] * at_x ** 2, axis=0)
    trace = float(np.sum(agg.c * a00))
    n = float(agg.c.sum())
    if agg.kish is None:
        sigma2 = np.maximum(rss, 0.0) / max(n - trace, 1.0)
    else:       # sampling weights: the weighted mean square, Kish's n for the degrees of freedom
        sigma2 = np.maximum(rss, 0.0) / n * agg.kish / max(agg.kish - trace, 1.0)
    assert sl2 is not None
    se = np.sqrt(np.maximum(sl2, 0.0))[:, None] * np.sqrt(sigma2)[None, :]
    kind = "equal-count" if agg.kish is None else "equal-mass"
    approx = f"values grouped into {agg.x.shape[0]} {kind} groups" if agg.grouped else ""
    return LoessCurve(grid=grid, fit=fit, se=se, span=span, approximation=approx,
                      sigma=np.sqrt(sigma2))


# ---------------------------------------------------------------------------------------------
# one variable


@dataclass
class VariableResult:
    """VECE and the worst-case VCE(v*) of one variable."""

    name: str
    vece: float
    table: QcutTable
    vce_max: float
    v_star: float
    curve: LoessCurve
    n: int
    excluded_missing: int
    settings: dict[str, Any]

    def to_dict(self, *, curve: bool = True) -> dict[str, Any]:
        from calcheck._json import jsonable

        out: dict[str, Any] = {
            "vece": self.vece, "vce_max": self.vce_max, "v_star": self.v_star, "n": self.n,
            "excluded_missing": self.excluded_missing, "empty_bins_skipped": self.table.empty_bins,
            "settings": self.settings, "bins": self.table.rows(),
        }
        if curve:
            c = self.curve
            out["curve"] = {
                "v": c.grid, "error_rate": c.fit[:, 0] / 100.0, "predicted_error": c.fit[:, 1] / 100.0,
                "error_rate_lo": (c.fit[:, 0] - 1.96 * c.se[:, 0]) / 100.0,
                "error_rate_hi": (c.fit[:, 0] + 1.96 * c.se[:, 0]) / 100.0,
                "predicted_error_lo": (c.fit[:, 1] - 1.96 * c.se[:, 1]) / 100.0,
                "predicted_error_hi": (c.fit[:, 1] + 1.96 * c.se[:, 1]) / 100.0,
            }
        return jsonable(out)  # type: ignore[no-any-return]


def variable_calibration(name: str, v: FloatArray, pred_error: FloatArray, incorrect: FloatArray,
                         *, bins: int = 10, span: float = 0.75,
                         weights: Weights | None = None) -> VariableResult:
    """VECE over ``bins`` qcut bins of v, and VCE(v*) from LOESS curves (docs/multiclass.md;
    ``weights``: row counts or sampling weights, module docstring).

    Rows where v is NaN are excluded from this variable only (the count is reported).
    """
    ok = ~np.isnan(v)
    if weights is not None:
        return _weighted_variable(name, v, pred_error, incorrect, ok, weights, bins, span)
    missing = int((~ok).sum())
    order = np.argsort(v) if missing == 0 else np.flatnonzero(ok)[np.argsort(v[ok])]
    vs, pe, inc = v[order], pred_error[order], incorrect[order].astype(np.float64)
    table = _qcut_sorted(vs, pe, inc, bins)
    lo, hi = np.percentile(vs, [5.0, 95.0])
    return variable_result(name, table, float(lo), float(hi),
                           _aggregate(vs, [inc, pe], presorted=True), span=span, bins=bins,
                           excluded_missing=missing)


def _weighted_variable(name: str, v: FloatArray, pred_error: FloatArray, incorrect: FloatArray,
                       ok: np.ndarray, weights: Weights, bins: int,
                       span: float) -> VariableResult:
    """:func:`variable_calibration` of weighted or counted rows: ``n`` and the rows excluded
    are expanded rows for counts, rows for weights; rows of weight 0 take no part."""
    w, freq = weights.values, weights.frequency
    used = ok & (w > 0)
    if not used.any():
        from calcheck.errors import InputError

        raise InputError(f"--var {name}: no row with a value has a positive {weights.kind}")
    order = np.flatnonzero(used)[np.argsort(v[used])]
    vs, pe, inc, m = v[order], pred_error[order], incorrect[order].astype(np.float64), w[order]
    table = _qcut_mass(vs, pe, inc, m, bins, freq)
    lo, hi = mass_percentiles(vs, m, np.array([5.0, 95.0]), freq)
    n = round(float(w[ok].sum())) if freq else int(ok.sum())
    missing = round(float(w[~ok].sum())) if freq else int((~ok).sum())
    more = {"weights": weights.kind} if freq else \
        {"weights": weights.kind, "weight": float(m.sum()),
         "effective_n": float(m.sum()) ** 2 / float(np.dot(m, m))}
    return variable_result(name, table, float(lo), float(hi),
                           _aggregate_mass(vs, [inc, pe], m, freq), span=span, bins=bins,
                           excluded_missing=missing, settings=more, n=n)


def variable_result(name: str, table: QcutTable, lo: float, hi: float, agg: _Aggregated, *,
                    span: float, bins: int, excluded_missing: int,
                    settings: dict[str, Any] | None = None, n: int | None = None) -> VariableResult:
    """A variable's result from its qcut table, the 5%/95% percentiles of v and its rows
    aggregated by value (responses: incorrect, pred_error)."""
    grid = np.linspace(lo, hi, GRID_POINTS)
    # LOESS is linear in y: fit the fractions, report percentage points as the reference does
    curve = loess_aggregate(agg, grid, span)
    curve.fit *= 100.0
    curve.se *= 100.0
    curve.sigma *= 100.0
    diff = np.abs(curve.fit[:, 0] - curve.fit[:, 1])
    j = int(np.argmax(diff))
    return VariableResult(name=name, vece=table.value, table=table, vce_max=float(diff[j]) / 100.0,
                          v_star=float(grid[j]), curve=curve,
                          n=int(agg.c.sum()) if n is None else n,
                          excluded_missing=excluded_missing,
                          settings={"bins": bins, "binning": "qcut", "loess_span": span,
                                    "loess_degree": 2, "grid_points": GRID_POINTS,
                                    "loess_approximation": curve.approximation or None,
                                    **(settings or {})})


@dataclass
class VariablesResult:
    """VECE per variable, the qcut ECE, and the ranking by VECE (the paper's Table 1)."""

    results: dict[str, VariableResult]
    ece_qcut: float
    ranking: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for name in self.ranking:
            d = self.results[name].to_dict()
            d["ece_qcut"] = self.ece_qcut
            d["rank"] = self.ranking.index(name) + 1
            out[name] = d
        return out

    def notes(self) -> list[str]:
        """What a reader should know: rows excluded, empty bins skipped."""
        out = []
        for name, vr in self.results.items():
            if vr.excluded_missing:
                out.append(f"--var {name}: {vr.excluded_missing} rows with a missing value "
                           "excluded from its VECE")
            if vr.table.empty_bins:
                out.append(f"--var {name}: {vr.table.empty_bins} empty bin(s) skipped")
        return out


def variables_result(results: dict[str, VariableResult], ece_qcut: float) -> VariablesResult:
    """The variables ranked by VECE (largest first)."""
    ranking = sorted(results, key=lambda k: -results[k].vece)
    return VariablesResult(results=results, ece_qcut=ece_qcut, ranking=ranking)


def variables(pred_error: FloatArray, incorrect: FloatArray, columns: dict[str, FloatArray], *,
              span: float = 0.75, bins: int = 10,
              weights: Weights | None = None) -> VariablesResult:
    """VECE and VCE(v*) for every variable of ``columns`` and the qcut ECE over pred_error
    (``weights``: row counts or sampling weights)."""
    res = {name: variable_calibration(name, v, pred_error, incorrect, bins=bins, span=span,
                                      weights=weights)
           for name, v in columns.items()}
    if weights is None:
        ece = qcut_calibration(pred_error, pred_error, incorrect, bins).value
    else:
        used = weights.values > 0
        order = np.flatnonzero(used)[np.argsort(pred_error[used])]
        pe = pred_error[order]
        ece = _qcut_mass(pe, pe, np.asarray(incorrect, np.float64)[order],
                         weights.values[order], bins, weights.frequency).value
    return variables_result(res, ece)

