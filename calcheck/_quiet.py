"""No warning from a dependency reaches the user: numpy's 0/0 and empty-slice RuntimeWarnings,
and whatever numpy, scipy, pandas, pyarrow, matplotlib or Dask warn about, are silenced while
calcheck runs; every real condition (an empty bin, a dropped row, a subsample) is reported once
in calcheck's own words, in the notes."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

DEPENDENCIES = r"(numpy|scipy|pandas|pyarrow|matplotlib|dask|distributed|typer|click|rich)(\..*)?$"

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def silenced() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        warnings.filterwarnings("ignore", module=DEPENDENCIES)
        yield


def quiet(fn: F) -> F:
    """Run ``fn`` with the dependencies' warnings silenced."""
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with silenced():
            return fn(*args, **kwargs)
    return wrapper  # type: ignore[return-value]
