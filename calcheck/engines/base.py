"""The protocol every engine follows, and what its methods return.

An engine is opened on one input with one set of options (:class:`~calcheck.options.Options`)
and answers the pipeline's questions — the input's description, the metrics, the metrics per
group, the variables, the tests and the figures — each as values plus the notes and settings a
reviewer needs.  :class:`~calcheck.engines.memory.MemoryEngine` computes on
:class:`~calcheck.data.Predictions` in memory; :class:`~calcheck.engines.stream.StreamEngine`
computes from passes over a Parquet dataset, in this process (``stream``) or on a Dask
cluster (``dask``).  Engines are context managers: ``close()`` releases what a run holds (a
Dask client).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from calcheck import registry
from calcheck.options import Options
from calcheck.tuning import DEFAULT, Tuning

if TYPE_CHECKING:
    from calcheck.hypotests import TestOptions
    from calcheck.io.windows import WindowColumn
    from calcheck.metrics._data import MetricOptions
    from calcheck.segments import SegmentOptions

# a run's progress bars: label → callback(done, total), or None without a bar
Progress = Callable[[str], Callable[[int, int], None] | None]


@dataclass(frozen=True)
class Capabilities:
    """What an engine can compute — the one place the pipeline asks (nothing outside
    ``engines/`` and ``options.py`` compares engine names).

    ``rows``: the engine holds every row in memory — so it computes every registered metric
    and test (the streaming engines: those with a ``stream`` mode), checks ``--bins`` against
    the rows, draws the CORP and per-class figures, runs SKCE and tests per group, and its
    summary bins are equal-mass (ACE's) rather than the first pass's equal-width ones."""

    name: str
    rows: bool
    # an engine that computes less than its kind (streamed sampling weights,
    # calcheck.engines.weighted): the metric ids and methods it has, and why it refuses the
    # rest
    only: tuple[str, ...] | None = None
    why: str = ""
    # ... and the ids it computes only when they are named (from rows held: the default set
    # is the streaming engines' own)
    named_only: tuple[str, ...] = ()
    # ... and whether it holds the rows for what its passes lack (it draws the CORP diagram)
    held: bool = False

    def metrics(self, multiclass: bool) -> list[str]:
        """The metric ids this engine computes for this input kind."""
        if self.only is not None:                   # (the passes': held metrics too)
            return [m for m in registry.selectable(multiclass) if m in self.only]
        return registry.selectable(multiclass) if self.rows else registry.streamable(multiclass)

    def default_set(self, multiclass: bool, kind: str | None, label: str
                    ) -> tuple[list[str], list[str]]:
        """The default metric set this engine computes, and messages naming what it leaves
        out: what it cannot compute (but what the rows' weights of ``kind`` refuse, said
        elsewhere) and what it computes only when named (``label``: the option)."""
        ids = registry.default_ids(multiclass)
        can = self.metrics(multiclass)
        left = [m for m in ids if m not in can and not (kind and registry.weight_refusal(m, kind))]
        named = [m for m in ids if m in self.named_only]
        messages = [f"{', '.join(left)} not computed on --engine {self.name} " +
                    (f"({self.why})" if self.why else "(memory only)")] if left else []
        if named:
            messages.append(f"{', '.join(named)} left out of the default set on --engine "
                            f"{self.name} (computed from the rows held when named: "
                            f"{label} {','.join(named)})")
        return [m for m in ids if m not in left and m not in named], messages

    def methods(self) -> list[str]:
        """The ``--method`` values this engine runs."""
        if self.only is not None:                   # (KS, Kuiper, SKCE: from rows held)
            return [m for m in registry.methods() if m in self.only]
        return registry.methods(streamed=not self.rows)

    def interval(self, mid: str) -> bool:
        """Whether metric ``mid`` gets a ``--ci`` interval on this engine."""
        spec = registry.METRICS[mid]
        return spec.ci if self.rows else spec.stream_ci

    def left_out(self, asked: list[str] | None, methods: list[str], label: str) -> list[str]:
        """What a message says of the tests left out of ``methods`` (resolved from
        ``asked``): ``all``'s that this engine does not run, or the default T-Cal."""
        left = [m for m in registry.methods() if m not in methods]
        if left and not self.rows and "all" in registry.split_ids(asked or []):
            return [f"{label} all on --engine {self.name}: every test it runs; "
                    f"{', '.join(left)} need(s) --engine memory"]
        if not asked and "tcal" not in methods:
            return [f"tcal (the default test) left out: {self.why}"]
        return []


CAPABILITIES = {"memory": Capabilities("memory", rows=True),
                "stream": Capabilities("stream", rows=False),
                "dask": Capabilities("dask", rows=False)}


def capabilities(engine: str) -> Capabilities:
    """The capabilities of the engine named ``engine`` (an ``--engine`` value)."""
    return CAPABILITIES[engine]


@dataclass(frozen=True)
class IntervalOptions:
    """``--ci``: the bootstrap's replicates, level and seed."""

    reps: int = 1000
    level: float = 0.95
    seed: int = 0


@dataclass(frozen=True)
class VariableOptions:
    """``--var``'s options: the LOESS span, ``--correct-from`` (correctness from that column)
    and ``--pos-label`` (what that column's positive class is called)."""

    span: float = 0.75
    correct_from: str | None = None
    pos_label: str | None = None


@dataclass(frozen=True)
class FigureOptions:
    """A figure's options: the bins (None: 10, or 15 for multiclass input) and their kind, how
    ties are binned, the TCE diagram's y scale, the per-class panels, the CORP band's draws,
    level and seed, and the variable (with its ``--var`` options) of a variable figure."""

    bins: int | None = None
    binning: str = "uniform"
    ties: str = "share"
    yscale: str = "auto"
    per_class: bool = False
    band_reps: int = 200
    band_level: float = 0.9
    seed: int = 0
    variable: str = ""
    variables: VariableOptions = field(default_factory=lambda: VariableOptions())


def figure_options(opts: Options) -> FigureOptions:
    """The run's figure options (the first ``--var`` column for a variable figure)."""
    return FigureOptions(bins=opts.bins, binning=opts.binning, ties=opts.ties,
                         yscale=opts.yscale, per_class=opts.per_class,
                         band_reps=opts.band_reps, band_level=opts.band_level, seed=opts.seed,
                         variable=(opts.variables or [""])[0],
                         variables=variable_options(opts))


def variable_options(opts: Options) -> VariableOptions:
    """The run's ``--var`` options."""
    return VariableOptions(opts.loess_span, opts.correct_from, opts.pos_label)


@dataclass(frozen=True)
class GroupOptions:
    """``--by COL`` (or ``--time COL --window W``, ``by`` then being the
    :class:`~calcheck.io.windows.WindowColumn`): which rows go together, how many groups may
    be, which are too small to report, and whether the intervals are read together (windows:
    simultaneous over them, by ``family``).  ``name_of`` names an option in messages."""

    by: str
    windows: bool = False
    max_groups: int = 1000
    min_group_size: int = 0
    family: str = "holm"
    name_of: Callable[[str], str] = str


def group_options(opts: Options) -> GroupOptions:
    """The run's grouping (``opts.by`` set: after :func:`calcheck.pipeline._windows` for
    windows)."""
    assert opts.by is not None
    return GroupOptions(opts.by, windows=bool(opts.time), max_groups=opts.max_groups,
                        min_group_size=opts.min_group_size, family=opts.family,
                        name_of=opts.name_of)


@dataclass(frozen=True)
class ReadOptions:
    """How an engine reads its input: the columns (``score``, ``label``, ``probs``; the extra
    ``numeric`` ones of ``--var`` and ``raw`` ones of ``--by``/``--time``/``--segment``/…,
    with ``flags`` naming the option of each), the rows (``where``, ``drop_invalid``), the
    row weights (``weighting``: (column, "count" or "weight"); ``passes``: the run asks only
    what the weighted passes compute, :func:`passes_serve`), the equal-width bins a binary
    read may fold on the way (``fold_bins``), and how it reads (``engine``,
    ``batch_rows``, ``scheduler``, ``tuning``).  ``name_of`` names an option in messages."""

    engine: str = "memory"
    input_format: str | None = None
    score: str | None = None
    label: str | None = None
    pos_label: str | None = None
    probs: tuple[str, ...] | None = None
    renormalize: bool = False
    drop_invalid: bool = False
    where: str | None = None
    numeric: tuple[str, ...] = ()
    raw: tuple[str, ...] = ()
    flags: dict[str, str] = field(default_factory=dict)
    weighting: tuple[str, str] | None = None
    weight_null: str = "auto"
    passes: bool = False          # every metric and test asked is the weighted passes' own
    held: bool = False            # ... some from the rows held (held_metrics, --var)
    passes_multiclass: bool = False  # ... of multiclass input (which holds no rows)
    grouped: tuple[str, ...] = ()   # the raw columns the weighted passes group by (--by
                                    # and --time of score, plot and report)
    pair_as_binary: bool = True
    fold_bins: tuple[int, ...] = ()
    batch_rows: int = 0
    scheduler: str | None = None
    tuning: Tuning = DEFAULT
    name_of: Callable[[str], str] = str


# what the weighted passes compute (calcheck.engines.weighted: sampling weights, or counts,
# beyond the rows the streaming engines hold) ...
PASSES_METRICS = ("ece", "ece_l2", "mce", "ace", "mce_q", "pde", "brier", "log_loss",
                  "ece_debiased", "ece_l2_debiased", "smece")
PASSES_METHODS = ("tcal", "hl", "spiegelhalter", "cox")
# ... of multiclass input: those on its top-label view, and these from every class's passes
PASSES_CLASSWISE = ("sce", "ace_cw", "tace")


def passes_metrics(multiclass: bool) -> tuple[str, ...]:
    """The metric ids the weighted passes compute: of multiclass input also the top-label
    ids (``ece_top``, ``mce_top``, ``ace_top``) and :data:`PASSES_CLASSWISE`."""
    if not multiclass:
        return PASSES_METRICS
    top = tuple(m for m in registry.selectable(True)
                if m not in PASSES_METRICS and registry.binary_of(m) in PASSES_METRICS)
    return PASSES_METRICS + top + PASSES_CLASSWISE
# ... and, for the rows of a file within Tuning.exact_pava_rows rows, the other metrics
# (held_metrics) and --var by the in-memory kernels on the rows held, without --by and --time


def renormalized(rows: int) -> str:
    """The reading message of multiclass rows renormalized on the way in."""
    return (f"renormalized {rows:,} rows whose probabilities did not sum to exactly 1 "
            "(rounding within 1e-4 per class, or --renormalize)")


def held_metrics(kind: str) -> tuple[str, ...]:
    """The binary metrics the in-memory kernels compute on held rows of ``kind`` ("count",
    "weight") beyond the passes' own: every one that takes the kind."""
    return tuple(m for m in registry.selectable(False)
                 if m not in PASSES_METRICS and registry.weight_refusal(m, kind) is None)


def held_methods(kind: str) -> tuple[str, ...]:
    """The tests the in-memory engine runs on held rows of ``kind`` beyond the passes' own:
    KS, Kuiper and SKCE (on a subsample beyond its pairs' budget, as in memory)."""
    return tuple(m for m in ("skce", "ks", "kuiper") if registry.weight_refusal(m, kind) is None)


def passes_serve(opts: Options, multiclass: bool = False) -> tuple[bool, bool]:
    """Whether a run of counted rows asks only for what the weighted passes compute — so its
    rows beyond the held budget are computed from the file's rows, not expanded — and
    whether it needs the rows held (:func:`held_metrics`, ``--var``): ``score`` and
    ``report`` whose metrics (named, or the default set) are :func:`passes_metrics`, or,
    binary, without ``--by``/``--time`` any the counts take; ``test`` whose methods (named,
    or the default T-Cal) are :data:`PASSES_METHODS` (or, binary, held and without groups,
    :func:`held_methods`); ``plot --kind reliability`` (binary: also ``tce``, ``variable``
    and ``corp``, held, without ``--by``).  ``multiclass``: of multiclass input, for which
    no rows are held (never ``held``)."""
    from calcheck.errors import CalcheckError
    from calcheck.gates import parse_gate
    from calcheck.metrics import resolve_metric_ids

    no = (False, False)
    if opts.command not in ("score", "test", "plot", "report") or opts.ties != "share" or \
            opts.compat or opts.correct_from or (opts.asks_multiclass and not multiclass):
        return no
    if opts.command == "plot":
        held = opts.kind in ("tce", "variable", "corp") and not opts.by
        if multiclass:
            return opts.kind == "reliability" and not opts.per_class, False
        return opts.kind == "reliability" or held, held
    if opts.command == "test":
        methods = set(registry.split_ids(opts.methods or ["tcal"]))
        methods = set(registry.methods()) if "all" in methods else methods
        held = bool(methods - set(PASSES_METHODS))
        if held and (opts.by or opts.time or multiclass):
            return no                         # (the expanded rows say what they test)
        return methods <= set(PASSES_METHODS + held_methods("count")), held
    try:
        named = [*(opts.metrics or registry.default_ids(multiclass)),
                 *(parse_gate(g).metric for g in opts.fail_if or []),
                 *(b for b in opts.bins_table or [] if b.strip().lower() != "all")]
        beyond = set(resolve_metric_ids(named, multiclass=multiclass, name="--metrics")) - \
            set(passes_metrics(multiclass))
    except CalcheckError:                    # (the run says what is wrong, later)
        return no
    if multiclass:
        return not beyond and not opts.variables, False
    if beyond and (opts.by or opts.time or beyond - set(held_metrics("count"))):
        return no
    held = bool(beyond or opts.variables)
    return True, held


def read_options(opts: Options, fold_bins: tuple[int, ...] = ()) -> ReadOptions:
    """The run's reading options (:func:`extra_columns` the extra columns); ``fold_bins``:
    the equal-width bins a binary read may fold on the way (the ``score`` command's,
    :func:`calcheck.options.score_fold_bins`)."""
    numeric, raw, flags = extra_columns(opts)
    serve = passes_serve(opts) if opts.weighting else (False, False)
    multiclass = passes_serve(opts, multiclass=True)[0] if opts.weighting else False
    return ReadOptions(engine=opts.engine, input_format=opts.input_format, score=opts.score,
                       label=opts.label, pos_label=opts.pos_label,
                       probs=tuple(opts.probs) if opts.probs else None,
                       renormalize=opts.renormalize, drop_invalid=opts.drop_invalid,
                       where=opts.where, numeric=tuple(numeric), raw=tuple(raw), flags=flags,
                       weighting=opts.weighting, weight_null=opts.weight_null,
                       passes=serve[0], held=serve[1], passes_multiclass=multiclass,
                       grouped=tuple(c for c in (opts.by, opts.time) if c),
                       pair_as_binary=not opts.asks_multiclass, fold_bins=fold_bins,
                       batch_rows=opts.batch_rows, scheduler=opts.scheduler,
                       tuning=opts.tuning, name_of=opts.name_of)


def extra_columns(opts: Options) -> tuple[list[str], list[str], dict[str, str]]:
    """The extra columns a run reads: numeric (``--var``) and raw (``--by``, ``--time``,
    ``--correct-from``, ``--segment``, ``--audit``), and the option naming each."""
    numeric = opts.variable_list
    segments = list(dict.fromkeys([*(opts.segments or []), *(opts.audit or [])]))
    raw = list(dict.fromkeys([c for c in (opts.by, opts.time, opts.correct_from) if c]
                             + segments))
    flags = {c: opts.name_of("variables") for c in numeric}
    flags.update({c: opts.name_of("segments" if opts.segments else "audit") for c in segments})
    flags.update({c: opts.name_of(n) for n in ("by", "time", "correct_from")
                  if (c := getattr(opts, n))})
    return numeric, raw, flags


def interval_options(opts: Options) -> IntervalOptions | None:
    """The run's ``--ci`` options, or None without ``--ci``."""
    return IntervalOptions(opts.ci_reps, opts.ci_level, opts.seed) if opts.ci else None


def metric_options(opts: Options, multiclass: bool) -> MetricOptions:
    """The kernels' options of a run (``multiclass`` sets the default bins)."""
    from calcheck.metrics._data import MetricOptions
    from calcheck.options import default_bins

    return MetricOptions(bins=default_bins(opts, multiclass),
                         alpha=opts.alpha, test=opts.test, tce_nmin=opts.tce_nmin,
                         tce_nmax=opts.tce_nmax, tace_threshold=opts.tace_threshold,
                         compat=opts.compat, ties=opts.ties, smece_sigma=opts.smece_sigma,
                         skce_bandwidth=opts.skce_bandwidth, seed=opts.seed)


def test_options(opts: Options, *, groups: int = 1, bins: int | None = None) -> TestOptions:
    """The tests' options of a run (``bins``: T-Cal's fixed m, None for adaptive; ``groups``:
    how many groups' tests the verdict reads together)."""
    from calcheck.hypotests import TestOptions

    return TestOptions(alpha=opts.alpha, bins=bins, trials=opts.trials, resample=opts.resample,
                       seed=opts.seed, discrete_max=opts.discrete_max, ties=opts.ties,
                       hl_df=opts.hl_df, adaptive_grid=opts.adaptive_grid,
                       adaptive_correction=opts.adaptive_correction,
                       skce_bandwidth=opts.skce_bandwidth, ci_level=opts.ci_level,
                       auto_trials="trials" not in opts.given,
                       trials_label=opts.name_of("trials"), family=opts.family,
                       family_groups=groups, compat=opts.compat)


def top_label_note(classes: int) -> str:
    return (f"multiclass input ({classes} classes): testing the top-label view (confidence of "
            "the predicted class vs correctness)")


@dataclass
class Outcome:
    """Values computed by an engine, with the notes for the user (``notes`` go into the report;
    ``messages`` only to stderr) and the settings the engine adds to the report."""

    values: dict[Any, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)


class Engine(Protocol):
    """What the pipeline (:mod:`calcheck.api`) asks of an engine."""

    name: str

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def multiclass(self) -> bool: ...

    def input_info(self, top: bool = False) -> dict[str, Any]:
        """The report's ``input`` section (``top``: of multiclass input tested on its
        top-label view, with that view's positives and prevalence)."""

    def reading(self) -> Outcome:
        """Messages about the read itself (rows dropped, one class only, renormalized rows)."""

    def metrics(self, ids: list[str], mopts: MetricOptions, *,
                ci: IntervalOptions | None = None, by: str | None = None) -> Outcome:
        """The metrics ``ids`` (values: id → MetricResult), with bootstrap intervals when
        ``ci`` is given; ``by``: the run's ``--by`` column (a streamed first pass then serves
        the groups too)."""

    def groups(self, ids: list[str], mopts: MetricOptions, ci: IntervalOptions | None,
               grouping: GroupOptions) -> Outcome:
        """Every metric per ``--by`` group (values: group key → GroupResult), with ``--ci``
        intervals when asked."""

    def variables(self, names: list[str], vopts: VariableOptions) -> Outcome:
        """VECE and VCE(v*) per variable (values: {"result": VariablesResult})."""

    def tests(self, methods: list[str], topts: TestOptions) -> Outcome:
        """Calibration tests on the binary (or top-label) view (values: id → TestResult);
        ``topts.family_groups``: how many groups' tests the verdict reads together (their
        Monte Carlo trials reach α/10 after the family adjustment)."""

    def group_tests(self, methods: list[str], topts: TestOptions,
                    grouping: GroupOptions) -> Outcome:
        """The tests of every ``--by`` group or ``--time`` window of ``grouping`` (values: key →
        (rows, flagged, Outcome)); groups under ``--min-group-size`` flagged and not
        tested."""

    def recalibration(self, alpha: float, ci_level: float) -> Any:
        """Cox's logistic recalibration of the binary (or top-label) view — the fit behind
        every headline's direction — as the ``cox`` TestResult, Wald intervals at
        ``ci_level``."""

    def summary_bins(self, ties: str) -> list[dict[str, Any]] | None:
        """Bin rows of the (top-label) view for the report's summary — equal-mass in memory
        (ties binned by ``ties``), the first pass's equal-width ones on a stream — when they
        come without another pass over the data (None otherwise)."""
        ...

    @property
    def classes(self) -> int: ...

    def segment_table(self, columns: list[str], sopts: SegmentOptions) -> Any:
        """``audit``: the segment columns cut into levels and the cell table of their atoms
        (:class:`calcheck.segments.SegmentData`)."""
        ...

    def window_rows(self, column: WindowColumn) -> tuple[Any, Any, Any, Any]:
        """``monitor``: (each row's window start in ns, scores, labels, counts) of the binary
        or top-label view, windows of the ``--time`` ``column`` (engines that hold the rows);
        counts: ``--count``'s, else None."""
        ...

    def rows(self, view: str = "top") -> Iterator[tuple[Any, ...]]:
        """Every row once, validated, in the input's order, as batches of (scores, labels) —
        ``view="classes"``: (class probabilities (n, K), class indices) of multiclass input;
        weighted rows on the weighted passes: their weights third — for a pass over two
        models in step (``compare``)."""

    def summary_ties(self, mid: str, rows: list[dict[str, Any]], ties: str) -> list[Any]:
        """The tie groups the summary's bins (of metric ``mid``) share pro rata (``ties``
        "share"), when the engine has the rows to find them (the streaming engines give none:
        their headline's consistency resampling is then conservative on tied scores)."""

    def figure(self, kind: str, fopts: FigureOptions, *, variables: Any = None,
               ax: Any = None) -> Outcome:
        """A figure (values: {"figure": matplotlib Figure}); ``variables``: the run's
        VariablesResult, when the caller has it (``kind="variable"``); ``ax``: draw the main
        panel into this matplotlib Axes and return it instead."""

    def settings(self) -> dict[str, Any]:
        """What the engine adds to the report's settings."""

    def close(self) -> None: ...

    def __enter__(self) -> Engine: ...

    def __exit__(self, *exc: object) -> None: ...
