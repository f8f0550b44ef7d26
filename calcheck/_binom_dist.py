"""``scipy.stats.binom``'s ``pmf``, ``cdf`` and ``sf`` without importing ``scipy.stats``.

``import scipy.stats`` costs about 0.45 s of start-up; ``scipy.special`` about 0.1 s.  Since
scipy 1.14, ``scipy.stats.binom`` computes with three ufuncs of ``scipy.special._ufuncs``
(``_binom_pmf``, ``_binom_cdf``, ``_binom_sf``: Boost's binomial) wrapped by
``rv_discrete.pmf/cdf/sf``, which check the arguments, place the support's constant values
(0 outside it for the pmf, 1 above it for the cdf, 1 below it for the sf), floor k for the
cdf and sf, call the ufunc on the entries inside the support only, and clip to [0, 1].  The
functions here are those wrappers, line for line (identical in scipy 1.14 to 1.17), calling
the same ufuncs on the same entries, so every value — and every Boost overflow error — is
scipy's own.  With an older scipy (the ufuncs live in ``scipy.stats._boost`` there) ``BINOM``
is ``scipy.stats.binom`` itself.  ``tests/test_tce.py`` compares the two on a grid.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from calcheck._typing import FloatArray


def _arrays(k: Any, n: Any, p: Any) -> tuple[FloatArray, FloatArray, FloatArray, np.ndarray]:
    """k, n, p broadcast together, and ``_argcheck`` (n a whole number >= 0, 0 <= p <= 1)."""
    k_, n_, p_ = np.broadcast_arrays(np.asarray(k, dtype=np.float64),
                                     np.asarray(n, dtype=np.float64),
                                     np.asarray(p, dtype=np.float64))
    valid = (n_ >= 0) & (n_ == np.round(n_)) & (p_ >= 0) & (p_ <= 1)
    return k_, n_, p_, valid


def _placed(out: FloatArray, cond: np.ndarray, f: Any, *args: FloatArray) -> Any:
    """``f`` on the entries of ``cond`` only (scipy's ``argsreduce``), clipped to [0, 1]."""
    if np.any(cond):
        out[cond] = np.clip(f(*(a[cond] for a in args)), 0, 1)
    return out[()] if out.ndim == 0 else out


class _Binom:
    """The three methods of ``scipy.stats.binom`` that the binomial test calls."""

    def __init__(self, pmf: Any, cdf: Any, sf: Any) -> None:
        self._pmf, self._cdf, self._sf = pmf, cdf, sf

    def pmf(self, k: Any, n: Any, p: Any) -> Any:
        k_, n_, p_, valid = _arrays(k, n, p)
        cond = valid & (k_ >= 0) & (k_ <= n_) & (np.floor(k_) == k_)
        out = np.zeros(cond.shape)
        out[~valid | np.isnan(k_)] = np.nan
        return _placed(out, cond, self._pmf, k_, n_, p_)

    def pmf_inside(self, k: FloatArray, n: FloatArray, p: FloatArray) -> Any:
        """:meth:`pmf` of the binomial test's search probes: same-shape arrays of whole k and
        n and of 0 <= p <= 1 (the caller's contract).  When every k is inside the support
        [0, n], scipy's wrapper calls the ufunc on every entry and clips it to [0, 1]: that is
        done here without the wrapper's checks (the search calls it ~2,000 times a run, and
        the checks cost twice the ufunc); anything else goes through :meth:`pmf`."""
        if k.shape == n.shape == p.shape and k.ndim == 1 and bool(np.all((k >= 0) & (k <= n))):
            return np.clip(self._pmf(k, n, p), 0, 1)
        return self.pmf(k, n, p)

    def cdf(self, k: Any, n: Any, p: Any) -> Any:
        k_, n_, p_, valid = _arrays(k, n, p)
        cond = valid & (k_ >= 0) & (k_ < n_) & np.isfinite(k_)
        out = np.zeros(cond.shape)
        out[k_ >= n_] = 1.0
        out[np.isneginf(k_)] = 0.0
        out[~valid | np.isnan(k_)] = np.nan
        return _placed(out, cond, self._cdf, np.floor(k_), n_, p_)

    def sf(self, k: Any, n: Any, p: Any) -> Any:
        k_, n_, p_, valid = _arrays(k, n, p)
        cond = valid & (k_ >= 0) & (k_ < n_) & np.isfinite(k_)
        out = np.zeros(cond.shape)
        out[~valid | np.isnan(k_)] = np.nan
        out[((k_ < 0) | np.isneginf(k_)) & valid] = 1.0
        return _placed(out, cond, self._sf, np.floor(k_), n_, p_)


# The extension modules of scipy.special that ``_ufuncs`` imports as it initialises, in an
# order that loads each after those it imports, by scipy version (read off an import of
# ``_ufuncs`` under a stand-in package in each version; ``tests/test_tce.py`` checks the
# installed one in a fresh interpreter).
_UFUNC_DEPENDENCIES: dict[tuple[int, ...], tuple[str, ...]] = {
    (1, 14): ("_ufuncs_cxx", "_special_ufuncs"),
    (1, 15): ("_ufuncs_cxx", "_special_ufuncs"),
    (1, 16): ("_ufuncs_cxx", "_ellip_harm_2", "_special_ufuncs", "_gufuncs"),
    (1, 17): ("_ufuncs_cxx", "_ellip_harm_2", "_special_ufuncs", "_gufuncs"),
}


def _load_ufuncs_alone() -> None:
    """Load ``scipy.special._ufuncs`` (and the extension modules it imports) without running
    ``scipy.special/__init__.py``: that package's import costs ~0.1 s (its array-API layer
    loads numpy.testing, numpy.f2py and more), a third of a default ``score`` on a small file,
    and the binomial ufuncs need none of it.  Each module is loaded by the import machinery's
    own ``_load`` (module lock held, marked initialising, removed again if it fails), so
    another thread that imports it meanwhile waits for it, and a later ``import scipy.special``
    finds the modules loaded and runs its ``__init__`` over them as usual.  Only for the scipy
    versions in :data:`_UFUNC_DEPENDENCIES`, and only when ``scipy.special`` is not loaded
    already; anything unexpected leaves the ordinary import to the caller."""
    if "scipy.special" in sys.modules or "scipy.special._ufuncs" in sys.modules:
        return
    try:
        from importlib import _bootstrap
        from importlib.machinery import ExtensionFileLoader, PathFinder

        import scipy

        version = tuple(int(x) for x in scipy.__version__.split(".")[:2])
        names = _UFUNC_DEPENDENCIES.get(version)
        if names is None:
            return
        path = [os.path.join(scipy.__path__[0], "special")]
        specs = [PathFinder.find_spec(f"scipy.special.{n}", path) for n in (*names, "_ufuncs")]
        for spec in specs:
            if spec is None or not isinstance(spec.loader, ExtensionFileLoader):
                return
        for spec in specs:
            if spec is not None and spec.name not in sys.modules:
                _bootstrap._load(spec)  # type: ignore[attr-defined]
    except Exception:       # the ordinary import follows, and says what fails
        return


def _binom() -> Any:
    _load_ufuncs_alone()
    try:
        from scipy.special._ufuncs import _binom_cdf, _binom_pmf, _binom_sf
    except ImportError:                       # scipy < 1.14
        from scipy.stats import binom

        binom.pmf_inside = binom.pmf          # the search's probes: scipy's own pmf
        return binom
    return _Binom(_binom_pmf, _binom_cdf, _binom_sf)


BINOM = _binom()
