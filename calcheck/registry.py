"""The registry: every metric and test calcheck computes, described once.

Each :class:`MetricSpec` says what a metric is (id, title, unit, kind), how it is binned, whether
it belongs to the default set, how the engines compute it and whether ``--ci`` applies; each
:class:`TestSpec` does the same for a calibration test.  Every id list in calcheck — the CLI's
help text, the report's titles and units, the engines' capability checks and the tests'
parametrisation — derives from :data:`METRICS` and :data:`TESTS`.

Adding a metric is its kernel (a function ``kernel(data, options) -> MetricResult``, named
here by its import path so that this module stays free of numpy) plus one entry below, plus a
stream state if it streams.  Metric names follow scikit-learn's rule: every metric is an
*error* (lower is better) unless ``error=False`` (the probabilistic count is a count).

Engines (the ``stream`` field):

* ``"grid"`` — from the streaming engines' one-pass grid state (fixed bin edges, sums);
* ``"positional"`` — equal-mass or PAVA bins: an exact rank search and a row pass;
* ``"classwise"`` — multiclass (class, bin) sums in one pass (SCE);
* ``"classwise_positional"`` — a rank search per class (classwise ACE, TACE, TCE);
* ``None`` — in-memory engine only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

BINARY, MULTICLASS, VARIABLE = "binary", "multiclass", "variable"
UNITS = ("fraction", "percent", "nats", "count")


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A metric: what it is and which engines compute it.

    Attributes
    ----------
    id : str
        The metric id (``-m ID``, ``.metrics.ID`` in the JSON report).
    title : str
        Human name in tables and figures.
    unit : {"fraction", "percent", "nats", "count"}
        Unit of the value.
    kind : {"binary", "multiclass", "variable"}
        ``binary`` metrics take (score, label) and run on the top-label view of multiclass
        input; ``multiclass`` ones need the class probabilities; ``variable`` ones are the
        per-variable results of ``--var`` (not selectable with ``-m``).
    summary : str
        One line for help texts and docs.
    binned : bool
        Has a bin table (``--bins-table``).
    default : bool
        In the default set of its input kind.
    kernel : str
        ``"module:function"`` of the in-memory kernel ``f(data, options) -> MetricResult``
        (data: :class:`~calcheck.metrics.Prepared` or ``MulticlassPrepared``); empty for the
        top-label ids, which run their ``top_of`` metric on the top-label view.
    stream : str or None
        How the streaming engines compute it (module docstring); None: memory only.
    ci : bool
        ``--ci`` gives a bootstrap interval in memory — only where that interval covers the
        metric's population value (docs/uncertainty.md): the binned errors' norm bootstrap,
        the means' percentile intervals.
    stream_ci : bool
        ... and on the streaming engines.
    top_of : str or None
        For top-label ids (``ece_top``): the binary id computed on the top-label view.
    error : bool
        An error metric (lower is better); False for counts shown for context.
    whole : bool
        A binary-kind id that takes the whole class-probability matrix of multiclass input
        (not the top-label view): SKCE.
    weights : str
        Which row weights it takes (docs/weights.md): ``"any"`` (``--weight`` and ``--count``),
        ``"count"`` (counts of identical rows only) or ``""`` (neither); asking for it with one
        it does not take is an error saying why (:func:`weight_refusal`).
    """

    id: str
    title: str
    unit: str
    kind: str
    summary: str
    binned: bool
    default: bool
    kernel: str
    stream: str | None = None
    ci: bool = False
    stream_ci: bool = False
    top_of: str | None = None
    error: bool = True
    whole: bool = False
    weights: str = ""

    def compute(self, data: Any, options: Any) -> Any:
        """Run the in-memory kernel."""
        return kernel(self.kernel)(data, options)


@dataclass(frozen=True, slots=True)
class TestSpec:
    """A calibration test selectable with ``calcheck test --method``.

    Attributes
    ----------
    method : str
        The ``--method`` value.
    ids : tuple of str
        The ids it reports under ``.tests`` in the JSON report.
    title : str
        Human name (of the method).
    summary : str
        One line for help texts and docs.
    stream : bool
        The streaming engines run it.
    weights : str
        ``"any"``, ``"count"`` or ``""``, as :attr:`MetricSpec.weights`.
    """

    __test__ = False           # not a pytest class

    method: str
    ids: tuple[str, ...]
    title: str
    summary: str
    stream: bool = True
    weights: str = ""


def kernel(path: str) -> Callable[..., Any]:
    """The function named ``"module:function"`` (imported on first use)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


_B, _T, _MC = "calcheck.metrics.binned", "calcheck.metrics.tce", "calcheck.metrics.multiclass"
_S = "calcheck.metrics.scoring"
_CU = "calcheck.metrics.cumulative"
_CO = "calcheck.metrics.corp"

METRICS: dict[str, MetricSpec] = {m.id: m for m in (
    MetricSpec("tce", "TCE", "percent", BINARY,
               "test-based calibration error: % of predictions rejected by an exact binomial "
               "test in their PAVA-BC bin", True, True, f"{_T}:tce_pava_bc", "positional"),
    MetricSpec("tce_q", "TCE(Q)", "percent", BINARY, "TCE on equal-mass bins", True, True,
               f"{_T}:tce_quantile", "positional"),
    MetricSpec("tce_v", "TCE(V)", "percent", BINARY, "TCE on PAVA bins", True, False,
               f"{_T}:tce_pava", "positional"),
    MetricSpec("tce_u", "TCE(U)", "percent", BINARY, "TCE on equal-width bins", True, False,
               f"{_T}:tce_uniform", "positional"),
    MetricSpec("ece", "ECE", "fraction", BINARY, "expected calibration error, equal-width bins",
               True, True, f"{_B}:ece_l1", "grid", ci=True, stream_ci=True),
    MetricSpec("ece_l2", "ECE (l2)", "fraction", BINARY, "l2 expected calibration error (the root)",
               True, True, f"{_B}:ece_l2", "grid", ci=True, stream_ci=True),
    MetricSpec("mce", "MCE", "fraction", BINARY, "maximum calibration error, equal-width bins",
               True, True, f"{_B}:mce_metric", "grid"),
    MetricSpec("ace", "ACE", "fraction", BINARY, "adaptive calibration error, equal-mass bins",
               True, True, f"{_B}:ace_metric", "positional", ci=True, stream_ci=True),
    MetricSpec("mce_q", "MCE(Q)", "fraction", BINARY, "MCE on equal-mass bins", True, True,
               f"{_B}:mce_q_metric", "positional"),
    MetricSpec("ece_debiased", "ECE (debiased)", "fraction", BINARY,
               "ECE with each bin's noise removed: sum_b w_b sqrt(max(0, gap_b^2 - c_b var_b)), "
               "c_b tapering from 1 (gap within 1 sd) to 0 (beyond 2 sd)",
               False, False, "calcheck.metrics.debiased:ece_debiased", "grid", ci=True,
               stream_ci=True),
    MetricSpec("ece_l2_debiased", "ECE (l2, debiased)", "fraction", BINARY,
               "root of the unbiased squared l2-ECE: sqrt(max(0, sum_b w_b (gap_b^2 - var_b)))",
               False, False, "calcheck.metrics.debiased:ece_l2_debiased", "grid", ci=True,
               stream_ci=True),
    MetricSpec("ace_debiased", "ACE (debiased)", "fraction", BINARY,
               "ACE with each bin's noise removed, as ece_debiased on equal-mass bins", False,
               False, "calcheck.metrics.debiased:ace_debiased", None, ci=True),
    MetricSpec("brier", "Brier score", "fraction", BINARY, "mean squared error of the scores",
               False, True, f"{_S}:brier_metric", "grid", ci=True, stream_ci=True),
    MetricSpec("log_loss", "Log loss", "nats", BINARY,
               "mean negative log-likelihood (natural log)", False, True,
               f"{_S}:log_loss_metric", "grid", ci=True, stream_ci=True),
    MetricSpec("pde", "PDE", "fraction", BINARY,
               "probability deviation error (Torabian & Urner)", True, True,
               f"{_B}:pde_metric", "positional"),
    MetricSpec("pc", "Probabilistic count", "count", BINARY,
               "number of effectively distinct scores (a count, not an error)", False, True,
               f"{_S}:pc_metric", None, error=False),
    MetricSpec("smece", "smooth ECE", "fraction", BINARY,
               "smooth ECE: kernel-smoothed residuals at the bandwidth sigma = smECE "
               "(Blasiok & Nakkiran); no bins", False, False, "calcheck.metrics.smooth:smece",
               "grid"),
    MetricSpec("ici", "ICI", "fraction", BINARY,
               "integrated calibration index: mean |LOESS(s) - s| (Austin & Steyerberg)", False,
               False, "calcheck.metrics.ici:ici", None),
    MetricSpec("e50", "E50", "fraction", BINARY, "median |LOESS(s) - s|", False, False,
               "calcheck.metrics.ici:e50", None),
    MetricSpec("e90", "E90", "fraction", BINARY, "90th percentile of |LOESS(s) - s|", False,
               False, "calcheck.metrics.ici:e90", None),
    MetricSpec("emax", "Emax", "fraction", BINARY, "largest |LOESS(s) - s|", False, False,
               "calcheck.metrics.ici:emax", None),
    MetricSpec("corp_mcb", "CORP MCB (Brier)", "fraction", BINARY,
               "miscalibration of the Brier score: Brier(s) - Brier(PAV-recalibrated s) "
               "(Dimitriadis, Gneiting & Jordan)", False, False, f"{_CO}:corp_mcb", None),
    MetricSpec("corp_dsc", "CORP DSC (Brier)", "fraction", BINARY,
               "discrimination: Brier(base rate) - Brier(PAV-recalibrated s); higher is "
               "better", False, False, f"{_CO}:corp_dsc", None, error=False),
    MetricSpec("corp_unc", "CORP UNC (Brier)", "fraction", BINARY,
               "uncertainty: Brier score of the base rate", False, False, f"{_CO}:corp_unc",
               None, ci=True, error=False),
    MetricSpec("corp_mcb_log", "CORP MCB (log)", "nats", BINARY,
               "miscalibration of the log score", False, False, f"{_CO}:corp_mcb_log", None),
    MetricSpec("corp_dsc_log", "CORP DSC (log)", "nats", BINARY,
               "discrimination of the log score; higher is better", False, False,
               f"{_CO}:corp_dsc_log", None, error=False),
    MetricSpec("corp_unc_log", "CORP UNC (log)", "nats", BINARY,
               "log score of the base rate", False, False, f"{_CO}:corp_unc_log", None,
               ci=True, error=False),
    MetricSpec("ece_sweep", "ECE-sweep", "fraction", BINARY,
               "ECE on the most equal-mass bins whose label means stay monotone (Roelofs et "
               "al.)", True, False, f"{_B}:ece_sweep_metric", None),
    MetricSpec("skce", "SKCE", "fraction", BINARY,
               "squared kernel calibration error over every class (Widmann, Lindsten & "
               "Zachariah), unbiased; may be negative", False, False,
               "calcheck.metrics.skce:skce_metric", None, whole=True),
    MetricSpec("ecce_mad", "ECCE-MAD", "fraction", BINARY,
               "estimated cumulative calibration error: largest |walk of cumulative "
               "differences| (Arrieta-Ibarra et al.); no bins", False, False,
               f"{_CU}:ecce_mad", None),
    MetricSpec("ecce_r", "ECCE-R", "fraction", BINARY,
               "range of the walk of cumulative differences (Arrieta-Ibarra et al.); no bins",
               False, False, f"{_CU}:ecce_r", None),
    MetricSpec("ece_top", "top-label ECE", "fraction", MULTICLASS,
               "ECE of the top-label view (confidence vs correctness)", True, True,
               "", "grid", ci=True, stream_ci=True, top_of="ece"),
    MetricSpec("mce_top", "top-label MCE", "fraction", MULTICLASS,
               "MCE of the top-label view", True, True, "", "grid", top_of="mce"),
    MetricSpec("ace_top", "top-label ACE", "fraction", MULTICLASS,
               "ACE of the top-label view", True, True, "", "positional",
               ci=True, stream_ci=True, top_of="ace"),
    MetricSpec("sce", "SCE", "fraction", MULTICLASS,
               "static calibration error: classwise ECE, averaged over classes", False, True,
               f"{_MC}:sce_metric", "classwise", ci=True),
    MetricSpec("ace_cw", "ACE (classwise)", "fraction", MULTICLASS,
               "classwise ACE: equal-mass bins per class, averaged", False, True,
               f"{_MC}:ace_cw_metric", "classwise_positional"),
    MetricSpec("tace", "TACE", "fraction", MULTICLASS,
               "thresholded classwise ACE over probabilities >= --tace-threshold", False, True,
               f"{_MC}:tace_metric", "classwise_positional"),
    MetricSpec("tce_cw", "TCE (classwise)", "percent", MULTICLASS,
               "classwise TCE, averaged over classes", False, True, f"{_MC}:tce_cw_metric",
               "classwise_positional"),
    MetricSpec("smece_cw", "smooth ECE (classwise)", "fraction", MULTICLASS,
               "smooth ECE of each class one-vs-rest, averaged over classes", False, False,
               f"{_MC}:smece_cw_metric", None),
    MetricSpec("ici_cw", "ICI (classwise)", "fraction", MULTICLASS,
               "ICI of each class one-vs-rest, averaged over classes", False, False,
               f"{_MC}:ici_cw_metric", None),
    MetricSpec("ecce_mad_cw", "ECCE-MAD (classwise)", "fraction", MULTICLASS,
               "ECCE-MAD of each class one-vs-rest, averaged over classes", False, False,
               f"{_MC}:ecce_mad_cw_metric", None),
    MetricSpec("ecce_r_cw", "ECCE-R (classwise)", "fraction", MULTICLASS,
               "ECCE-R of each class one-vs-rest, averaged over classes", False, False,
               f"{_MC}:ecce_r_cw_metric", None),
    MetricSpec("ece_sweep_cw", "ECE-sweep (classwise)", "fraction", MULTICLASS,
               "ECE-sweep of each class one-vs-rest, averaged over classes", False, False,
               f"{_MC}:ece_sweep_cw_metric", None),
    MetricSpec("vece", "VECE", "fraction", VARIABLE,
               "variable-based ECE over equal-mass bins of a variable", True, False, "", None),
    MetricSpec("ece_qcut", "ECE (qcut)", "fraction", VARIABLE,
               "ECE over equal-mass bins of the predicted error (the VECE paper's ECE)", True,
               False, "", None),
    MetricSpec("vce_max", "VCE(v*)", "fraction", VARIABLE,
               "worst-case gap between LOESS error rate and predicted error", False, False, "",
               None),
)}

TESTS: dict[str, TestSpec] = {t.method: t for t in (
    TestSpec("tcal", ("tcal_adaptive", "tcal", "binomial_discrete"), "T-Cal",
             "T-Cal on the debiased squared l2-ECE, adaptive over dyadic bin counts (or fixed "
             "m with --bins); Monte Carlo p-value"),
    TestSpec("hl", ("hosmer_lemeshow",), "Hosmer–Lemeshow",
             "Hosmer–Lemeshow, 10 equal-mass groups, chi-squared(8)"),
    TestSpec("spiegelhalter", ("spiegelhalter",), "Spiegelhalter Z",
             "Spiegelhalter's Z, two-sided, with the direction"),
    TestSpec("cox", ("cox",), "Cox intercept/slope",
             "Cox calibration intercept and slope, likelihood-ratio test of (0, 1)"),
    TestSpec("skce", ("skce",), "SKCE",
             "kernel calibration test over every class (Widmann et al.): unbiased SKCE, "
             "p-value by label resampling from the predictions", stream=False),
    TestSpec("ks", ("ks",), "Kolmogorov–Smirnov",
             "ECCE-MAD / sigma against max |Brownian motion|; tail-series p-value",
             stream=False),
    TestSpec("kuiper", ("kuiper",), "Kuiper",
             "ECCE-R / sigma against the range of Brownian motion; tail-series p-value",
             stream=False),
)}

# ---------------------------------------------------------------------------------------------
# weighted and aggregated rows (docs/weights.md)

# the metrics and tests computed on weighted rows: binned sums, means and the cumulative walk
# take a weight per row as a mass; the tests use each row's variance mass (k or w²).  TCE's
# per-prediction tests take counts only (an aggregated row is that many predictions)
_WEIGHTED_METRICS = {**dict.fromkeys(("ece", "ece_l2", "mce", "ace", "mce_q", "pde", "brier",
                                      "log_loss", "pc", "ecce_mad", "ecce_r", "ece_top",
                                      "mce_top", "ace_top"), "any"),
                     "sce": "any", "ace_cw": "any", "tace": "any", "smece": "any",
                     "ece_debiased": "any", "ece_l2_debiased": "any", "ace_debiased": "any",
                     "ece_sweep": "any", "smece_cw": "any", "ecce_mad_cw": "any",
                     "ecce_r_cw": "any", "ece_sweep_cw": "any",
                     **dict.fromkeys(("corp_mcb", "corp_dsc", "corp_unc", "corp_mcb_log",
                                      "corp_dsc_log", "corp_unc_log"), "any"),
                     **dict.fromkeys(("ici", "e50", "e90", "emax", "ici_cw", "skce"), "any"),
                     **dict.fromkeys(("tce", "tce_q", "tce_v", "tce_u", "tce_cw"), "count")}
_WEIGHTED_TESTS = dict.fromkeys(("tcal", "hl", "spiegelhalter", "cox", "ks", "kuiper", "skce"),
                                "any")
METRICS = {k: replace(m, weights=_WEIGHTED_METRICS.get(k, "")) for k, m in METRICS.items()}
TESTS = {k: replace(t_, weights=_WEIGHTED_TESTS.get(k, "")) for k, t_ in TESTS.items()}

# what the ids outside the tables above take: the binomial test per value, T-Cal's companion
_OTHER_WEIGHTS = {"binomial_discrete": "count"}

# why the others are refused: no sound weighted form, or not built yet
_NO_WEIGHTS = {
    "tce": "its per-row exact binomial tests inside PAVA-BC bins have no weighted form (a "
           "weight does not change how many labels a row has)",
    "binomial_discrete": "the exact binomial test per score value counts labels (a weight "
                         "does not change how many labels a row has)",
}
_NOT_YET = ("not computed on weighted or aggregated rows in this version (docs/weights.md "
            "lists what is)")


def weight_refusal(mid: str, kind: str) -> str | None:
    """Why metric or test ``mid`` refuses rows of ``kind`` ("count" or "weight"), or None
    when it takes them."""
    spec: Any = METRICS.get(mid) or TESTS.get(mid)
    takes = spec.weights if spec is not None else _OTHER_WEIGHTS.get(mid, "")
    if takes == "any" or takes == kind:
        return None
    base = "tce" if mid.startswith("tce") else mid
    if kind == "weight" and base in _NO_WEIGHTS:
        return (f"{mid} takes no --weight: {_NO_WEIGHTS[base]}" +
                ("; when the weights are whole numbers that count identical rows, give them "
                 "with --count" if takes == "count" else ""))
    return f"{mid} is {_NOT_YET}"


TEST_TITLES: dict[str, str] = {
    "tcal": "T-Cal (fixed m)", "tcal_adaptive": "adaptive T-Cal",
    "binomial_discrete": "binomial per value", "hosmer_lemeshow": "Hosmer–Lemeshow",
    "spiegelhalter": "Spiegelhalter Z", "cox": "Cox intercept/slope (LR)",
    "skce": "SKCE (kernel, all classes)", "ks": "Kolmogorov–Smirnov (ECCE-MAD)", "kuiper": "Kuiper (ECCE-R)",
}


# ---------------------------------------------------------------------------------------------
# queries


def selectable(multiclass: bool) -> list[str]:
    """Ids ``-m`` accepts: binary ids, plus the multiclass ids for multiclass input (where
    binary ids run on the top-label view)."""
    kinds = (BINARY, MULTICLASS) if multiclass else (BINARY,)
    ids = [m.id for m in METRICS.values() if m.kind in kinds]
    if multiclass:                                   # the multiclass ids first, as listed
        ids = [i for i in ids if METRICS[i].kind == MULTICLASS] + \
              [i for i in ids if METRICS[i].kind == BINARY]
    return ids


def default_ids(multiclass: bool) -> list[str]:
    """The default metric set of binary or multiclass input."""
    kind = MULTICLASS if multiclass else BINARY
    return [m.id for m in METRICS.values() if m.kind == kind and m.default]


def binary_of(mid: str) -> str | None:
    """The binary metric that computes ``mid`` on the top-label view (itself for a binary
    id); None for a multiclass-only metric."""
    spec = METRICS[mid]
    if spec.whole:
        return None
    if spec.kind == BINARY:
        return mid
    return spec.top_of


def stream_mode(mid: str) -> str | None:
    """How the streaming engines compute ``mid`` (see the module docstring)."""
    return METRICS[mid].stream


def streamable(multiclass: bool) -> list[str]:
    """The ids the streaming engines compute for this input kind."""
    return [m for m in selectable(multiclass) if METRICS[m].stream is not None]


def title(mid: str) -> str:
    """Human title of a metric or test id."""
    spec = METRICS.get(mid)
    return spec.title if spec is not None else TEST_TITLES.get(mid, mid)


def unit(mid: str) -> str:
    return METRICS[mid].unit


def binned_ids(ids: Iterable[str]) -> list[str]:
    return [m for m in ids if METRICS[m].binned]


def methods(streamed: bool = False) -> list[str]:
    """The ``--method`` values (those the streaming engines run, with ``streamed``)."""
    return [t.method for t in TESTS.values() if t.stream or not streamed]


def split_ids(values: Iterable[str]) -> list[str]:
    """Ids given as repeated options and/or comma lists, lower-cased, blanks dropped, in order."""
    return [part.strip().lower() for chunk in values for part in str(chunk).split(",")
            if part.strip()]
