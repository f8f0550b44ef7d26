"""Renderings of a report: ``table`` (rich), ``json``, ``csv``, ``markdown`` and the terminal
reliability diagram.  Nothing here computes a metric, reads a file or exits.

Every rendering leads with the report's one-line summary.  The table fits the width it is
given (the terminal's, or ``COLUMNS``): one row per metric with its value and a short note on
its bins; ``details=True`` adds the full settings and every level of adaptive T-Cal.  Off a
terminal (``plain=True``) the table is plain ASCII.  Notes are not part of any rendering —
they go to stderr.  Text from the data is cleaned of control characters and never read as
markup (:mod:`calcheck.report.text`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from typing import Any

from calcheck.formatting import number
from calcheck.formatting import pvalue as format_p
from calcheck.registry import title
from calcheck.report.describe import (
    LEVEL_COLUMNS,
    TCE_TABLE_COLUMNS,
    adjusted_shown,
    bin_columns,
    cell_text,
    ci_level,
    common_settings,
    context_lines,
    gate_line,
    group_cell,
    group_test_rows,
    group_verdict_column,
    grouping,
    groups_of,
    header_line,
    is_context,
    level_cells,
    metric_rows,
    per_class_rows,
    short_settings,
    shown_levels,
    test_rows,
)
from calcheck.report.text import ascii, clean, markdown

OUTPUT_FORMATS = ("table", "json", "csv", "markdown")


def to_json(report: Mapping[str, Any]) -> str:
    """The report as JSON text; NaN/inf are refused (they were turned into null before)."""
    return json.dumps(report, indent=2, allow_nan=False) + "\n"


# ---------------------------------------------------------------------------------------------
# cells


def _plain(cell: Any) -> str:
    return cell.plain if hasattr(cell, "plain") else str(cell)


def _fit(t: Any, width: int) -> bool:
    """Set the columns' widths so that the table fits ``width`` with no word broken: each
    column gets at least its longest word (a wrapping column) or its longest line (the
    others); the room left first makes whole the columns that lack least, and what remains
    goes to the others in proportion to what they lack.  False
    when even that is too wide (the caller then stacks the rows)."""
    lo, hi = [], []
    for col in t.columns:
        texts = [_plain(col.header), *(_plain(c) for c in col.cells)]
        longest = max((len(line) for x in texts for line in x.splitlines() or [""]), default=0)
        word = max((len(w) for x in texts for w in x.split()), default=0)
        lo.append(longest if col.no_wrap else word)
        hi.append(longest)
    frame = 1 + 3 * len(lo)
    if sum(lo) + frame > width:
        return False
    if sum(hi) + frame <= width:
        return True
    room, lack = width - frame - sum(lo), [h - m for h, m in zip(hi, lo)]
    widths = list(lo)
    for j in sorted(range(len(lack)), key=lambda j: lack[j]):   # whole columns first,
        if 0 < lack[j] <= room:                                  # the least lacking first
            widths[j], room, lack[j] = hi[j], room - lack[j], 0
    total = sum(lack) or 1
    for col, w, need in zip(t.columns, widths, lack):
        col.width = w + room * need // total
    return True


def _stacked(t: Any, width: int) -> list[str]:
    """A table as text blocks: the title, then per row its first cell and ``column: value``
    lines, wrapped between words (a word longer than the width is kept whole)."""
    import textwrap

    def wrap(text: str, indent: str) -> list[str]:
        return textwrap.wrap(text, width=max(width, 20), initial_indent=indent,
                             subsequent_indent=indent + "  ", break_long_words=False,
                             break_on_hyphens=False) or [indent.rstrip()]

    out: list[str] = []
    if t.title:
        out += wrap(_plain(t.title), "")
    cols = t.columns
    cells = [list(c.cells) for c in cols]
    for i in range(t.row_count):
        out += wrap(" ".join(_plain(cells[0][i]).split()), "- ")
        for j in range(1, len(cols)):
            value = " ".join(_plain(cells[j][i]).split())
            if value:
                out += wrap(f"{' '.join(_plain(cols[j].header).split())}: {value}", "    ")
    return out


def print_fitted(console: Any, t: Any, tx: Any) -> None:
    """Print table ``t`` on ``console``, or — when it cannot fit the width without breaking a
    word — each row as a block of ``column: value`` lines wrapped between words (``tx``
    makes the console's text)."""
    if _fit(t, console.width):
        console.print(t)
        return
    for line in _stacked(t, console.width):
        console.print(tx(line), soft_wrap=True)


class _Printer:
    """The rich console of one table rendering and its helpers: text (ASCII when ``plain``,
    styled only with ``color``), tables in the chosen frame, columns, lines and fitted tables.
    :func:`render_table` prints each section with it."""

    def __init__(self, width: int | None, color: bool | None, plain: bool) -> None:
        from rich import box
        from rich.console import Console

        self.buf = io.StringIO()
        self.console = Console(file=self.buf, width=width or 100,
                               color_system="standard" if color else None,
                               force_terminal=bool(color), no_color=not color,
                               legacy_windows=False, highlight=False, markup=False,
                               emoji=False)
        self.frame = box.ASCII if plain else box.HEAVY_HEAD
        self.color, self.plain = color, plain

    def tx(self, text: str, style: str = "") -> Any:
        from rich.text import Text

        return Text(ascii(text) if self.plain else text, style=style if self.color else "")

    def table(self, title_: str | None = None) -> Any:
        from rich.table import Table

        return Table(show_header=True, header_style="bold" if self.color else "",
                     box=self.frame, title=self.tx(title_) if title_ else None)

    def column(self, t: Any, name: str, justify: str = "left", wrap: bool = False) -> None:
        t.add_column(self.tx(name), justify=justify, no_wrap=not wrap,
                     overflow="fold" if wrap else "ellipsis")

    def out(self, text: str, style: str = "") -> None:
        self.console.print(self.tx(text, style))

    def show(self, t: Any) -> None:
        print_fitted(self.console, t, self.tx)


def render_table(report: Mapping[str, Any], *, bins_for: Iterable[str] = (),
                 width: int | None = None, color: bool | None = None, plain: bool = False,
                 details: bool = False, per_class: bool = False) -> str:
    """Rich tables as text: header, summary, metrics, tests, variables, groups, bins, gates."""
    p = _Printer(width, color, plain)
    p.out(header_line(report))
    summary = report.get("summary") or {}
    if summary.get("text"):
        verdict = summary.get("verdict", "")
        style = ("bold red" if verdict == "miscalibrated" else "bold yellow"
                 if verdict == "inconclusive" else "bold green" if verdict else "")
        p.out(clean(summary["text"]), style)
    if report.get("metrics"):
        _metrics_table(p, report, details)
    if per_class:
        _per_class_table(p, report)
    if report.get("tests"):
        _tests_tables(p, report, details)
    if report.get("variables"):
        _variables_table(p, report)
    if groups_of(report) and report.get("command") == "test":
        _group_tests_table(p, report)
    elif groups_of(report):
        _groups_tables(p, report)
    for mid in bins_for:
        m = report.get("metrics", {}).get(mid)
        if not m or "bins" not in m:
            continue
        brows = m["bins"]
        cols = list(TCE_TABLE_COLUMNS) if brows and "rejected" in brows[0] \
            else bin_columns(brows)
        bt = p.table(f"bins of {title(mid)} ({short_settings(mid, m)})")
        for c in cols:
            p.column(bt, c, "right")
        for r in brows:
            bt.add_row(*(p.tx(cell_text(r.get(c))) for c in cols))
        p.show(bt)
    for gate in report.get("gates", []):
        line, bad = gate_line(gate)
        p.out(line, "bold red" if bad else "green")
    return p.buf.getvalue()


def _metrics_table(p: _Printer, report: Mapping[str, Any], details: bool) -> None:
    rows = metric_rows(report, details)
    if rows:
        t = p.table()
        p.column(t, "id")
        p.column(t, "metric", wrap=True)
        p.column(t, "value", "right")
        level = ci_level(report)
        if level is not None:            # "[low, high]" may wrap after its comma
            p.column(t, f"{100 * level:g}% CI", "right", wrap=True)
        p.column(t, "bins", wrap=True)
        if details:
            p.column(t, "settings", wrap=True)
        failed = {g["metric"] for g in report.get("gates", []) if g["failed"]
                  and g.get("group") is None}
        for row in rows:
            cells = [p.tx(c) for c in row]
            if row[0] in failed and p.color:
                cells[2].stylize("bold red")
            t.add_row(*cells)
        p.show(t)
    for line in context_lines(report):
        p.out(line)
    common = common_settings(report)
    if common:
        p.out(f"settings: {common}" + ("" if details else " (--details for all)"), "dim")


def _per_class_table(p: _Printer, report: Mapping[str, Any]) -> None:
    head, prow = per_class_rows(report)
    if prow:
        pt = p.table("per class (one-vs-rest)")
        for i, c in enumerate(head):
            p.column(pt, c, "left" if i == 0 else "right", wrap=i == 0)
        for r in prow:
            pt.add_row(*(p.tx(c) for c in r))
        p.show(pt)


def _family(report: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether the tests' adjusted p-values are shown, and the family's summary entry."""
    return adjusted_shown(report), (report.get("summary") or {}).get("family") or {}


def _tests_tables(p: _Printer, report: Mapping[str, Any], details: bool) -> None:
    adjusted, fam = _family(report)
    how = (f"{fam['method']} over {fam['size']} tests" if adjusted else
           "no family adjustment" if fam.get("method") == "none" else "")
    tt = p.table(f"calibration tests at α = {report['settings'].get('alpha')}"
                 + (f" ({how})" if how else ""))
    if details:
        p.column(tt, "id")
    p.column(tt, "test", wrap=True)
    p.column(tt, "statistic", "right")
    p.column(tt, "p-value", "right")
    if adjusted:
        p.column(tt, f"{fam['method']} p", "right")
    p.column(tt, "verdict")
    p.column(tt, "details", wrap=True)
    for row in test_rows(report["tests"], adjusted):
        cells = [p.tx(c) for c in (row if details else row[1:])]
        if row[-2] == "REJECT" and p.color:
            cells[-2].stylize("bold red")
        tt.add_row(*cells)
    p.show(tt)
    levels = report["tests"].get("tcal_adaptive", {}).get("levels")
    if levels:
        shown, left = shown_levels(levels, details)
        lt = p.table("adaptive T-Cal, per level")
        for c in LEVEL_COLUMNS:
            p.column(lt, c, "right")
        for lv in shown:
            lt.add_row(*(p.tx(c) for c in level_cells(lv)))
        p.show(lt)
        if left:
            p.out(f"{left} finer levels not shown (--details shows all)", "dim")


def _variables_table(p: _Printer, report: Mapping[str, Any]) -> None:
    vt = p.table("variable-based calibration (ranked by VECE)")
    for c in ("rank", "variable", "VECE", "VCE(v*)", "v*", "n", "bins", "excluded"):
        p.column(vt, c, "left" if c == "variable" else "right", wrap=c == "variable")
    for name, v in report["variables"].items():
        vt.add_row(*(p.tx(c) for c in (str(v["rank"]), clean(name), number(v["vece"]),
                                       number(v["vce_max"]), number(v["v_star"]),
                                       f"{v['n']:,}", str(len(v["bins"])),
                                       str(v["excluded_missing"]))))
    p.show(vt)
    first = next(iter(report["variables"].values()), None)
    if first is not None:
        p.out("ECE over qcut bins of the predicted error (the VECE paper's ECE): "
              f"{number(first['ece_qcut'])}")


def _group_tests_table(p: _Printer, report: Mapping[str, Any]) -> None:
    adjusted, fam = _family(report)
    gt = p.table(f"tests {grouping(report)}")
    p.column(gt, "window" if report.get("windows") is not None else "group", wrap=True)
    p.column(gt, "n", "right")
    p.column(gt, "test", wrap=True)
    p.column(gt, "p-value", "right")
    if adjusted:
        p.column(gt, f"{fam['method']} p", "right")
    p.column(gt, "verdict")
    for row in group_test_rows(report, adjusted):
        cells = [p.tx(c) for c in row]
        if row[-1] == "REJECT" and p.color:
            cells[-1].stylize("bold red")
        gt.add_row(*cells)
    p.show(gt)
    if any(g["flagged"] for g in groups_of(report).values()):
        p.out(f"* fewer than {report['settings'].get('min_group_size')} rows: not tested")


def _groups_tables(p: _Printer, report: Mapping[str, Any]) -> None:
    """The metrics of every ``--by`` group (or ``--time`` window) beside the whole data's;
    metric columns never wrap: when they do not all fit, the table is cut into several, each
    repeating the group, n (and verdict) columns."""
    groups = groups_of(report)
    ids = [m for m in report.get("metrics", {}) if not is_context(m)]
    overall = report.get("metrics", {})
    failed = {(g.get("group"), g["metric"]) for g in report.get("gates", []) if g["failed"]}
    names = ["(all)", *(clean(k) + (" *" if g["flagged"] else "") for k, g in groups.items())]
    counts = [f"{report['input']['rows_used']:,}", *(f"{g['n']:,}" for g in groups.values())]
    cells_of = {mid: [group_cell(overall[mid]),
                      *(group_cell(g["metrics"].get(mid, {})) for g in groups.values())]
                for mid in ids}
    verdict_col = group_verdict_column(report)
    name_w = min(24, max(map(len, names)))
    fixed = name_w + max(map(len, counts)) + 7 + \
        (max(len(verdict_col[0]), *map(len, verdict_col[1])) + 3 if verdict_col else 0)
    chunks: list[list[str]] = [[]]
    used = fixed
    for mid in ids:
        w = max(len(clean(mid)), *map(len, cells_of[mid])) + 3
        if chunks[-1] and used + w > p.console.width:
            chunks.append([])
            used = fixed
        chunks[-1].append(mid)
        used += w
    for part, chunk in enumerate(chunks, 1):
        what = f" ({part}/{len(chunks)})" if len(chunks) > 1 else ""
        gt = p.table(f"{grouping(report)}{what}")
        p.column(gt, "window" if report.get("windows") is not None else "group", wrap=True)
        p.column(gt, "n", "right")
        if verdict_col:
            p.column(gt, verdict_col[0], "right")
        for mid in chunk:
            p.column(gt, clean(mid), "right")
        for i, gname in enumerate(["(all)", *groups]):
            cells = [p.tx(names[i]), p.tx(counts[i])]
            if verdict_col:
                cells.append(p.tx(verdict_col[1][i], "bold red" if verdict_col[2][i] else ""))
            for mid in chunk:
                cell = p.tx(cells_of[mid][i])
                if i and (gname, mid) in failed and p.color:
                    cell.stylize("bold red")
                cells.append(cell)
            gt.add_row(*cells)
        p.show(gt)
    if any(g["flagged"] for g in groups.values()):
        p.out(f"* fewer than {report['settings'].get('min_group_size')} rows")


def render_text_reliability(report: Mapping[str, Any], metric: str, *,
                            width: int | None = None, color: bool | None = None,
                            plain: bool = False) -> str:
    """A compact reliability diagram in the terminal: per bin, the mean score and the empirical
    probability as bars on the same 0–1 scale (rich, no plotting library needed)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    m = report.get("metrics", {}).get(metric)
    if not m or "bins" not in m:
        return ""
    buf = io.StringIO()
    console = Console(file=buf, width=width or 100, color_system="standard" if color else None,
                      force_terminal=bool(color), no_color=not color, legacy_windows=False,
                      highlight=False, markup=False)
    t = Table(title=f"reliability diagram ({title(metric)} bins): predicted ▇ vs observed █",
              show_header=True, header_style="bold" if color else "",
              box=box.ASCII if plain else box.HEAVY_HEAD)
    for c, j in (("bin", "left"), ("n", "right"), ("predicted / observed", "left"),
                 ("gap", "right")):
        t.add_column(c, justify=j)  # type: ignore[arg-type]
    bar = max(8, min(40, console.width - 46))     # the bars shrink with the terminal
    for r in m["bins"]:
        if not r["n"]:
            continue
        ps, ob = r["mean_score"], r["mean_label"]
        cell = Text()
        cell.append("▇" * max(1, round(bar * ps)), style="cyan" if color else "")
        cell.append(f" {ps:.3f}\n")
        cell.append("█" * max(1, round(bar * ob)),
                    style=("magenta" if ob < ps else "green") if color else "")
        cell.append(f" {ob:.3f}")
        t.add_row(Text(f"[{r['lower']:.2f}, {r['upper']:.2f}]"), Text(f"{r['n']:,}"), cell,
                  Text(f"{ob - ps:+.3f}"))
    console.print(t)
    text = buf.getvalue()
    return ascii(text) if plain else text     # bars and numbers only: widths are unchanged


# ---------------------------------------------------------------------------------------------
# csv: flat, one column per detail


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    """Scalars under ``prefix``; dicts as ``prefix.key``; lists of scalars joined by ``;``
    (lists of tables are rows of their own, elsewhere)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, (list, tuple)):
        if all(not isinstance(x, (dict, list, tuple)) for x in value):
            out[prefix] = ";".join("" if x is None else str(x) for x in value)
    else:
        out[prefix] = value


def _metric_record(mid: str, m: Mapping[str, Any], **keys: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {**keys, "metric": mid, "value": m.get("value"),
                           "unit": m.get("unit"), "n": m.get("n")}
    ci = m.get("ci")
    if ci:
        rec.update({"ci_low": ci.get("low"), "ci_high": ci.get("high"),
                    "ci_level": ci.get("level")})
    _flatten("settings", m.get("settings", {}), rec)
    extra = {k: v for k, v in m.items() if k not in ("value", "unit", "n", "settings", "bins",
                                                     "ci")}
    _flatten("", extra, rec)
    return rec


def _write_rows(records: list[dict[str, Any]]) -> str:
    columns: list[str] = []
    for r in records:
        for k in r:
            if k not in columns:
                columns.append(k)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in records:
        w.writerow(["" if r.get(c) is None else _csv_value(r.get(c)) for c in columns])
    return buf.getvalue()


def _csv_value(v: Any) -> Any:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return clean(v)
    return v


def render_csv(report: Mapping[str, Any], *, bins_for: Iterable[str] = ()) -> str:
    """Flat CSV, one column per detail.  ``score``: one row per metric, then per (group,
    metric) and per (variable, result); with ``bins_for``, the bin rows of those metrics
    instead.  ``test``: one row per test, then one per level of adaptive T-Cal."""
    metrics = report.get("metrics") or {}
    if report.get("tests") and not metrics:
        records = []
        for tid, t in report["tests"].items():
            rec: dict[str, Any] = {"test": tid, "statistic": t.get("statistic"),
                                   "pvalue": t.get("pvalue"),
                                   "pvalue_text": format_p(t.get("pvalue")),
                                   "reject": t.get("reject"), "alpha": t.get("alpha")}
            _flatten("", {k: v for k, v in t.items() if k not in rec and k != "levels"}, rec)
            records.append(rec)
        for lv in report["tests"].get("tcal_adaptive", {}).get("levels", []):
            records.append({"test": "tcal_adaptive.level", **lv,
                            "pvalue_text": format_p(lv["pvalue"])})
        return _write_rows(records)
    wanted = [m for m in bins_for if "bins" in metrics.get(m, {})]
    if wanted:
        records = [{"metric": mid, **r} for mid in wanted for r in metrics[mid]["bins"]]
        return _write_rows(records)
    records = [_metric_record(mid, m) for mid, m in metrics.items()]
    for w in report.get("windows") or []:
        for mid, m in w.get("metrics", {}).items():
            records.append(_metric_record(mid, m, window_start=w["start"], window_end=w["end"],
                                          window_n=w["n"]))
        if not w["n"]:
            records.append({"window_start": w["start"], "window_end": w["end"], "window_n": 0})
    for gname, g in (report.get("groups") or {}).items():
        for mid, m in g.get("metrics", {}).items():
            records.append(_metric_record(mid, m, group=gname, group_n=g["n"],
                                          group_flagged=g["flagged"]))
        for mid, err in (g.get("errors") or {}).items():
            records.append({"group": gname, "metric": mid, "error": err})
    for name, v in (report.get("variables") or {}).items():
        for key in ("vece", "vce_max", "ece_qcut"):
            rec = {"variable": name, "metric": key, "value": v.get(key), "n": v.get("n"),
                   "rank": v.get("rank")}
            if key == "vce_max":
                rec["v_star"] = v.get("v_star")
            records.append(rec)
    for gate in report.get("gates") or []:
        records.append({"gate": gate["condition"], "metric": gate["metric"],
                        "group": gate.get("group"), "value": gate["value"],
                        "failed": gate["failed"]})
    return _write_rows(records)


# ---------------------------------------------------------------------------------------------
# markdown


def _md_row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(markdown(c) for c in cells) + " |"


def render_markdown(report: Mapping[str, Any], *, bins_for: Iterable[str] = (),
                    details: bool = False, per_class: bool = False) -> str:
    """GitHub-flavoured markdown: the summary, then tables (every cell escaped)."""
    lines = [f"**{markdown(line)}**" for line in header_line(report).splitlines()] + [""]
    summary = report.get("summary") or {}
    if summary.get("text"):
        lines += [f"**Summary:** {markdown(summary['text'])}", ""]
    if report.get("metrics"):
        level = ci_level(report)
        head = ["id", "metric", "value", *([f"{100 * level:g}% CI"] if level else []), "bins",
                *(["settings"] if details else [])]
        lines += [_md_row(head), "|" + "|".join("---:" if h in ("value",) or h.endswith("CI")
                                                else "---" for h in head) + "|"]
        lines += [_md_row(row) for row in metric_rows(report, details)]
        lines += [f"\n{markdown(line)}" for line in context_lines(report)]
    if per_class:
        head, prow = per_class_rows(report)
        if prow:
            lines += ["", _md_row(head), "|---|" + "---:|" * (len(head) - 1)]
            lines += [_md_row(r) for r in prow]
    if report.get("tests"):
        adj = adjusted_shown(report)
        method = ((report.get("summary") or {}).get("family") or {}).get("method", "")
        lines += ["", _md_row(["id", "test", "statistic", "p-value",
                               *([f"{method} p"] if adj else []), "verdict", "details"]),
                  "|---|---|---:|---:|" + ("---:|" if adj else "") + "---|---|"]
        lines += [_md_row(row) for row in test_rows(report["tests"], adj)]
        levels = report["tests"].get("tcal_adaptive", {}).get("levels")
        if levels:
            shown, left = shown_levels(levels, details)
            lines += ["", _md_row(LEVEL_COLUMNS), "|" + "---:|" * len(LEVEL_COLUMNS)]
            lines += [_md_row(level_cells(lv)) for lv in shown]
            if left:
                lines += ["", f"{left} finer levels not shown (--details shows all)"]
    if report.get("variables"):
        lines += ["", _md_row(["rank", "variable", "VECE", "VCE(v*)", "v*", "n"]),
                  "|---:|---|---:|---:|---:|---:|"]
        for name, v in report["variables"].items():
            lines.append(_md_row([str(v["rank"]), name, number(v["vece"]), number(v["vce_max"]),
                                  number(v["v_star"]), f"{v['n']:,}"]))
    if groups_of(report) and report.get("command") == "test":
        adj = adjusted_shown(report)
        lines += ["", _md_row(["group", "n", "test", "p-value", *(["adjusted p"] if adj else []),
                               "verdict"]), "|---|---:|---|---:|" + ("---:|" if adj else "")
                  + "---|"]
        lines += [_md_row(r) for r in group_test_rows(report, adj)]
    elif groups_of(report):
        ids = [m for m in report.get("metrics", {}) if not is_context(m)]
        lines += ["", _md_row(["group", "n", *ids]), "|---|---:|" + "---:|" * len(ids)]
        for gname, g in groups_of(report).items():
            lines.append(_md_row([gname + (" *" if g["flagged"] else ""), f"{g['n']:,}",
                                  *(group_cell(g["metrics"].get(m, {})) for m in ids)]))
    for mid in bins_for:
        m = report.get("metrics", {}).get(mid)
        if not m or "bins" not in m:
            continue
        cols = bin_columns(m["bins"])
        lines += ["", f"Bins of {markdown(title(mid))} ({markdown(short_settings(mid, m))})", "",
                  _md_row(cols), "|" + "---:|" * len(cols)]
        lines += [_md_row(cell_text(r.get(c)) for c in cols) for r in m["bins"]]
    for gate in report.get("gates", []):
        lines += ["", f"- {markdown(gate_line(gate)[0])}"]
    return "\n".join(lines) + "\n"


def render(report: Mapping[str, Any], fmt: str, *, bins_for: Iterable[str] = (),
           color: bool | None = None, width: int | None = None, plain: bool = False,
           details: bool = False, per_class: bool = False) -> str:
    """Render ``report`` in ``fmt`` (one of :data:`OUTPUT_FORMATS`)."""
    bins_for = list(bins_for)
    if fmt == "json":
        return to_json(report)
    if fmt == "csv":
        return render_csv(report, bins_for=bins_for)
    if fmt == "markdown":
        return render_markdown(report, bins_for=bins_for, details=details, per_class=per_class)
    return render_table(report, bins_for=bins_for, color=color, width=width, plain=plain,
                        details=details, per_class=per_class)


EXTENSIONS = {".json": "json", ".csv": "csv", ".md": "markdown", ".markdown": "markdown",
              ".html": "html", ".htm": "html", ".txt": "table"}


def format_for_path(path: str) -> str:
    """The output format an ``-o`` file name asks for, by its extension; a name without one
    (or with another) is a :class:`UsageError` (give ``--format``)."""
    import os

    from calcheck.errors import UsageError

    ext = os.path.splitext(path)[1].lower()
    if not ext:
        raise UsageError(f"cannot tell the report format of {path}: the name has no extension; "
                         f"use {', '.join(EXTENSIONS)} or give --format")
    if ext not in EXTENSIONS:
        raise UsageError(f"cannot tell the report format from the extension {ext!r} of "
                         f"{path}; use {', '.join(EXTENSIONS)} or give --format")
    return EXTENSIONS[ext]
