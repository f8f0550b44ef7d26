"""calcheck: is this classifier calibrated?

``calcheck.score(source, **options)`` and ``calcheck.run_tests(source, **options)`` return the
report the command line prints (:class:`calcheck.Report`); ``calcheck.ece(scores, labels)``
and its siblings compute one metric or test on arrays.  The public API is loaded lazily
(module ``__getattr__``, as scipy does) so that ``calcheck --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from calcheck._version import SCHEMA_VERSION, __version__

_F = "calcheck.functions"
_API = {
    # the report API: what the command line prints, from Python
    "score": "calcheck.api", "run_tests": "calcheck.api", "compare": "calcheck.api", "figure": "calcheck.api",
    "write_report": "calcheck.api", "Report": "calcheck.report.model",
    "audit": "calcheck.auditing", "monitor": "calcheck.monitoring",
    "Predictions": "calcheck.data",
    # metrics and tests on arrays
    "ece": _F, "mce": _F, "ace": _F, "mce_q": _F, "pde": _F, "brier": _F, "log_loss": _F,
    "pc": _F, "tce": _F, "tcal": _F, "hosmer_lemeshow": _F, "spiegelhalter": _F, "cox": _F,
    "binomial_discrete": _F, "evaluate": _F, "smece": _F, "ici": _F, "corp": _F,
    "ece_sweep": _F, "ecce": _F, "ks": _F, "kuiper": _F, "skce": _F, "skce_test": _F,
    "binomtest_pvalue": "calcheck.binomial", "TestResult": "calcheck.hypotests._result",
    "MetricResult": "calcheck.metrics._result", "BinStats": "calcheck.binning",
    # figures of arrays
    "plot_reliability": "calcheck.figures.arrays", "plot_tce": "calcheck.figures.arrays",
    "plot_variable": "calcheck.figures.arrays", "plot_corp": "calcheck.figures.arrays",
    # errors
    "InputError": "calcheck.errors", "UsageError": "calcheck.errors",
    "CalcheckError": "calcheck.errors",
}

__all__ = ["SCHEMA_VERSION", "__version__", *_API]


def __getattr__(name: str) -> Any:
    mod = _API.get(name)
    if mod is None:
        raise AttributeError(f"module 'calcheck' has no attribute {name!r}")
    return getattr(importlib.import_module(mod), name)


def __dir__() -> list[str]:
    return sorted(__all__)
