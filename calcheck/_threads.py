"""One BLAS thread while calcheck runs threads of its own.

calcheck parallelises by threads (the bootstrap draws the next replicate while this one is
computed; the stream engine folds batches on two threads; T-Cal's null simulation runs on a
pool).  OpenBLAS would start its own threads for every dot product inside them, and the two
kinds then fight for the same cores: the bootstrap at 500k rows took 1.4× as long with
OpenBLAS's default threads as with one.  :func:`one_blas_thread` limits BLAS (and OpenMP) to
one thread for the duration, with threadpoolctl, the library scikit-learn uses for this.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


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
