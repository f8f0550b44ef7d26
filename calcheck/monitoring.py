"""``calcheck monitor``: has calibration drifted?  Window after window, an anytime-valid
e-process and a confidence sequence for the offset, with an alarm whose chance of ever
sounding on a calibrated model is at most α however many windows are read (docs/monitoring.md).

A ``--state`` file carries the e-process from one run to the next: the sums of log likelihood
ratios so far, the last window read, the alarm and every window's line, so that a daily job
continues yesterday's e-process with today's file and gets the numbers of one run over all the
days.  The state is JSON, versioned, and written atomically.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from calcheck._json import jsonable
from calcheck._quiet import quiet
from calcheck._version import SCHEMA_VERSION, __version__
from calcheck.engines import Progress, open_engine, read_options
from calcheck.errors import InputError, UsageError
from calcheck.hypotests import eprocess as ep
from calcheck.hypotests.classical import cox
from calcheck.options import DEFAULT_BATCH_ROWS, Options
from calcheck.report.model import Report
from calcheck.signatures import inputs, keywords, parameters_doc

STATE_FORMAT = "calcheck-monitor-state"
STATE_VERSION = 1
CONSTRUCTION = ("E = (M + P)/2: M the mixture likelihood ratio over Cox alternatives "
                "logit P(y=1) = a + b*logit(s), a in {-1, -0.5, -0.25, -0.1, 0, 0.1, 0.25, 0.5, "
                "1}, b in {0.5, 0.7, 0.85, 1, 1.2, 1.5, 2}, (a, b) != (0, 1), equal weights; P "
                f"a plug-in betting {ep.HEDGE:g} on the alternative that led the last "
                f"{ep.RECENT} windows; alarm when E >= 1/alpha (Ville's inequality)")


def state_settings(opts: Options) -> dict[str, Any]:
    """What must match for a state to continue: the window, its zone, α and the grids."""
    return {"time": opts.time, "window": opts.window, "tz": opts.tz, "alpha": opts.alpha,
            "shifts": list(ep.SHIFTS), "slopes": list(ep.SLOPES), "recent": ep.RECENT,
            "hedge": ep.HEDGE,
            "offsets": [float(ep.OFFSETS[0]), float(ep.OFFSETS[-1]), ep.OFFSET_STEP],
            "steps": list(ep.STEPS)}


def empty_state(opts: Options) -> dict[str, Any]:
    return {"format": STATE_FORMAT, "version": STATE_VERSION, "calcheck_version": __version__,
            "settings": state_settings(opts), "log_ratio": [0.0] * len(ep.ALTERNATIVES),
            "offset_loglik": [0.0] * ep.OFFSETS.size, "log_plugin": 0.0, "recent": [],
            "rows": 0, "last_window": None,
            "alarm": None, "windows": []}


def read_state(path: str, opts: Options) -> dict[str, Any]:
    """The state in ``path`` (a fresh one when the file does not exist), checked against this
    run's settings."""
    label = opts.name_of("state")
    if not os.path.exists(path):
        return empty_state(opts)
    try:
        with open(path, encoding="utf-8") as fh:
            state = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"{label} {path}: not a readable monitor state ({exc})") from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise InputError(f"{label} {path}: not a calcheck monitor state file")
    if state.get("version") != STATE_VERSION:
        raise InputError(f"{label} {path}: state version {state.get('version')!r}; this "
                         f"calcheck reads version {STATE_VERSION}")
    want = state_settings(opts)
    got = state.get("settings", {})
    differ = [k for k in want if got.get(k) != want[k]]
    if differ:
        what = ", ".join(f"{k} {got.get(k)!r} (now {want[k]!r})" for k in differ)
        raise UsageError(f"{label} {path}: the state was written with other settings: {what}; "
                         "continue it with the same settings or start a new state")
    if len(state.get("log_ratio", [])) != len(ep.ALTERNATIVES) or \
            len(state.get("offset_loglik", [])) != ep.OFFSETS.size:
        raise InputError(f"{label} {path}: the state's sums do not match this construction")
    return state


@keywords
@quiet
def monitor(
        source: Any = None,
        *,
        scores: ArrayLike | None = None,
        labels: ArrayLike | None = None,
        time: str | ArrayLike | None = None,
        window: str | None = None,
        tz: str = "UTC",
        state: str | os.PathLike[str] | None = None,
        score: str | None = None,
        label: str | None = None,
        pos_label: str | None = None,
        probs: str | Sequence[str] | ArrayLike | None = None,
        renormalize: bool = False,
        input_format: str | None = None,
        drop_invalid: bool = False,
        max_dropped: float = 0.5,
        where: str | None = None,
        weight: str | None = None,
        count: str | None = None,
        alpha: float = 0.05,
        fail_on_alarm: bool = False,
        engine: str = "memory",
        scheduler: str | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Report:
    """Has calibration drifted — ``calcheck monitor`` as a function.

    Reads the rows window by window (``time`` column, ``window`` length such as ``"1d"``) and
    returns the :class:`Report` of the anytime-valid e-process: every window's line, the
    alarm (``report.alarm``) and the offset's confidence sequence.  ``state``: a JSON file
    to continue (if it exists) and to write back with the new windows.
    """
    values = dict(locals())
    return run_monitor(*inputs("monitor", values))


monitor.__doc__ = (monitor.__doc__ or "").rstrip() + "\n" + parameters_doc(monitor, "monitor")


def run_monitor(source: Any, opts: Options, *, progress: Progress | None = None) -> Report:
    """``calcheck monitor`` on ``source`` with validated options."""
    from calcheck.io.windows import WindowColumn, parse_window

    state = read_state(opts.state, opts) if opts.state else empty_state(opts)
    window = parse_window(opts.window or "", opts.tz, opts.name_of("window"))
    with open_engine(source, read_options(opts), progress=progress) as eng:
        if not eng.capabilities.rows:
            raise UsageError(f"{opts.name_of('engine')} {eng.name}: the monitor runs on the "
                             "memory engine (the streaming engines do not read windows in "
                             "order yet)")
        assert opts.time is not None
        starts, scores, labels, counts = eng.window_rows(WindowColumn(opts.time, window))
        info = eng.input_info(top=True)
        reading = eng.reading()
        multiclass = eng.multiclass
    order = np.argsort(starts, kind="stable")
    starts, scores, labels = starts[order], scores[order], labels[order]
    counts = None if counts is None else counts[order]
    first = None if starts.size == 0 else int(starts[0])
    if first is not None and state["last_window"] is not None and \
            first <= window_start(state["last_window"]):
        raise UsageError(f"{opts.name_of('state')} {opts.state}: the window starting "
                         f"{window.iso(first)} is already in the state (its last window starts "
                         f"{state['last_window']}); give rows after it")
    new = advance(state, window, starts, scores, labels, opts.alpha, counts)
    notes = list(reading.notes)
    if multiclass:
        notes.append("multiclass input: the monitor reads the top-label view (confidence, "
                     "correct)")
    doc = {"schema_version": SCHEMA_VERSION, "calcheck_version": __version__,
           "command": "monitor", "input": info,
           "settings": {**state_settings(opts), "construction": CONSTRUCTION,
                        "state": opts.state, "engine": opts.engine, "where": opts.where,
                        "pos_label": opts.pos_label, "drop_invalid": opts.drop_invalid},
           "summary": summary(state, new, opts.alpha), "windows": state["windows"],
           "new_windows": new, "notes": notes}
    report = Report(jsonable(doc), messages=tuple(reading.messages),
                    fail_on_alarm=opts.fail_on_alarm)
    if opts.state:                  # last: a run that fails leaves yesterday's state as it was
        from calcheck.io.output import atomic_write

        atomic_write(opts.state, json.dumps(jsonable(state), indent=1, allow_nan=False) + "\n",
                     label=opts.name_of("state"))
    return report


def window_start(iso: str) -> int:
    from calcheck.io.windows import start_ns

    return start_ns(iso)


def advance(state: dict[str, Any], window: Any, starts: np.ndarray, scores: np.ndarray,
            labels: np.ndarray, alpha: float, counts: np.ndarray | None = None) -> int:
    """Add the windows of these rows (sorted by window) to ``state``; returns how many.
    ``counts``: each row stands for that many identical rows (``--count``): every window's
    sums, fit and e-value are the expanded rows', so a state carries on from counted files
    to expanded ones and back."""
    if starts.size == 0:
        return 0
    bounds = np.flatnonzero(np.r_[True, starts[1:] != starts[:-1], True])
    span = window.span(int(starts[0]), int(starts[-1]))
    if state["last_window"] is not None:     # the empty windows since the state's last one
        span = window.span(window.following(window_start(state["last_window"])),
                           int(starts[-1]))
    at = {int(starts[b]): (int(b), int(e)) for b, e in itertools.pairwise(bounds)}
    log_ratio = np.asarray(state["log_ratio"], dtype=np.float64)
    loglik = np.asarray(state["offset_loglik"], dtype=np.float64)
    threshold = math.log(1.0 / alpha)
    recent = [np.asarray(r, dtype=np.float64) for r in state["recent"]]
    log_plugin = float(state["log_plugin"])
    for lo, hi in span:
        rows = at.get(lo)
        line: dict[str, Any] = {"start": window.iso(lo), "end": window.iso(hi), "n": 0}
        if rows is not None:
            s, y = scores[rows[0]:rows[1]], labels[rows[0]:rows[1]]
            k = None if counts is None else counts[rows[0]:rows[1]]
            sums = ep.window_sums(s, y.astype(np.float64), k)
            choice = ep.plugin_choice(recent)             # fixed before the window is read
            log_plugin += ep.plugin_step(sums.log_ratio, choice)
            recent = [*recent, sums.log_ratio][-ep.RECENT:]
            log_ratio = log_ratio + sums.log_ratio
            loglik = loglik + sums.offset_loglik
            state["rows"] += sums.rows
            line.update(_window_fit(s, y, sums, k))
            line["plugin"] = None if choice is None else \
                {"intercept": float(ep.ALTERNATIVES[choice, 0]),
                 "slope": float(ep.ALTERNATIVES[choice, 1])}
        log_e = ep.log_evalue(log_ratio, log_plugin)
        empty, low, high = ep.confidence_sequence(loglik, alpha) if state["rows"] else \
            (False, None, None)
        line.update({"log_evalue": log_e, "evalue": math.exp(min(log_e, 700.0)),
                     "offset_cs": {"low": low, "high": high, "empty": empty,
                                   "level": 1.0 - alpha},
                     "alarm": bool(state["alarm"] is not None or log_e >= threshold)})
        if state["alarm"] is None and log_e >= threshold:
            state["alarm"] = {"window": line["start"], "evalue": line["evalue"]}
        state["windows"].append(line)
        state["last_window"] = line["start"]
    state["recent"] = [r.tolist() for r in recent]
    state["log_plugin"] = log_plugin
    state["log_ratio"] = log_ratio.tolist()
    state["offset_loglik"] = loglik.tolist()
    return len(span)


def _window_fit(s: np.ndarray, y: np.ndarray, sums: ep.WindowSums,
                counts: np.ndarray | None = None) -> dict[str, Any]:
    """The window's own numbers: rows, rates, Cox's calibration intercept and slope (of the
    expanded rows, with ``counts``)."""
    n = sums.rows
    out: dict[str, Any] = {"n": n, "positives": round(sums.positives),
                           "mean_score": sums.score_sum / n,
                           "observed_rate": sums.positives / n,
                           "calibration_intercept": None, "slope": None}
    if 0 < sums.positives < n:
        if counts is None:
            d = cox(s, y.astype(np.int64)).details
        else:
            from calcheck.hypotests import weighted
            from calcheck.weights import Weights

            d = weighted.cox(s, y.astype(np.int64), Weights(counts, "count")).details
        out["calibration_intercept"] = d.get("calibration_intercept")
        out["slope"] = d.get("slope")
    return out


def summary(state: dict[str, Any], new: int, alpha: float) -> dict[str, Any]:
    """The headline: alarm or not, the e-value, the offset's confidence sequence."""
    windows = state["windows"]
    if not windows:
        return {"verdict": "no data", "text": "no window read yet", "alarm": None}
    last = windows[-1]
    cs = last["offset_cs"]
    level = f"{100 * (1 - alpha):g}%"
    if cs["empty"]:
        cs_text = f"no constant offset fits at {level}"
    else:
        lo = "−∞" if cs["low"] is None else f"{cs['low']:+.3g}"
        hi = "+∞" if cs["high"] is None else f"{cs['high']:+.3g}"
        cs_text = f"offset {level} confidence sequence [{lo}, {hi}]"
    e = last["evalue"]
    alarm = state["alarm"]
    if alarm is not None:
        text = (f"ALARM since {alarm['window']}: calibration rejected, anytime-valid at α = "
                f"{alpha:g} (e-value {e:.3g} ≥ {1 / alpha:g}); {cs_text}")
        verdict = "alarm"
    else:
        text = (f"no alarm after {len(windows):,} windows ({state['rows']:,} rows): e-value "
                f"{e:.3g} < {1 / alpha:g}; {cs_text}")
        verdict = "no alarm"
    return {"verdict": verdict, "text": text, "alarm": alarm, "evalue": e,
            "log_evalue": last["log_evalue"], "threshold": 1.0 / alpha, "windows": len(windows),
            "new_windows": new, "rows": state["rows"], "offset_cs": cs}
