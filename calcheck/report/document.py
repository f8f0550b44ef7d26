"""The report as a document: the blocks of text and tables that the PDF lays out (page 1 the
verdict, the metrics with their intervals and the tests; then the groups, variables, notes and
settings).  Plain data — no drawing here (:mod:`calcheck.figures.pdf` draws them).

Each block is a tuple: ``("title", text)``, ``("meta", text)``, ``("verdict", verdict,
text)``, ``("heading", text)``, ``("table", header, rows, right-aligned column indices)`` or
``("text", text)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calcheck.formatting import number, statistic
from calcheck.formatting import pvalue as format_p
from calcheck.formatting import value as format_value
from calcheck.registry import title
from calcheck.report.describe import (
    adjusted_shown,
    ci_text,
    grouping,
    groups_of,
    short_settings,
    test_note,
)
from calcheck.report.text import setting

Block = tuple[Any, ...]
GROUP_METRICS = 4               # metric columns of the groups table (a page is narrow)


def blocks(report: Mapping[str, Any]) -> list[Block]:
    """The report's text content, in reading order."""
    inp = report["input"]
    out: list[Block] = [("title", "Calibration report")]
    meta = (f"{inp.get('path')} · {inp.get('rows_used', 0):,} rows used of "
            f"{inp.get('rows_read', inp.get('rows_used', 0)):,} · calcheck "
            f"{report.get('calcheck_version')}")
    if inp.get("kind") == "multiclass":
        meta += (f" · {len(inp.get('classes', []))} classes, accuracy "
                 f"{number(inp.get('accuracy'))}")
    else:
        meta += f" · prevalence {number(inp.get('prevalence'))}"
    out.append(("meta", meta))
    s = report.get("summary") or {}
    if s.get("verdict"):
        body = s.get("basis", "")
        if s.get("direction"):
            body += ". Direction: " + "; ".join(s["direction"])
        if s.get("where"):
            body += ". Where: " + "; ".join(s["where"])
        out.append(("verdict", s["verdict"], body))
    metrics = report.get("metrics") or {}
    if metrics:
        level = next((m["ci"]["level"] for m in metrics.values() if m.get("ci")), None)
        head = ["metric", "value", *([f"{level:.0%} interval"] if level else []), "bins"]
        rows = [[title(mid), format_value(m["value"], m["unit"]),
                 *([ci_text(m)] if level else []), short_settings(mid, m)]
                for mid, m in metrics.items()]
        out += [("heading", "Metrics"), ("table", head, rows, (1, 2) if level else (1,))]
    tests = report.get("tests") or {}
    if tests:
        adj = adjusted_shown(report)
        rows = [[title(tid), "∞" if t.get("infinite") else statistic(t.get("statistic")),
                 format_p(t.get("pvalue")), *([format_p(t.get("pvalue_adjusted"))] if adj else []),
                 "rejected" if t.get("reject_adjusted", t.get("reject")) else "not rejected",
                 test_note(tid, t)] for tid, t in tests.items()]
        method = ((report.get("summary") or {}).get("family") or {}).get("method", "")
        out += [("heading", f"Calibration tests at α = "
                            f"{report.get('settings', {}).get('alpha')}"),
                ("table", ["test", "statistic", "p-value", *([f"{method} p"] if adj else []),
                           "verdict", "details"], rows, (1, 2, 3) if adj else (1, 2))]
    groups = groups_of(report)
    if groups:
        ids = list(metrics)[:GROUP_METRICS]
        rows = [[("(missing)" if g.get("missing") else str(name))
                 + (" (small)" if g.get("flagged") else ""), f"{g.get('n', 0):,}",
                 *(format_value(g["metrics"].get(mid, {}).get("value"), metrics[mid]["unit"])
                   for mid in ids),
                 "; ".join(f"{title(mid)} {ci_text(g['metrics'][mid])}" for mid in ids
                           if g["metrics"].get(mid, {}).get("ci"))]
                for name, g in groups.items()]
        out += [("heading", f"Groups {grouping(report)}"),
                ("table", ["group", "rows", *(title(mid) for mid in ids), "intervals"], rows,
                 tuple(range(1, 2 + len(ids))))]
    variables = report.get("variables") or {}
    if variables:
        out += [("heading", "Variable-based calibration"),
                ("table", ["variable", "VECE", "VCE(v*)", "v*", "rows"],
                 [[name, number(v["vece"]), number(v["vce_max"]), number(v["v_star"]),
                   f"{v['n']:,}"] for name, v in variables.items()], (1, 2, 3, 4))]
    if report.get("audit"):
        out += audit_blocks(report["audit"])
    if report.get("notes"):
        out.append(("heading", "Notes"))
        out += [("text", "• " + str(n)) for n in report["notes"]]
    out += [("heading", "Settings"),
            ("table", ["setting", "value"], [[k.replace("_", " "), setting(v)]
                                             for k, v in report.get("settings", {}).items()],
             ())]
    return out


AUDIT_HEAD = ("segment", "rows", "predicted", "observed", "ECCE σ", "adjusted p")
AUDIT_ROWS = 10                 # segments in a report's audit section


def audit_rows(segments: list[Mapping[str, Any]]) -> list[list[str]]:
    """The audit table's rows (the columns of :data:`AUDIT_HEAD`)."""
    return [[e["name"], f"{e['n']:,}", number(e["mean_score"], 3), number(e["observed_rate"], 3),
             number(e["ecce_sigma"], 2), format_p(e["pvalue_adjusted"])] for e in segments]


def audit_blocks(audit: Mapping[str, Any]) -> list[Block]:
    """A report's audit section: the verdict, the worst segments, the multicalibration error."""
    st = audit["settings"]
    segments = list(audit["segments"])
    out: list[Block] = [("heading", f"Audit: segments of {', '.join(st['segments'])} (depth "
                                    f"≤ {st['depth']})"),
                        ("text", audit["summary"]["text"]),
                        ("table", list(AUDIT_HEAD), audit_rows(segments[:AUDIT_ROWS]),
                         (1, 2, 3, 4, 5))]
    mc = audit.get("multicalibration") or {}
    if mc.get("mce") is not None:
        out.append(("text", f"Multicalibration error (MCGrad's MCE): {number(mc['mce'], 5)} = "
                            f"{number(mc['mce_sigma'], 2)} σ, in {mc['segment']}."))
    return out
