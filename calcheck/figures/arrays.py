"""Figures from data: compute the tables with the engine, then draw them (``calcheck.plots``).

The Python API for pictures: ``calcheck.plot_reliability``, ``calcheck.plot_tce``,
``calcheck.plot_corp``, ``calcheck.plot_variable`` return matplotlib figures.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from calcheck.figures import draw
from calcheck.metrics._data import Prepared
from calcheck.metrics.binned import ace as _quantile_bins
from calcheck.metrics.binned import ece as _ece
from calcheck.metrics.tce import tce, tce_bounds
from calcheck.weights import weights_of


def reliability(data: Prepared, *, bins: int = 10, binning: str = "uniform",
                title: str | None = None, top_label: bool = False, ax: Any = None) -> Any:
    """Reliability diagram of equal-width (``uniform``) or equal-mass (``quantile``) bins."""
    res = _ece(data, bins=bins) if binning == "uniform" else _quantile_bins(data, bins=bins)
    label = "equal-width" if binning == "uniform" else "equal-mass"
    spread = _spread(data)
    return draw.reliability_figure(res.bin_rows(), spread, top_label=top_label,
                                    title=title or f"Reliability diagram ({bins} {label} bins)",
                                    ax=ax)


def test_based(data: Prepared, *, title: str | None = None, yscale: str = "auto",
               top_label: bool = False, ax: Any = None, **tce_options: Any) -> Any:
    """The test-based reliability diagram of TCE (PAVA-BC bins unless ``binning`` is given);
    of counted rows, the expanded rows' diagram (their bins' sizes give the cut ranks)."""
    res = tce(data, **tce_options)
    rows = res.bin_rows()
    if data.weights is None:
        bounds, _ = tce_bounds(data, tce_options.get("binning", "pava-bc"),
                               tce_options.get("bins", 10), tce_options.get("n_min"),
                               tce_options.get("n_max"))
        ranked: Any = data.sorted_scores
    else:                                 # counts: the expanded rows, indexed by rank
        from calcheck.metrics.vece import RankedRows

        bounds = np.r_[0, np.cumsum([round(r["n"]) for r in rows])].astype(np.int64)
        ranked = RankedRows(data.sorted_scores, data.sorted_weights)
    return draw.tce_figure_from(rows, [ranked[r] for r in draw.violin_ranks(bounds)],
                                _spread(data, sorted_=True), value=res.value,
                                title=title or "Test-based reliability diagram", yscale=yscale,
                                top_label=top_label, ax=ax)


def corp(data: Prepared, *, reps: int = 200, level: float = 0.9, seed: int = 0,
         title: str | None = None, top_label: bool = False, ax: Any = None) -> Any:
    """The CORP reliability diagram: PAV curve, consistency band, Brier and log decompositions
    (of counted rows: the expanded rows'; of sampling-weighted rows: the weighted PAV, its band
    drawn by the weights' null)."""
    from calcheck.metrics import corp as c

    rec = c.recalibration(data)
    if data.weights is not None and not data.weights.frequency:
        band = c.weighted_band(rec, data, reps=reps, level=level, seed=seed)
    else:
        band = c.consistency_band(rec, reps=reps, level=level, seed=seed)
    parts = {name: c.decompose(rec, kind).to_dict() for name, kind in (("Brier", "brier"),
                                                                  ("log", "log"))}
    labels = ({"xlabel": "confidence (max probability)", "ylabel": "accuracy (PAV)"}
              if top_label else {})
    scores = data.scores if data.weights is None else _spread(data)   # the mass's histogram
    return draw.corp_figure(rec.x, rec.fit, band, parts, scores,
                             title=title or "CORP reliability diagram", ax=ax, **labels)


def per_class(probs: np.ndarray, labels: np.ndarray, classes: list[str], *, bins: int = 15,
              binning: str = "uniform", ties: str = "share", weights: Any = None) -> Any:
    """Small multiples of the one-vs-rest reliability diagrams of every class (the worst
    :data:`~calcheck.draw.MAX_PANELS` by their ECE when there are more); ``weights``: the
    rows' counts or weights, which every panel's bins take."""
    panels = []
    for j, name in enumerate(classes):
        data = Prepared(probs[:, j], (labels == j).astype(np.int64), validate=False, ties=ties,
                        weights=weights)
        res = _ece(data, bins=bins) if binning == "uniform" else _quantile_bins(data, bins=bins)
        panels.append((name, res.bin_rows(), res.value))
    worst = sorted(panels, key=lambda p: -p[2])[: draw.MAX_PANELS]
    keep = {p[0] for p in worst}
    label = "equal-width" if binning == "uniform" else "equal-mass"
    return draw.per_class_figure([p for p in panels if p[0] in keep], total=len(panels),
                                  title=f"Per-class reliability, one-vs-rest, {bins} {label} "
                                        "bins")


def plot_corp(scores: ArrayLike, labels: ArrayLike, *, reps: int = 200, level: float = 0.9,
              seed: int = 0, weight: ArrayLike | None = None,
              count: ArrayLike | None = None) -> Any:
    """CORP reliability diagram of binary predictions (matplotlib Figure); ``weight=`` /
    ``count=``: the rows' sampling weights (fixed-weight null) or counts (the expanded rows'
    diagram)."""
    return corp(_counted(scores, labels, count, weight), reps=reps, level=level, seed=seed)


def plot_reliability(scores: ArrayLike, labels: ArrayLike, *, bins: int = 10,
                     binning: str = "uniform", weight: ArrayLike | None = None,
                     count: ArrayLike | None = None) -> Any:
    """Reliability diagram of binary predictions (matplotlib Figure); ``weight=`` /
    ``count=``: the rows' sampling weights or counts (docs/weights.md)."""
    return reliability(_counted(scores, labels, count, weight), bins=bins, binning=binning)


def plot_tce(scores: ArrayLike, labels: ArrayLike, *, yscale: str = "auto",
             count: ArrayLike | None = None, **tce_options: Any) -> Any:
    """Test-based reliability diagram (matplotlib Figure); options as :func:`calcheck.tce`;
    ``count=``: the rows' counts (the expanded rows' diagram)."""
    return test_based(_counted(scores, labels, count), yscale=yscale, **tce_options)


def _spread(data: Prepared, sorted_: bool = False) -> draw.Spread:
    """The scores' :class:`~calcheck.figures.draw.Spread` (of the sorted ones: the same, from
    the sort already made), weighted by the rows' counts (counting rows) or sampling weights
    (counting weight)."""
    w = data.weights
    if sorted_:
        return draw.Spread.of(data.sorted_scores, None if w is None else data.sorted_weights,
                              unit=draw.unit_of(w))
    return draw.Spread.of(data.scores, None if w is None else w.values, unit=draw.unit_of(w))


def _counted(scores: ArrayLike, labels: ArrayLike, count: ArrayLike | None,
             weight: ArrayLike | None = None) -> Prepared:
    """The rows of a figure function, with their counts or weights when given."""
    data = Prepared(scores, labels)
    weights = weights_of(weight, count, data.n)
    if weights is None:
        return data
    return Prepared(data.scores, data.labels, validate=False, weights=weights)


def plot_variable(scores: ArrayLike, labels: ArrayLike, values: ArrayLike, name: str = "v", *,
                  span: float = 0.75, weight: ArrayLike | None = None,
                  count: ArrayLike | None = None) -> Any:
    """Variable-based calibration plot of binary scores (or an (n, K) probability matrix);
    ``weight=`` / ``count=``: the rows' sampling weights or counts (docs/weights.md)."""
    from calcheck.data import Predictions
    from calcheck.metrics.vece import variables

    s = np.asarray(scores, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    data = Predictions(labels=labels, probs=s) if s.ndim == 2 else \
        Predictions(labels=labels, scores=s)
    pred_error, incorrect = data.error_view()
    weights = weights_of(weight, count, v.shape[0])
    res = variables(pred_error, incorrect, {name: v}, span=span, weights=weights)
    return draw.variable_figure(res.to_dict()[name], v, name, weights=weights)
