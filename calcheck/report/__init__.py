"""Reports: one builder (:mod:`calcheck.report.build`), one frozen :class:`Report`
(:mod:`calcheck.report.model`) and its renderings (:mod:`calcheck.report.render`,
:mod:`calcheck.report.html`).  Nothing here computes a metric, reads a file or exits."""

from calcheck.report.build import build_report
from calcheck.report.model import Report

__all__ = ["Report", "build_report"]
