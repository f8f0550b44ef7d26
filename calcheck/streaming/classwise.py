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

from calcheck._typing import FloatArray, IntArray, Passes
from calcheck.data import ClassColumns
from calcheck.metrics._result import MetricResult
from calcheck.metrics.multiclass import classwise_result, classwise_uniform_sums, sce_from_sums
from calcheck.streaming.runner import one_pass
from calcheck.streaming.states import CompensatedSum, StreamState, workspace
from calcheck.tuning import DEFAULT, Tuning


@dataclass(frozen=True)
class ClasswiseSpec:
    """SCE's state for ``classes`` classes and ``bins`` uniform bins, and optionally the grid
    state (``top``, a :class:`~calcheck.streaming.engine.StateSpec`) of the top-label view; the
    reader gives its batches as (:class:`~calcheck.data.ClassColumns`, class indices)."""

    classes: int
    bins: int = 15
    top: Any = None
    hold: bool = False              # keep each batch's top-label view (see engine.BatchesKept)
    sce: bool = True                # SCE's sums (else the held classes' passes give SCE)
    hold_labels: bool = False       # keep every row's class (take_held_labels)
    view: str = "columns"
    threaded = True                 # fold() runs this pass on two threads

    def new(self) -> ClasswiseState:
        return ClasswiseState(self.classes, self.bins,
                              top=None if self.top is None else self.top.new(),
                              held=[] if self.hold else None, sce=self.sce,
                              held_classes=[] if self.hold_labels else None)


@dataclass
class ClasswiseState:
    """Per (class, bin): rows, rows of that class, Σ p (class-major, index k·bins + b) — when
    ``sce`` —; and the rows of each class (``class_n``)."""

    classes: int
    bins: int
    top: StreamState | None = None
    n: int = 0
    count: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hits: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    sum_p: CompensatedSum | None = None
    # with ``hold``: (first row id, confidence, correct) of every batch, for the top-label
    # view's later passes (:meth:`held_batches`)
    held: list[tuple[int, FloatArray, np.ndarray]] | None = None
    sce: bool = True
    class_n: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # with ``hold_labels``: (first row id, class indices) of every batch (take_held_labels)
    held_classes: list[tuple[int, np.ndarray]] | None = None

    def __post_init__(self) -> None:
        if self.sum_p is None:
            size = self.classes * self.bins
            self.count = np.zeros(size, dtype=np.int64)
            self.hits = np.zeros(size, dtype=np.int64)
            self.sum_p = CompensatedSum.zeros(size)
            self.class_n = np.zeros(self.classes, dtype=np.int64)

    def update(self, probs: ClassColumns | FloatArray, labels: IntArray,
               start: int = 0) -> ClasswiseState:
        """Add a validated batch — its :class:`~calcheck.data.ClassColumns`, or an (n, K)
        matrix — (rows sum to 1, labels in 0..K−1) whose first row has id ``start``; the sums
        do not depend on row order (``start`` orders the held batches)."""
        if not isinstance(probs, ClassColumns) and np.ndim(probs) != 2:
            raise ValueError(f"expected probabilities of shape (n, {self.classes})")
        cols = probs if isinstance(probs, ClassColumns) else \
            ClassColumns(tuple(np.asarray(probs, dtype=np.float64).T))
        n, k = cols.shape
        if k != self.classes:
            raise ValueError(f"expected probabilities of shape (n, {self.classes})")
        if n == 0:
            return self
        assert self.sum_p is not None
        y = np.asarray(labels)
        if self.sce:
            _, t, _, key, flag = workspace(n)     # (the top grid's update reuses them after)
            cnt, sp, sy = classwise_uniform_sums(cols.columns, y, 0, self.bins,
                                                 work=(key.view(np.int64), t, flag))
            self.count += cnt
            self.hits += sy
            self.sum_p.add(sp)
        self.class_n += np.bincount(y, minlength=self.classes)[:self.classes]
        if self.held_classes is not None:
            self.held_classes.append((start, y.astype(np.min_scalar_type(-self.classes))))
        self.n += n
        if self.top is not None:
            conf, correct = cols.top_label(y)
            c8: Any = correct.astype(np.int8)
            self.top.update(conf, c8, start)
            if self.held is not None:
                self.held.append((start, conf, c8))
        return self

    def held_batches(self) -> list[tuple[FloatArray, np.ndarray]] | None:
        """The top-label view's (confidence, correct) batches in stream order, as the reader
        gives them to a top-label pass, when this pass held them."""
        if self.held is None:
            return None
        return [(conf, c8) for _, conf, c8 in sorted(self.held, key=lambda b: b[0])]

    def take_held_labels(self) -> np.ndarray | None:
        """Every row's class index in stream order (1 byte a row up to 128 classes), when this
        pass kept them — handed over, not kept here: the class passes slice them instead of
        reading the label column again (:func:`calcheck.io.stream.stream_batches`)."""
        if self.held_classes is None:
            return None
        parts = [y for _, y in sorted(self.held_classes, key=lambda b: b[0])]
        self.held_classes = None
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int8)

    def merge(self, other: ClasswiseState) -> ClasswiseState:
        if (self.classes, self.bins) != (other.classes, other.bins):
            raise ValueError("cannot merge classwise states of different shapes")
        assert self.sum_p is not None and other.sum_p is not None
        self.count += other.count
        self.hits += other.hits
        self.sum_p.merge(other.sum_p)
        self.class_n += other.class_n
        self.n += other.n
        if self.top is not None and other.top is not None:
            self.top.merge(other.top)
        if self.held is not None and other.held is not None:
            self.held.extend(other.held)
        if self.held_classes is not None and other.held_classes is not None:
            self.held_classes.extend(other.held_classes)
        return self

    def results(self, ids: list[str]) -> dict[str, MetricResult]:
        """The classwise metrics among ``ids`` (SCE), in the in-memory engine's form."""
        assert self.sum_p is not None
        out: dict[str, MetricResult] = {}
        if "sce" in ids and self.n and self.sce:
            err = sce_from_sums(self.count, self.sum_p.value, self.hits, self.n, self.bins)
            out["sce"] = classwise_result("sce", err, self.n,
                                          {"binning": "uniform", "bins": self.bins,
                                           "classes": self.classes})
        return out


# ---------------------------------------------------------------------------------------------
# classwise positional metrics: a binary computation per class (calcheck.streaming.views)

POSITIONAL_CLASSWISE = ("ace_cw", "tace", "tce_cw")


def _class_rows(share: bool, rows: int = 0, **errors: Any) -> Passes[Any]:
    """A sub-stream small enough to hold (``Tuning.hold_rows`` rows): one pass keeps its rows,
    sorted, then the in-memory engine's :func:`~calcheck.metrics.multiclass.class_errors` on
    them — the in-memory numbers, in one pass instead of a grid pass, a rank search and a row
    pass.  ``rows``: the rows it will see, when known (their keys go into one buffer of that
    size, not one grown by doubling)."""
    from calcheck.metrics.multiclass import class_errors
    from calcheck.streaming.heldrows import SortedRowsSpec

    state = yield from one_pass(SortedRowsSpec(packed=share, rows=rows))
    ps, ys = state.sorted_rows()
    del state
    return class_errors(ps, ys, **errors)


def _class_passes(ids: list[str], id_bound: int, bins: int, **options: Any
                  ) -> Passes[tuple[int, dict[str, Any]]]:
    """A larger sub-stream: one grid pass, then its positional metrics (a rank search and a
    row pass): (rows, results by id)."""
    from calcheck.streaming.engine import StateSpec
    from calcheck.streaming.positional import positional_passes

    grid = yield from one_pass(StateSpec(bins=bins, log_loss=False))
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
                         sce: bool = False, labels: IntArray | None = None,
                         ) -> dict[Any, tuple[dict[str, MetricResult], dict[str, str]]]:
    """``ace_cw``, ``tace`` and ``tce_cw`` of streamed multiclass input: the binary ACE / TCE
    of each class's one-vs-rest view (TACE: of its rows with p ≥ ``threshold``), as the
    in-memory engine defines them.  ``sizes`` maps each ``--by`` group (``ALL``: all rows;
    None: the rows with a missing group value) to its rows; every group's classes run in
    shared passes.  Returns, per group, the results and the errors (a metric that cannot be
    computed on that group, with the reason).  ``labels``: every row's class, kept by the first
    pass (:meth:`ClasswiseState.take_held_labels`), so the class passes read only their classes'
    columns.

    A group of at most ``source.tuning.hold_rows`` rows (every class's view has the group's rows)
    takes one pass per few classes: each keeps its class's rows sorted (8 bytes a row with
    shared ties; the classes held at once stay within that many rows) and computes the three
    metrics on them as the in-memory engine does.  A larger group runs a grid pass, a rank
    search and a row pass per class (TACE: per class's kept rows), PAVA-BC on equal-mass
    blocks beyond the exact budget.

    ``sce``: SCE too, from each class's held rows (:func:`sce_in_class_passes` says when the
    first pass may leave it to these passes)."""
    from calcheck.streaming.runner import drive_lockstep
    from calcheck.streaming.views import ALL, CHUNK

    tuning: Tuning = source.tuning

    wanted = [m for m in POSITIONAL_CLASSWISE if m in ids]
    out: dict[Any, tuple[dict[str, MetricResult], dict[str, str]]] = {
        g: ({}, {}) for g in sizes}
    if sce and not sce_in_class_passes(wanted, sizes.values(), source.tuning):
        raise ValueError("SCE from the class passes needs every group's classes held whole")
    if not wanted:
        return out
    tce_opts = {"alpha": alpha, "test": test, "n_min": n_min, "n_max": n_max}
    held, subs = _class_plans(classes, wanted, sizes, out, bins=bins, threshold=threshold,
                              ties=ties, sce=sce, tce_opts=tce_opts, tuning=tuning)

    done: dict[Any, Any] = {}
    if held:                       # no grids: every class in one lockstep, within the budget
        done.update(drive_lockstep(source, held, view="columns", by=by,
                                   rows={key: sizes[key[0]] for key in held},
                                   max_rows=tuning.hold_rows, chunk=len(held),
                                   labels=labels))
    if subs:
        id_bound = source.id_bound(sizes.get(ALL) or sum(sizes.values()))
        comps = {key: (sub, _class_passes(ids_, id_bound, bins, **tce_opts, ties=ties,
                                          collect_rows=tuning.collect_rows // CHUNK,
                                          tuning=tuning))
                 for key, (sub, ids_) in subs.items()}
        done.update(drive_lockstep(source, comps, view="columns", by=by,
                                   rows={key: sizes[key[0]] for key in subs},
                                   max_rows=tuning.exact_pava_rows, labels=labels))
    _assemble(out, done, sizes, wanted, classes, sce, bins, threshold, {**tce_opts, "ties": ties})
    return out


def _class_plans(classes: int, wanted: list[str], sizes: dict[Any, int],
                 out: dict[Any, tuple[dict[str, MetricResult], dict[str, str]]], *,
                 bins: int, threshold: float, ties: str, sce: bool, tce_opts: dict[str, Any],
                 tuning: Tuning) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """The computations of :func:`classwise_positional`: per class of a group held whole
    (its rows kept, the metrics in memory), or for a larger group a grid pass, a rank search
    and a row pass per class (TACE: its kept rows); a group too small for PAVA-BC gets
    ``tce_cw``'s error in ``out`` instead."""
    from calcheck.errors import CalcheckError
    from calcheck.metrics.tce import check_pava_bc_rows
    from calcheck.streaming.views import SubStream

    n_min, n_max = tce_opts["n_min"], tce_opts["n_max"]
    held: dict[Any, tuple[SubStream, Any]] = {}          # groups held in memory, per class
    subs: dict[Any, tuple[SubStream, list[str]]] = {}    # larger groups: grid and search
    for g, n in sizes.items():
        errors = out[g][1]
        if "tce_cw" in wanted:
            try:
                check_pava_bc_rows(n, n_min, n_max)
            except CalcheckError as exc:
                errors["tce_cw"] = str(exc)
        if n <= tuning.hold_rows:
            only_tace = wanted == ["tace"]
            errs = {"bins": bins, "ties": ties, "ace": "ace_cw" in wanted,
                    "eps": threshold if "tace" in wanted else None,
                    "sce_bins": bins if sce else None,
                    "tce_opts": ({"binning": "pava-bc", **tce_opts}
                                 if "tce_cw" in wanted and "tce_cw" not in errors else None)}
            for k in range(classes):
                sub = SubStream(cls=k, group=g, min_score=threshold if only_tace else None)
                held[(g, "rows", k)] = (sub, _class_rows(ties == "share",
                                                         0 if only_tace else n, **errs))
            continue
        per_class = [m for m in ("ace", "tce") if f"{m}_cw" in wanted and f"{m}_cw" not in errors]
        for k in range(classes):
            if per_class:
                subs[(g, "class", k)] = (SubStream(cls=k, group=g), per_class)
            if "tace" in wanted:
                subs[(g, "tace", k)] = (SubStream(cls=k, group=g, min_score=threshold), ["ace"])

    return held, subs


def _assemble(out: dict[Any, tuple[dict[str, MetricResult], dict[str, str]]],
              done: dict[Any, Any], sizes: dict[Any, int], wanted: list[str], classes: int,
              sce: bool, bins: int, threshold: float, tce_opts: dict[str, Any]) -> None:
    """Every group's classwise results from its classes' computations (``done``), a failed
    computation's error on the metrics it serves."""
    for g, n in sizes.items():
        results, errors = out[g]
        failed = {key[1]: r for key, r in done.items() if key[0] == g and isinstance(r, Exception)}
        for kind, err in failed.items():
            for m in (["tace"] if kind == "tace" else
                      [*wanted, *(["sce"] if sce else [])] if kind == "rows" else
                      [m for m in wanted if m != "tace"]):
                errors.setdefault(m, str(err))
        per = _per_class({key[1:]: r for key, r in done.items()
                          if key[0] == g and not isinstance(r, Exception)}, classes)
        results.update(_classwise_results(
            per, [m for m in [*wanted, *(["sce"] if sce else [])] if m not in errors],
            classes, n, bins, threshold, tce_opts))


def sce_in_class_passes(wanted: list[str], sizes: Any, tuning: Tuning = DEFAULT) -> bool:
    """Whether the class passes can give SCE: every class is held whole (each group within
    ``tuning.hold_rows`` rows, and not TACE's kept rows alone)."""
    return bool(set(wanted) & {"ace_cw", "tce_cw"}) and \
        all(n <= tuning.hold_rows for n in sizes)


def _per_class(done: dict[Any, Any], classes: int) -> list[dict[str, Any]]:
    """Each class's {ace, tace, kept, tce (a result), pava_input} from either computation: the
    held rows' :func:`~calcheck.metrics.multiclass.class_errors`, or the grid computations'
    (rows, binary results) of the class and of its kept rows (a failed computation is left
    out of ``done``: its metrics are among the group's errors)."""
    out = []
    for k in range(classes):
        if ("rows", k) in done:
            one = dict(done[("rows", k)])
            one["pava_input"] = "exact"
        else:
            _, res = done.get(("class", k), (0, {}))
            kept, tres = done.get(("tace", k), (0, {}))
            one = {"ace": res["ace"].value if "ace" in res else 0.0,
                   "tace": tres["ace"].value if kept and "ace" in tres else 0.0,
                   "kept": kept, "tce": res.get("tce")}
            one["pava_input"] = one["tce"].settings.get("pava_input") if one["tce"] else None
        out.append(one)
    return out


def _classwise_results(per_class: list[dict[str, Any]], wanted: list[str], classes: int,
                       n: int, bins: int, threshold: float,
                       tce_opts: dict[str, Any]) -> dict[str, MetricResult]:
    """The classwise results from each class's errors (:func:`_per_class`)."""
    out: dict[str, MetricResult] = {}
    if "sce" in wanted and n:                 # (as ClasswiseState.results gives it)
        out["sce"] = classwise_result("sce", np.array([c.get("sce", 0.0) for c in per_class]),
                                      n, {"binning": "uniform", "bins": bins,
                                          "classes": classes})
    if "ace_cw" in wanted:
        err = np.array([c["ace"] for c in per_class])
        out["ace_cw"] = classwise_result("ace_cw", err, n, {"binning": "quantile", "bins": bins,
                                                            "classes": classes,
                                                            "ties": tce_opts["ties"]})
    if "tace" in wanted:
        err = np.array([c["tace"] for c in per_class])
        out["tace"] = classwise_result("tace", err, n,
                                       {"binning": "quantile", "bins": bins,
                                        "threshold": threshold, "classes": classes,
                                        "ties": tce_opts["ties"]},
                                       extra={"kept": [int(c["kept"]) for c in per_class]})
    if "tce_cw" in wanted:
        how = sorted({str(c["pava_input"]) for c in per_class})
        out["tce_cw"] = classwise_result("tce_cw", np.array([c["tce"].value for c in per_class]),
                                         n, {"binning": "pava-bc", **tce_opts, "classes": classes,
                                             "pava_input": how[0] if len(how) == 1 else how,
                                             "unit": "percent"})
    return out
