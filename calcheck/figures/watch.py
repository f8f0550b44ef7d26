"""The figures of ``audit`` and ``monitor``: the worst segments' gaps, and the e-value path
over time with the offset's confidence sequence."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calcheck.figures.draw import _mpl


def segments_figure(segments: list[dict[str, Any]], *, top: int = 15, alpha: float = 0.05,
                    ax: Any = None) -> Any:
    """The ``top`` worst segments (as the audit orders them): observed rate minus mean score,
    in points, with a ±2σ bar of that gap under calibration; red where the segment is
    miscalibrated after adjustment."""
    plt = _mpl()
    shown = list(segments[:top])[::-1]
    given = ax is not None
    if ax is None:
        _fig, ax = plt.subplots(figsize=(8.0, 0.9 + 0.32 * max(len(shown), 1)),
                               layout="constrained")
    gap = np.array([100 * e["difference"] for e in shown])
    sd = np.array([100 * (abs(e["difference"]) / abs(e["z"]) if e.get("z") else math.nan)
                   for e in shown])
    y = np.arange(len(shown))
    colors = ["#b00020" if e["reject_adjusted"] else "0.45" for e in shown]
    ax.barh(y, gap, color=colors, height=0.6)
    ax.errorbar(np.zeros(len(shown)), y, xerr=2 * sd, fmt="none", ecolor="0.2", capsize=3,
                lw=0.8, label="±2σ under calibration")
    ax.axvline(0, color="0.2", lw=0.8)
    ax.set_yticks(y, [e["name"] for e in shown], fontsize="small")
    ax.set_xlabel("observed rate − mean score (points)")
    ax.set_title(f"The {len(shown)} worst segments (red: miscalibrated after adjustment, "
                 f"α = {alpha:g})", fontsize="medium")
    ax.legend(loc="lower right", fontsize="small")
    return ax if given else ax.figure


def monitor_figure(windows: list[dict[str, Any]], *, alpha: float, ax: Any = None) -> Any:
    """Above: the e-value after each window on a log axis, the 1/α line and the alarm;
    below: each window's calibration intercept and the offset's confidence sequence."""
    from datetime import datetime

    plt = _mpl()
    t = [datetime.fromisoformat(w["start"]) for w in windows]
    log10_e = np.array([w["log_evalue"] / math.log(10) for w in windows])
    given = ax is not None
    if ax is None:
        fig = plt.figure(figsize=(8.0, 5.5), layout="constrained")
        gs = fig.add_gridspec(2, 1, height_ratios=(3, 2))
        ax = fig.add_subplot(gs[0])
    ax.plot(t, log10_e, "-o", ms=3, color="C0", label="e-value")
    ax.axhline(math.log10(1 / alpha), color="#b00020", ls="--", lw=1,
               label=f"1/α = {1 / alpha:g}")
    alarm = next((i for i, w in enumerate(windows) if w["alarm"]), None)
    if alarm is not None:
        ax.axvline(t[alarm], color="#b00020", lw=1.5, label=f"alarm {windows[alarm]['start'][:10]}")
    ax.set_ylabel("log10 e-value")
    ax.set_title("Anytime-valid calibration monitor")
    ax.legend(loc="upper left", fontsize="small")
    if given:
        return ax
    axo = fig.add_subplot(gs[1], sharex=ax)

    def val(w: dict[str, Any], k: str) -> float:
        v = w.get(k)
        return math.nan if v is None else float(v)

    lo = np.array([math.nan if w["offset_cs"]["empty"] else val(w["offset_cs"], "low")
                   for w in windows])
    hi = np.array([math.nan if w["offset_cs"]["empty"] else val(w["offset_cs"], "high")
                   for w in windows])
    axo.fill_between(t, lo, hi, color="C1", alpha=0.25, step="post",
                     label="offset confidence sequence")
    axo.plot(t, [val(w, "calibration_intercept") for w in windows], "o", ms=3, color="C1",
             label="window's calibration intercept")
    axo.axhline(0, color="0.3", lw=0.8)
    axo.set_ylabel("logit offset")
    axo.legend(loc="upper left", fontsize="small")
    fig.autofmt_xdate()
    return fig
