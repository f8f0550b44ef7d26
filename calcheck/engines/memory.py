"""The in-memory engine: every metric and test on :class:`~calcheck.data.Predictions`.

The input is read once (:func:`calcheck.io.load_predictions`) with the extra columns the run
needs; metrics come from the registry's kernels (one shared sort), ``--ci`` from the percentile
bootstrap of :mod:`calcheck.uncertainty`, ``--by`` by computing every metric on each group's
rows, ``--var`` from :mod:`calcheck.metrics.vece`, tests from :mod:`calcheck.hypotests` on the
binary (or top-label) view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from calcheck import registry
from calcheck._typing import IntArray
from calcheck.data import Predictions
from calcheck.engines.base import (
    CAPABILITIES,
    Capabilities,
    FigureOptions,
    GroupOptions,
    IntervalOptions,
    Outcome,
    Progress,
    VariableOptions,
    renormalized,
    top_label_note,
)
from calcheck.errors import CalcheckError, InputError
from calcheck.metrics import (
    MetricOptions,
    MetricResult,
    MulticlassPrepared,
    Prepared,
    compute_metrics,
    compute_multiclass_metrics,
)
from calcheck.metrics._result import GroupResult
from calcheck.weights import ZERO_MASS

if TYPE_CHECKING:
    from calcheck.hypotests import TestOptions
    from calcheck.io.windows import WindowColumn
    from calcheck.segments import SegmentOptions


def compute(data: Predictions, ids: list[str], options: MetricOptions,
            progress: Callable[[int, int], None] | None = None) -> dict[str, MetricResult]:
    """The metrics ``ids`` of binary or multiclass predictions (as a peer library computes
    them under ``compat``); ``progress`` (metrics done, in all) is told after each metric."""
    if data.weights is not None and not data.weights.total > 0:
        raise InputError(ZERO_MASS)
    if options.compat:
        from calcheck import compat

        return compat.compute(options.compat, data, ids, options.bins,
                              tace_threshold=options.tace_threshold)
    if data.probs is not None:
        return compute_multiclass_metrics(
            MulticlassPrepared(data.probs, data.labels, ties=options.ties,
                               weights=data.weights), ids, options, progress)
    assert data.scores is not None
    return compute_metrics(prepared(data, options.ties), ids, options, progress)


def prepared(data: Predictions, ties: str) -> Prepared:
    """The binary rows as a :class:`Prepared`, kept with ``data`` so that every metric, the
    summary's score ranges and later calls share one sort."""
    assert data.scores is not None
    if data.sorted_order is not None:              # a bootstrap replicate, listed sorted
        return Prepared(data.scores, data.labels, validate=False, order=data.sorted_order,
                        ties=ties, weights=data.weights)
    cache: dict[str, Prepared] = data.__dict__.setdefault("_prepared", {})
    if ties not in cache:
        cache[ties] = Prepared(data.scores, data.labels, validate=False, ties=ties,
                               weights=data.weights)
        cache[ties].uniform.update(data.uniform_read)   # equal-width bins folded while reading
    return cache[ties]


def read_fold(bins: tuple[int, ...]) -> Callable[[int], Any] | None:
    """The hook the reader calls to fold a large binary file's rows into the equal-width
    ``bins`` while it reads (:class:`~calcheck.binning.UniformFold`), or None."""
    if not bins:
        return None
    from calcheck.binning import UniformFold

    return lambda rows: UniformFold(rows, bins)


def group_keys(values: np.ndarray) -> tuple[list[str | None], IntArray]:
    """Distinct ``--by`` keys (``str(value)``; None for a missing value, listed last) and the
    key index of every row."""
    missing = np.array([v is None or (isinstance(v, float) and v != v) for v in values.tolist()],
                       dtype=bool)
    text = np.array(["" if m else str(v) for v, m in zip(values.tolist(), missing)], dtype=str)
    real, inverse = np.unique(text[~missing], return_inverse=True)
    keys: list[str | None] = [str(k) for k in real]
    codes = np.full(values.shape[0], len(keys), dtype=np.int64)
    codes[~missing] = inverse
    if missing.any():
        keys.append(None)
    return keys, codes


def group_sizes(data: Predictions, codes: IntArray, k: int) -> IntArray:
    """Rows per group of ``data`` (``codes``: every row's group, of ``k``; aggregated rows:
    the predictions they stand for)."""
    w = data.weights
    if w is not None and w.frequency:
        return np.round(np.bincount(codes, weights=w.values, minlength=k)).astype(np.int64)
    return np.bincount(codes, minlength=k)


class MemoryEngine:
    """Every metric and test on predictions held in memory."""

    name = "memory"
    capabilities: Capabilities = CAPABILITIES["memory"]

    def __init__(self, data: Predictions, *, progress: Progress | None = None) -> None:
        self.data = data
        self.progress = progress

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    @property
    def multiclass(self) -> bool:
        return self.data.multiclass

    @property
    def classes(self) -> int:
        return self.data.classes if self.multiclass else 0

    def sorted_scores(self, sort: bool = True) -> np.ndarray | None:
        """The (top-label) scores in ascending order: the metrics' sort when they made one,
        else a new sort (``sort=False``: None)."""
        if not self.multiclass:
            for p in self.data.__dict__.get("_prepared", {}).values():
                if p.sort_made:
                    out: np.ndarray = p.sorted_scores
                    return out
        if not sort:
            return None
        return np.sort(np.asarray(self.data.top[0], dtype=np.float64))

    def score_range(self, lower: float, upper: float) -> tuple[float, float] | None:
        """The smallest and largest (top-label) score in [lower, upper] (None: no score)."""
        s = np.asarray(self.data.top[0], dtype=np.float64)
        inside = s[(s >= lower) & (s <= upper)]
        if inside.shape[0] == 0:
            return None
        return float(inside.min()), float(inside.max())

    def input_info(self, top: bool = False) -> dict[str, Any]:
        info = self.data.input_info()
        if top and self.multiclass:                  # tested on the top-label view
            info.update({"view": "top-label", "positives": self.data.positives,
                         "prevalence": info["accuracy"]})
        return info

    def settings(self) -> dict[str, Any]:
        return {}

    def reading(self) -> Outcome:
        p = self.data.provenance
        out = Outcome(messages=[f"warning: {w}" for w in p.warnings], notes=list(p.notes))
        if p.rows_dropped:
            reasons = ", ".join(f"{k}={v}" for k, v in p.dropped_by_reason.items())
            read = p.rows_read if p.rows_read is not None else self.data.n + p.rows_dropped
            out.messages.append(f"dropped {p.rows_dropped} of {read} rows ({reasons})")
        if p.rows_renormalized:
            out.messages.append(renormalized(p.rows_renormalized))
        return out

    # -- metrics -----------------------------------------------------------------------------

    def metrics(self, ids: list[str], mopts: MetricOptions, *,
                ci: IntervalOptions | None = None, by: str | None = None) -> Outcome:
        if not self.multiclass and {"tce", "tce_v"} & set(ids):
            from calcheck.pava import preload_compiled_pava

            preload_compiled_pava(self.data.n, int(np.count_nonzero(self.data.labels)))
                                                        # loads while the rows are sorted
        bar = self.progress(f"computing {len(ids)} metrics on {self.data.n:,} rows") \
            if self.progress else None
        results = compute(self.data, ids, mopts, bar)
        out = Outcome(values=dict(results))
        if mopts.compat:
            from calcheck import compat

            out.notes = compat.notes(results)
        if ci is not None:
            out.values, ci_notes = self._intervals(self.data, results, mopts, ci)
            out.notes += ci_notes
            out.settings["ci"] = {"reps": ci.reps, "level": ci.level, "seed": ci.seed,
                                  "method": "norm bootstrap (binned errors), percentile "
                                            "bootstrap (the others)",
                                  "resampling": "rows with replacement, bins re-estimated"}
        return out

    def _intervals(self, data: Predictions, results: dict[str, MetricResult],
                   mopts: MetricOptions, ci: IntervalOptions) -> tuple[dict[str, Any], list[str]]:
        from calcheck.uncertainty import bootstrap, no_interval, with_intervals

        progress = self.progress("bootstrap") if self.progress else None
        cis = bootstrap(data, list(results), mopts, compute, reps=ci.reps, level=ci.level,
                        seed=ci.seed, progress=progress)
        notes = [f"{m}: {no_interval(m)}" for m in results
                 if not registry.METRICS[m].ci]
        notes += [f"{m}: {c.failed} of {c.reps} bootstrap replicates could not be computed"
                  + ("" if c.low is not None else "; no interval")
                  for m, c in cis.items() if c.failed]
        return with_intervals(results, cis), notes

    def groups(self, ids: list[str], mopts: MetricOptions, ci: IntervalOptions | None,
               grouping: GroupOptions) -> Outcome:
        from calcheck.uncertainty import simultaneous_level

        keys, codes = self.group_codes(grouping)
        out = Outcome()
        if grouping.windows and ci is not None:     # windows read together: simultaneous
            ci = replace(ci, level=simultaneous_level(ci.level, len(keys), grouping.family))
        sizes = group_sizes(self.data, codes, len(keys))
        for j, key in enumerate(keys):
            mask = codes == j
            sub = self.data.subset(mask)
            results: dict[str, Any] = {}
            errors: dict[str, str] = {}
            for mid in ids:
                try:
                    results.update(compute(sub, [mid], mopts))
                except CalcheckError as exc:
                    errors[mid] = str(exc)
            if ci is not None and results:
                with_ci, _ = self._intervals(sub, results, mopts, ci)
                results = {k: with_ci.get(k, r) for k, r in results.items()}
            n = int(sizes[j])
            out.values[key] = GroupResult(value=key, n=n, flagged=n < grouping.min_group_size,
                                          metrics=results, errors=errors)
        return out

    def group_codes(self, grouping: GroupOptions) -> tuple[list[str | None], IntArray]:
        """The ``--by`` groups (or ``--time`` windows, as their ISO starts) and every row's
        group; more than ``--max-groups`` is a usage error."""
        from calcheck.io.windows import WindowColumn, window_keys

        if isinstance(grouping.by, WindowColumn):
            keys, codes = window_keys(self.data.column(grouping.by), grouping.by,
                                      self.data.provenance.path)
        else:
            keys, codes = group_keys(self.data.column(grouping.by))
        if len(keys) > grouping.max_groups:
            from calcheck.errors import UsageError

            lab = grouping.name_of
            raise UsageError(f"{lab('by')} {grouping.by}: {len(keys):,} distinct values, more "
                             f"than {lab('max_groups')} {grouping.max_groups:,}; group by a "
                             "coarser column or raise the limit")
        return keys, codes

    # -- variables ---------------------------------------------------------------------------

    def incorrect(self, column: str, pos_label: str | None) -> np.ndarray:
        """``--correct-from``: 1[the column's prediction ≠ label]."""
        from calcheck.io.columns import incorrect_from

        return incorrect_from(self.data.column(column), self.data.labels,
                              class_names=self.data.class_names if self.multiclass else None,
                              pos_label=pos_label, source=self.data.provenance.path,
                              column=column).astype(float)

    def variables(self, names: list[str], vopts: VariableOptions) -> Outcome:
        incorrect = self.incorrect(vopts.correct_from, vopts.pos_label) \
            if vopts.correct_from else None
        return variables_of(self.data, {v: self._numeric(v) for v in names}, vopts, incorrect)

    def _numeric(self, name: str) -> np.ndarray:
        values = self.data.column(name)
        if values.dtype.kind not in "fiub":
            try:
                values = values.astype(np.float64)
            except (TypeError, ValueError):
                raise InputError(f"{self.data.provenance.path}: column {name!r} is not numeric "
                                 "(--var needs a numeric column)", column=name) from None
        return np.asarray(values, dtype=np.float64)

    # -- tests -------------------------------------------------------------------------------

    def tests(self, methods: list[str], topts: TestOptions) -> Outcome:
        return tests_of(self.data, methods, topts, self.progress)

    def group_tests(self, methods: list[str], topts: TestOptions,
                    grouping: GroupOptions) -> Outcome:
        """The tests of every ``--by`` group (or ``--time`` window): values key →
        (rows, flagged, Outcome of its tests); groups under ``--min-group-size`` are flagged
        and not tested (their rows are too few for the tests' references).  Monte Carlo
        trials count every group's tests in the family."""
        keys, codes = self.group_codes(grouping)
        counts = group_sizes(self.data, codes, len(keys))
        w = self.data.weights                   # a group whose weights are all 0: no test
        empty = counts == 0 if w is None else \
            np.bincount(codes, weights=w.values, minlength=len(keys)) <= 0
        tested = int(np.sum((counts >= max(grouping.min_group_size, 1)) & ~empty))
        out = Outcome()
        for j, key in enumerate(keys):
            n = int(counts[j])
            flagged = n < grouping.min_group_size
            res = Outcome() if flagged or empty[j] else \
                tests_of(self.data.subset(codes == j), methods,
                         replace(topts, family_groups=1 + tested))
            out.values[key] = (n, flagged, res)
        return out

    def recalibration(self, alpha: float, ci_level: float) -> Any:
        scores, labels = self.data.top
        if self.data.weights is not None:
            from calcheck.hypotests import weighted

            return weighted.cox(scores, labels, self.data.weights, alpha=alpha,
                                ci_level=ci_level)
        from calcheck.hypotests.classical import cox

        return cox(scores, labels, alpha=alpha, ci_level=ci_level)

    def summary_bins(self, ties: str) -> list[dict[str, Any]] | None:
        """Equal-mass bins (ACE's) of the (top-label) view."""
        from calcheck.metrics.binned import ace

        s, y = self.data.top
        return ace(Prepared(s, y, validate=False, ties=ties, weights=self.data.weights),
                   bins=15 if self.multiclass else 10).bin_rows()

    def rows(self, view: str = "top") -> Iterator[tuple[Any, Any]]:
        if view == "classes" and self.multiclass:
            yield self.data.probs, self.data.labels
        else:
            yield self.data.top

    def summary_ties(self, mid: str, rows: list[dict[str, Any]], ties: str) -> list[Any]:
        """The tie groups the summary's equal-mass bins share pro rata (ACE's, with
        ``--ties share``), for its consistency resampling."""
        from calcheck.binning import quantile_bounds
        from calcheck.report.summary import shared_ties

        if mid not in ("ace", "ace_top") or ties != "share" or not rows or \
                self.data.weights is not None:      # weighted rows: drawn as independent rows
            return []
        s = self.sorted_scores()
        assert s is not None
        return shared_ties(s, quantile_bounds(s.shape[0], len(rows)))

    # -- audit and monitor -------------------------------------------------------------------

    def segment_table(self, columns: list[str], sopts: SegmentOptions) -> Any:
        """The audit's cell table over the segment ``columns`` (:mod:`calcheck.segments`),
        with the rows themselves for the segments' row-level walks."""
        from calcheck.io.columns import as_numeric, categories
        from calcheck.segments import SegmentData, segment_data

        s, y = self.data.top
        counts = self._counts()          # --count: the expanded rows' (rows of count 0, which
        keep = None                      # the expanded file has not, take no part)
        if counts is not None:
            keep = counts > 0
            s, y, counts = s[keep], y[keep], counts[keep]
        encoded = []
        for c in columns:
            raw = self.data.column(c) if keep is None else self.data.column(c)[keep]
            num = as_numeric(raw)
            encoded.append((num, None if num is not None else categories(raw)))
        data: SegmentData = segment_data(s, y, columns, encoded, sopts, counts)
        return data

    def window_rows(self, column: WindowColumn) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                         np.ndarray | None]:
        """(window start in ns, scores, labels, ``--count``'s counts or None) of every row of
        the binary (top-label) view, for ``monitor``."""
        from calcheck.io.windows import timestamps

        ns = timestamps(self.data.column(column), str(column), self.data.provenance.path)
        s, y = self.data.top
        return column.window.starts(ns), s, y, self._counts()

    def _counts(self) -> np.ndarray | None:
        """``--count``'s counts of the rows, or None (unweighted, or sampling weights)."""
        w = self.data.weights
        return w.values if w is not None and w.frequency else None

    # -- figures -----------------------------------------------------------------------------

    def figure(self, kind: str, fopts: FigureOptions, *, variables: Any = None,
               ax: Any = None) -> Outcome:
        if kind != "variable":
            return Outcome(values={"figure": figure_of(self.data, kind, fopts, ax)})
        from calcheck.figures import draw

        name = fopts.variable
        res = variables or self.variables([name], fopts.variables).values["result"]
        fig = draw.variable_figure(res.to_dict()[name], self._numeric(name), name, ax=ax,
                                   weights=self.data.weights)
        return Outcome(values={"figure": fig})


def variables_of(data: Predictions, columns: dict[str, np.ndarray], vopts: VariableOptions,
                 incorrect: np.ndarray | None = None) -> Outcome:
    """VECE and VCE(v*) of ``data`` along the variables ``columns`` (``incorrect``: the
    ``--correct-from`` flags, else the predictions' own)."""
    from calcheck.metrics.vece import variables

    pred_error, own = data.error_view()
    for name, values in columns.items():
        if np.isnan(values).all():
            raise InputError(f"--var {name}: every value is missing")
    res = variables(pred_error, own if incorrect is None else incorrect, columns,
                    span=vopts.span, weights=data.weights)
    return Outcome(values={"result": res}, notes=res.notes())


def tests_of(data: Predictions, methods: list[str], topts: TestOptions,
             progress: Progress | None = None) -> Outcome:
    """The tests of ``data`` (the whole input, or one group; ``progress`` shows the null's
    simulation)."""
    from calcheck.hypotests import run_tests

    scores, labels = data.top
    if topts.compat:
        from calcheck import compat

        bins = topts.bins if topts.bins is not None else compat.mode(topts.compat).default_bins
        results = compat.run_tests(topts.compat, scores, labels, methods, topts.alpha, bins)
        notes = [top_label_note(data.classes)] if data.multiclass else []
        return Outcome(values=results, notes=notes)
    bar = progress("simulating the null") if progress else None
    results, notes = run_tests(scores, labels, methods, topts, progress=bar,
                               probs=data.probs if data.multiclass else None,
                               classes=data.labels if data.multiclass else None,
                               weights=data.weights)
    if data.multiclass and set(methods) - {"skce"}:
        note = top_label_note(data.classes)
        if "skce" in methods:
            note += "; the SKCE test uses every class's probability"
        notes.insert(0, note)
    out = Outcome(values=dict(results), notes=notes)
    tc = results.get("tcal_adaptive") or results.get("tcal")
    if tc is not None:
        out.settings["trials"] = tc.settings["trials"]
    return out


def figure_of(data: Predictions, kind: str, fopts: FigureOptions, ax: Any = None) -> Any:
    """The reliability (or per-class), test-based or CORP diagram of ``data``'s binary or
    top-label view."""
    from calcheck.figures import arrays as figures
    from calcheck.figures import draw

    s, y = data.top
    top = Prepared(s, y, validate=False, ties=fopts.ties, weights=data.weights)
    mc = data.multiclass
    view = " (top-label view)" if mc else ""
    bins = fopts.bins or (15 if mc else 10)
    if kind == "reliability" and fopts.per_class and mc:
        assert data.probs is not None
        names = list(data.class_names or map(str, range(data.classes)))
        return figures.per_class(data.probs, data.labels, names, bins=bins,
                                 binning=fopts.binning, ties=fopts.ties, weights=data.weights)
    if kind == "reliability":
        return figures.reliability(top, bins=bins, binning=fopts.binning, top_label=mc,
                                   title=draw.reliability_title(bins, fopts.binning, mc), ax=ax)
    if kind == "tce":
        return figures.test_based(top, yscale=fopts.yscale, top_label=mc,
                                  title=f"Test-based reliability diagram{view}", ax=ax)
    return figures.corp(top, reps=fopts.band_reps, level=fopts.band_level, seed=fopts.seed,
                        title=f"CORP reliability diagram{view}", top_label=mc, ax=ax)
