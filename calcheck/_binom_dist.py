"""``scipy.stats.binom``'s ``pmf``, ``cdf`` and ``sf`` without importing ``scipy.stats``.

``import scipy.stats`` costs about 0.45 s of start-up; ``scipy.special`` about 0.1 s.  Since
scipy 1.14, ``scipy.stats.binom`` computes with three private scipy ufuncs
(``_binom_pmf``, ``_binom_cdf``, ``_binom_sf``: Boost's binomial; loaded by calcheck._hooks) wrapped by
``rv_discrete.pmf/cdf/sf``, which check the arguments, place the support's constant values
(0 outside it for the pmf, 1 above it for the cdf, 1 below it for the sf), floor k for the
cdf and sf, call the ufunc on the entries inside the support only, and clip to [0, 1].  The
functions here are those wrappers, line for line (identical in scipy 1.14 to 1.17), calling
the same ufuncs on the same entries, so every value — and every Boost overflow error — is
scipy's own.  With an older scipy (the ufuncs live in ``scipy.stats._boost`` there) ``BINOM``
is ``scipy.stats.binom`` itself.  ``tests/test_tce.py`` compares the two on a grid.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calcheck._hooks import binomial_ufuncs
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


def _binom() -> Any:
    ufuncs = binomial_ufuncs()
    if ufuncs is None:                        # scipy < 1.14, or the hooks switched off
        from scipy.stats import binom

        return _Scipy(binom)
    return _Binom(*ufuncs)


class _Scipy:
    """``scipy.stats.binom`` itself, with :meth:`_Binom.pmf_inside` as its own pmf."""

    def __init__(self, binom: Any) -> None:
        self.pmf, self.cdf, self.sf = binom.pmf, binom.cdf, binom.sf
        self.pmf_inside = binom.pmf


BINOM = _binom()
