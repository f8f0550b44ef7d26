"""Calibration metrics of multiclass classifiers (docs/multiclass.md; Nixon et al. 2019; TCE Remark 2).

calcheck's own conventions reuse docs/metrics.md's binnings per class:

* **top-label** ECE / MCE / ACE: the binary metrics on the top-label view (confidence =
  max_k p_ik, correct = 1[argmax = c_i], ties → lowest index); default 15 bins.
* **SCE**: per class k, uniform bins over p_ik with indicator 1[c_i = k];
  err_k = Σ_b (n_bk/n)|acc(b,k) − conf(b,k)|; SCE = (1/K) Σ_k err_k.
* **ACE** (classwise, ``ace_cw``): the same with equal-mass bins per class (weights n_bk/n).
* **TACE**: ACE over the probabilities p_ik ≥ ε only (default ε = 0.01), bins and weights on
  the kept values of each class (weights n_bk/n_k), divided by K (a class with no kept value
  adds 0).
* **classwise TCE** (``tce_cw``): mean over k of the binary TCE of (p_ik, 1[c_i = k]).

References
----------
.. [1] Nixon, Dusenberry, Zhang, Jerfel, Tran. Measuring calibration in deep learning. CVPR
       Workshops 2019.
.. [2] Matsubara, Tax, Mudd, Guy. TCE: A test-based approach to measuring calibration error.
       UAI 2023, Remark 2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.binning import (
    label_sums,
    quantile_bounds,
    quantile_stats_select,
    segment_sums,
    sort_order,
    sorted_binary,
    uniform_assign,
    uniform_bounds,
)
from calcheck.data import top_label_view
from calcheck.metrics._data import MetricOptions, Prepared
from calcheck.metrics._result import MetricResult
from calcheck.weights import Weights

CLASS_BLOCK = 8_000_000      # matrix entries per block of classes in the vectorized SCE


class MulticlassPrepared:
    """Validated class probabilities (n, K) and class labels, with cached per-class passes."""

    def __init__(self, probs: FloatArray, labels: IntArray, *, ties: str = "share",
                 weights: Weights | None = None) -> None:
        self.probs = np.asarray(probs, dtype=np.float64)
        self.labels = np.asarray(labels, dtype=np.int64)
        self.ties = ties
        self.weights = weights          # the top-label view's metrics take them
        self._classwise: dict[tuple[Any, ...], Any] = {}
        self._kept: dict[float | None, IntArray] = {}

    @property
    def n(self) -> int:
        """Rows."""
        return int(self.probs.shape[0])

    @property
    def k(self) -> int:
        """Classes."""
        return int(self.probs.shape[1])

    @cached_property
    def top(self) -> Prepared:
        """The top-label view as binary data (confidence, correct)."""
        conf, correct = top_label_view(self.probs, self.labels)
        return Prepared(conf, correct, validate=False, ties=self.ties, weights=self.weights)

    def column(self, k: int) -> tuple[FloatArray, IntArray]:
        """Probabilities of class k and the one-vs-rest labels 1[c = k]."""
        return np.ascontiguousarray(self.probs[:, k]), (self.labels == k).astype(np.int64)

    def selected(self, bins: int, eps: float | None) -> FloatArray:
        """Per-class ACE (``eps`` None) or TACE (probabilities >= eps) with shared ties, by
        selection instead of a sort per class (:func:`calcheck.binning.quantile_stats_select`);
        cached, so ``ace_cw`` and ``tace`` each cost one selection per class."""
        key = ("selected", bins, eps)
        if key not in self._classwise:
            err = np.zeros(self.k)
            kept = np.zeros(self.k, dtype=np.int64)
            for k in range(self.k):
                p = np.ascontiguousarray(self.probs[:, k])
                y = self.labels == k
                if eps is not None:
                    keep = p >= eps
                    p, y = p[keep], y[keep]
                kept[k] = p.shape[0]
                if p.shape[0]:
                    err[k] = _ace_of(quantile_stats_select(p, y, bins), p.shape[0])
            self._classwise[key] = err
            self._kept[eps] = kept
        return self._classwise[key]  # type: ignore[no-any-return]

    def classwise(self, bins: int, eps: float, tce_opts: dict[str, Any] | None) -> dict[str, Any]:
        """One pass over the classes (one sort each): ACE and TACE per class, and TCE if asked.

        Results are cached per (bins, eps, TCE options) so several metrics share the pass.
        """
        key = (bins, eps, None if tce_opts is None else tuple(sorted(tce_opts.items())))
        if key in self._classwise:
            return self._classwise[key]  # type: ignore[no-any-return]
        K = self.k
        ace_err = np.zeros(K)
        tace_err = np.zeros(K)
        kept = np.zeros(K, dtype=np.int64)
        tce_vals = np.zeros(K) if tce_opts is not None else None
        if self.ties == "share" and tce_vals is None:
            out = {"ace": self.selected(bins, None), "tace": self.selected(bins, eps),
                   "kept": self._kept[eps], "tce": None}
            self._classwise[key] = out
            return out
        for k in range(K):
            ps, ys = sorted_class(*self.column(k), self.ties)
            one = class_errors(ps, ys, bins=bins, eps=eps, ties=self.ties, tce_opts=tce_opts)
            ace_err[k], tace_err[k], kept[k] = one["ace"], one["tace"], one["kept"]
            if tce_vals is not None:
                tce_vals[k] = one["tce"].value
        out = {"ace": ace_err, "tace": tace_err, "kept": kept, "tce": tce_vals}
        self._classwise[key] = out
        return out


def sorted_class(p: FloatArray, y: np.ndarray, ties: str) -> tuple[FloatArray, np.ndarray]:
    """One class's one-vs-rest rows (p_ik, 1[c_i = k]) in ascending order of p: by one sort
    of packed keys for shared ties (the order inside a tie group is not used), else the
    stable order (ties in row order)."""
    if ties == "share":
        return sorted_binary(p, y)
    order = sort_order(p, ties)
    return p[order], y[order]


def class_errors(ps: FloatArray, ys: np.ndarray, *, bins: int, eps: float | None,
                 ties: str = "share", ace: bool = True,
                 tce_opts: dict[str, Any] | None = None,
                 sce_bins: int | None = None) -> dict[str, Any]:
    """One class's classwise errors from its rows sorted by p (:func:`sorted_class`): ``ace``
    (equal-mass bins over all rows, weights n_b/n; when ``ace``), ``tace`` and ``kept`` (the
    same over the rows with p ≥ ``eps`` — a sorted suffix —, weights n_b/n_kept; when ``eps``
    is given), ``tce`` (the binary TCE result, when ``tce_opts`` are given) and ``sce`` (SCE's
    err_k over ``sce_bins`` uniform bins, when given: the bins of :func:`uniform_assign` cut
    the sorted rows, each bin's Σ p summed in sorted order).  The streaming engine calls it on
    the rows a pass collected for the class, so both engines give the same numbers."""
    from calcheck.metrics.tce import tce

    out: dict[str, Any] = {"ace": 0.0, "tace": 0.0, "kept": 0, "tce": None}
    n = int(ps.shape[0])
    if sce_bins is not None:
        b = uniform_bounds(ps, sce_bins)
        out["sce"] = float(sce_from_sums(np.diff(b), segment_sums(ps, b), segment_sums(ys, b),
                                         max(n, 1), sce_bins)[0])
    if ace and n:
        out["ace"] = _ace_sorted(ps, ys, bins, ties)
    if eps is not None:
        first = int(np.searchsorted(ps, eps, side="left"))      # kept values: a sorted suffix
        out["kept"] = n - first
        if n > first:
            out["tace"] = _ace_sorted(ps[first:], ys[first:], bins, ties)
    if tce_opts is not None:
        out["tce"] = tce(Prepared.presorted(ps, ys, ties=ties), **tce_opts)
    return out


def _ace_sorted(ps: FloatArray, ys: np.ndarray, bins: int, ties: str) -> float:
    """Σ_b (n_b/n)·|ȳ_b − p̄_b| over equal-mass bins of rows sorted by score."""
    n = int(ps.shape[0])
    b = quantile_bounds(n, bins)
    cnt = np.diff(b)
    gap = _gaps(segment_sums(ps, b), label_sums(ps, ys, b, ties), cnt)
    return float(np.sum(cnt * gap) / n)


def _ace_of(stats: Any, n: int) -> float:
    """Σ_b (n_b/n)·|ȳ_b − p̄_b| of a bin table over n rows."""
    return float(np.sum(np.abs(stats.sum_label - stats.sum_score)) / n) if n else 0.0


def _gaps(sum_p: FloatArray, sum_y: np.ndarray, count: np.ndarray) -> FloatArray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, np.abs(sum_y / np.maximum(count, 1) -
                                          sum_p / np.maximum(count, 1)), 0.0)


def classwise_uniform_sums(probs: FloatArray | Sequence[FloatArray], labels: IntArray,
                           first: int, bins: int, *,
                           work: tuple[IntArray, FloatArray, np.ndarray] | None = None,
                           ) -> tuple[IntArray, FloatArray, IntArray]:
    """Per (class, uniform bin) row count, Σ p_ik and Σ 1[c_i = k] of the classes
    ``first`` .. ``first + width − 1``, flattened class-major: index (k − first)·bins + b.
    ``probs`` holds their probabilities: an (n, width) matrix, or the width columns;
    ``work``: reused buffers of n entries (int64, float64, bool) for the per-class temporaries.

    Class by class over contiguous columns (a matrix is transposed once): each (class, bin)
    sum adds its rows in row order from 0, as one ``bincount`` over the whole matrix would."""
    cols = np.ascontiguousarray(np.asarray(probs).T) if isinstance(probs, np.ndarray) else probs
    width = len(cols)
    count = np.empty(bins * width, dtype=np.int64)
    sum_p = np.empty(bins * width, dtype=np.float64)
    own = np.empty(bins * width, dtype=np.int64)
    cls = np.asarray(labels) - first if first else np.asarray(labels)
    n = int(cls.shape[0])
    key, t, flag = work if work is not None else \
        (np.empty(n, dtype=np.int64), np.empty(n), np.empty(n, dtype=bool))
    for j, p in enumerate(cols):
        uniform_assign(p, bins, out=key, work=(t, flag))
        at = slice(j * bins, (j + 1) * bins)
        sum_p[at] = np.bincount(key, weights=p, minlength=bins)
        np.left_shift(key, 1, out=key)                  # 2·bin + 1[c_i = k]: both counts in
        np.equal(cls, j, out=flag)                      # one bincount
        np.add(key, flag, out=key, casting="unsafe")
        both = np.bincount(key, minlength=2 * bins).reshape(bins, 2)
        count[at] = both.sum(axis=1)
        own[at] = both[:, 1]
    return count, sum_p, own


def sce_from_sums(count: IntArray, sum_p: FloatArray, sum_y: IntArray, n: int,
                  bins: int) -> FloatArray:
    """err_k of every class from the (class, bin) sums of :func:`classwise_uniform_sums`."""
    gap = _gaps(sum_p, sum_y, count)
    return (count * gap).reshape(-1, bins).sum(axis=1) / n  # type: ignore[no-any-return]


def sce_per_class(data: MulticlassPrepared, bins: int) -> FloatArray:
    """err_k of the static calibration error for every class (uniform bins, weights n_bk/n)."""
    n, K = data.n, data.k
    err = np.zeros(K)
    block = max(1, CLASS_BLOCK // max(n, 1))
    for k0 in range(0, K, block):
        k1 = min(K, k0 + block)
        cnt, sp, sy = classwise_uniform_sums(data.probs[:, k0:k1], data.labels, k0, bins)
        err[k0:k1] = sce_from_sums(cnt, sp, sy, n, bins)
    return err


def classwise_result(mid: str, per_class: FloatArray, n: int, settings: dict[str, Any],
                     extra: dict[str, Any] | None = None) -> MetricResult:
    """A classwise metric's result: the mean of the per-class errors, listed in ``extra``."""
    rows = [{"class": k, "error": float(e)} for k, e in enumerate(per_class)]
    if extra:
        for key, col in extra.items():
            for row, v in zip(rows, col):
                row[key] = v
    return MetricResult(id=mid, value=float(per_class.mean()), unit=settings.pop("unit", "fraction"),
                        settings=settings, n_samples=n, bins=None,
                        extra={"per_class": rows})


def weighted_classwise(data: MulticlassPrepared, mid: str, bins: int,
                       settings: dict[str, Any], threshold: float | None = None,
                       tce_opts: dict[str, Any] | None = None) -> MetricResult:
    """A classwise metric of weighted or aggregated rows: each class one-vs-rest as binary
    rows with their weights (:mod:`calcheck.weights`), the binary kernel's error — ECE for
    SCE, ACE for classwise ACE and (on the probabilities >= ``threshold``) TACE, TCE for
    classwise TCE — averaged over classes, as the unweighted forms are (a class whose kept
    rows weigh nothing adds 0)."""
    from calcheck.metrics.binned import ace, ece
    from calcheck.metrics.tce import tce

    assert data.weights is not None
    w = data.weights
    errs = np.zeros(data.k)
    kept = np.zeros(data.k)
    for k in range(data.k):
        p, y = data.column(k)
        rows = np.ones(p.shape[0], dtype=bool) if threshold is None else p >= threshold
        kept[k] = float(w.values[rows].sum())
        if not (w.values[rows] > 0).any():
            continue
        one = Prepared(p[rows], y[rows], validate=False, ties=data.ties,
                       weights=w.subset(rows))
        if mid == "sce":
            errs[k] = ece(one, bins=bins).value
        elif mid == "tce_cw":
            errs[k] = tce(one, **(tce_opts or {})).value
        else:
            errs[k] = ace(one, bins=bins).value
    n = round(w.total) if w.frequency else data.n
    return weighted_classwise_result(mid, errs, kept if threshold is not None else None, n,
                                     settings, w.frequency)


def weighted_classwise_result(mid: str, errs: FloatArray, kept: FloatArray | None, n: int,
                              settings: dict[str, Any], frequency: bool) -> MetricResult:
    """A weighted classwise metric's result from its classes' errors ``errs`` and (TACE) the
    mass each class kept (counts: whole numbers)."""
    extra = {"kept": [round(x) if frequency else float(x) for x in kept]} \
        if kept is not None else None
    return classwise_result(mid, errs, n, settings, extra=extra)


def classwise_settings(mid: str, bins: int, classes: int, ties: str,
                       threshold: float = 0.01) -> dict[str, Any]:
    """The ``settings`` of SCE, classwise ACE or TACE."""
    if mid == "sce":
        return {"binning": "uniform", "bins": bins, "classes": classes}
    if mid == "ace_cw":
        return {"binning": "quantile", "bins": bins, "classes": classes, "ties": ties}
    return {"binning": "quantile", "bins": bins, "threshold": threshold, "classes": classes,
            "ties": ties}


def sce(data: MulticlassPrepared, *, bins: int = 15) -> MetricResult:
    """Static calibration error: classwise ECE on uniform bins, averaged over classes."""
    settings = classwise_settings("sce", bins, data.k, data.ties)
    if data.weights is not None:
        return weighted_classwise(data, "sce", bins, settings)
    return classwise_result("sce", sce_per_class(data, bins), data.n, settings)


def ace_cw(data: MulticlassPrepared, *, bins: int = 15) -> MetricResult:
    """Adaptive calibration error, classwise: equal-mass bins per class, weights n_bk/n."""
    settings = classwise_settings("ace_cw", bins, data.k, data.ties)
    if data.weights is not None:
        return weighted_classwise(data, "ace_cw", bins, settings)
    errs = data.selected(bins, None) if data.ties == "share" else \
        data.classwise(bins, 0.01, None)["ace"]
    return classwise_result("ace_cw", errs, data.n, settings)


def tace(data: MulticlassPrepared, *, bins: int = 15, threshold: float = 0.01) -> MetricResult:
    """Thresholded ACE: classwise ACE over the probabilities >= threshold of each class."""
    settings = classwise_settings("tace", bins, data.k, data.ties, threshold)
    if data.weights is not None:
        return weighted_classwise(data, "tace", bins, settings, threshold=threshold)
    cw: dict[str, Any] = {"tace": data.selected(bins, threshold),
                          "kept": data._kept[threshold]} if data.ties == "share" \
        else data.classwise(bins, threshold, None)
    return classwise_result("tace", cw["tace"], data.n, settings,
                             extra={"kept": cw["kept"].tolist()})


def tce_cw(data: MulticlassPrepared, *, alpha: float = 0.05, test: str = "binomial",
           n_min: int | None = None, n_max: int | None = None) -> MetricResult:
    """Classwise TCE: the mean over classes of the binary TCE of (p_ik, 1[c_i = k]), percent."""
    opts = {"binning": "pava-bc", "alpha": alpha, "test": test, "n_min": n_min, "n_max": n_max}
    if data.weights is not None:
        return weighted_classwise(data, "tce_cw", 15, {
            "binning": "pava-bc", "alpha": alpha, "test": test, "n_min": n_min,
            "n_max": n_max, "classes": data.k, "ties": data.ties, "unit": "percent"},
            tce_opts=opts)
    cw = data.classwise(15, 0.01, opts)
    return classwise_result("tce_cw", cw["tce"], data.n,
                             {"binning": "pava-bc", "alpha": alpha, "test": test,
                              "n_min": n_min, "n_max": n_max, "classes": data.k,
                              "ties": data.ties, "unit": "percent"})


# registry kernels: f(data, options) -> MetricResult


def sce_metric(data: MulticlassPrepared, o: MetricOptions) -> MetricResult:
    return sce(data, bins=o.bins)


def ace_cw_metric(data: MulticlassPrepared, o: MetricOptions) -> MetricResult:
    return ace_cw(data, bins=o.bins)


def tace_metric(data: MulticlassPrepared, o: MetricOptions) -> MetricResult:
    return tace(data, bins=o.bins, threshold=o.tace_threshold)


def tce_cw_metric(data: MulticlassPrepared, o: MetricOptions) -> MetricResult:
    return tce_cw(data, alpha=o.alpha, test=o.test, n_min=o.tce_nmin, n_max=o.tce_nmax)


# ---------------------------------------------------------------------------------------------
# classwise forms of the binning-free metrics: each class one-vs-rest, averaged


def _one_vs_rest(binary: str, mid: str) -> Callable[[MulticlassPrepared, MetricOptions],
                                                    MetricResult]:
    """The kernel of ``mid``: the binary metric ``binary`` on each class's (p_ik, 1[c_i = k]),
    averaged over the classes as SCE and classwise ACE are (the per-class values in
    ``per_class``)."""
    def kernel(data: MulticlassPrepared, o: MetricOptions) -> MetricResult:
        from calcheck import registry

        spec = registry.METRICS[binary]
        errs = np.zeros(data.k)
        settings: dict[str, Any] = {}
        per_class: dict[str, list[Any]] = {"sigma": [], "bins": [], "grid_nodes": []}
        for k in range(data.k):
            p, y = data.column(k)
            res = spec.compute(Prepared(p, y, validate=False, ties=data.ties,
                                        weights=data.weights), o)
            errs[k] = res.value
            settings = dict(res.settings)
            for key, col in per_class.items():          # per-class choices, not settings
                col.append(settings.pop(key, res.extra.get(key)))
        if binary == "ece_sweep":
            settings.pop("binning", None)
        extra = {key: col for key, col in per_class.items() if any(v is not None for v in col)}
        w = data.weights
        n = round(w.total) if w is not None and w.frequency else data.n
        return classwise_result(mid, errs, n, {**settings, "one_vs_rest": binary,
                                                "classes": data.k}, extra=extra or None)
    kernel.__name__ = f"{mid}_metric"
    return kernel


smece_cw_metric = _one_vs_rest("smece", "smece_cw")
ici_cw_metric = _one_vs_rest("ici", "ici_cw")
ecce_mad_cw_metric = _one_vs_rest("ecce_mad", "ecce_mad_cw")
ecce_r_cw_metric = _one_vs_rest("ecce_r", "ecce_r_cw")
ece_sweep_cw_metric = _one_vs_rest("ece_sweep", "ece_sweep_cw")
