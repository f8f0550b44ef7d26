"""Exceptions raised by calcheck; only :mod:`calcheck.cli` turns them into exit codes."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit status: 0 ok, 1 a requested gate failed, 2 usage, input or output error,
    3 internal error, 130 interrupted."""

    OK = 0
    GATE_FAILED = 1
    USAGE_OR_INPUT = 2
    INTERNAL = 3
    INTERRUPTED = 130


class CalcheckError(Exception):
    """Base class of every error calcheck raises on purpose."""


class InputError(CalcheckError, ValueError):
    """The data are unusable: missing file, bad column, invalid values.

    Parameters
    ----------
    message : str
        One line saying what is wrong, naming the file, column and first bad rows.
    column : str, optional
        The offending column, when there is one.
    rows : list of int, optional
        The first offending rows (1 = first data row, header excluded).
    """

    def __init__(self, message: str, *, column: str | None = None,
                 rows: list[int] | None = None) -> None:
        super().__init__(message)
        self.column = column
        self.rows = rows or []


class TooFewRows(InputError):
    """TCE with PAVA-BC bins has too few rows: a default run reports the other metrics and
    says TCE was not computed; an explicit ``-m tce`` stays an error."""


class UsageError(CalcheckError, ValueError):
    """An option or argument has an invalid value (bad ``--bins``, unknown metric id, ...)."""


class OutputError(CalcheckError, OSError):
    """An output cannot be written (full disk, closed stdout, …): exit 2, nothing half-written."""
