"""The streaming engine: fold validated batches into one :class:`FixedBinState`."""

from __future__ import annotations

from collections.abc import Iterable

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import BinStats, uniform_edges
from calcheck.errors import InputError, UsageError
from calcheck.metrics._result import MetricResult
from calcheck.streaming.states import STREAMABLE, FixedBinState


def stream_metrics(batches: Iterable[tuple[FloatArray, IntArray]], ids: list[str], *,
                   bins: int = 10) -> dict[str, MetricResult]:
    """The streamable metrics ``ids`` over all batches, in the in-memory engine's result form."""
    bad = [m for m in ids if m not in STREAMABLE]
    if bad:
        raise UsageError(f"--engine stream computes {', '.join(STREAMABLE)}; "
                         f"{', '.join(bad)} need(s) the in-memory engine (--engine memory)")
    state = FixedBinState(bins=bins)
    for s, y in batches:
        state.update(s, y)
    if state.n == 0:
        raise InputError("no rows to compute on (after the --where filter and dropped rows)")
    out = state.finalize()
    e = uniform_edges(bins)
    stats = BinStats(kind="uniform", lower=e[:-1].copy(), upper=e[1:].copy(),
                     count=out["bins"]["count"], sum_score=out["bins"]["sum_score"],
                     sum_label=out["bins"]["positives"], params={"bins": bins})
    settings = {
        "ece": {"binning": "uniform", "bins": bins, "norm": "l1"},
        "ece_l2": {"binning": "uniform", "bins": bins, "norm": "l2"},
        "mce": {"binning": "uniform", "bins": bins, "norm": "max"},
        "brier": {},
        "log_loss": {"clip": 1e-15},
    }
    unit = {"log_loss": "fraction"}
    results = {}
    for mid in ids:
        results[mid] = MetricResult(id=mid, value=float(out[mid]), unit=unit.get(mid, "fraction"),
                                    settings=settings[mid], n_samples=int(out["n"]),
                                    bins=stats if mid in ("ece", "ece_l2", "mce") else None)
    return results
