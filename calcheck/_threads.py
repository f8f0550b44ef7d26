"""One BLAS thread while calcheck runs threads of its own; independent work on two threads.

calcheck parallelises by threads (the bootstrap draws the next replicate while this one is
computed; the stream engine folds batches on two threads; T-Cal's null simulation runs on a
pool).  OpenBLAS would start its own threads for every dot product inside them, and the two
kinds then fight for the same cores: the bootstrap at 500k rows took 1.4× as long with
OpenBLAS's default threads as with one.  :func:`one_blas_thread` limits BLAS (and OpenMP) to
one thread for the duration, with threadpoolctl, the library scikit-learn uses for this.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with BLAS and OpenMP limited to one thread each (restored after)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:                     # pragma: no cover - a dependency, but not fatal
        yield
        return
    with threadpool_limits(limits=1):
        yield


def map_two(fn: Callable[..., T], items: Sequence[Any]) -> list[T]:
    """``[fn(*item) for item in items]``, on two threads when there are several items and two
    cores (BLAS held to one thread meanwhile).  For independent numpy work that releases the
    GIL — scipy's and numpy's ufuncs, sorts — where each result does not depend on the order;
    an exception is raised in the caller."""
    if len(items) < 2 or (os.cpu_count() or 1) < 2:
        return [fn(*item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with one_blas_thread(), ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(fn, *item) for item in items]
        return [f.result() for f in futures]


def halves(run: Callable[[int, int], None], count: int) -> None:
    """``run(0, count)`` as ``run(0, h)`` on this thread and ``run(h, count)`` on a second one
    (h = count // 2) when there are two items or more and two cores.  For block-wise numpy
    work that releases the GIL (ufuncs; ``bincount`` holds it only briefly), where ``run``
    writes each block's result to its own slot and the caller combines the slots in block
    order — so the result does not depend on the threads.  An exception is raised here."""
    if count < 2 or (os.cpu_count() or 1) < 2:
        run(0, count)
        return
    import threading

    half, errors = count // 2, []

    def second() -> None:
        try:
            run(half, count)
        except BaseException as exc:            # re-raised in the caller's thread
            errors.append(exc)

    other = threading.Thread(target=second)
    other.start()
    try:
        run(0, half)
    finally:
        other.join()
    if errors:
        raise errors[0]
