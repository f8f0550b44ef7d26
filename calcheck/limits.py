"""The limits of the parameters every entry point shares — one check each, called by the
command line's option table (:mod:`calcheck.options`) and by every array kernel
(:mod:`calcheck.validation`), so that ``score(bins=10**9)`` and ``calcheck.ece(s, y,
bins=10**9)`` are refused alike.  Imports nothing heavy (``calcheck --help`` reads it)."""

from __future__ import annotations

from calcheck.errors import UsageError

MAX_BINS = 1_000_000           # a documented ceiling: 10^9 bins would allocate gigabytes


def bins_in_range(bins: int, label: str, minimum: int = 1) -> int:
    """A bin count (already an integer) from ``minimum`` to :data:`MAX_BINS`."""
    if bins < minimum:
        raise UsageError(f"{label} must be an integer >= {minimum:,}, got {bins!r}")
    if bins > MAX_BINS:
        raise UsageError(f"{label} must be an integer <= {MAX_BINS:,}, got {bins!r}")
    return int(bins)
