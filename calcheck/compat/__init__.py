"""``--compat``: each peer library's own numbers, convention by convention.

calcheck's metrics follow the papers (docs/metrics.md); the libraries users compare with make
other, equally defensible choices — where bin edges fall, which side of an edge is closed,
whether an exact 0 or 1 gets a bin of its own, how scores are clipped, in which float precision
the sums run.  A compat mode computes calcheck's metric ids *as that library computes them*,
so a number can be checked against the tool it came from:

========== =====================================================================================
mode       reproduces
========== =====================================================================================
sklearn    ``sklearn.calibration.calibration_curve`` bins (ECE/MCE weighted by counts),
           ``brier_score_loss``, ``log_loss`` (scikit-learn 1.9)
torchmetrics ``binary_calibration_error`` / ``multiclass_calibration_error`` (l1, l2, max)
           (torchmetrics 1.9), without importing torch
mapie      ``expected_calibration_error``, ``top_label_ece``, ``spiegelhalter_p_value``,
           Kolmogorov–Smirnov and Kuiper (MAPIE 1.6)
netcal     ``netcal.metrics.ECE`` / ``MCE`` with and without ``equal_intervals`` (netcal 1.4)
calzone    ECE-H/MCE-H, ECE-C/MCE-C, Spiegelhalter, Cox (DIDSR calzone)
pycaleva   Hosmer–Lemeshow and Spiegelhalter of ``CalibrationEvaluator``, its ACE/MCE
           (pycaleva 0.8)
nixon      ``gce()`` of google/uncertainty-metrics (Nixon et al. 2019)
========== =====================================================================================

The ids stay calcheck's: a uniform-bin ECE is ``ece`` whatever the library calls it, an
equal-count one ``ace``, the top-label ones ``ece_top``/``mce_top``.  A metric or test the
library does not have is a usage error naming what it has.  Without ``--bins`` a mode uses the
library's own default bin count.  Every convention is listed in docs/compat.md.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from calcheck.errors import UsageError


@dataclass(frozen=True)
class CompatMode:
    """A peer library's conventions: the ids it computes (for binary and multiclass input, each
    a ``"module:function"`` kernel), the test methods it has, its default bin count."""

    name: str
    library: str
    default_bins: int
    binary: dict[str, str] = field(default_factory=dict)
    multiclass: dict[str, str] = field(default_factory=dict)
    tests: dict[str, str] = field(default_factory=dict)
    weighted: tuple[str, ...] = ()      # binary ids whose library function takes sample weights

    def ids(self, multiclass: bool) -> list[str]:
        return list(self.multiclass if multiclass else self.binary)

    def kernel(self, mid: str, multiclass: bool) -> Any:
        path = (self.multiclass if multiclass else self.binary)[mid]
        module, _, name = path.partition(":")
        return getattr(importlib.import_module(module), name)

    def test_kernel(self, method: str) -> Any:
        module, _, name = self.tests[method].partition(":")
        return getattr(importlib.import_module(module), name)

    def what_it_has(self, multiclass: bool) -> str:
        kind = "multiclass" if multiclass else "binary"
        ids = self.ids(multiclass)
        tests = list(self.tests)
        return (f"{self.library} computes, for {kind} input, "
                f"{', '.join(ids) if ids else 'no metric'}"
                f"{'; tests: ' + ', '.join(tests) if tests else '; no calibration test'}")


_P = "calcheck.compat."

MODES: dict[str, CompatMode] = {m.name: m for m in (
    CompatMode("sklearn", "scikit-learn", 5,
               binary={"ece": _P + "sklearn:ece", "mce": _P + "sklearn:mce",
                       "ace": _P + "sklearn:ace", "mce_q": _P + "sklearn:mce_q",
                       "brier": _P + "sklearn:brier", "log_loss": _P + "sklearn:log_loss"},
               weighted=("brier", "log_loss")),
    CompatMode("torchmetrics", "torchmetrics", 15,
               binary={"ece": _P + "torchmetrics:ece", "ece_l2": _P + "torchmetrics:ece_l2",
                       "mce": _P + "torchmetrics:mce"},
               multiclass={"ece_top": _P + "torchmetrics:ece_top",
                           "mce_top": _P + "torchmetrics:mce_top",
                           "ece_l2": _P + "torchmetrics:ece_l2_top"}),
    CompatMode("mapie", "MAPIE", 50,
               binary={"ece": _P + "mapie:ece", "ace": _P + "mapie:ace"},
               multiclass={"ece": _P + "mapie:ece_confidence", "ace": _P + "mapie:ace_confidence",
                           "ece_top": _P + "mapie:ece_top", "ace_top": _P + "mapie:ace_top",
                           "sce": _P + "mapie:sce", "ace_cw": _P + "mapie:ace_cw"},
               tests={"spiegelhalter": _P + "mapie:spiegelhalter", "ks": _P + "mapie:ks",
                      "kuiper": _P + "mapie:kuiper"}),
    CompatMode("netcal", "netcal", 10,
               binary={"ece": _P + "netcal:ece", "mce": _P + "netcal:mce",
                       "ace": _P + "netcal:ace", "mce_q": _P + "netcal:mce_q"},
               multiclass={"ece_top": _P + "netcal:ece_top", "mce_top": _P + "netcal:mce_top",
                           "ace_top": _P + "netcal:ace_top",
                           "mce_q": _P + "netcal:mce_q_top"}),
    CompatMode("calzone", "calzone", 10,
               binary={"ece": _P + "calzone:ece", "mce": _P + "calzone:mce",
                       "ace": _P + "calzone:ace", "mce_q": _P + "calzone:mce_q",
                       "ici": _P + "calzone:ici"},
               multiclass={"ece_top": _P + "calzone:ece_top", "mce_top": _P + "calzone:mce_top",
                           "ace_top": _P + "calzone:ace_top",
                           "mce_q": _P + "calzone:mce_q_top"},
               tests={"hl": _P + "calzone:hosmer_lemeshow",
                      "spiegelhalter": _P + "calzone:spiegelhalter", "cox": _P + "calzone:cox"}),
    CompatMode("pycaleva", "pycaleva", 10,
               binary={"ace": _P + "pycaleva:ace", "mce_q": _P + "pycaleva:mce_q",
                       "brier": _P + "pycaleva:brier"},
               tests={"hl": _P + "pycaleva:hosmer_lemeshow",
                      "spiegelhalter": _P + "pycaleva:spiegelhalter"}),
    CompatMode("nixon", "Nixon et al.'s reference code (google/uncertainty-metrics)", 15,
               multiclass={"ece_top": _P + "nixon:ece_top", "ace_top": _P + "nixon:ace_top",
                           "sce": _P + "nixon:sce", "ace_cw": _P + "nixon:ace_cw",
                           "tace": _P + "nixon:tace"}),
)}


def mode(name: str) -> CompatMode:
    try:
        return MODES[name]
    except KeyError:
        raise UsageError(f"unknown compat mode {name!r}; use one of {', '.join(MODES)}") \
            from None


def check_ids(name: str, ids: list[str], multiclass: bool, label: str = "--compat") -> None:
    """Every id must be one the library has."""
    m = mode(name)
    bad = [i for i in ids if i not in m.ids(multiclass)]
    if bad:
        raise UsageError(f"{label} {name}: {', '.join(bad)} not available; "
                         f"{m.what_it_has(multiclass)}")


def check_weighted(name: str, ids: list[str], flag: str, label: str = "--compat") -> None:
    """Weighted or aggregated rows: every id must be one whose library function takes sample
    weights (scikit-learn's Brier score and log loss); the others are refused by name."""
    m = mode(name)
    bad = [i for i in ids if i not in m.weighted]
    if bad:
        takes = (f"; with weights it computes {', '.join(m.weighted)} (its sample_weight)"
                 if m.weighted else "")
        raise UsageError(f"{label} {name} with {flag}: {', '.join(bad)} not available — "
                         f"{m.library} takes no row weights there{takes}")


def check_methods(name: str, methods: list[str], label: str = "--compat") -> None:
    """Every test method must be one the library has."""
    m = mode(name)
    bad = [x for x in methods if x not in m.tests]
    if bad:
        raise UsageError(f"{label} {name}: test {', '.join(bad)} not available; {m.library} "
                         f"has {', '.join(m.tests) or 'no calibration test'}")


def compute(name: str, data: Any, ids: list[str], bins: int, *,
            tace_threshold: float = 0.01) -> dict[str, Any]:
    """The metrics ``ids`` of ``data`` (:class:`~calcheck.data.Predictions`) as ``name``
    computes them (id → MetricResult)."""
    m = mode(name)
    mc = data.multiclass
    check_ids(name, ids, mc)
    w = getattr(data, "weights", None)
    if w is not None:
        check_weighted(name, ids, "--" + w.kind)
    out = {}
    for mid in ids:
        fn = m.kernel(mid, mc)
        if mc:
            out[mid] = fn(data.probs, data.labels, bins, tace_threshold=tace_threshold)
        elif w is not None:
            out[mid] = fn(data.scores, data.labels, bins, weights=w.values)
        else:
            out[mid] = fn(data.scores, data.labels, bins)
    return out


def notes(results: dict[str, Any]) -> list[str]:
    """What a library's convention left out of a result (rows in no bin)."""
    out = []
    for mid, r in results.items():
        dropped = r.extra.get("rows_in_no_bin")
        if dropped:
            rows = "1 row sits" if dropped == 1 else f"{dropped} rows sit"
            out.append(f"{mid}: {rows} on the first bin edge and in no bin under "
                       f"{r.settings.get('compat')}'s right-closed bins; left out, as the "
                       "library does")
    return out


def run_tests(name: str, scores: Any, labels: Any, methods: list[str], alpha: float,
              bins: int) -> dict[str, Any]:
    """The tests ``methods`` as ``name`` computes them: test id → TestResult."""
    m = mode(name)
    check_methods(name, methods)
    out: dict[str, Any] = {}
    for method in methods:
        out.update(m.test_kernel(method)(scores, labels, alpha, bins))
    return out
