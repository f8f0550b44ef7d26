"""What every rendering of a report says about its parts, as text: the settings of a metric
in a few words, the rows of the metrics, tests, levels, groups and classes, the header line and
the gates.  Shared by the terminal table, CSV and markdown (:mod:`calcheck.report.render`), the
HTML and PDF documents (:mod:`calcheck.report.html`, :mod:`calcheck.report.document`).  Nothing
here computes a metric or lays out a table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from calcheck.formatting import number, statistic
from calcheck.formatting import pvalue as format_p
from calcheck.formatting import value as format_value
from calcheck.options import DEFAULT_ENGINE
from calcheck.registry import METRICS, title
from calcheck.report.text import clean, setting


def to_json(report: Mapping[str, Any]) -> str:
    """The report as JSON text; NaN/inf are refused (they were turned into null before)."""
    return json.dumps(report, indent=2, allow_nan=False) + "\n"


# ---------------------------------------------------------------------------------------------
# cells

LEVELS_SHOWN = 6


def describe_settings(settings: Mapping[str, Any]) -> str:
    """Every setting of a metric, readably: ``binning uniform, bins 10, norm l1``."""
    return ", ".join(f"{k} {setting(v)}" for k, v in settings.items())


def short_settings(mid: str, m: Mapping[str, Any]) -> str:
    """What a reader needs next to a value: the bins (or bandwidth, smoother, …)."""
    s = m.get("settings", {})
    b = s.get("binning")
    parts = []
    if mid == "smece":
        parts.append(f"σ = {number(m.get('sigma', 0.0))}")
    elif s.get("smoother"):
        parts.append(f"LOESS span {setting(s.get('span'))}" +
                     (" (grouped)" if s.get("approximation") else ""))
    elif s.get("recalibration"):
        parts.append("PAV")
    elif mid == "ece_sweep":
        parts.append(f"{s.get('bins')} equal-mass (sweep)")
    elif b in ("uniform", "quantile"):
        count = s.get("bins", s.get("groups"))
        parts.append(f"{count} {'equal-width' if b == 'uniform' else 'equal-mass'}")
    elif b in ("pava-bc", "pava"):
        name = "PAVA-BC" if b == "pava-bc" else "PAVA"
        nb = s.get("n_bins")
        parts.append(f"{name}, {nb} bins" if nb is not None else f"{name} per class")
    elif b:
        parts.append(setting(b))
    if s.get("view") == "top-label" and not mid.endswith("_top"):
        parts.append("top-label")
    if s.get("compat"):
        parts.append(setting(s["compat"]))
    return ", ".join(parts)


def ci_level(report: Mapping[str, Any]) -> float | None:
    """The level of the report's bootstrap intervals, or None when it has none."""
    for m in report.get("metrics", {}).values():
        if "ci" in m:
            return float(m["ci"]["level"])
    return None


def ci_text(m: Mapping[str, Any]) -> str:
    ci = m.get("ci")
    if not ci or ci.get("low") is None:
        return "–"
    return f"[{format_value(ci['low'], m['unit'])}, {format_value(ci['high'], m['unit'])}]"


def is_context(mid: str) -> bool:
    spec = METRICS.get(mid)
    return spec is not None and spec.unit == "count"


def metric_rows(report: Mapping[str, Any], details: bool) -> list[tuple[str, ...]]:
    """id, title, value, (CI), bins, (settings): the error metrics (counts apart)."""
    with_ci = ci_level(report) is not None
    rows = []
    for mid, m in report.get("metrics", {}).items():
        if is_context(mid):
            continue
        ci = (ci_text(m),) if with_ci else ()
        full = (describe_settings(m.get("settings", {})),) if details else ()
        rows.append((clean(mid), title(mid), format_value(m["value"], m["unit"]), *ci,
                     short_settings(mid, m), *full))
    return rows


def context_lines(report: Mapping[str, Any]) -> list[str]:
    out = []
    for mid, m in report.get("metrics", {}).items():
        if is_context(mid) and m.get("value") is not None:
            n = report["input"].get("rows_used")
            out.append(f"{title(mid)}: {format_value(float(m['value']), 'count')} effectively "
                       "distinct scores"
                       + (f" of {n:,} rows" if n else "") + " (a count, not an error)")
    return out


def common_settings(report: Mapping[str, Any]) -> str:
    """The run's settings that hold for every metric, in one line."""
    s = report.get("settings", {})
    parts = []
    ids = list(report.get("metrics", {}))
    if any(i.startswith("tce") for i in ids):
        parts.append(f"TCE: α = {setting(s.get('alpha'))}, {setting(s.get('test'))} test")
    if s.get("ties"):
        parts.append(f"ties {setting(s.get('ties'))}")
    if s.get("compat"):
        parts.append(f"compat {setting(s['compat'])}")
    if s.get("where"):
        parts.append(f"where {clean(s['where'])}")
    if s.get("engine") and s.get("engine") != DEFAULT_ENGINE:
        parts.append(f"engine {setting(s['engine'])}")
    return "; ".join(parts)


def test_note(tid: str, t: Mapping[str, Any]) -> str:
    if tid == "tcal":
        return (f"m = {t['m']}, debiased l2-ECE {number(t['debiased_l2_ece'])}, "
                f"critical T {number(t['critical_value'])}")
    if tid == "tcal_adaptive":
        rej = t["rejecting_levels"]
        rule = (f"min-P over {t['B']} levels (m ≤ {t.get('max_bins', 2 ** t['B'])}), level "
                f"p ≤ {number(t['level_alpha'])}" if t.get("correction") == "minp" else
                f"B = {t['B']} levels at α/B = {number(t['level_alpha'])}")
        return (f"{rule}; rejecting m: "
                + (", ".join(map(str, rej[:6])) + (" …" if len(rej) > 6 else "") if rej
                   else "none"))
    if tid == "skce":
        sub = f", subsample of {t['settings']['rows_used']:,} rows" \
            if t.get("settings", {}).get("subsample") else ""
        return f"ν {number(t['settings']['bandwidth'])}, all classes{sub}"
    if tid == "hosmer_lemeshow":
        ref = "external" if t.get("df_rule", "external") == "external" else "fitted"
        return f"χ²({t['df']}) ({ref} predictions), {t['groups']} groups"
    if tid == "spiegelhalter":
        z = t.get("statistic") or 0.0
        where = "above" if z > 0 else "below" if z < 0 else "at"
        return f"{t['direction']}: Brier score {where} its expectation under calibration"
    if tid == "cox":
        def ci(name: str) -> str:
            c = t.get(f"{name}_ci")
            return f" [{number(c['low'])}, {number(c['high'])}]" if c else ""
        return (f"intercept {number(t['intercept'])}{ci('intercept')}, "
                f"slope {number(t['slope'])}{ci('slope')}")
    if tid in ("ks", "kuiper"):
        return f"ECCE {number(t['ecce'])}, σ̂ {number(t['sigma'])}"
    if tid == "binomial_discrete":
        return f"V = {t['distinct_values']} values at α/V = {number(t['level_alpha'])}"
    return ""


def _statistic(t: Mapping[str, Any]) -> str:
    if t.get("infinite"):
        return "∞"
    return statistic(t.get("statistic"))


def group_verdict_column(report: Mapping[str, Any]
                         ) -> tuple[str, list[str], list[bool]] | None:
    """The groups' (windows') consistency verdicts of a ``score`` run as a column: its
    header, one cell per row ((all) first: the whole data's), and which reject after the
    family adjustment; None without group verdicts."""
    groups = list(groups_of(report).values())
    if not any(g.get("verdict") for g in groups):
        return None
    s = report.get("summary") or {}
    fam = (report.get("settings") or {}).get("family", "none")
    head = "p (adjusted)" if fam != "none" else "p-value"
    key = "pvalue_adjusted" if fam != "none" else "pvalue"
    whole = s.get("pvalue_adjusted", s.get("pvalue")) if fam != "none" else s.get("pvalue")
    cells = [format_p(whole)]
    flags = [s.get("verdict") == "miscalibrated" and whole is not None
             and whole <= float(report["settings"].get("alpha", 0.05))]
    for g in groups:
        v = g.get("verdict") or {}
        cells.append(format_p(v.get(key)) if v else "–")
        flags.append(bool(v.get("reject_adjusted", v.get("reject"))))
    return head, cells, flags


def group_test_rows(report: Mapping[str, Any], adjusted: bool) -> list[tuple[str, ...]]:
    """group (or window), n, test, p-value, (adjusted p-value), verdict: one row per test of
    each ``--by`` group or ``--time`` window of a ``test`` run."""
    rows: list[tuple[str, ...]] = []
    for gname, g in groups_of(report).items():
        name = clean(gname) + (" *" if g["flagged"] else "")
        if not g.get("tests"):
            rows.append((name, f"{g['n']:,}", "–", "–", *(("–",) if adjusted else ()), "–"))
        for tid, t in (g.get("tests") or {}).items():
            rows.append((name, f"{g['n']:,}", title(tid), format_p(t.get("pvalue")),
                         *((format_p(t.get("pvalue_adjusted")),) if adjusted else ()),
                         "REJECT" if t.get("reject_adjusted", t["reject"]) else "not rejected"))
    return rows


def adjusted_shown(report: Mapping[str, Any]) -> bool:
    """Whether the tests' p-values were adjusted for their family (a column of its own)."""
    fam = (report.get("summary") or {}).get("family") or {}
    return bool(fam.get("method", "none") != "none" and fam.get("size", 0) > 1)


def test_rows(tests: Mapping[str, Any], adjusted: bool) -> list[tuple[str, ...]]:
    """id, title, statistic, p-value, (adjusted p-value), verdict, details: the verdict after
    the family adjustment when there is one."""
    return [(clean(tid), title(tid), _statistic(t), format_p(t.get("pvalue")),
             *((format_p(t.get("pvalue_adjusted")),) if adjusted else ()),
             "REJECT" if t.get("reject_adjusted", t["reject"]) else "not rejected",
             test_note(tid, t))
            for tid, t in tests.items()]


LEVEL_COLUMNS = ("m", "dpe", "debiased_l2_ece", "critical_value", "pvalue", "reject")


def shown_levels(levels: list[Mapping[str, Any]], details: bool) -> tuple[list[Any], int]:
    """The per-level rows a reader needs: up to the most significant level (at least the
    first six), all with ``details``; and how many are left out."""
    if details or len(levels) <= LEVELS_SHOWN:
        return list(levels), 0
    best = min(range(len(levels)), key=lambda i: levels[i]["pvalue"])
    last = max(best + 1, LEVELS_SHOWN)
    rejecting = [i for i, lv in enumerate(levels) if lv["reject"]]
    if rejecting:
        last = max(last, rejecting[-1] + 1)
    return list(levels[:last]), len(levels) - last


def level_cells(lv: Mapping[str, Any]) -> tuple[str, ...]:
    return (str(lv["m"]), number(lv["dpe"], 6), number(lv["debiased_l2_ece"], 6),
            number(lv["critical_value"], 6), format_p(lv["pvalue"]),
            "yes" if lv["reject"] else "")


def groups_of(report: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``--by`` groups, or the ``--time`` windows keyed by their start."""
    if report.get("windows") is not None:
        return {w["start"]: w for w in report["windows"]}
    return report.get("groups") or {}


def grouping(report: Mapping[str, Any]) -> str:
    st = report["settings"]
    if report.get("windows") is not None:
        return f"per {clean(st.get('window'))} window of {clean(st.get('time'))} ({st.get('tz')})"
    return f"by {clean(st.get('by'))}"


def group_cell(m: Mapping[str, Any]) -> str:
    if m.get("value") is None:
        return "–"
    text = format_value(m["value"], m.get("unit", "fraction"))
    return text + (f" {ci_text(m)}" if "ci" in m else "")


def header_line(report: Mapping[str, Any]) -> str:
    inp = report["input"]
    path = clean(inp.get("path"))
    if inp.get("kind") == "multiclass":
        acc = inp.get("accuracy")
        text = (f"{path}  n={inp['rows_used']:,}  classes={len(inp['classes'])}"
                + (f"  accuracy={number(acc)}" if acc is not None else ""))
    else:
        prev = inp.get("prevalence")
        text = (f"{path}  n={inp['rows_used']:,}  positives={inp['positives']:,}  "
                f"prevalence={number(prev)}" if prev is not None else path)
    if inp.get("rows_dropped"):
        text += f"  dropped={inp['rows_dropped']:,}"
    weights = weights_text(inp)
    return text + (f"\n{weights}" if weights else "")


def weights_text(inp: Mapping[str, Any]) -> str | None:
    """What ``--weight`` or ``--count`` did, in one line (None without them)."""
    w = inp.get("weights")
    if not w:
        return None
    rate = w.get("weighted_prevalence", w.get("weighted_accuracy"))
    what = "prevalence" if "weighted_prevalence" in w else "accuracy"
    col = clean(w.get("column"))
    if w["kind"] == "count":
        return (f"aggregated: {col} counts, n = {w['expanded_rows']:,} rows expanded; "
                f"{what} {number(rate)}")
    cw = w.get("class_weights")
    classes = (f"; class weights (negatives {cw['negative']:g}, positives "
               f"{cw['positive']:g})" if cw else "")
    return (f"weighted by {col}: Σw = {number(w['sum'])}, effective n = (Σw)²/Σw² = "
            f"{number(w['effective_n'])}; weighted {what} {number(rate)}{classes}")


_BIN_COLUMNS = ("bin", "lower", "upper", "n", "positives", "mean_score", "mean_label", "gap")
TCE_TABLE_COLUMNS = ("bin", "lower", "upper", "n", "mean_label", "min_score", "q1_score",
                      "median_score", "q3_score", "max_score", "rejected", "rejected_pct")


def bin_columns(rows: list[dict[str, Any]]) -> list[str]:
    extra = [k for k in (rows[0] if rows else {}) if k not in _BIN_COLUMNS]
    return [*_BIN_COLUMNS, *extra]


def cell_text(v: Any) -> str:
    if isinstance(v, float) and v != 0.0 and abs(v) < 1e-3:
        return f"{v:.3g}"
    return number(v) if isinstance(v, float) and abs(v) < 1e4 else \
        (f"{v:.4g}" if isinstance(v, float) else number(v) if isinstance(v, int) else clean(v))


def gate_line(gate: Mapping[str, Any]) -> tuple[str, bool]:
    where = f" in group {clean(gate['group'])}" if gate.get("group") is not None else ""
    state = "FAILED" if gate["failed"] else "passed"
    return f"gate {clean(gate['condition'])}{where}: {state} (value {cell_text(gate['value'])})", \
        bool(gate["failed"])


# ---------------------------------------------------------------------------------------------
# table


def per_class_rows(report: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The per-class view: one row per class, one column per classwise metric."""
    metrics = report.get("metrics", {})
    ids = [m for m, e in metrics.items() if isinstance(e.get("per_class"), dict)
           and METRICS.get(m) is not None and METRICS[m].kind == "multiclass"]
    if not ids:
        return [], []
    names = list(metrics[ids[0]]["per_class"])
    rows = []
    for name in names:
        row = [clean(name)]
        for mid in ids:
            c = metrics[mid]["per_class"].get(name, {})
            row.append(format_value(c.get("error"), metrics[mid]["unit"]))
        rows.append(row)
    return ["class", *ids], rows
