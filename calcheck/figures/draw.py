"""Figures, drawn from the engine's result tables (matplotlib, the optional ``plot`` extra).

* :func:`reliability_figure` — reliability diagram: empirical probability against mean score
  per bin with exact binomial 95% intervals, bin sizes below, histogram of predictions beside
  (TCE paper Fig. 1, right).
* :func:`tce_figure_from` — the test-based reliability diagram: violins of the predictions of each
  bin, the bin's empirical probability, bin sizes with the rejected share (and its percentage)
  overlaid, histogram of predictions (TCE paper Fig. 1, left).  Bins are labelled with their
  score range, not just an id.
* :func:`variable_figure` — variable-based calibration plot: LOESS-smoothed error rate and
  predicted error against the variable with 95% bands, v* marked, the variable's distribution
  below (VECE paper Fig. 1b).

Axes zoom to the range that holds the predictions (imbalanced data put them all near 0 or 1);
histograms use a log count axis when counts span several orders of magnitude.
matplotlib is imported inside the functions: without it they raise :class:`MissingExtra`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.figures._extra import INSTALL_HINT, MissingExtra
from calcheck.formatting import number

MAX_VIOLIN_POINTS = 4000


def _mpl() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingExtra(f"plots need matplotlib, which is not installed; {INSTALL_HINT}") \
            from None
    return plt


LOGIT_CLIP = 1e-6
EXTREME = 0.02          # the share of predictions within this of 0 or 1 picks the logit axis


@dataclass(frozen=True)
class Spread:
    """What a figure needs of a column (the predictions, or a variable) besides the engine's
    tables: its range, the share of values within 0.02 of 0 or 1, whether all are integers, and
    counts over any edges (``np.histogram``'s, of the values clipped to ``clip``).  From an
    array (:meth:`of`) or, on the streaming engines, from passes over the files."""

    lo: float
    hi: float
    extreme: float
    integer: bool
    histogram: Callable[[FloatArray, tuple[float, float] | None], IntArray]
    unit: str = "rows"          # what the histograms count ("weight": sampling weights)

    @classmethod
    def of(cls, values: FloatArray, weights: FloatArray | None = None,
           unit: str = "rows") -> Spread:
        """Of an array; with row ``weights`` (counts or sampling weights) the share and the
        histogram are weighted (``unit``: what they count)."""
        def hist(edges: FloatArray, clip: tuple[float, float] | None) -> IntArray:
            shown = values if clip is None else np.clip(values, *clip)
            return np.histogram(shown, bins=edges, weights=weights)[0]

        far = (values < EXTREME) | (values > 1 - EXTREME)
        return cls(lo=float(values.min()), hi=float(values.max()),
                   extreme=float(np.average(far, weights=weights)),
                   integer=bool(np.all(values == np.round(values))), histogram=hist, unit=unit)


def choose_scale(scores: FloatArray | Spread, yscale: str = "auto") -> str:
    """``"logit"`` when most predictions are within 0.02 of 0 or 1 (imbalanced data), else
    ``"linear"``; an explicit ``yscale`` wins."""
    if yscale in ("linear", "logit"):
        return yscale
    spread = scores if isinstance(scores, Spread) else Spread.of(scores)
    return "logit" if spread.extreme >= 0.5 else "linear"


def _apply_scale(ax: Any, scale: str, lim: tuple[float, float]) -> tuple[float, float]:
    if scale == "logit":
        lim = (max(lim[0], LOGIT_CLIP), min(lim[1], 1 - LOGIT_CLIP))
        ax.set_yscale("logit", nonpositive="clip")
    ax.set_ylim(*lim)
    return lim


def _zoom(lo: float, hi: float, pad: float = 0.05) -> tuple[float, float]:
    span = max(hi - lo, 1e-6)
    return max(0.0, lo - pad * span), min(1.0, hi + pad * span)


def _hist_scale(counts: np.ndarray) -> str:
    nz = counts[counts > 0]
    return "log" if nz.size and nz.max() / max(nz.min(), 1) > 50 else "linear"


def _binom_interval(k: IntArray, n: IntArray) -> tuple[FloatArray, FloatArray]:
    """Exact (Clopper–Pearson) 95% intervals of k/n."""
    from scipy.stats import beta

    k, n = np.asarray(k, float), np.asarray(n, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, beta.ppf(0.025, k, n - k + 1), 0.0)
        hi = np.where(k < n, beta.ppf(0.975, k + 1, n - k), 1.0)
    return np.nan_to_num(lo), np.nan_to_num(hi, nan=1.0)


def _row_interval(rows: list[dict[str, Any]]) -> tuple[FloatArray, FloatArray]:
    """:func:`_binom_interval` of bin rows; a bin of sampling-weighted rows counts its
    effective size (Σw)²/Σw² (``effective_n``) and its weighted rate."""
    n = np.array([r.get("effective_n", r["n"]) for r in rows], dtype=float)
    k = np.array([r["mean_label"] if "effective_n" in r else r["positives"] for r in rows],
                 dtype=float)
    return _binom_interval(np.where([("effective_n" in r) for r in rows], k * n, k), n)


def _pred_hist(ax: Any, scores: Spread, ylim: tuple[float, float], color: str,
               scale: str = "linear") -> None:
    if scale == "logit":                      # bins evenly spaced on the logit axis
        lo, hi = np.log(ylim[0] / (1 - ylim[0])), np.log(ylim[1] / (1 - ylim[1]))
        edges = 1.0 / (1.0 + np.exp(-np.linspace(lo, hi, 41)))
        counts = scores.histogram(edges, (LOGIT_CLIP, 1 - LOGIT_CLIP))
    else:
        edges = np.linspace(ylim[0], ylim[1], 41)
        counts = scores.histogram(edges, None)
    ax.barh(edges[:-1], counts, height=np.diff(edges), align="edge", color=color, alpha=0.8)
    ax.set_xscale(_hist_scale(counts))
    ax.set_xlabel("predictions")
    ax.tick_params(labelleft=False)


def reliability_title(bins: int, binning: str, top_label: bool = False) -> str:
    """The ``plot --kind reliability`` figure's title, on every engine."""
    label = "equal-width" if binning == "uniform" else "equal-mass"
    return f"Reliability diagram, {bins} {label} bins{' (top-label view)' if top_label else ''}"


def reliability_figure(bins_table: list[dict[str, Any]], scores: FloatArray | Spread, *,
                       title: str = "Reliability diagram", top_label: bool = False,
                       ax: Any = None) -> Any:
    """Reliability diagram from a metric's bin table (``MetricResult.bin_rows()``) and the
    predictions (or their :class:`Spread`); with ``ax``, only its main panel, in that Axes
    (returned)."""
    plt = _mpl()
    scores = scores if isinstance(scores, Spread) else Spread.of(scores)
    rows = [r for r in bins_table if r["n"] > 0]
    ms = np.array([r["mean_score"] for r in rows])
    ml = np.array([r["mean_label"] for r in rows])
    n = np.array([r["n"] for r in rows])
    lo, hi = _row_interval(rows)
    lim = _zoom(min(scores.lo, float(lo.min())), max(scores.hi, float(hi.max())))
    given = ax is not None
    if ax is None:
        fig = plt.figure(figsize=(7.5, 7.0), layout="constrained")
        gs = fig.add_gridspec(2, 2, width_ratios=(4, 1), height_ratios=(4, 1.2))
        ax = fig.add_subplot(gs[0, 0])
    ax.plot(lim, lim, ls="--", color="0.5", lw=1, label="perfect calibration")
    for edge in sorted({r["lower"] for r in rows} | {r["upper"] for r in rows}):
        ax.axvline(edge, color="0.85", lw=0.8, ls=":", zorder=0)
    ax.errorbar(ms, ml, yerr=[ml - lo, hi - ml], fmt="o", color="C0", ecolor="C0", capsize=3,
                label="empirical probability (95% CI)")
    ax.set_xlim(*lim)
    ax.set_ylim(*lim)
    ax.set_xlabel("mean confidence (max probability) in bin" if top_label
                  else "mean predicted probability in bin")
    ax.set_ylabel("accuracy (share correct)" if top_label else "empirical probability")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
    if given:
        return ax
    axh = fig.add_subplot(gs[0, 1], sharey=ax)
    _pred_hist(axh, scores, lim, "C0")
    axc = fig.add_subplot(gs[1, 0], sharex=ax)
    lower = np.array([r["lower"] for r in rows])
    upper = np.array([r["upper"] for r in rows])
    axc.bar(lower, n, width=np.maximum(upper - lower, 1e-9), align="edge", color="0.6",
            edgecolor="white", label="bin size")
    axc.set_yscale(_hist_scale(n))
    axc.set_ylabel(scores.unit)
    axc.set_xlabel("confidence" if top_label else "predicted probability")
    return fig


MAX_OVERLAY = 10        # curves of one overlay (the largest groups): more are unreadable


def overlay_figure(tables: list[tuple[str, list[dict[str, Any]]]], *,
                   title: str = "Reliability diagrams", top_label: bool = False,
                   ax: Any = None, size: tuple[float, float] = (6.5, 6.0)) -> Any:
    """Several models' (or groups') reliability diagrams on one axes, with a legend:
    ``tables`` is (label, bin table) per curve.  Returns the Figure, or ``ax`` when given."""
    plt = _mpl()
    given = ax is not None
    if ax is None:
        fig, ax = plt.subplots(figsize=size, layout="constrained")
    ax.plot((0, 1), (0, 1), ls="--", color="0.5", lw=1, label="perfect calibration")
    for j, (label, table) in enumerate(tables):
        rows = [r for r in table if r["n"] > 0]
        if not rows:
            continue
        ms = np.array([r["mean_score"] for r in rows])
        ml = np.array([r["mean_label"] for r in rows])
        lo, hi = _row_interval(rows)
        color = f"C{j % 10}"
        ax.errorbar(ms, ml, yerr=[ml - lo, hi - ml], fmt="-o", color=color, ecolor=color,
                    capsize=2, lw=1.2, ms=4, label=label)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("mean confidence (max probability) in bin" if top_label
                  else "mean predicted probability in bin")
    ax.set_ylabel("accuracy (share correct)" if top_label else "empirical probability (95% CI)")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
    return ax if given else fig


def drift_figure(windows: list[dict[str, Any]], metric: str, name: str, *,
                 window: str = "", ax: Any = None) -> Any:
    """A metric over time: its value per window with the bootstrap interval as a band, and the
    rows per window below (empty windows leave a gap)."""
    from datetime import datetime

    plt = _mpl()
    t = [datetime.fromisoformat(w["start"]) for w in windows]
    v = np.array([(w["metrics"].get(metric) or {}).get("value") if w["n"] else None
                  for w in windows], dtype=float)

    def end(w: dict[str, Any], k: str) -> float:
        ci = (w["metrics"].get(metric) or {}).get("ci") or {}
        return float("nan") if ci.get(k) is None else float(ci[k])

    lo = np.array([end(w, "low") for w in windows])
    hi = np.array([end(w, "high") for w in windows])
    n = np.array([w["n"] for w in windows])
    given = ax is not None
    if ax is None:
        fig = plt.figure(figsize=(8.0, 5.0), layout="constrained")
        gs = fig.add_gridspec(2, 1, height_ratios=(3, 1))
        ax = fig.add_subplot(gs[0])
    ax.fill_between(t, lo, hi, color="C0", alpha=0.2, label="bootstrap interval")
    ax.plot(t, v, "-o", color="C0", ms=3, label=name)
    ax.set_ylabel(name)
    ax.set_title(f"{name} over time" + (f" ({window})" if window else ""))
    ax.legend(loc="upper left", fontsize="small")
    if given:
        return ax
    axn = fig.add_subplot(gs[1], sharex=ax)
    days = [(datetime.fromisoformat(w["end"]) - s).total_seconds() / 86400.0
            for w, s in zip(windows, t)]
    axn.bar(t, n, width=[0.9 * d for d in days], align="edge", color="0.6")
    axn.set_ylabel("rows")
    fig.autofmt_xdate()
    return fig


def corp_figure(x: FloatArray, fit: FloatArray, band: Any, parts: dict[str, Any],
                scores: FloatArray | Spread, *, title: str = "CORP reliability diagram",
                xlabel: str = "predicted probability",
                ylabel: str = "conditional event probability (PAV)", ax: Any = None) -> Any:
    """The CORP reliability diagram: the PAV-recalibrated step function, the consistency band
    of a calibrated model, the histogram of the predictions, and the decomposition (with
    ``ax``, all but the histogram, in that Axes)."""
    plt = _mpl()
    scores = scores if isinstance(scores, Spread) else Spread.of(scores)
    given = ax is not None
    if ax is None:
        fig = plt.figure(figsize=(7.5, 7.0), layout="constrained")
        gs = fig.add_gridspec(2, 1, height_ratios=(4, 1.1))
        ax = fig.add_subplot(gs[0, 0])
    ax.plot([0, 1], [0, 1], ls="--", color="0.5", lw=1, label="perfect calibration")
    ax.fill_between(band.x, band.low, band.high, step="post", color="C1", alpha=0.25,
                    label=f"{band.level:.0%} consistency band ({band.reps} draws)")
    ax.step(x, fit, where="post", color="C0", lw=1.8, label="PAV-recalibrated (CORP)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
    lines = [f"{name:>5}  MCB {number(v['mcb'])}  DSC {number(v['dsc'])}  "
             f"UNC {number(v['unc'])}  score {number(v['score'])}" for name, v in parts.items()]
    ax.text(0.98, 0.03, "\n".join(lines), transform=ax.transAxes, ha="right", va="bottom",
            family="monospace", fontsize="small",
            bbox={"facecolor": "white", "edgecolor": "0.8", "alpha": 0.9})
    if given:
        return ax
    axh = fig.add_subplot(gs[1, 0], sharex=ax)
    edges = np.linspace(0.0, 1.0, 51)
    counts = scores.histogram(edges, None)
    axh.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="0.6",
            edgecolor="white")
    axh.set_yscale(_hist_scale(counts))
    axh.set_ylabel(scores.unit)
    axh.set_xlabel(xlabel)
    return fig


MAX_PANELS = 20


def per_class_figure(panels: list[tuple[str, list[dict[str, Any]], float]], *, total: int,
                     title: str = "Per-class reliability (one-vs-rest)") -> Any:
    """Small multiples: one reliability diagram per class — (class name, bin table, the
    class's ECE) — on shared 0–1 axes; at most :data:`MAX_PANELS` (the worst classes)."""
    plt = _mpl()
    k = len(panels)
    cols = min(5, max(1, math.ceil(math.sqrt(k))))
    rows = math.ceil(k / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols + 0.6, 3.0 * rows + 0.8),
                             sharex=True, sharey=True, squeeze=False, layout="constrained")
    for ax, (name, table, ece) in zip(axes.flat, panels):
        use = [r for r in table if r["n"]]
        ms = np.array([r["mean_score"] for r in use])
        ml = np.array([r["mean_label"] for r in use])
        n = np.array([r["n"] for r in use], dtype=float)
        ax.plot([0, 1], [0, 1], ls="--", color="0.6", lw=0.8)
        ax.scatter(ms, ml, s=12 + 60 * n / max(float(n.max()), 1.0), color="C0", alpha=0.8)
        ax.plot(ms, ml, color="C0", lw=0.8, alpha=0.6)
        ax.set_title(f"{name}  (ECE {number(ece, 3)})", fontsize=10)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
    for ax in list(axes.flat)[k:]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("predicted probability")
    for ax in axes[:, 0]:
        ax.set_ylabel("observed frequency")
    more = f" — the {k} worst of {total} classes" if total > k else ""
    fig.suptitle(title + more)
    return fig


def violin_ranks(bounds: IntArray) -> list[IntArray]:
    """The sorted positions each bin's violin draws: all of a bin's, or evenly spaced order
    statistics of a bin with more than ``MAX_VIOLIN_POINTS`` rows (they keep the shape)."""
    out = []
    for a, b in itertools.pairwise(bounds.tolist()):
        if b - a > MAX_VIOLIN_POINTS:
            out.append(a + np.linspace(0, b - a - 1, MAX_VIOLIN_POINTS).astype(np.int64))
        else:
            out.append(np.arange(a, b, dtype=np.int64))
    return out


def range_labels(rows: list[dict[str, Any]]) -> list[str]:
    """Each bin's ``lower–upper`` with the fewest significant digits (3 at least) that keep
    every distinct edge distinct — so no bin reads "1–1" where scores crowd near 0 or 1 — and
    ``= v`` for a bin whose edges are equal."""
    edges = sorted({float(r[k]) for r in rows for k in ("lower", "upper")})
    digits = 3
    while digits < 12 and len({f"{v:.{digits}g}" for v in edges}) < len(edges):
        digits += 1

    def show(v: float) -> str:
        return f"{v:.{digits}g}"
    return [f"= {show(r['lower'])}" if show(r["lower"]) == show(r["upper"])
            else f"{show(r['lower'])}–{show(r['upper'])}" for r in rows]


def tce_figure_from(bins_table: list[dict[str, Any]], violins: list[FloatArray], scores: Spread,
                    *, title: str = "Test-based reliability diagram", value: float | None = None,
                    yscale: str = "auto", top_label: bool = False, ax: Any = None) -> Any:
    """Test-based reliability diagram from the TCE bin table, each bin's violin points (the
    sorted scores at :func:`violin_ranks`) and the predictions' :class:`Spread` — what the
    memory and streaming engines compute.  With ``ax``, the violins and empirical
    probabilities only, in that Axes (returned).

    ``yscale`` is ``"linear"``, ``"logit"`` or ``"auto"`` (logit when most predictions are
    near 0 or 1, where a linear axis flattens the bins; exact 0s and 1s are clipped to 1e-6 for
    display only).
    """
    plt = _mpl()
    nb = len(bins_table)
    x = np.arange(1, nb + 1)
    scale = choose_scale(scores, yscale)
    clip = (LOGIT_CLIP, 1 - LOGIT_CLIP) if scale == "logit" else (0.0, 1.0)
    data = [np.clip(v, *clip) for v in violins]
    lo, hi = float(np.clip(scores.lo, *clip)), float(np.clip(scores.hi, *clip))
    nonempty = [i for i, d in enumerate(data) if d.size > 0]
    emp = np.array([np.nan if r["mean_label"] is None else r["mean_label"] for r in bins_table])
    if scale == "logit":
        emp = np.clip(emp, LOGIT_CLIP, 1 - LOGIT_CLIP)
        lim = (float(min(lo, np.nanmin(emp))) / 2, 1 - (1 - float(max(hi, np.nanmax(emp)))) / 2)
    else:
        lim = _zoom(min(lo, float(np.nanmin(emp))), max(hi, float(np.nanmax(emp))))
    given = ax is not None
    if ax is None:
        fig = plt.figure(figsize=(max(8.0, 0.95 * nb + 3), 7.5), layout="constrained")
        gs = fig.add_gridspec(2, 2, width_ratios=(5, 1), height_ratios=(4, 1.6))
        ax = fig.add_subplot(gs[0, 0])
    varying = [i for i in nonempty if np.ptp(data[i]) > 0]
    if varying:
        parts = ax.violinplot([data[i] for i in varying], positions=x[varying], widths=0.8,
                              showextrema=True, showmedians=True)
        for body in parts["bodies"]:
            body.set_alpha(0.45)
    flat = [i for i in nonempty if np.ptp(data[i]) == 0]
    if flat:
        ax.scatter(x[flat], [data[i][0] for i in flat], marker="_", s=400, lw=3, color="C0",
                   clip_on=False, zorder=3, label="predictions (all equal)")
    ax.hlines(emp, x - 0.4, x + 0.4, colors="red", lw=3, label="empirical probability")
    lim = _apply_scale(ax, scale, lim)
    ax.set_xlim(0.4, nb + 0.6)
    ax.set_ylabel("confidence (max probability)" if top_label
                  else r"predicted probability $P_\theta(y=1\mid x)$")
    ax.set_title(title + (f" — TCE {number(value, 2)} %" if value is not None else ""))
    ax.legend(loc="upper left", fontsize="small")
    labels = [f"{span}\n{r['n']:,} rows" for span, r in zip(range_labels(bins_table), bins_table)]
    if given:
        ax.set_xticks(x, labels, rotation=30 if nb > 10 else 0,
                      ha="right" if nb > 10 else "center", fontsize=8)
        return ax
    ax.tick_params(labelbottom=False)
    axh = fig.add_subplot(gs[0, 1], sharey=ax)
    _pred_hist(axh, scores, lim, "C0", scale)
    axb = fig.add_subplot(gs[1, 0], sharex=ax)
    n = np.array([r["n"] for r in bins_table])
    rej = np.array([r["rejected"] for r in bins_table])
    axb.bar(x, n, width=0.8, color="0.75", label="not rejected")
    axb.bar(x, rej, width=0.8, color="tab:red", alpha=0.75, label="rejected")
    for xi, ni, ri in zip(x, n, rej):
        if ni:
            axb.text(xi, ni, f"{100 * ri / ni:.0f}%", ha="center", va="bottom", fontsize=8)
    axb.set_ylim(0, n.max() * 1.25 if n.size else 1)
    axb.set_ylabel("rows")
    axb.set_xticks(x, labels, rotation=30 if nb > 10 else 0, ha="right" if nb > 10 else "center",
                   fontsize=9)
    axb.set_xlabel(("confidence" if top_label else "score") + " range of each bin")
    axb.legend(loc="upper right", fontsize="x-small", ncols=2)
    return fig


def unit_of(weights: Any) -> str:
    """What a histogram of rows carrying ``weights`` (:class:`calcheck.weights.Weights` or
    None) counts: rows (none, or counts: the expanded rows) or weight (sampling weights)."""
    return "weight" if weights is not None and not weights.frequency else "rows"


def variable_figure(var: dict[str, Any], values: FloatArray | Spread, name: str, *,
                    ax: Any = None, weights: Any = None) -> Any:
    """Variable-based calibration plot from a ``variables.NAME`` report entry and the variable's
    values (or the :class:`Spread` of the values inside the curve's v range); ``weights``: the
    rows' :class:`calcheck.weights.Weights`, which the histogram adds."""
    plt = _mpl()
    c = var["curve"]
    v = np.asarray(c["v"], float)
    if not isinstance(values, Spread):
        shown = ~np.isnan(values)
        shown[shown] = (values[shown] >= v.min()) & (values[shown] <= v.max())
        values = Spread.of(values[shown], None if weights is None else weights.values[shown],
                           unit=unit_of(weights))
    given = ax is not None
    if ax is None:
        fig = plt.figure(figsize=(7.5, 6.0), layout="constrained")
        gs = fig.add_gridspec(2, 1, height_ratios=(4, 1))
        ax = fig.add_subplot(gs[0])
    for key, color, label in (("error_rate", "C0", "actual error (LOESS)"),
                              ("predicted_error", "C3", "predicted error (LOESS)")):
        mid = 100 * np.asarray(c[key], float)
        ax.plot(v, mid, color=color, label=label)
        ax.fill_between(v, 100 * np.asarray(c[f"{key}_lo"], float),
                        100 * np.asarray(c[f"{key}_hi"], float), color=color, alpha=0.25)
    ax.axvline(var["v_star"], color="0.3", ls=":", lw=1)
    ax.annotate(f"VCE(v*) = {number(100 * var['vce_max'], 1)} pts at {name} = {var['v_star']:.4g}",
                xy=(var["v_star"], ax.get_ylim()[1]), xytext=(4, -14), textcoords="offset points",
                fontsize=8)
    ax.set_ylabel("% error")
    ax.set_title(f"Variable-based calibration along {name} — VECE {number(100 * var['vece'], 2)} %")
    ax.legend(loc="best", fontsize="small")
    if given:
        ax.set_xlabel(name)
        return ax
    ax.tick_params(labelbottom=False)
    axh = fig.add_subplot(gs[1], sharex=ax)
    integer = values.integer and values.hi - values.lo <= 200
    edges = np.arange(values.lo - 0.5, values.hi + 1.5) if integer else \
        np.linspace(values.lo, values.hi, 31)
    counts = values.histogram(edges, None)
    axh.stairs(counts, edges, fill=True, color="0.6")
    axh.set_xlim(v.min(), v.max())
    axh.set_xlabel(f"{name} (5th–95th percentile)")
    axh.set_ylabel(values.unit)
    return fig


# no creation date, fixed element ids: the same input and options give the same bytes
STABLE_METADATA = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}
STABLE_RC: dict[str, Any] = {"svg.hashsalt": "calcheck"}


def save(fig: Any, path: str, fmt: str | None = None) -> None:
    """Save a figure; the format is ``fmt``, else it follows the extension (png, svg, pdf).
    SVG and PDF files are byte-identical for the same figure (no date, fixed ids)."""
    import os

    plt = _mpl()
    kind = (fmt or os.path.splitext(path)[1].lstrip(".")).lower()
    with plt.rc_context(STABLE_RC):
        fig.savefig(path, dpi=150, format=fmt, metadata=STABLE_METADATA.get(kind))
    plt.close(fig)


def to_png_bytes(fig: Any) -> bytes:
    """The figure as PNG bytes (for the HTML report)."""
    import io

    plt = _mpl()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
