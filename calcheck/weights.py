"""Row weights: counts (``--count``) and sampling or importance weights (``--weight``).

Two meanings, one representation (docs/weights.md):

* **count** (frequency weights): a row with count k stands for k identical rows.  Every number
  is that of the expanded file; ``n`` is Σk.
* **weight** (sampling / importance weights): the estimand is the weighted population.  Means
  and bin sums are weighted (Σ w·x / Σ w); multiplying every weight by a constant changes
  nothing.

Both enter the point estimates the same way (as a *mass* per row); they differ in the variance
of a weighted sum under calibration.  A row's **variance mass** is k for a count (k independent
rows, each of variance s(1 − s)) and w² for a weight (one row of variance s(1 − s), scaled by
w): :meth:`Weights.variance_mass`.  Every test and interval uses it where an unweighted one
would count rows.

**Equal-mass bins in mass coordinates.**  The rows sorted by score occupy consecutive
intervals of the mass axis [0, Σw]; bin j of B takes the mass [c_j, c_{j+1}) with
c_j = ⌊j·N/B⌋ for counts (the expanded file's cut positions) and c_j = j·W/B for weights.  A
unit of rows that straddles a cut is shared pro rata, the way tie groups are shared without
weights: with ``ties="share"`` the units are the tie groups (rows of equal score, their label
mass spread evenly over their mass), so the label mass of the first x of the mass is the
piecewise-linear interpolation of the units' cumulative sums (:func:`mass_prefix`).  With unit
weights this is exactly :func:`calcheck.binning.label_sums`' sharing.

This module is a kernel: arrays in, arrays out; no input/output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import BinStats, tie_bounds, uniform_assign, uniform_edges

KINDS = ("count", "weight")
# the null of the tests of sampling-weighted rows (docs/weights.md, "Tests"): ``fixed`` —
# labels redrawn as Bernoulli(s) with the weights held fixed (exact when the weights do not
# depend on the label); ``labels`` — class weights (every positive one weight w₁, every
# negative another w₀: a class-based down-sampling), labels redrawn from the sampled rows'
# probability q(s) = (s/w₁) / (s/w₁ + (1 − s)/w₀), each taking its class's weight; ``auto``
# — ``labels`` for class weights, else ``fixed``.  Counts are exact either way.
NULLS = ("auto", "fixed", "labels")
ZERO_MASS = "every row here has weight 0: nothing to measure"   # rows whose weights are all 0


@dataclass(frozen=True, eq=False)
class Weights:
    """Non-negative row weights of one meaning.

    Attributes
    ----------
    values : ndarray of shape (n,), float64
        Finite and >= 0; whole numbers for ``kind="count"``; not all zero.
    kind : {"count", "weight"}
        Frequency weights or sampling/importance weights (module docstring).
    column : str or None
        The column they came from (None: an array).
    """

    values: FloatArray
    kind: str
    column: str | None = None
    null: str = "auto"

    def __post_init__(self) -> None:
        if self.null not in NULLS:
            raise ValueError(f"unknown weight null {self.null!r}")

    @property
    def frequency(self) -> bool:
        """Counts: a row stands for that many identical rows."""
        return self.kind == "count"

    def regime(self, labels: np.ndarray) -> tuple[str, tuple[float, float] | None]:
        """The null the tests of these rows use (:data:`NULLS`): ``("count", None)``,
        ``("fixed", None)`` or ``("labels", (w₀, w₁))``; ``null="labels"`` on weights that
        are not class weights is a usage error."""
        if self.frequency:
            return "count", None
        return resolve_null(self.null, class_weights(self.values, labels)
                            if self.null != "fixed" else None)

    @property
    def total(self) -> float:
        """Σw (for counts: the expanded number of rows)."""
        return float(self.values.sum())

    @property
    def effective_n(self) -> float:
        """Kish's effective sample size (Σw)²/Σw² (for counts: Σk, the expanded rows)."""
        if self.frequency:
            return self.total
        sq = float(np.dot(self.values, self.values))
        return self.total ** 2 / sq if sq > 0 else 0.0

    def variance_mass(self, values: FloatArray | None = None) -> FloatArray:
        """Each row's variance mass: k for counts, w² for weights (module docstring)."""
        w = self.values if values is None else values
        return w if self.frequency else w * w

    def subset(self, mask: Any) -> Weights:
        return Weights(self.values[mask], self.kind, self.column, self.null)

    def info(self) -> dict[str, Any]:
        """The JSON ``input.weights`` object."""
        out: dict[str, Any] = {"kind": self.kind, "column": self.column,
                               "sum": _number(self.total)}
        if self.frequency:
            out["expanded_rows"] = round(self.total)
        else:
            out["effective_n"] = self.effective_n
        out["zero_rows"] = int(np.count_nonzero(self.values == 0))
        return out


def class_weights(w: FloatArray, labels: np.ndarray) -> tuple[float, float] | None:
    """(w₀, w₁) when every row of positive weight with label 0 has weight w₀ and every one
    with label 1 has w₁ ≠ w₀ (a class-based sampling), else None.  The first rows are looked
    at first: weights that vary within a class mostly show it there, without a pass over all."""
    y = np.asarray(labels)
    out: tuple[float, float] | None = None
    for rows in (slice(0, 4096), slice(None)):
        wr, yr = w[rows], y[rows]
        pos = wr[(yr == 1) & (wr > 0)]
        neg = wr[(yr == 0) & (wr > 0)]
        if (pos.shape[0] and pos.min() != pos.max()) or (neg.shape[0] and neg.min() != neg.max()):
            return None
        out = (float(neg[0]), float(pos[0])) if pos.shape[0] and neg.shape[0] else None
    return out if out is not None and out[0] != out[1] else None


def resolve_null(null: str, cw: tuple[float, float] | None
                 ) -> tuple[str, tuple[float, float] | None]:
    """The null of sampling weights (:data:`NULLS`) whose class weights are ``cw`` (None:
    they vary within a class): ``("fixed", None)`` or ``("labels", (w₀, w₁))``; ``labels``
    asked of weights that are not class weights is a usage error."""
    if null == "fixed":
        return "fixed", None
    if null == "labels" and cw is None:
        from calcheck.errors import UsageError

        raise UsageError("--weight-null labels needs class weights (one weight for every "
                         "positive, another for every negative); these weights vary "
                         "within a class: use --weight-null fixed")
    return ("labels", cw) if cw is not None else ("fixed", None)


def regime_variance(s: FloatArray, w: FloatArray, cw: tuple[float, float] | None) -> FloatArray:
    """Each row's variance of w(y − s) under calibration, for sampling weights: w²·s(1 − s)
    with the weights held fixed (``cw`` None), else under the ``labels`` null of class
    weights ``cw`` q·w₁²(1 − s)² + (1 − q)·w₀²·s² (0 for a row of weight 0)."""
    if cw is None:
        return np.asarray(w * w * s * (1.0 - s), dtype=np.float64)
    w0, w1 = cw
    q = sampled_rate(s, cw)
    return np.where(w > 0, q * w1 * w1 * (1.0 - s) ** 2 + (1.0 - q) * w0 * w0 * s * s, 0.0)


def sampled_rate(s: FloatArray, cw: tuple[float, float]) -> FloatArray:
    """q(s) = (s/w₁) / (s/w₁ + (1 − s)/w₀): P(y = 1 | s) among rows a class-based sampling
    kept (inclusion probabilities ∝ 1/w), when the population is calibrated."""
    w0, w1 = cw
    a, b = s / w1, (1.0 - s) / w0
    return np.asarray(np.divide(a, a + b, out=np.zeros_like(s), where=(a + b) > 0),
                      dtype=np.float64)


def null_variance(weights: Weights, s: FloatArray, y: np.ndarray) -> FloatArray:
    """Each row's variance of w(y − s) under calibration, by the null of
    :meth:`Weights.regime`: k·s(1 − s) (counts), w²·s(1 − s) (fixed) or
    q·w₁²(1 − s)² + (1 − q)·w₀²·s² (labels; 0 for a row of weight 0).  ``s``, ``y``: the
    rows of ``weights``, in its order."""
    w = weights.values
    regime, cw = weights.regime(y)
    if regime == "labels":
        return regime_variance(s, w, cw)
    return np.asarray(weights.variance_mass(w) * s * (1.0 - s), dtype=np.float64)


@dataclass(frozen=True, eq=False)
class NullDraws:
    """The null of the tests of weighted rows (:meth:`Weights.regime`), prepared once for all
    its draws: ``p``, each row's chance of a drawn label 1 (s, or q(s) under ``labels``);
    ``w``, the weights; ``classes``, (w₀, w₁) when the drawn label picks the weight; ``count``,
    Binomial(k, s) copies instead of one label."""

    p: FloatArray
    w: FloatArray
    classes: tuple[float, float] | None
    count: bool

    @classmethod
    def of(cls, weights: Weights, s: FloatArray, y: np.ndarray) -> NullDraws:
        """``s``, ``y``: the rows of ``weights``, in its order."""
        regime, cw = weights.regime(y)
        return cls(sampled_rate(s, cw) if regime == "labels" and cw is not None else s,
                   weights.values, cw if regime == "labels" else None, regime == "count")

    def labels(self, t: int, rng: np.random.Generator) -> np.ndarray:
        """t draws of every row's label (bool, t × n): the draws of :meth:`__call__`."""
        return rng.random((t, self.p.shape[0])) < self.p

    def __call__(self, t: int, rng: np.random.Generator) -> tuple[FloatArray, FloatArray]:
        """t null draws of every row's (label mass, weight), each (t, n): Binomial(k, s)
        copies of a count; w·Bernoulli(s) with w fixed; or (labels) y* ~ Bernoulli(q(s))
        taking its class's weight (rows of weight 0 stay 0)."""
        n, w = self.p.shape[0], self.w
        if self.count:
            drawn = rng.binomial(np.round(w).astype(np.int64), self.p, size=(t, n))
            return drawn.astype(np.float64), np.broadcast_to(w, (t, n))
        ystar = self.labels(t, rng)
        if self.classes is not None:
            ws = np.where(w > 0, np.where(ystar, self.classes[1], self.classes[0]), 0.0)
            return np.asarray(ystar * ws, dtype=np.float64), ws
        return np.asarray(ystar * w, dtype=np.float64), np.broadcast_to(w, (t, n))


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def weights_of(weight: Any, count: Any, n: int, weight_null: str = "auto") -> Weights | None:
    """The ``weight=`` or ``count=`` array of a Python function over ``n`` rows as
    :class:`Weights` (None: neither given); both, a bad value (the first named), a length
    that is not ``n`` or an unknown ``weight_null`` is an error."""
    from calcheck.errors import UsageError

    if weight is None and count is None:
        return None
    if weight is not None and count is not None:
        raise UsageError("give weight= (sampling weights) or count= (row counts), not both")
    if weight_null not in NULLS:
        raise UsageError(f"weight_null must be one of {', '.join(NULLS)}, got {weight_null!r}")
    kind, values = ("weight", weight) if weight is not None else ("count", count)
    w = check_weights(values, kind, where=f"{kind}=")
    if w.shape[0] != n:
        raise UsageError(f"{kind}= has {w.shape[0]} values for {n} rows")
    return Weights(w, kind, None, weight_null)


def check_weights(values: Any, kind: str, *, where: str = "weights") -> FloatArray:
    """``values`` as float64 weights of ``kind``, or an :class:`~calcheck.errors.InputError`
    naming the first bad entry (negative, NaN, infinite, not whole for counts) — for arrays
    given from Python; the file reader reports file rows (:mod:`calcheck.io.columns`)."""
    from calcheck.errors import InputError
    from calcheck.validation import describe_rows

    w = np.asarray(values, dtype=np.float64).ravel()
    for mask, what in ((~np.isfinite(w), "missing or infinite"), (w < 0, "negative"),
                       ((w != np.floor(w)) if kind == "count" else np.zeros(0, bool),
                        "not a whole number (a count)")):
        if mask.shape[0] and mask.any():
            raise InputError(f"{where}: {int(mask.sum())} value(s) {what}, "
                             f"{describe_rows(mask, w, row_base=0)}")
    if w.shape[0] and not (w > 0).any():
        raise InputError(f"{where}: every {kind} is zero; nothing to measure")
    return w


# ---------------------------------------------------------------------------------------------
# weighted bins


def weighted_uniform_stats(scores: FloatArray, labels: np.ndarray, weights: Weights,
                           n_bins: int) -> BinStats:
    """Equal-width bins (ids as :func:`~calcheck.binning.uniform_assign`) with mass Σw, Σw·s
    and Σw·y per bin (and, for sampling weights, each bin's effective size)."""
    ids = uniform_assign(np.asarray(scores, dtype=np.float64), n_bins)
    w = weights.values

    def sums(x: FloatArray) -> FloatArray:
        return np.asarray(np.bincount(ids, weights=x, minlength=n_bins), dtype=np.float64)

    return uniform_of_sums(n_bins, sums(w), sums(w * scores), sums(w * labels),
                           None if weights.frequency else
                           sums(null_variance(weights, scores, labels)))


def uniform_of_sums(n_bins: int, mass: FloatArray, sum_score: FloatArray,
                    sum_label: FloatArray, variance: FloatArray | None) -> BinStats:
    """The weighted equal-width bins from each bin's Σw, Σw·s, Σw·y and (sampling weights)
    Σ Var w(y − s), which gives its effective size."""
    edges = uniform_edges(n_bins)
    return BinStats(kind="uniform", lower=edges[:-1].copy(), upper=edges[1:].copy(),
                    count=mass, sum_score=sum_score, sum_label=_tidy(sum_label),
                    params={"bins": n_bins},
                    effective=None if variance is None else
                    _effective(mass, variance, sum_score))


def _effective(mass: FloatArray, var: FloatArray, sum_score: FloatArray) -> FloatArray:
    """Each bin's effective size: the unweighted rows whose Binomial label count at the bin's
    mean score s̄, scaled to the bin's mass, has the variance ``var`` of its weighted label sum
    under calibration (:func:`null_variance`): (Σw)²·s̄(1 − s̄)/var — (Σw)²/Σw² when the
    weights are held fixed and the scores equal.  0 for an empty bin."""
    ms = np.divide(sum_score, mass, out=np.zeros_like(mass), where=mass > 0)
    return np.divide(mass * mass * ms * (1.0 - ms), var, out=np.zeros_like(mass),
                     where=var > 0)


def _tidy(x: FloatArray) -> FloatArray:
    """Sums within 1e-9 of a whole number as that number (counted positives stay integers)."""
    whole = np.round(x)
    return np.asarray(np.where(np.abs(x - whole) < 1e-9 * np.maximum(1.0, np.abs(x)), whole, x),
                      dtype=np.float64)


def mass_cuts(total: float, n_bins: int, whole: bool) -> FloatArray:
    """Cut masses of ``n_bins`` equal-mass bins: ⌊j·N/B⌋ for counts (``whole``: the expanded
    file's cut positions), j·W/B for weights."""
    c = np.linspace(0.0, 1.0, n_bins + 1) * total
    if whole:
        c = np.floor(np.linspace(0.0, 1.0, n_bins + 1) * round(total))
    c[-1] = total
    return np.asarray(c, dtype=np.float64)


@dataclass(frozen=True)
class MassAxis:
    """Sorted rows laid on the mass axis: the units (tie groups with shared ties, else rows),
    their cumulative mass ``M`` (length u + 1, from 0) and cumulative sums of w·s, w·y and the
    variance mass (same shape), and each unit's first sorted row ``first``."""

    M: FloatArray
    S: FloatArray
    Y: FloatArray
    V: FloatArray
    first: IntArray
    scores: FloatArray          # each unit's score (of its first row)

    @classmethod
    def of(cls, ss: FloatArray, ys: np.ndarray, ws: FloatArray, vs: FloatArray,
           ties: str = "share") -> MassAxis:
        n = ss.shape[0]
        bounds = tie_bounds(ss) if ties == "share" else np.arange(n + 1, dtype=np.int64)
        first = bounds[:-1]

        def cum(x: FloatArray) -> FloatArray:
            if n == 0:
                return np.zeros(1)
            return np.concatenate(([0.0], np.cumsum(np.add.reduceat(x, first))))

        return cls(M=cum(ws), S=cum(ws * ss), Y=cum(ws * ys), V=cum(vs), first=first,
                   scores=ss[first] if n else ss)

    @property
    def total(self) -> float:
        return float(self.M[-1])

    def sums(self, values: FloatArray, cuts: FloatArray) -> FloatArray:
        """Σ ``values`` (one per sorted row) over the bins between the masses ``cuts``, a unit
        cut by a bound shared pro rata by its mass."""
        if values.shape[0] == 0:
            return np.zeros(cuts.shape[0] - 1)
        cum = np.concatenate(([0.0], np.cumsum(np.add.reduceat(values, self.first))))
        return np.diff(self.at(cum, cuts))

    def at(self, cum: FloatArray, x: FloatArray) -> FloatArray:
        """The piecewise-linear prefix sum ``cum`` at masses ``x`` (units shared pro rata)."""
        return mass_prefix(self.M, cum, x)

    def stats(self, cuts: FloatArray, *, kind: str = "quantile",
              params: dict[str, Any] | None = None, effective: bool = False) -> BinStats:
        """:class:`BinStats` of the bins between the masses ``cuts`` (``effective``: with
        each bin's effective size, for sampling weights, when the axis's variance is each
        row's :func:`null_variance`)."""
        lower, upper = self.edges(cuts)
        count = np.diff(cuts)
        return BinStats(kind=kind, lower=lower, upper=upper, count=count,
                        sum_score=np.diff(self.at(self.S, cuts)),
                        sum_label=_tidy(np.diff(self.at(self.Y, cuts))), params=dict(params or {}),
                        effective=_effective(count, np.diff(self.at(self.V, cuts)),
                                             np.diff(self.at(self.S, cuts)))
                        if effective else None)

    def edges(self, cuts: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Reporting edges: midpoints between the scores of the mass either side of each inner
        cut (as :func:`calcheck.binning.positional_edges` on the expanded rows); 0 and 1 at
        the ends."""
        pos = np.diff(self.M) > 0                      # units of zero mass hold no row
        ends, starts, sc = self.M[1:][pos], self.M[:-1][pos], self.scores[pos]
        inner = cuts[1:-1]
        mids = np.where(inner <= 0, 0.0, 1.0)
        if sc.shape[0]:
            j = np.clip(np.searchsorted(ends, inner, side="right"), 0, sc.shape[0] - 1)
            below = sc[np.maximum(j - 1, 0)]
            here = np.where(starts[j] < inner, sc[j], (below + sc[j]) / 2.0)
            mids = np.where((inner > 0) & (inner < self.total), here, mids)
        edges = np.concatenate(([0.0], mids, [1.0]))
        return edges[:-1].copy(), edges[1:].copy()

    def variance_loss(self, cuts: FloatArray, unit_var: FloatArray) -> FloatArray:
        """Per bin, the variance under calibration that pro-rata sharing removes: a unit of
        variance V shared with fraction f into a bin adds f²V instead of fV there — a loss of
        f(1 − f)V (``unit_var``: each unit's Σ v·s(1 − s)).

        Only a unit a cut falls in is shared (f is exactly 0 or 1 in every other unit, whose
        term is exactly 0), so only those units are summed — in unit order, the order a sum
        over every unit adds them: the same bits, without a units × bins table (2·10⁶ rows,
        10 groups: 0.8 GB)."""
        units = self.M.shape[0] - 1
        at = np.unique(np.clip(np.searchsorted(self.M, cuts, side="right") - 1, 0,
                               max(units - 1, 0))) if units > 0 else np.zeros(0, np.int64)
        lo, hi = self.M[at][:, None], self.M[at + 1][:, None]
        size = hi - lo
        over = np.clip(np.minimum(hi, cuts[None, 1:]) - np.maximum(lo, cuts[None, :-1]), 0, None)
        f = np.divide(over, size, out=np.zeros_like(over), where=size > 0)
        return np.asarray((f * (1.0 - f) * unit_var[at][:, None]).sum(axis=0), dtype=np.float64)


def mass_prefix(M: FloatArray, cum: FloatArray, x: FloatArray) -> FloatArray:
    """``cum`` (cumulative sums at the unit boundaries ``M``) at the masses ``x``, linear
    inside a unit.  Zero-mass units (weight 0) hold nothing and are skipped."""
    keep = np.concatenate(([True], np.diff(M) > 0))
    return np.asarray(np.interp(x, M[keep], cum[keep]), dtype=np.float64)
