"""Renderings of a report: ``table`` (rich), ``json``, ``csv``, ``markdown`` and the terminal
reliability diagram.  Nothing here computes a metric, reads a file or exits."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from typing import Any

from calcheck.registry import title

OUTPUT_FORMATS = ("table", "json", "csv", "markdown")

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


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if v != 0.0 and (abs(v) < 10 ** -digits or abs(v) >= 1e6):
            return f"{v:.3e}"
        return f"{v:.{digits}f}"
    return str(v)


def _test_summary(tid: str, t: Mapping[str, Any]) -> str:
    if tid == "tcal":
        return (f"m={t['m']}, debiased l2-ECE={_fmt(t['debiased_l2_ece'])}, "
                f"l1 plug-in={_fmt(t['plugin_l1'])}, critical T={_fmt(t['critical_value'])}")
    if tid == "tcal_adaptive":
        rej = t["rejecting_levels"]
        return (f"B={t['B']} levels, level α/B={_fmt(t['level_alpha'])}, rejecting m: "
                + (", ".join(map(str, rej[:6])) + (" …" if len(rej) > 6 else "") if rej else "none"))
    if tid == "hosmer_lemeshow":
        return f"χ²({t['df']}), {t['groups']} groups"
    if tid == "spiegelhalter":
        return (f"{t['direction']}: mean score {_fmt(t['mean_score'])} vs observed rate "
                f"{_fmt(t['mean_label'])}")
    if tid == "cox":
        return f"intercept={_fmt(t['intercept'])}, slope={_fmt(t['slope'])}, χ²(2)"
    if tid == "binomial_discrete":
        return f"V={t['distinct_values']} values, level α/V={_fmt(t['level_alpha'])}"
    return ""


def _test_rows(report: Mapping[str, Any]) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    for tid, t in report.get("tests", {}).items():
        stat = "∞" if t.get("infinite") else _fmt(t["statistic"], 6)
        rows.append((tid, title(tid), stat, _fmt(t["pvalue"]),
                     "REJECT" if t["reject"] else "not rejected", _test_summary(tid, t)))
    return rows


_LEVEL_COLUMNS = ("m", "dpe", "debiased_l2_ece", "critical_value", "pvalue", "reject")


def _ci_level(report: Mapping[str, Any]) -> float | None:
    """The level of the report's bootstrap intervals, or None when it has none."""
    for m in report.get("metrics", {}).values():
        if "ci" in m:
            return float(m["ci"]["level"])
    return None


def _ci_text(m: Mapping[str, Any]) -> str:
    ci = m.get("ci")
    if not ci or ci.get("low") is None:
        return "–"
    return f"[{format_value(ci['low'], m['unit'])}, {format_value(ci['high'], m['unit'])}]"


def _metric_rows(report: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """id, title, value, (CI when the report has intervals), settings."""
    with_ci = _ci_level(report) is not None
    rows = []
    for mid, m in report.get("metrics", {}).items():
        ci = (_ci_text(m),) if with_ci else ()
        rows.append((mid, title(mid), format_value(m["value"], m["unit"]), *ci,
                     describe_settings(m.get("settings", {}))))
    return rows


def _group_cell(m: Mapping[str, Any]) -> str:
    if m.get("value") is None:
        return "–"
    text = format_value(m["value"], m.get("unit", "fraction"))
    return text + (f" {_ci_text(m)}" if "ci" in m else "")


def _header_line(report: Mapping[str, Any]) -> str:
    inp = report["input"]
    if inp.get("kind") == "multiclass":
        acc = inp.get("accuracy")
        text = (f"{inp['path']}  n={inp['rows_used']:,}  classes={len(inp['classes'])}"
                + (f"  accuracy={acc:.4f}" if acc is not None else ""))
        return text + (f"  dropped={inp['rows_dropped']:,}" if inp.get("rows_dropped") else "")
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
    if "metrics" in report:
        table = Table(show_header=True, header_style="bold")
        table.add_column("id")
        table.add_column("metric")
        table.add_column("value", justify="right")
        level = _ci_level(report)
        if level is not None:
            table.add_column(f"{100 * level:g}% CI", justify="right")
        table.add_column("settings")
        for row in _metric_rows(report):
            table.add_row(*row)
        console.print(table)
    if "tests" in report:
        tt = Table(show_header=True, header_style="bold",
                   title=f"calibration tests at α = {report['settings'].get('alpha')}")
        for c, j in (("id", "left"), ("test", "left"), ("statistic", "right"),
                     ("p-value", "right"), ("verdict", "left"), ("details", "left")):
            tt.add_column(c, justify=j)  # type: ignore[arg-type]
        for row in _test_rows(report):
            tt.add_row(*row)
        console.print(tt)
        levels = report["tests"].get("tcal_adaptive", {}).get("levels")
        if levels:
            lt = Table(title="adaptive T-Cal, per level", show_header=True, header_style="bold")
            for c in _LEVEL_COLUMNS:
                lt.add_column(c, justify="right")
            for lv in levels:
                lt.add_row(*(("yes" if lv[c] else "") if c == "reject" else _fmt(lv[c], 6)
                             for c in _LEVEL_COLUMNS))
            console.print(lt)
    if "variables" in report:
        vt = Table(title="variable-based calibration (ranked by VECE)", show_header=True,
                   header_style="bold")
        for c in ("rank", "variable", "VECE", "VCE(v*)", "v*", "n", "bins", "excluded"):
            vt.add_column(c, justify="left" if c == "variable" else "right")
        for name, v in report["variables"].items():
            vt.add_row(str(v["rank"]), name, _fmt(v["vece"]), _fmt(v["vce_max"]),
                       _fmt(v["v_star"]), f"{v['n']:,}", str(len(v["bins"])),
                       str(v["excluded_missing"]))
        console.print(vt)
        first = next(iter(report["variables"].values()), None)
        if first is not None:
            console.print(f"ECE over qcut bins of the predicted error (the VECE paper's ECE): "
                          f"{_fmt(first['ece_qcut'])}")
    if "groups" in report:
        ids = list(report.get("metrics", {}))
        gt = Table(title=f"by {report['settings'].get('by')}", show_header=True,
                   header_style="bold")
        gt.add_column("group")
        gt.add_column("n", justify="right")
        for mid in ids:
            gt.add_column(mid, justify="right")
        overall = report.get("metrics", {})
        gt.add_row("(all)", f"{report['input']['rows_used']:,}",
                   *(_group_cell(overall[m]) for m in ids))
        for gname, g in report["groups"].items():
            cells = [_group_cell(g["metrics"].get(mid, {})) for mid in ids]
            gt.add_row(gname + (" *" if g["flagged"] else ""), f"{g['n']:,}", *cells)
        console.print(gt)
        if any(g["flagged"] for g in report["groups"].values()):
            console.print(f"* fewer than {report['settings'].get('min_group_size')} rows")
    for note in report.get("notes", []):
        console.print(f"note: {note}")
    for mid in bins_for:
        m = report.get("metrics", {}).get(mid)
        if not m or "bins" not in m:
            continue
        rows = m["bins"]
        cols = list(_TCE_TABLE_COLUMNS) if rows and "rejected" in rows[0] else _bin_columns(rows)
        bt = Table(title=f"bins of {title(mid)} ({describe_settings(m['settings'])})",
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


def render_text_reliability(report: Mapping[str, Any], metric: str, *,
                            width: int | None = None, color: bool | None = None) -> str:
    """A compact reliability diagram in the terminal: per bin, the mean score and the empirical
    probability as bars on the same 0–1 scale (rich, no plotting library needed)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    m = report.get("metrics", {}).get(metric)
    if not m or "bins" not in m:
        return ""
    buf = io.StringIO()
    console = Console(file=buf, width=width or 100, color_system=None if color is False else "auto",
                      force_terminal=bool(color), legacy_windows=False, highlight=False)
    t = Table(title=f"reliability diagram ({title(metric)} bins): "
                    "predicted ▇ vs observed █", show_header=True, header_style="bold")
    for c, j in (("bin", "left"), ("n", "right"), ("predicted / observed", "left"),
                 ("gap", "right")):
        t.add_column(c, justify=j)  # type: ignore[arg-type]
    bar = 40
    for r in m["bins"]:
        if not r["n"]:
            continue
        ps, ob = r["mean_score"], r["mean_label"]
        cell = Text()
        cell.append("▇" * max(1, round(bar * ps)), style="cyan")
        cell.append(f" {ps:.3f}\n")
        cell.append("█" * max(1, round(bar * ob)), style="magenta" if ob < ps else "green")
        cell.append(f" {ob:.3f}")
        t.add_row(f"[{r['lower']:.2f}, {r['upper']:.2f}]", f"{r['n']:,}", cell,
                  f"{ob - ps:+.3f}")
    console.print(t)
    return buf.getvalue()


def render_csv(report: Mapping[str, Any], *, bins_for: Iterable[str] = ()) -> str:
    """CSV: one row per metric; with ``bins_for``, the bin rows of those metrics instead."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if "tests" in report and "metrics" not in report:
        w.writerow(["test", "statistic", "pvalue", "reject", "alpha", "details"])
        for tid, tr in report["tests"].items():
            extra = {k: v for k, v in tr.items()
                     if k not in ("statistic", "pvalue", "reject", "alpha", "levels")}
            w.writerow([tid, "" if tr["statistic"] is None else repr(tr["statistic"]),
                        "" if tr["pvalue"] is None else repr(tr["pvalue"]), tr["reject"],
                        tr["alpha"], json.dumps(extra, sort_keys=True)])
        return buf.getvalue()
    wanted = [m for m in bins_for if "bins" in report["metrics"].get(m, {})]
    if wanted:
        cols = _bin_columns(report["metrics"][wanted[0]]["bins"])
        w.writerow(["metric", *cols])
        for mid in wanted:
            for r in report["metrics"][mid]["bins"]:
                w.writerow([mid, *("" if r.get(c) is None else r.get(c) for c in cols)])
        return buf.getvalue()
    with_ci = _ci_level(report) is not None
    w.writerow(["metric", "value", "unit", "n", *(("ci_low", "ci_high", "ci_level") if with_ci
                                                   else ()), "settings"])
    for mid, m in report["metrics"].items():
        ci = m.get("ci") or {}
        bounds = ["" if ci.get(k) is None else repr(ci[k]) for k in ("low", "high", "level")]
        w.writerow([mid, "" if m["value"] is None else repr(m["value"]), m["unit"], m["n"],
                    *(bounds if with_ci else ()), json.dumps(m["settings"], sort_keys=True)])
    return buf.getvalue()


def render_markdown(report: Mapping[str, Any], *, bins_for: Iterable[str] = ()) -> str:
    """GitHub-flavoured markdown tables."""
    lines = [f"**{_header_line(report)}**", ""]
    if "metrics" in report:
        level = _ci_level(report)
        if level is None:
            lines += ["| id | metric | value | settings |", "|---|---|---:|---|"]
        else:
            lines += [f"| id | metric | value | {100 * level:g}% CI | settings |",
                      "|---|---|---:|---:|---|"]
        for row in _metric_rows(report):
            lines.append("| " + " | ".join(row) + " |")
    if "tests" in report:
        lines += ["| id | test | statistic | p-value | verdict | details |",
                  "|---|---|---:|---:|---|---|"]
        for trow in _test_rows(report):
            lines.append("| " + " | ".join(trow) + " |")
        levels = report["tests"].get("tcal_adaptive", {}).get("levels")
        if levels:
            lines += ["", "| " + " | ".join(_LEVEL_COLUMNS) + " |", "|" + "---:|" * len(_LEVEL_COLUMNS)]
            for lv in levels:
                lines.append("| " + " | ".join(_fmt(lv[c], 6) for c in _LEVEL_COLUMNS) + " |")
    if "variables" in report:
        lines += ["", "| rank | variable | VECE | VCE(v*) | v* | n |", "|---:|---|---:|---:|---:|---:|"]
        for name, v in report["variables"].items():
            lines.append(f"| {v['rank']} | {name} | {_fmt(v['vece'])} | {_fmt(v['vce_max'])} | "
                         f"{_fmt(v['v_star'])} | {v['n']} |")
    if "groups" in report:
        ids = list(report.get("metrics", {}))
        lines += ["", "| group | n | " + " | ".join(ids) + " |", "|---|---:|" + "---:|" * len(ids)]
        for gname, g in report["groups"].items():
            vals = [_fmt(g["metrics"].get(m, {}).get("value")) for m in ids]
            lines.append(f"| {gname}{' *' if g['flagged'] else ''} | {g['n']} | "
                         + " | ".join(vals) + " |")
    for note in report.get("notes", []):
        lines += ["", f"- note: {note}"]
    for mid in bins_for:
        m = report.get("metrics", {}).get(mid)
        if not m or "bins" not in m:
            continue
        cols = _bin_columns(m["bins"])
        lines += ["", f"Bins of {title(mid)} ({describe_settings(m['settings'])})", "",
                  "| " + " | ".join(cols) + " |", "|" + "---:|" * len(cols)]
        for r in m["bins"]:
            lines.append("| " + " | ".join(_cell(r.get(c)) for c in cols) + " |")
    for gate in report.get("gates", []):
        lines += ["", f"- gate `{gate['condition']}`: {'FAILED' if gate['failed'] else 'passed'}"]
    return "\n".join(lines) + "\n"


def render(report: Mapping[str, Any], fmt: str, *, bins_for: Iterable[str] = (),
           color: bool | None = None, width: int | None = None) -> str:
    """Render ``report`` in ``fmt`` (one of :data:`OUTPUT_FORMATS`)."""
    bins_for = list(bins_for)
    if fmt == "json":
        return to_json(report)
    if fmt == "csv":
        return render_csv(report, bins_for=bins_for)
    if fmt == "markdown":
        return render_markdown(report, bins_for=bins_for)
    return render_table(report, bins_for=bins_for, color=color, width=width)


EXTENSIONS = {".json": "json", ".csv": "csv", ".md": "markdown", ".markdown": "markdown",
              ".html": "html", ".htm": "html", ".txt": "table"}


def format_for_path(path: str) -> str:
    """The output format an ``-o`` file name asks for: by its extension (no extension: JSON)."""
    import os

    ext = os.path.splitext(path)[1].lower()
    if not ext:
        return "json"
    if ext not in EXTENSIONS:
        from calcheck.errors import UsageError

        raise UsageError(f"cannot tell the report format from the extension {ext!r} of "
                         f"{path}; use {', '.join(EXTENSIONS)} or give --format")
    return EXTENSIONS[ext]
