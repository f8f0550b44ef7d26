"""Classwise partial state of multiclass input: SCE's (class, uniform bin) sums.

SCE (docs/multiclass.md) bins each class's probabilities p_ik on the uniform edges and compares, per
(class, bin), the mean probability with the share of rows of that class.  Its sufficient
statistics are a K × bins table of int64 row counts and class counts and a compensated sum of
p_ik — exactly the in-memory sums (:func:`~calcheck.metrics.multiclass.classwise_uniform_sums`,
the same bin rule on the same floats), so any split of the rows merged in any order gives
identical counts and SCE equal to the in-memory value to ~1e-15.

The top-label metrics (ece_top, mce_top, ace_top, and every binary id on the top-label view) are
the binary engine's on the top-label view (confidence, correct) of each batch: the reader gives
that view to the positional passes (``view="top"``), and this state, which reads the full
probabilities, feeds it to a grid state it carries (``top``), so one pass serves both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.data import top_label_view
from calcheck.metrics._result import MetricResult
from calcheck.metrics.multiclass import classwise_result, classwise_uniform_sums, sce_from_sums
from calcheck.streaming.states import CompensatedSum, StreamState

CLASSWISE_METRICS = ("sce",)


@dataclass(frozen=True)
class ClasswiseSpec:
    """SCE's state for ``classes`` classes and ``bins`` uniform bins, and optionally the grid
    state (``top``, a :class:`~calcheck.streaming.engine.StateSpec`) of the top-label view; the
    reader gives its batches as (probabilities (n, K), class indices)."""

    classes: int
    bins: int = 15
    top: Any = None
    view: str = "classes"
    threaded = True                 # fold() runs this pass on two threads

    def new(self) -> ClasswiseState:
        return ClasswiseState(self.classes, self.bins,
                              top=None if self.top is None else self.top.new())


@dataclass
class ClasswiseState:
    """Per (class, bin): rows, rows of that class, Σ p (class-major, index k·bins + b)."""

    classes: int
    bins: int
    top: StreamState | None = None
    n: int = 0
    count: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hits: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    sum_p: CompensatedSum | None = None

    def __post_init__(self) -> None:
        if self.sum_p is None:
            size = self.classes * self.bins
            self.count = np.zeros(size, dtype=np.int64)
            self.hits = np.zeros(size, dtype=np.int64)
            self.sum_p = CompensatedSum.zeros(size)

    def update(self, probs: FloatArray, labels: IntArray, start: int = 0) -> ClasswiseState:
        """Add a validated batch (rows of ``probs`` sum to 1, labels in 0..K−1); the sums do not
        depend on row order, so ``start`` is unused."""
        P = np.asarray(probs, dtype=np.float64)
        if P.ndim != 2 or P.shape[1] != self.classes:
            raise ValueError(f"expected probabilities of shape (n, {self.classes})")
        if P.shape[0] == 0:
            return self
        assert self.sum_p is not None
        y = np.asarray(labels)
        cnt, sp, sy = classwise_uniform_sums(P, y, 0, self.bins)
        self.count += cnt
        self.hits += sy
        self.sum_p.add(sp)
        self.n += int(P.shape[0])
        if self.top is not None:
            conf, correct = top_label_view(P, y)
            self.top.update(conf, correct.astype(np.int8), start)
        return self

    def merge(self, other: ClasswiseState) -> ClasswiseState:
        if (self.classes, self.bins) != (other.classes, other.bins):
            raise ValueError("cannot merge classwise states of different shapes")
        assert self.sum_p is not None and other.sum_p is not None
        self.count += other.count
        self.hits += other.hits
        self.sum_p.merge(other.sum_p)
        self.n += other.n
        if self.top is not None and other.top is not None:
            self.top.merge(other.top)
        return self

    def results(self, ids: list[str]) -> dict[str, MetricResult]:
        """The classwise metrics among ``ids`` (SCE), in the in-memory engine's form."""
        assert self.sum_p is not None
        out: dict[str, MetricResult] = {}
        if "sce" in ids and self.n:
            err = sce_from_sums(self.count, self.sum_p.value, self.hits, self.n, self.bins)
            out["sce"] = classwise_result("sce", err, self.n,
                                          {"binning": "uniform", "bins": self.bins,
                                           "classes": self.classes})
        return out


# ---------------------------------------------------------------------------------------------
# classwise positional metrics: a binary computation per class (calcheck.streaming.views)

POSITIONAL_CLASSWISE = ("ace_cw", "tace", "tce_cw")


def _class_passes(ids: list[str], id_bound: int, bins: int, **options: Any) -> Any:
    """One sub-stream's grid pass, then its positional metrics: (rows, results by id)."""
    from calcheck.streaming.engine import StateSpec
    from calcheck.streaming.positional import positional_passes

    grid = yield StateSpec(bins=bins, log_loss=False)
    n = grid.n
    if n == 0:
        return 0, {}
    passes = positional_passes(grid, ids, id_bound=id_bound, bins=bins, **options)
    del grid                               # the passes keep what they need of it
    results, _ = yield from passes
    return n, results


def classwise_positional(source: Any, classes: int, ids: list[str], *,
                         sizes: dict[Any, int], by: str | None = None, bins: int = 15,
                         threshold: float = 0.01, alpha: float = 0.05, test: str = "binomial",
                         n_min: int | None = None, n_max: int | None = None, ties: str = "share",
                         ) -> tuple[dict[Any, tuple[dict[str, MetricResult],
                                                           dict[str, str]]], int]:
    """``ace_cw``, ``tace`` and ``tce_cw`` of streamed multiclass input: the binary ACE / TCE
    of each class's one-vs-rest view (TACE: of its rows with p ≥ ``threshold``), as the
    in-memory engine defines them.  ``sizes`` maps each ``--by`` group (``ALL``: all rows;
    None: the rows with a missing group value) to its rows; every group's classes run in
    shared passes.  Returns, per group, the results and the errors (a metric that cannot be
    computed on that group, with the reason), and the passes taken."""
    from calcheck.errors import CalcheckError
    from calcheck.metrics.tce import check_pava_bc_rows
    from calcheck.streaming.positional import EXACT_PAVA_ROWS
    from calcheck.streaming.select import COLLECT_ROWS
    from calcheck.streaming.views import ALL, CHUNK, SubStream, drive_lockstep

    wanted = [m for m in POSITIONAL_CLASSWISE if m in ids]
    out: dict[Any, tuple[dict[str, MetricResult], dict[str, str]]] = {
        g: ({}, {}) for g in sizes}
    if not wanted:
        return out, 0
    tce_opts = {"alpha": alpha, "test": test, "n_min": n_min, "n_max": n_max}
    subs: dict[Any, tuple[SubStream, list[str]]] = {}
    for g, n in sizes.items():
        errors = out[g][1]
        if "tce_cw" in wanted:
            try:
                check_pava_bc_rows(n, n_min, n_max)
            except CalcheckError as exc:
                errors["tce_cw"] = str(exc)
        per_class = [m for m in ("ace", "tce") if f"{m}_cw" in wanted and f"{m}_cw" not in errors]
        for k in range(classes):
            if per_class:
                subs[(g, "class", k)] = (SubStream(cls=k, group=g), per_class)
            if "tace" in wanted:
                subs[(g, "tace", k)] = (SubStream(cls=k, group=g, min_score=threshold), ["ace"])

    id_bound = source.id_bound(sizes.get(ALL) or sum(sizes.values()))
    comps = {key: (sub, _class_passes(ids_, id_bound, bins, **tce_opts, ties=ties,
                                      collect_rows=COLLECT_ROWS // CHUNK))
             for key, (sub, ids_) in subs.items()}
    done, passes = drive_lockstep(source, comps, view="classes", by=by,
                                  rows={key: sizes[key[0]] for key in subs},
                                  max_rows=EXACT_PAVA_ROWS)
    for g, n in sizes.items():
        results, errors = out[g]
        failed = {key[1]: r for key, r in done.items() if key[0] == g and isinstance(r, Exception)}
        for kind, err in failed.items():
            for m in (["tace"] if kind == "tace" else [m for m in wanted if m != "tace"]):
                errors.setdefault(m, str(err))
        results.update(_classwise_results(
            {key[1:]: r for key, r in done.items() if key[0] == g},
            [m for m in wanted if m not in errors], classes, n, bins, threshold,
            {**tce_opts, "ties": ties}))
    return out, passes


def _classwise_results(done: dict[Any, Any], wanted: list[str], classes: int, n: int,
                       bins: int, threshold: float,
                       tce_opts: dict[str, Any]) -> dict[str, MetricResult]:
    """The classwise results from each class's (rows, binary results)."""
    out: dict[str, MetricResult] = {}
    if "ace_cw" in wanted:
        err = np.array([done[("class", k)][1]["ace"].value for k in range(classes)])
        out["ace_cw"] = classwise_result("ace_cw", err, n, {"binning": "quantile", "bins": bins,
                                                            "classes": classes,
                                                            "ties": tce_opts["ties"]})
    if "tace" in wanted:
        kept = [done[("tace", k)][0] for k in range(classes)]
        err = np.array([done[("tace", k)][1]["ace"].value if m else 0.0
                        for k, m in enumerate(kept)])
        out["tace"] = classwise_result("tace", err, n,
                                       {"binning": "quantile", "bins": bins,
                                        "threshold": threshold, "classes": classes,
                                        "ties": tce_opts["ties"]},
                                       extra={"kept": kept})
    if "tce_cw" in wanted:
        tces = [done[("class", k)][1]["tce"] for k in range(classes)]
        how = sorted({str(r.settings.get("pava_input")) for r in tces})
        out["tce_cw"] = classwise_result("tce_cw", np.array([r.value for r in tces]), n,
                                         {"binning": "pava-bc", **tce_opts, "classes": classes,
                                          "pava_input": how[0] if len(how) == 1 else how,
                                          "unit": "percent"})
    return out
