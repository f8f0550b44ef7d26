"""calcheck: is this classifier calibrated?

The public API is loaded lazily (module ``__getattr__``, as scipy does) so that
``calcheck --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from calcheck._version import SCHEMA_VERSION, __version__

_API = {
    "ece": "calcheck.api", "mce": "calcheck.api", "ace": "calcheck.api",
    "mce_q": "calcheck.api", "pde": "calcheck.api", "brier": "calcheck.api",
    "log_loss": "calcheck.api", "pc": "calcheck.api", "tce": "calcheck.api",
    "binomtest_pvalue": "calcheck.hypotests.binom", "tcal": "calcheck.api",
    "hosmer_lemeshow": "calcheck.api", "spiegelhalter": "calcheck.api", "cox": "calcheck.api",
    "binomial_discrete": "calcheck.api", "TestResult": "calcheck.hypotests._result",
    "evaluate": "calcheck.api", "plot_reliability": "calcheck.figures",
    "plot_tce": "calcheck.figures", "plot_variable": "calcheck.figures",
    "MetricResult": "calcheck.metrics._result", "BinStats": "calcheck.binning",
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
