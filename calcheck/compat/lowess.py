"""statsmodels' ``lowess`` (0.14–0.15), as calzone calls it for its LOWESS ICI.

Cleveland's algorithm as statsmodels runs it, without robustness iterations (``it=0``):

* the rows are sorted by x with numpy's default (quicksort) ``argsort``; k = ⌊frac·n + 1e-10⌋
  (at least 2, at most n) neighbours by position, the window [left, left + k) sliding right
  while x_i > (x[left] + x[left + k]) / 2;
* weights (1 − (|x_j − x_i|/r)³)³ with r the larger distance to the window's ends, normalised;
  fewer than two weights above 1e-12 → the fit is y_i itself;
* a weighted *linear* fit, its variance term floored at 1e-12;
* ``delta``: after a fit at x_i, the points up to x_i + delta are not fitted but
  interpolated linearly between fits, tied x's copy the fit of their first occurrence.

Each fit is one vectorised pass over its window; the fits themselves run in order, at most
about (range of x)/delta + (number of distinct x) of them.
"""

from __future__ import annotations

import numpy as np

from calcheck._typing import FloatArray


def lowess(y: FloatArray, x: FloatArray, frac: float, delta: float) -> tuple[FloatArray,
                                                                            FloatArray]:
    """(x sorted, fitted values): ``statsmodels.nonparametric.lowess(y, x, frac, it=0,
    delta, return_sorted=True)``."""
    order = np.argsort(x)
    xs = np.asarray(x, dtype=np.float64)[order]
    ys = np.asarray(y, dtype=np.float64)[order]
    n = xs.shape[0]
    k = min(max(int(frac * n + 1e-10), 2), n)
    fit = np.zeros(n)
    mids = (xs[: n - k] + xs[k:]) / 2.0 if n > k else np.zeros(0)
    left = 0
    i, last = 0, -1
    while True:
        xv = xs[i]
        # slide the window: first left >= the current one with xv <= mid[left] (or the end)
        if left < n - k:
            j = int(np.searchsorted(mids, xv, side="left"))
            left = max(left, min(j, n - k))
        right = left + k
        radius = max(xv - xs[left], xs[right - 1] - xv)
        with np.errstate(invalid="ignore", divide="ignore"):
            w = (1.0 - (np.abs(xs[left:right] - xv) / radius) ** 3) ** 3
        ok = int(np.sum(w > 1e-12)) >= 2
        if ok:
            w = w / np.sum(w)
            xw = xs[left:right]
            mean = float(np.sum(w * xw))
            var = max(float(np.sum(w * (xw - mean) ** 2)), 1e-12)
            p = w * (1.0 + (xv - mean) * (xw - mean) / var)
            fit[i] = float(np.sum(p * ys[left:right]))
        else:
            fit[i] = ys[i]
        if last < i - 1:                                   # interpolate the skipped points
            a = (xs[last + 1: i] - xs[last]) / (xs[i] - xs[last])
            fit[last + 1: i] = a * fit[i] + (1.0 - a) * fit[last]
        # the next point to fit: the last within delta (ties copy this fit)
        last = i
        cut = xs[i] + delta
        kk = last
        for kk in range(last + 1, n):
            if xs[kk] > cut:
                break
            if xs[kk] == xs[last]:
                fit[kk] = fit[last]
                last = kk
        i = max(kk - 1, last + 1)
        if last >= n - 1:
            break
    return xs, fit
