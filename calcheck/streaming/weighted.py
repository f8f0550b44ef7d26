"""Sampling weights (``--weight``) in passes over the rows, for inputs larger than the
streaming engines hold (docs/weights.md, "Engines"; the engine:
:mod:`calcheck.engines.weighted`).

Every batch carries its rows' weights last (:func:`calcheck.io.stream.validated_batches`).
The numbers are the in-memory engine's (docs/weights.md, "Definitions"), from sums that add
over batches and partitions (compensated float64 sums: any split of the rows, merged in any
order, gives the same values to ~1e-15 relative):

1. **The first pass** (:class:`FirstState`): the rows, their weights' Σw, Σw², the weighted
   label, score, squared-error and log-likelihood sums and Spiegelhalter's numerator; each
   equal-width binning's Σw, Σw·s, Σw·y per bin; whether the weights are class weights (each
   label's first positive weight and whether another follows), which decides the tests'
   null; and per bucket of the top 16 bits of the score's order key and per label Σw and Σw·s
   (the first step of the mass search, and Cox's start: a fit to the buckets' mean scores);
   with ``--ci``, per bootstrap unit (:func:`unit_keys`) Σw, Σw², Σw·s, Σw·s², Σw·(s − y)²
   and Σw·log-likelihood (:mod:`calcheck.streaming.bootstrap`).
2. **The mass search** (:class:`MassSearch`, :class:`MassPassState`): equal-mass bins cut the
   mass axis — the rows sorted by score laid on [0, Σw] — at c_j = j·Σw/B.  Each cut falls
   inside one tie group (a unit: the rows of one distinct score, shared pro rata between the
   bins either side, as in memory), and the search finds that unit's score exactly, as the
   rank search of :mod:`calcheck.streaming.ranks` finds a value at a rank, with masses in
   place of row counts: each pass histograms the mass of the narrowed key ranges, or collects
   their (key, weight) pairs once they hold few rows.
3. **The bins pass** (:class:`BinsState`): with the cut units' scores t_1 < … < t_T known,
   every row is either at one of them or strictly between two (a *gap*): per gap and per unit
   Σw, Σw·s, Σw·y, Σ Var w(y − s) under the tests' null and the variance mass Σw² (Σk for
   counts), and each gap's largest score.
   Gaps and units in score order are the mass axis of :class:`calcheck.weights.MassAxis`
   coarsened: no cut falls inside a gap, so the in-memory kernels (bin tables, ACE, MCE(Q),
   Hosmer–Lemeshow's groups, the reporting edges) read the same numbers from it.  The pass also
   sums each equal-width bin's null variance (its effective size) and Spiegelhalter's
   denominator.
4. **PDE's pass** (:class:`DeviationState`): each gap's Σ w|s − P̂_b| for its bin's P̂_b (the
   units' deviations follow from their sums).

Cox's fit runs by Newton passes (:func:`calcheck.streaming.rowtests.newton_passes`, weighted)
and one pass for its sandwich (:class:`SandwichState`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray, Passes
from calcheck.binning import uniform_assign
from calcheck.hypotests.classical import LOGISTIC_BLOCK, cox_logit
from calcheck.metrics.scoring import LOG_LOSS_EPS
from calcheck.streaming.groups import group_state
from calcheck.streaming.ranks import (
    FIRST_SHIFT,
    FULL,
    KEY_BITS,
    Range,
    _range_table,
    key_value,
    next_ranges,
)
from calcheck.streaming.runner import one_pass
from calcheck.streaming.states import CompensatedSum
from calcheck.streaming.views import group_rows
from calcheck.tuning import DEFAULT, Tuning
from calcheck.weights import MassAxis, regime_variance

# the first pass's scalar sums, in this order (Σw, Σw·s, Σw·y: the binnings' sums)
SCALARS = ("mass_sq", "squared_error", "log_likelihood", "spiegelhalter_num")
BUCKET_BITS = KEY_BITS - FIRST_SHIFT     # the first histogram's 2^16 key buckets
SLOT_BITS = 16           # the bins pass finds a row's gap by a table of 2^16 score cells
QUANTITIES = 5           # per gap and unit: Σw, Σw·s, Σw·y, Σ Var w(y − s), Σw² (Σk)
UNIT_BITS = 12           # --ci's units: 2^-12-wide score blocks (finer beyond 2^10 bins) ...
UNIT_SUMS = 6            # ... each Σw, Σw², Σw·s, Σw·s², Σw·(s − y)², Σw·log-likelihood


def _weights(rest: tuple[Any, ...]) -> FloatArray:
    return np.asarray(rest[-1], dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# the first pass


@dataclass(frozen=True)
class FirstSpec:
    """The first pass: scalars, the equal-width binnings ``bins``' sums, the class-weight
    check, the mass histogram and Cox's start cells (module docstring)."""

    bins: tuple[int, ...]
    units: int = 0              # --ci: the bootstrap units of this equal-width binning
    threaded = True

    def new(self) -> FirstState:
        return FirstState(self)


class FirstState:
    def __init__(self, spec: FirstSpec) -> None:
        self.spec = spec
        self.rows = 0
        self.zero_rows = 0
        self.positives = 0
        self.scalars = CompensatedSum.zeros(len(SCALARS))
        self.bins = {b: CompensatedSum.zeros(3 * b) for b in spec.bins}
        # the class-weight check: each label's first positive weight, and whether a
        # positive-weight row of that label has another
        self.first_weight = np.full(2, np.nan)
        self.varies = False
        # per bucket of the top 16 bits of the score's order key and per label: Σw, Σw·s
        # (the mass search's first histogram; Cox's start); and the rows per bucket
        self.buckets = CompensatedSum.zeros(4 << BUCKET_BITS)
        self.hist_rows = np.zeros(1 << BUCKET_BITS, dtype=np.int64)
        self.units = CompensatedSum.zeros(UNIT_SUMS * (4 << unit_bits(spec.units))
                                          if spec.units else 0)

    def update(self, s: FloatArray, y: IntArray, start: int, *rest: Any) -> FirstState:
        w = _weights(rest)
        yf = y.astype(np.float64)
        n = s.shape[0]
        self.rows += n
        self.zero_rows += n - int(np.count_nonzero(w))
        self.positives += int(np.count_nonzero(y))
        ws = w * s
        r = s - yf
        sc = np.clip(s, LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS)
        ll = np.log(np.where(y > 0, sc, 1.0 - sc))
        self.scalars.add(np.array([np.dot(w, w), np.dot(w, r * r), np.dot(w, ll),
                                   -np.dot(w, r) + 2.0 * np.dot(ws, r)]))
        for b, acc in self.bins.items():
            ids = uniform_assign(s, b)
            acc.add(np.concatenate([np.bincount(ids, weights=x, minlength=b)
                                    for x in (w, ws, w * yf)]))
            if b == self.spec.units:
                size = self.units.hi.shape[0] // UNIT_SUMS
                key = unit_keys(s, y, b, ids)
                self.units.add(np.concatenate([np.bincount(key, weights=x, minlength=size)
                                               for x in (w, w * w, ws, ws * s, w * r * r,
                                                         w * ll)]))
        self._check_classes(w, y)
        bucket = top_buckets(s)
        self.hist_rows += np.bincount(bucket, minlength=self.hist_rows.shape[0])
        half = 2 << BUCKET_BITS
        cell = bucket * 2 + y
        self.buckets.add(np.concatenate([np.bincount(cell, weights=w, minlength=half),
                                         np.bincount(cell, weights=ws, minlength=half)]))
        return self

    def _check_classes(self, w: FloatArray, y: IntArray) -> None:
        if self.varies:
            return
        pos = w > 0
        for label in (0, 1):
            if np.isnan(self.first_weight[label]):
                at = np.flatnonzero(pos & (y == label))[:1]
                if at.shape[0]:
                    self.first_weight[label] = w[at[0]]
        ref = self.first_weight[y]              # (a label not seen yet has no row here)
        self.varies = bool(np.any(pos & (w != ref)))

    def merge(self, other: FirstState) -> FirstState:
        self.rows += other.rows
        self.zero_rows += other.zero_rows
        self.positives += other.positives
        self.scalars.merge(other.scalars)
        for b, acc in self.bins.items():
            acc.merge(other.bins[b])
        both = ~np.isnan(self.first_weight) & ~np.isnan(other.first_weight)
        self.varies = self.varies or other.varies or \
            bool(np.any(self.first_weight[both] != other.first_weight[both]))
        self.first_weight = np.where(np.isnan(self.first_weight), other.first_weight,
                                     self.first_weight)
        self.buckets.merge(other.buckets)
        self.hist_rows += other.hist_rows
        self.units.merge(other.units)
        return self

    def scalar(self, name: str) -> float:
        """A scalar sum: ``mass``, ``score``, ``label`` (Σw, Σw·s, Σw·y) from the first
        binning's sums, the others (:data:`SCALARS`) as kept."""
        if name in ("mass", "score", "label"):
            mass, score, label = self.binned(self.spec.bins[0])
            return float({"mass": mass, "score": score, "label": label}[name].sum())
        return float(self.scalars.value[SCALARS.index(name)])

    def class_weights(self) -> tuple[float, float] | None:
        """(w₀, w₁) when every positive-weight row of each label has one weight and the two
        differ (:func:`calcheck.weights.class_weights`), else None."""
        w0, w1 = (float(v) for v in self.first_weight)
        if self.varies or np.isnan(w0) or np.isnan(w1) or w0 == w1:
            return None
        return w0, w1

    def binned(self, b: int) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Equal-width binning ``b``'s Σw, Σw·s, Σw·y per bin."""
        v = self.bins[b].value
        return v[:b], v[b:2 * b], v[2 * b:]

    @property
    def hist_mass(self) -> FloatArray:
        """Σw per bucket of the top 16 bits of the score's order key."""
        return np.asarray(self.label_cells()[0].sum(axis=1), dtype=np.float64)

    def label_cells(self) -> tuple[FloatArray, FloatArray]:
        """(Σw, Σw·s) per key bucket and label, each (buckets × 2): Cox's start cells."""
        v = self.buckets.value
        half = v.shape[0] // 2
        return v[:half].reshape(-1, 2), v[half:].reshape(-1, 2)


    def unit_table(self) -> dict[str, Any]:
        """The bootstrap units of positive mass — the rows of one label in one 2^-bits-wide
        score block inside one equal-width bin (:func:`unit_keys`), in score order — with
        ``bin``, ``block`` (the (block, bin) index), ``label`` and their six sums
        (:data:`UNIT_SUMS`: ``mass``, ``mass_sq``, ``score``, ``score_sq``,
        ``squared_error``, ``log_likelihood``)."""
        b = self.spec.units
        v = self.units.value.reshape(UNIT_SUMS, -1)
        key = np.flatnonzero(v[0] > 0)
        block = key >> 1
        out = {"bin": _unit_base(b)[block >> 1] + (block & 1), "block": block,
               "label": (key & 1).astype(np.float64)}
        for i, name in enumerate(("mass", "mass_sq", "score", "score_sq", "squared_error",
                                  "log_likelihood")):
            out[name] = v[i, key]
        return out


def unit_bits(bins: int) -> int:
    """The bootstrap units' block bits for ``bins`` equal-width bins: at least two blocks a
    bin, so a block meets at most two bins."""
    return max(UNIT_BITS, bins.bit_length() + 1)


@functools.lru_cache(maxsize=8)
def _unit_base(bins: int) -> IntArray:
    """The equal-width bin of each unit block's lower end."""
    size = 1 << unit_bits(bins)
    return uniform_assign(np.arange(size, dtype=np.float64) / size, bins)


def unit_keys(s: FloatArray, y: IntArray, bins: int, ids: IntArray) -> IntArray:
    """Each row's bootstrap unit, 4·block + 2·o + y: its score block ⌊2^bits·s⌋, o = 1 when
    its equal-width bin (``ids``) is past its block's lower end's (a bin edge inside the
    block: at most one, :func:`unit_bits`), and its label — in score order."""
    size = 1 << unit_bits(bins)
    block = np.minimum((s * size).astype(np.intp), size - 1)
    return np.asarray((block * 2 + (ids - _unit_base(bins)[block])) * 2 + y, dtype=np.intp)


def score_keys(s: FloatArray) -> np.ndarray:
    """:func:`~calcheck.streaming.ranks.order_keys` of scores in [0, 1]: non-negative, so a
    key is the bits with the sign bit set (−0.0 + 0.0 = +0.0)."""
    return (s + 0.0).view(np.uint64) | np.uint64(1 << (KEY_BITS - 1))


def top_buckets(s: FloatArray) -> IntArray:
    """The top 16 bits of each score's order key."""
    return (score_keys(s) >> np.uint64(FIRST_SHIFT)).astype(np.intp)


@dataclass(frozen=True)
class GroupedFirstSpec:
    """The first pass of every ``--by`` group (or ``--time`` window): a :class:`FirstState` per
    group key, at most :data:`calcheck.streaming.groups.MAX_GROUPS` of them."""

    spec: FirstSpec
    by: str
    threaded = True

    def new(self) -> GroupedFirstState:
        return GroupedFirstState(self)


class GroupedFirstState:
    def __init__(self, spec: GroupedFirstSpec) -> None:
        self.spec = spec
        self.groups: dict[str | None, FirstState] = {}

    def _group(self, key: str | None) -> FirstState:
        state: FirstState = group_state(self.groups, key, self.spec.spec.new, self.spec.by,
                                        "a weighted first pass")
        return state

    def update(self, s: FloatArray, y: IntArray, start: int, *rest: Any) -> GroupedFirstState:
        w = _weights(rest)                     # (group keys, code per row), then the weights
        for key, rows in group_rows(rest[0]).items():
            self._group(key).update(s[rows], y[rows], start, w[rows])
        return self

    def merge(self, other: GroupedFirstState) -> GroupedFirstState:
        for key, st in other.groups.items():          # (a new key: the other's state, capped)
            mine = group_state(self.groups, key, lambda st=st: st, self.spec.by,
                               "a weighted first pass")
            if mine is not st:
                mine.merge(st)
        return self


# ---------------------------------------------------------------------------------------------
# the mass search


@dataclass(frozen=True)
class MassPassSpec:
    """One pass of the mass search: the disjoint key ranges (sorted by ``lo``) it histograms
    (by mass and rows) or collects."""

    ranges: tuple[Range, ...]
    threaded = True

    def new(self) -> MassPassState:
        return MassPassState(self)


class MassPassState:
    def __init__(self, spec: MassPassSpec) -> None:
        self.spec = spec
        self._table = _range_table(spec.ranges)
        size = int(self._table[4][-1])
        self.mass = np.zeros(size)
        self.rows = np.zeros(size, dtype=np.int64)
        self.kept: list[tuple[IntArray, np.ndarray, FloatArray]] = []
        self._sorted: tuple[IntArray, np.ndarray, FloatArray] | None = None
        self._buckets = np.zeros(1 << BUCKET_BITS, dtype=bool)    # the key buckets the
        for r in spec.ranges:                                      # ranges touch
            self._buckets[r.lo >> FIRST_SHIFT:(r.hi >> FIRST_SHIFT) + 1] = True

    def update(self, s: FloatArray, y: IntArray, start: int, *rest: Any) -> MassPassState:
        self.add(score_keys(s), _weights(rest))
        return self

    def add(self, keys: np.ndarray, w: FloatArray) -> None:
        """Histogram (or collect) the order keys ``keys`` with their weights ``w`` (rows of
        weight 0 add no mass: they are never a cut's unit, :meth:`MassSearch.choose`)."""
        if self.spec.ranges == (FULL,):             # a first histogram: every key's top bits
            top = (keys >> np.uint64(FIRST_SHIFT)).astype(np.intp)
            self.mass += np.bincount(top, weights=w, minlength=self.mass.shape[0])
            self.rows += np.bincount(top, minlength=self.rows.shape[0])
            return
        near = np.flatnonzero(self._buckets[(keys >> np.uint64(FIRST_SHIFT)).astype(np.intp)])
        keys, w = keys[near], w[near]
        lo, hi, shift, collect, offsets = self._table
        rid = np.searchsorted(lo, keys, side="right").astype(np.intp) - 1
        rid_c = np.maximum(rid, 0)
        inside = (rid >= 0) & (keys <= hi[rid_c])
        k, r, wk = keys[inside], rid_c[inside], w[inside]
        hist = ~collect[r]
        if hist.any():
            rh = r[hist]
            idx = offsets[rh] + ((k[hist] - lo[rh]) >> shift[rh]).astype(np.intp)
            self.mass += np.bincount(idx, weights=wk[hist], minlength=self.mass.shape[0])
            self.rows += np.bincount(idx, minlength=self.rows.shape[0])
        if not hist.all():
            self.kept.append((r[~hist], k[~hist], wk[~hist]))

    def merge(self, other: MassPassState) -> MassPassState:
        self.mass += other.mass
        self.rows += other.rows
        self.kept.extend(other.kept)
        return self

    def histogram(self, index: int) -> tuple[FloatArray, IntArray]:
        offsets = self._table[4]
        part = slice(int(offsets[index]), int(offsets[index + 1]))
        return self.mass[part], self.rows[part]

    def collected(self, index: int) -> tuple[np.ndarray, FloatArray]:
        """The distinct keys collected by range ``index`` (ascending) and their masses."""
        if self._sorted is None:                     # every range's keys, sorted once
            parts = self.kept or [(np.zeros(0, np.intp), np.zeros(0, np.uint64), np.zeros(0))]
            r, k, w = (np.concatenate([p[i] for p in parts]) for i in range(3))
            order = np.lexsort((k, r))                  # by range, then key
            r = r[order]
            bounds = np.searchsorted(r, np.arange(len(self.spec.ranges) + 1), side="left")
            self._sorted = (bounds, k[order], w[order])
        bounds, k, w = self._sorted
        keys, mass = k[bounds[index]:bounds[index + 1]], w[bounds[index]:bounds[index + 1]]
        if not keys.shape[0]:
            return keys, mass
        starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        return keys[starts], np.add.reduceat(mass, starts)


@dataclass
class _Cut:
    mass: float                      # the cut's position on the mass axis
    lo: int = 0                      # its unit's key is in [lo, hi] ...
    hi: int = (1 << KEY_BITS) - 1
    base: float = 0.0                # ... after this mass of smaller keys
    count: int = -1                  # rows in [lo, hi]
    key: int | None = None


def _pick(cum: FloatArray, mass: FloatArray, target: float) -> int:
    """The piece (bucket or key) whose cumulative mass first exceeds ``target`` — always one of
    positive mass (``cum`` rises there) — or the last piece of positive mass when rounding
    puts the target beyond them all."""
    j = int(np.searchsorted(cum, target, side="right"))
    if j >= cum.shape[0]:
        j = int(np.flatnonzero(mass > 0)[-1])
    return j


class MassSearch:
    """The distinct scores whose tie groups hold the masses ``cuts`` of the rows sorted by
    score (0 < c < Σw), by passes over key ranges: :meth:`first` reads the first pass's
    histogram, then :meth:`ranges` and :meth:`absorb` alternate until :attr:`done`."""

    def __init__(self, cuts: list[float], tuning: Tuning = DEFAULT) -> None:
        self.tuning = tuning
        self.cuts = [_Cut(c) for c in sorted(set(cuts))]
        self._pass: tuple[Range, ...] = ()
        self._owners: list[list[_Cut]] = []

    @property
    def done(self) -> bool:
        return all(c.key is not None for c in self.cuts)

    def first(self, mass: FloatArray, rows: IntArray) -> None:
        self._pass, self._owners = (FULL,), [list(self.cuts)]
        self._narrow(0, FULL, mass, rows)

    def ranges(self) -> tuple[Range, ...]:
        self._pass, self._owners = next_ranges(self.cuts, self.tuning)
        return self._pass

    def absorb(self, state: MassPassState) -> None:
        for i, rng in enumerate(self._pass):
            if rng.shift < 0:
                keys, mass = state.collected(i)
                cum = np.cumsum(mass)
                for c in self._owners[i]:
                    c.key = int(keys[self.choose(cum, mass, c)])
            else:
                self._narrow(i, rng, *state.histogram(i))

    def choose(self, cum: FloatArray, mass: FloatArray, cut: _Cut) -> int:
        """The piece (bucket or key) of a range holding ``cut``, from the range's pieces'
        ``mass`` and its running sum ``cum`` (:func:`_pick`)."""
        return _pick(cum, mass, cut.mass - cut.base)

    def _narrow(self, i: int, rng: Range, mass: FloatArray, rows: IntArray) -> None:
        cum = np.cumsum(mass)
        for c in self._owners[i]:
            j = self.choose(cum, mass, c)
            c.base += float(cum[j - 1]) if j else 0.0
            c.lo = rng.lo + (j << rng.shift)
            c.hi = min(rng.hi, rng.lo + ((j + 1) << rng.shift) - 1)
            c.count = int(rows[j])
            if c.lo == c.hi:
                c.key = c.lo

    def scores(self) -> FloatArray:
        """The distinct scores found (ascending, each once)."""
        return np.unique(np.array([key_value(c.key) for c in self.cuts if c.key is not None]))


def cut_units(first: FirstState, cuts: list[float], tuning: Tuning = DEFAULT
              ) -> Passes[FloatArray]:
    """The mass search's passes: the scores of the tie groups that hold the mass ``cuts``,
    from the first pass's histogram (:class:`MassSearch`)."""
    search = MassSearch(cuts, tuning)
    search.first(first.hist_mass, first.hist_rows)
    while not search.done:
        search.absorb((yield from one_pass(MassPassSpec(search.ranges()))))
    return search.scores()


# ---------------------------------------------------------------------------------------------
# the bins pass


def slot_table(units: FloatArray) -> tuple[IntArray, np.ndarray]:
    """For each of 2^16 equal-width score cells: how many ``units`` lie below the cell, and
    whether one lies in it (its rows are then placed one by one)."""
    cells = 1 << SLOT_BITS
    lower = np.arange(cells, dtype=np.float64) / cells
    below = np.searchsorted(units, lower, side="left").astype(np.intp)
    inside = np.zeros(cells, dtype=bool)
    inside[np.minimum((units * cells).astype(np.intp), cells - 1)] = True
    return below, inside


def slots(s: FloatArray, units: FloatArray, table: tuple[IntArray, np.ndarray]) -> IntArray:
    """Each row's place among the ``units`` (sorted distinct scores, T of them): its gap
    k = #{units < s} (0 … T) for a row strictly between two, or T + 1 + k for a row at
    units[k]."""
    below, inside = table
    cell = np.minimum((s * (1 << SLOT_BITS)).astype(np.intp), (1 << SLOT_BITS) - 1)
    out = below[cell]
    near = np.flatnonzero(inside[cell])
    if near.shape[0]:
        sn = s[near]
        k = np.searchsorted(units, sn, side="left")
        at = (k < units.shape[0]) & (units[np.minimum(k, units.shape[0] - 1)] == sn)
        out[near] = np.where(at, units.shape[0] + 1 + k, k)
    return np.asarray(out, dtype=np.intp)


@dataclass(frozen=True)
class BinsSpec:
    """The bins pass (module docstring): the cut units' scores ``units`` (ascending), the
    equal-width binnings ``bins`` whose null variances are summed, and ``classes`` — the class
    weights (w₀, w₁) of the ``labels`` null, or None with the weights held fixed."""

    units: tuple[float, ...]
    bins: tuple[int, ...]
    classes: tuple[float, float] | None
    count: bool = False                 # counts: variance k·s(1 − s), variance mass k
    threaded = True

    def new(self) -> BinsState:
        return BinsState(self)


class BinsState:
    def __init__(self, spec: BinsSpec) -> None:
        self.spec = spec
        self.units = np.array(spec.units, dtype=np.float64)
        self._table = slot_table(self.units)
        t = self.units.shape[0]
        self.size = 2 * t + 1
        self.sums = CompensatedSum.zeros(QUANTITIES * self.size)
        self.top = np.full(t + 1, -np.inf)        # each gap's largest positive-weight score
        self.bins = {b: CompensatedSum.zeros(b) for b in spec.bins}
        self.den = CompensatedSum.zeros(1)        # Σ (1 − 2s)² Var w(y − s)

    def update(self, s: FloatArray, y: IntArray, start: int, *rest: Any) -> BinsState:
        w = _weights(rest)
        count = self.spec.count
        var = w * s * (1.0 - s) if count else regime_variance(s, w, self.spec.classes)
        place = slots(s, self.units, self._table)
        self.sums.add(np.concatenate([np.bincount(place, weights=x, minlength=self.size)
                                      for x in (w, w * s, w * y, var, w if count else w * w)]))
        gap = (place <= self.units.shape[0]) & (w > 0)
        np.maximum.at(self.top, place[gap], s[gap])
        for b, acc in self.bins.items():
            acc.add(np.bincount(uniform_assign(s, b), weights=var, minlength=b))
        t = 1.0 - 2.0 * s
        self.den.add(np.array([np.dot(t * t, var)]))
        return self

    def merge(self, other: BinsState) -> BinsState:
        self.sums.merge(other.sums)
        self.top = np.maximum(self.top, other.top)
        for b, acc in self.bins.items():
            acc.merge(other.bins[b])
        self.den.merge(other.den)
        return self

    def axis(self, exact: bool = True) -> tuple[MassAxis, FloatArray]:
        """The coarsened mass axis — gap 0, unit 0, gap 1, …, unit T − 1, gap T — with its
        ``V`` the null variance (``exact``) or the variance mass Σw² (Σk), and the variance
        mass's cumulative sums."""
        v = self.sums.value.reshape(QUANTITIES, self.size)
        t = self.units.shape[0]
        order = np.empty(self.size, dtype=np.intp)
        order[0::2] = np.arange(t + 1)            # gaps
        order[1::2] = t + 1 + np.arange(t)        # units
        v = v[:, order]
        scores = np.empty(self.size)
        scores[0::2] = self.top
        scores[1::2] = self.units

        def cum(x: FloatArray) -> FloatArray:
            return np.concatenate(([0.0], np.cumsum(x)))

        ax = MassAxis(M=cum(v[0]), S=cum(v[1]), Y=cum(v[2]), V=cum(v[3] if exact else v[4]),
                      first=np.arange(self.size, dtype=np.int64), scores=scores)
        return ax, cum(v[4])


# ---------------------------------------------------------------------------------------------
# T-Cal's units

TCAL_BITS = 16           # T-Cal's cells ⌊2^16·s⌋ (s = 1 its own cell, as ⌊m·s⌋ gives it)
TCAL_SUMS = ("rows", "bin", "mass", "S", "Q", "V", "WS", "VS", "VS2")
TCAL_CLASS_SUMS = ("s", "s2", "q", "q2", "qa", "qb")


@dataclass(frozen=True)
class TcalSpec:
    """T-Cal's units: the rows of one cell ⌊2^16·s⌋ — and for a fixed ``m`` one bin ⌊m·s⌋
    (:func:`tcal_keys`) — with their sums (:meth:`TcalState.table`); ``classes``: the class
    weights (w₀, w₁) of the ``labels`` null; ``count``: counts (variance mass k)."""

    m: int | None
    classes: tuple[float, float] | None
    count: bool = False
    threaded = True

    def new(self) -> TcalState:
        return TcalState(self)


def tcal_keys(s: FloatArray, m: int | None) -> IntArray:
    """Each row's T-Cal unit: its cell ⌊2^16·s⌋, plus its bin ⌊m·s⌋ for a fixed ``m`` (cell
    and bin both rise with s, so their sum is a unit's key in score order, and a cell that
    meets two bins is two units)."""
    cell = (s * float(1 << TCAL_BITS)).astype(np.intp)
    return cell if m is None else cell + np.floor(s * float(m)).astype(np.intp)


class TcalState:
    def __init__(self, spec: TcalSpec) -> None:
        self.spec = spec
        self.size = (1 << TCAL_BITS) + 1 + (spec.m + 1 if spec.m else 0)
        names = TCAL_SUMS + (TCAL_CLASS_SUMS if spec.classes else ())
        self.names = names
        self.sums = CompensatedSum.zeros(len(names) * self.size)

    def update(self, s: FloatArray, y: IntArray, start: int, *rest: Any) -> TcalState:
        w = _weights(rest)
        m, classes = self.spec.m, self.spec.classes
        r = s - y.astype(np.float64)
        v = w if self.spec.count else w * w
        on = (w > 0).astype(np.float64)
        cols = [on, on * np.floor(s * float(m)) if m else np.zeros_like(s), w, w * r,
                v * r * r, v, w * s, v * s, v * s * s]
        if classes is not None:
            from calcheck.weights import sampled_rate

            w0, w1 = classes
            q = sampled_rate(s, classes) * on
            cols += [on * s, on * s * s, q, q * q, q * (w1 * (s - 1.0) - w0 * s),
                     q * ((w1 * (1.0 - s)) ** 2 - (w0 * s) ** 2)]
        key = tcal_keys(s, m)
        self.sums.add(np.concatenate([np.bincount(key, weights=c, minlength=self.size)
                                      for c in cols]))
        return self

    def merge(self, other: TcalState) -> TcalState:
        self.sums.merge(other.sums)
        return self

    def table(self) -> dict[str, FloatArray]:
        """The units holding rows of positive weight, in score order: ``cell`` (⌊2^16·s⌋),
        ``bin`` (⌊m·s⌋ for a fixed m) and each sum — rows, mass Σw, S = Σw(s − y),
        Q = Σv(s − y)², V = Σv, WS = Σw·s, VS = Σv·s, VS2 = Σv·s² (v = w², or k for
        counts) and, with class weights, the rows' Σs, Σs², Σq, Σq², Σq·a and Σq·b of
        q = q(s), a = w₁(s − 1) − w₀s, b = w₁²(1 − s)² − w₀²s²."""
        v = self.sums.value.reshape(len(self.names), self.size)
        keep = np.flatnonzero(v[0] > 0)
        out = {name: v[i, keep] for i, name in enumerate(self.names)}
        out["bin"] = np.rint(out["bin"] / out["rows"])          # each unit's one bin
        out["cell"] = (keep - out["bin"]).astype(np.int64) if self.spec.m else \
            keep.astype(np.int64)
        return out


# ---------------------------------------------------------------------------------------------
# PDE's deviations, Cox's sandwich


@dataclass(frozen=True)
class DeviationSpec:
    """Σ w|s − p| over each gap's rows, p the gap's bin's P̂ (``phat``, one per gap)."""

    units: tuple[float, ...]
    phat: tuple[float, ...]
    threaded = True

    def new(self) -> DeviationState:
        return DeviationState(self)


class DeviationState:
    def __init__(self, spec: DeviationSpec) -> None:
        self.spec = spec
        self.units = np.array(spec.units, dtype=np.float64)
        self.phat = np.array(spec.phat, dtype=np.float64)
        self._table = slot_table(self.units)
        self.sums = CompensatedSum.zeros(self.phat.shape[0])

    def update(self, s: FloatArray, y: IntArray, start: int, *rest: Any) -> DeviationState:
        w = _weights(rest)
        place = slots(s, self.units, self._table)
        gap = place < self.phat.shape[0]
        p = place[gap]
        self.sums.add(np.bincount(p, weights=w[gap] * np.abs(s[gap] - self.phat[p]),
                                  minlength=self.phat.shape[0]))
        return self

    def merge(self, other: DeviationState) -> DeviationState:
        self.sums.merge(other.sums)
        return self


@dataclass(frozen=True)
class SandwichSpec:
    """At each β = (a, b): Σ w p(1 − p)·(1, x, x²) and Σ w²(y − p)²·(1, x, x²), x = logit(s),
    p = 1/(1 + e^−(a + b·x)) — Cox's robust covariance."""

    betas: tuple[tuple[float, float], ...]
    threaded = True

    def new(self) -> SandwichState:
        return SandwichState(self)


class SandwichState:
    def __init__(self, spec: SandwichSpec) -> None:
        self.spec = spec
        self.sums = CompensatedSum.zeros(6 * len(spec.betas))

    def update(self, s: FloatArray, y: IntArray, start: int, *rest: Any) -> SandwichState:
        w = _weights(rest)
        out = np.zeros(self.sums.hi.shape[0])
        for lo in range(0, s.shape[0], LOGISTIC_BLOCK):     # (temporaries that stay in cache)
            part = slice(lo, lo + LOGISTIC_BLOCK)
            x = cox_logit(s[part])
            xx, wp, yp = x * x, w[part], y[part]
            for j, (a, b) in enumerate(self.spec.betas):
                p = 1.0 / (1.0 + np.exp(-(a + b * x)))
                h = wp * p * (1.0 - p)
                r = wp * (yp - p)
                r2 = r * r
                out[6 * j:6 * j + 6] += [h.sum(), np.dot(h, x), np.dot(h, xx), r2.sum(),
                                         np.dot(r2, x), np.dot(r2, xx)]
        self.sums.add(out)
        return self

    def merge(self, other: SandwichState) -> SandwichState:
        self.sums.merge(other.sums)
        return self


# ---------------------------------------------------------------------------------------------
# rows held


@dataclass(frozen=True)
class HeldRowsSpec:
    """Every row — score, label, weight and the ``numeric`` (``--var``) columns — held in
    memory in the file's order (at most ``Tuning.exact_pava_rows``, checked from the footers
    before the pass): the in-memory kernels of what the passes lack read them as the
    in-memory engine does (:meth:`calcheck.engines.weighted.WeightedStreamEngine.kept`)."""

    numeric: tuple[str, ...] = ()
    threaded = True

    def new(self) -> HeldRowsState:
        return HeldRowsState(self)


class HeldRowsState:
    def __init__(self, spec: HeldRowsSpec) -> None:
        self.spec = spec
        self.parts: list[tuple[int, tuple[Any, ...]]] = []

    def update(self, s: FloatArray, y: IntArray, start: int, *rest: Any) -> HeldRowsState:
        cols = (s, y.astype(np.int8), _weights(rest),
                *((np.asarray(rest[0], dtype=np.float64),) if self.spec.numeric else ()))
        self.parts.append((start, cols))
        return self

    def merge(self, other: HeldRowsState) -> HeldRowsState:
        self.parts += other.parts
        return self

    def arrays(self) -> tuple[Any, ...]:
        """The held rows in the file's order (the batches by their first row id): scores,
        labels, weights and, with ``numeric``, the (rows × variables) matrix."""
        parts = [cols for _, cols in sorted(self.parts, key=lambda p: p[0])]
        width = 4 if self.spec.numeric else 3
        if not parts:
            empty = (np.zeros(0), np.zeros(0, dtype=np.int8), np.zeros(0))
            return empty + ((np.zeros((0, len(self.spec.numeric))),) if width == 4 else ())
        return tuple(np.concatenate([p[j] for p in parts]) for j in range(width))
