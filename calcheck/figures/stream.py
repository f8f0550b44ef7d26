"""The figures' data on the streaming engines: the same bin tables, violin points and
histograms as in memory, from passes over the files, drawn by :mod:`calcheck.figures.draw`.

* The bin tables are the streamed metrics' (ECE's grid, ACE's and TCE's rank searches).
* A TCE violin draws a bin's rows or, past ``draw.MAX_VIOLIN_POINTS``, evenly spaced order
  statistics of it: the exact rank search resolves those ranks (:func:`order_statistics`).
* The prediction (or variable) histogram is a :class:`~calcheck.figures.draw.Spread`: one pass gives
  the range, the share near 0 or 1 and whether all values are integers; once the figure has
  chosen its edges, one more pass counts the values in them with ``np.histogram`` per batch
  (counts add, so they equal the in-memory histogram).  Of weighted rows (``weighted``: every
  batch carries the rows' counts or sampling weights last, :mod:`calcheck.engines.weighted`)
  the share near 0 or 1 and the histogram are weighted, as :meth:`Spread.of` weighs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray, PassSpec, PassState
from calcheck.figures.draw import EXTREME, Spread


@dataclass(frozen=True)
class SpreadSpec:
    """One pass over the scores (or the ``--var`` column ``var``, missing values skipped),
    keeping the values in ``window``: their count, range, count within 0.02 of 0 or 1 and
    integrality, and counts over ``edges`` of the values clipped to ``clip``."""

    var: str | None = None
    window: tuple[float, float] | None = None
    edges: tuple[float, ...] = ()
    clip: tuple[float, float] | None = None
    weighted: bool = False
    threaded = True

    @property
    def numeric(self) -> tuple[str, ...]:       # the batch extras this pass reads
        return (self.var,) if self.var else ()

    def new(self) -> SpreadState:
        return SpreadState(self)


PASS_SPECS = (SpreadSpec,)      # the figures' pass specs (calcheck/streaming/conformance.py)


def as_pass(spec: SpreadSpec) -> PassSpec[PassState]:
    """``spec`` as the typed pass protocol (mypy --strict checks that it conforms)."""
    return spec


class SpreadState:
    def __init__(self, spec: SpreadSpec) -> None:
        self.spec = spec
        self.n = 0
        self.lo, self.hi = np.inf, -np.inf
        self.extreme: float = 0        # rows (weighted: the mass) within 0.02 of 0 or 1
        self.mass = 0.0                # weighted: the mass of the values kept
        self.integer = True
        self.counts: np.ndarray[Any, Any] = np.zeros(max(len(spec.edges) - 1, 0),
                               dtype=np.float64 if spec.weighted else np.int64)

    def update(self, scores: FloatArray, labels: IntArray, start: int, *extra: Any,
               ) -> SpreadState:
        spec = self.spec
        v = scores
        w = np.asarray(extra[-1], dtype=np.float64) if spec.weighted else None
        if spec.var:
            v = extra[0][:, 0]
            keep = ~np.isnan(v)
            v, w = v[keep], None if w is None else w[keep]
        if spec.window is not None:
            keep = (v >= spec.window[0]) & (v <= spec.window[1])
            v, w = v[keep], None if w is None else w[keep]
        if v.shape[0]:
            self.n += int(v.shape[0])
            self.lo, self.hi = min(self.lo, float(v.min())), max(self.hi, float(v.max()))
            far = (v < EXTREME) | (v > 1 - EXTREME)
            if w is None:
                self.extreme += int(np.count_nonzero(far))
            else:
                self.extreme += float(np.dot(far, w))
                self.mass += float(w.sum())
            self.integer = self.integer and bool(np.all(v == np.round(v)))
            if spec.edges:
                shown = v if spec.clip is None else np.clip(v, *spec.clip)
                self.counts += np.histogram(shown, bins=np.asarray(spec.edges), weights=w)[0]
        return self

    def merge(self, other: SpreadState) -> SpreadState:
        self.n += other.n
        self.lo, self.hi = min(self.lo, other.lo), max(self.hi, other.hi)
        self.extreme += other.extreme
        self.mass += other.mass
        self.integer = self.integer and other.integer
        self.counts += other.counts
        return self


def stream_spread(source: Any, *, var: str | None = None,
                  window: tuple[float, float] | None = None, unit: str | None = None
                  ) -> Spread:
    """The :class:`Spread` of the scores (or of ``var`` inside ``window``); its histogram
    runs one pass per call.  ``unit``: the rows are weighted, and the histogram counts
    ``"rows"`` (counts: the expanded rows) or ``"weight"`` (sampling weights)."""
    weighted = unit is not None
    st, _ = source.run(SpreadSpec(var, window, weighted=weighted))
    if st.n == 0:
        from calcheck.streaming.engine import no_rows_error

        raise no_rows_error(source.path, source.where)

    def histogram(edges: FloatArray, clip: tuple[float, float] | None) -> IntArray:
        done, _ = source.run(SpreadSpec(var, window, tuple(float(e) for e in edges), clip,
                                        weighted))
        return done.counts  # type: ignore[no-any-return]

    share = st.extreme / st.mass if weighted else st.extreme / st.n
    return Spread(lo=st.lo, hi=st.hi, extreme=share, integer=st.integer,
                  histogram=histogram, unit=unit or "rows")


def violins(source: Any, state: Any, counts: IntArray) -> list[FloatArray]:
    """Each bin's violin points (bins of ``counts`` rows, in score order), as in memory."""
    from calcheck.figures.draw import violin_ranks
    from calcheck.streaming.positional import order_statistics

    bounds = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    per_bin = violin_ranks(bounds)
    sizes = [r.shape[0] for r in per_bin]
    values = order_statistics(source, state, np.concatenate(per_bin))
    return np.split(values, np.cumsum(sizes)[:-1])


def grid_figure(source: Any, state: Any, kind: str, spread: Spread, *, bins: int,
                binning: str, ties: str, yscale: str, top_label: bool, ax: Any = None) -> Any:
    """The reliability diagram (``kind`` "reliability": ECE's grid bins, or ACE's equal-mass
    bins from a rank search) or the test-based one (TCE's bins and violins) of a streamed
    ``source`` whose grid pass gave ``state``."""
    from calcheck.figures import draw
    from calcheck.streaming.engine import metric_results
    from calcheck.streaming.positional import positional_results

    view = " (top-label view)" if top_label else ""
    if kind == "reliability":
        if binning == "uniform":
            res = metric_results(state, ["ece"])["ece"]
        else:
            res = positional_results(source, state, ["ace"], bins=bins, ties=ties)[0]["ace"]
        return draw.reliability_figure(res.bin_rows(), spread, top_label=top_label,
                                       title=draw.reliability_title(bins, binning, top_label),
                                       ax=ax)
    res = positional_results(source, state, ["tce"], ties=ties)[0]["tce"]
    assert res.bins is not None
    points = violins(source, state, res.bins.count)
    return draw.tce_figure_from(res.bin_rows(), points, spread, value=res.value, yscale=yscale,
                                top_label=top_label,
                                title=f"Test-based reliability diagram{view}", ax=ax)
