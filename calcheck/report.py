"""Reports: the versioned JSON document (SPEC §10) and its renderings.

``build_report`` assembles JSON-ready builtins; ``render`` turns a report into the text of one
output format (``table`` via rich, ``json``, ``csv``, ``markdown``).  Nothing here computes a
metric, reads a file or exits.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from typing import Any

from calcheck._json import jsonable
from calcheck._version import SCHEMA_VERSION, __version__
from calcheck.metrics._result import MetricResult

OUTPUT_FORMATS = ("table", "json", "csv", "markdown")

TITLES = {
    "ece": "ECE", "ece_l2": "ECE (l2)", "mce": "MCE", "ace": "ACE", "mce_q": "MCE(Q)",
    "tce": "TCE", "tce_q": "TCE(Q)", "tce_v": "TCE(V)", "tce_u": "TCE(U)",
    "brier": "Brier score", "log_loss": "Log loss", "pde": "PDE", "pc": "Probabilistic count",
}


def build_report(*, command: str, input_info: Mapping[str, Any], settings: Mapping[str, Any],
                 metrics: Mapping[str, MetricResult], bins_for: Iterable[str] = (),
                 gates: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The JSON report of a ``score`` run; bin tables only for the metrics in ``bins_for``."""
    with_bins = set(bins_for)
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "calcheck_version": __version__,
        "command": command,
        "input": dict(input_info),
        "settings": dict(settings),
        "metrics": {mid: r.to_dict(bins=mid in with_bins) for mid, r in metrics.items()},
    }
    if gates is not None:
        report["gates"] = gates
    return jsonable(report)  # type: ignore[no-any-return]


def to_json(report: Mapping[str, Any]) -> str:
    """The report as JSON text; NaN/inf are refused (they were turned into null before)."""
    return json.dumps(report, indent=2, allow_nan=False) + "\n"


# ---------------------------------------------------------------------------------------------
# value formatting


def format_value(value: float | None, unit: str) -> str:
    """Human formatting of a metric value."""
    if value is None:
        return "–"
    if unit == "percent":
        return f"{value:.2f} %"
    if unit == "count":
        return f"{value:,.1f}"
    return f"{value:.4f}"


def describe_settings(settings: Mapping[str, Any]) -> str:
    """Short human summary of a metric's settings: ``uniform, 10 bins, l1``."""
    parts = []
    if "binning" in settings:
        b = settings["binning"]
        if "bins" in settings and b in ("uniform", "quantile"):
            parts.append(f"{b}, {settings['bins']} bins")
        else:
            parts.append(str(b))
    for key, val in settings.items():
        if key in ("binning", "bins"):
            continue
        parts.append(f"{key}={val}")
    return ", ".join(parts)


_BIN_COLUMNS = ("bin", "lower", "upper", "n", "positives", "mean_score", "mean_label", "gap")
# the test-based reliability table (TCE paper, Fig. 1) as the terminal shows it
_TCE_TABLE_COLUMNS = ("bin", "lower", "upper", "n", "mean_label", "min_score", "q1_score",
                      "median_score", "q3_score", "max_score", "rejected", "rejected_pct")


def _bin_columns(rows: list[dict[str, Any]]) -> list[str]:
    extra = [k for k in (rows[0] if rows else {}) if k not in _BIN_COLUMNS]
    return [*_BIN_COLUMNS, *extra]


def _cell(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if v != 0.0 and abs(v) < 1e-3:
            return f"{v:.3g}"
        return f"{v:.4f}" if abs(v) < 1e4 else f"{v:.4g}"
    return str(v)


def _metric_rows(report: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    rows = []
    for mid, m in report["metrics"].items():
        rows.append((mid, TITLES.get(mid, mid), format_value(m["value"], m["unit"]),
                     describe_settings(m.get("settings", {}))))
    return rows


def _header_line(report: Mapping[str, Any]) -> str:
    inp = report["input"]
    prev = inp.get("prevalence")
    text = (f"{inp['path']}  n={inp['rows_used']:,}  positives={inp['positives']:,}  "
            f"prevalence={prev:.4f}" if prev is not None else f"{inp['path']}")
    if inp.get("rows_dropped"):
        text += f"  dropped={inp['rows_dropped']:,}"
    return text


# ---------------------------------------------------------------------------------------------
# renderings


def render_table(report: Mapping[str, Any], *, bins_for: Iterable[str] = (),
                 width: int | None = None, color: bool | None = None) -> str:
    """Rich tables as text: header, one row per metric, then the requested bin tables."""
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    console = Console(file=buf, width=width or 140, color_system=None if color is False else "auto",
                      force_terminal=bool(color), legacy_windows=False, highlight=False)
    console.print(_header_line(report))
    table = Table(show_header=True, header_style="bold")
    table.add_column("id")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("settings")
    for row in _metric_rows(report):
        table.add_row(*row)
    console.print(table)
    for mid in bins_for:
        m = report["metrics"].get(mid)
        if not m or "bins" not in m:
            continue
        rows = m["bins"]
        cols = list(_TCE_TABLE_COLUMNS) if rows and "rejected" in rows[0] else _bin_columns(rows)
        bt = Table(title=f"bins of {TITLES.get(mid, mid)} ({describe_settings(m['settings'])})",
                   show_header=True, header_style="bold")
        for c in cols:
            bt.add_column(c, justify="right")
        for r in rows:
            bt.add_row(*(_cell(r.get(c)) for c in cols))
        console.print(bt)
    for gate in report.get("gates", []):
        state = "FAILED" if gate["failed"] else "passed"
        console.print(f"gate {gate['condition']}: {state} (value {_cell(gate['value'])})")
    return buf.getvalue()


def render_csv(report: Mapping[str, Any], *, bins_for: Iterable[str] = ()) -> str:
    """CSV: one row per metric; with ``bins_for``, the bin rows of those metrics instead."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    wanted = [m for m in bins_for if "bins" in report["metrics"].get(m, {})]
    if wanted:
        cols = _bin_columns(report["metrics"][wanted[0]]["bins"])
        w.writerow(["metric", *cols])
        for mid in wanted:
            for r in report["metrics"][mid]["bins"]:
                w.writerow([mid, *("" if r.get(c) is None else r.get(c) for c in cols)])
        return buf.getvalue()
    w.writerow(["metric", "value", "unit", "n", "settings"])
    for mid, m in report["metrics"].items():
        w.writerow([mid, "" if m["value"] is None else repr(m["value"]), m["unit"], m["n"],
                    json.dumps(m["settings"], sort_keys=True)])
    return buf.getvalue()


def render_markdown(report: Mapping[str, Any], *, bins_for: Iterable[str] = ()) -> str:
    """GitHub-flavoured markdown tables."""
    lines = [f"**{_header_line(report)}**", "", "| id | metric | value | settings |",
             "|---|---|---:|---|"]
    for row in _metric_rows(report):
        lines.append("| " + " | ".join(row) + " |")
    for mid in bins_for:
        m = report["metrics"].get(mid)
        if not m or "bins" not in m:
            continue
        cols = _bin_columns(m["bins"])
        lines += ["", f"Bins of {TITLES.get(mid, mid)} ({describe_settings(m['settings'])})", "",
                  "| " + " | ".join(cols) + " |", "|" + "---:|" * len(cols)]
        for r in m["bins"]:
            lines.append("| " + " | ".join(_cell(r.get(c)) for c in cols) + " |")
    for gate in report.get("gates", []):
        lines += ["", f"- gate `{gate['condition']}`: {'FAILED' if gate['failed'] else 'passed'}"]
    return "\n".join(lines) + "\n"


def render(report: Mapping[str, Any], fmt: str, *, bins_for: Iterable[str] = (),
           color: bool | None = None) -> str:
    """Render ``report`` in ``fmt`` (one of :data:`OUTPUT_FORMATS`)."""
    bins_for = list(bins_for)
    if fmt == "json":
        return to_json(report)
    if fmt == "csv":
        return render_csv(report, bins_for=bins_for)
    if fmt == "markdown":
        return render_markdown(report, bins_for=bins_for)
    return render_table(report, bins_for=bins_for, color=color)
