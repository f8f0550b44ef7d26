"""Every option of every command, declared once, for the Python API and the command line.

An :class:`Opt` names an option twice — its Python keyword (``metrics=``, ``variables=``) and
its command-line flags (``--metrics``/``-m``, ``--var``) — with its default, its help text,
its help panel and the check that validates it.  :data:`COMMANDS` lists which options each
command takes; :func:`parse` turns the values a caller gave into one frozen :class:`Options`,
with messages that name the keyword in the API (``style="python"``) and the flag on the command
line (``style="cli"``).  The CLI builds its typer options from the same table
(:mod:`calcheck.cli`), so the two cannot drift apart.

This module imports nothing heavy: ``calcheck --help`` reads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from calcheck import registry
from calcheck.checks import (
    check_bins,
    check_bool,
    check_column,
    check_count,
    check_fraction,
    check_gates,
    check_gates_worse,
    check_list,
    check_open_unit,
    check_path,
    check_positive,
    check_sigma,
    check_span,
    check_text,
    check_threshold,
    check_tolerance,
    check_tz,
    check_where,
    check_window,
    choice,
)
from calcheck.limits import MAX_BINS
from calcheck.tuning import DEFAULT as DEFAULT_TUNING
from calcheck.tuning import Tuning

# rows per batch of the streaming engines: a Parquet row group is read in equal parts of about
# this many rows (pyarrow's default 1Mi-row groups: two).  Measured at 3·10^7 rows, default
# metrics: as fast as 1Mi-row batches (a batch's arrays stay nearer the cache) at 0.26 GB peak
# instead of 0.34 GB
DEFAULT_BATCH_ROWS = 1 << 19

MAX_BATCH_ROWS = 1 << 31
MAX_SEED = (1 << 63) - 1
ENGINES = ("memory", "stream", "dask")
DEFAULT_ENGINE = ENGINES[0]
INPUT_FORMATS = ("csv", "parquet")
OUTPUT_FORMATS = ("table", "json", "csv", "markdown")
REPORT_FORMATS = ("html", "pdf")
PLOT_KINDS = ("reliability", "tce", "corp", "variable", "drift", "monitor")
COMPAT = ("sklearn", "torchmetrics", "mapie", "netcal", "calzone", "pycaleva", "nixon")



# ---------------------------------------------------------------------------------------------
# the table


@dataclass(frozen=True)
class Opt:
    """One option: Python keyword, CLI flags, default, help and check."""

    name: str
    flags: tuple[str, ...]
    default: Any
    help: str
    panel: str
    check: Callable[[Any, str], Any] | None = None
    metavar: str | None = None
    type: str = "str"            # str, int, float, bool, list, toggle (--x/--no-x)
    required: bool = False

    @property
    def flag(self) -> str:
        return self.flags[0].split("/")[0]

    @property
    def kw(self) -> str:
        """The Python keyword: the long flag with ``-`` as ``_`` (``--var`` → ``var``)."""
        return self.flag[2:].replace("-", "_")

    def label(self, style: str) -> str:
        return self.kw if style == "python" else self.flag


INPUT, METRICS, TESTS, VARIABLES, CI, OUTPUT, ENGINE = (
    "Input", "Metrics", "Tests", "Variables and groups", "Uncertainty", "Output", "Engine")

_IDS = ", ".join(registry.default_ids(False))
_MC_IDS = ", ".join(registry.default_ids(True))

SCORE = Opt("score", ("--score",), None, "Score column (default: found by name, e.g. score, "
            "prob, y_prob).", INPUT, check_column, "COLUMN")
LABEL = Opt("label", ("--label",), None, "Label column (default: found by name, e.g. label, y, "
            "target).", INPUT, check_column, "COLUMN")
POS_LABEL = Opt("pos_label", ("--pos-label",), None, "Value of the label column that means the "
                "positive class.", INPUT, lambda v, lab: str(v), "VALUE")
PROBS = Opt("probs", ("--probs",), None, "Multiclass: class-probability columns (names, comma "
            "list or glob such as 'prob_*'); default prob_0..prob_{K-1} when there is no score "
            "column.", INPUT, check_list(check_column), "COLUMNS", "list")
RENORMALIZE = Opt("renormalize", ("--renormalize",), False, "Multiclass: divide rows that do "
                  "not sum to 1 by their sum.", INPUT, check_bool, type="bool")
INPUT_FORMAT = Opt("input_format", ("--input-format",), None, "csv or parquet, when it cannot "
                   "be told from the input.", INPUT, choice(*INPUT_FORMATS), "FORMAT")
DROP_INVALID = Opt("drop_invalid", ("--drop-invalid",), False, "Drop rows with invalid scores "
                   "or labels (counted and reported) instead of failing.", INPUT, check_bool,
                   type="bool")
MAX_DROPPED = Opt("max_dropped", ("--max-dropped",), 0.5, "With --drop-invalid, refuse a "
                  "verdict (exit 2) when more than this fraction of the rows was dropped.",
                  INPUT, lambda v, label: check_fraction(v, label), "FRACTION", "float")
WEIGHT = Opt("weight", ("--weight",), None, "Sampling or importance weight of each row (e.g. "
             "1/f for negatives kept with probability f): the metrics and tests are those of "
             "the weighted population (docs/weights.md).", INPUT, check_column, "COLUMN")
COUNT = Opt("count", ("--count",), None, "Aggregated rows: how many identical predictions each "
            "row stands for (a whole number); every number is that of the expanded file.",
            INPUT, check_column, "COLUMN")
WEIGHT_NULL = Opt("weight_null", ("--weight-null",), "auto", "With --weight, the tests' null "
                  "(docs/weights.md): fixed (labels redrawn as Bernoulli(s), the weights held "
                  "fixed: exact when the weights do not depend on the label), labels (class "
                  "weights, e.g. negatives kept at 10 % with weight 10: the labels redrawn at "
                  "the kept rows' rate, each with its class's weight), or auto (default: labels "
                  "for class weights, else fixed).", INPUT, choice("auto", "fixed", "labels"),
                  "NULL")
WHERE = Opt("where", ("--where",), None, "Keep only rows matching, e.g. \"split = 'test' and "
            "score >= 0.1\" (pushed down to Parquet scans).", INPUT, check_where, "FILTER")

METRIC_IDS = Opt("metrics", ("--metrics", "-m"), None, "Metric ids, comma-separated or "
                 f"repeated; 'all' for every one. Binary default: {_IDS}. Multiclass default: "
                 f"{_MC_IDS} (binary ids run on the top-label view).", METRICS,
                 check_list(check_text), "IDS", "list")
BINS = Opt("bins", ("--bins",), None, "Bins of the fixed-count binnings (ECE, MCE, ACE, MCE(Q), "
           "PDE, TCE(Q), TCE(U), SCE, classwise ACE, TACE): default 10 for binary input, 15 "
           f"for multiclass; at most {MAX_BINS:,}.", METRICS, check_bins, "N", "int")
ALPHA = Opt("alpha", ("--alpha",), 0.05, "Significance level, in (0, 1).", METRICS,
            check_open_unit, "A", "float")
TEST = Opt("test", ("--test",), "binomial", "Test inside TCE: binomial (exact, default) or t.",
           METRICS, choice("binomial", "t"), "TEST")
TCE_NMIN = Opt("tce_nmin", ("--tce-nmin",), None, "PAVA-BC minimum bin size for TCE (default "
               "⌊n/20⌋).", METRICS, check_count(0), "N", "int")
TCE_NMAX = Opt("tce_nmax", ("--tce-nmax",), None, "PAVA-BC maximum bin size for TCE (default "
               "⌊n/5⌋).", METRICS, check_count(0), "N", "int")
TACE_THRESHOLD = Opt("tace_threshold", ("--tace-threshold",), 0.01, "TACE keeps the "
                     "probabilities >= this value.", METRICS, check_threshold, "P", "float")
SMECE_SIGMA = Opt("smece_sigma", ("--smece-sigma",), None, "Smooth ECE at this kernel "
                  "bandwidth, in [1e-4, 1], instead of its fixed point smECE = sigma.", METRICS,
                  lambda v, label: check_sigma(v, label), "SIGMA", "float")
COMPAT_OPT = Opt("compat", ("--compat",), None, "Compute the metrics exactly as this library "
                 "does (" + ", ".join(COMPAT) + "): its bins, edges, clipping and defaults; "
                 "docs/compat.md lists each convention.", METRICS, choice(*COMPAT), "LIBRARY")
COMPAT_TEST = Opt("compat", ("--compat",), None, "Run the tests exactly as this library does "
                  "(mapie, calzone or pycaleva): its statistics, p-values and defaults.",
                  TESTS, choice(*COMPAT), "LIBRARY")
TIES = Opt("ties", ("--ties",), "share", "Tie groups cut by an equal-mass or PAVA bound: "
            "share (default: split pro rata, so no number depends on row order) or order (the "
            "reference codes' split by row position, which reproduces their published tables).",
            METRICS, choice("share", "order"), "MODE")
BINS_TABLE = Opt("bins_table", ("--bins-table",), None, "Show the per-bin table of this metric "
                 "(repeatable; 'all' for every binned one).", OUTPUT, check_list(check_text),
                 "ID", "list")

VARS = Opt("variables", ("--var",), None, "Variable-based calibration (VECE, VCE(v*)) along "
           "this numeric column (repeatable).", VARIABLES, check_list(check_column), "COLUMN",
           "list")
LOESS_SPAN = Opt("loess_span", ("--loess-span",), 0.75, "LOESS span of the variable-based "
                 "calibration curves, in (0, 1].", VARIABLES, check_span, "S", "float")
CORRECT_FROM = Opt("correct_from", ("--correct-from",), None, "Take correctness for VECE as "
                   "1[COLUMN = label] (e.g. the model's pred column).", VARIABLES, check_column,
                   "COLUMN")
BY = Opt("by", ("--by",), None, "Also compute every selected metric per value of this column.",
         VARIABLES, check_column, "COLUMN")
MAX_GROUPS = Opt("max_groups", ("--max-groups",), 1000, "Refuse --by on a column with more "
                 "distinct values than this (exit 2 naming the count); the streaming engines "
                 "keep at most 64.", VARIABLES, check_count(1, 1_000_000), "N", "int")
MIN_GROUP_SIZE = Opt("min_group_size", ("--min-group-size",), 100, "Groups smaller than this "
                     "are reported but flagged.", VARIABLES, check_count(0), "N", "int")

CI_OPT = Opt("ci", ("--ci",), False, "Percentile bootstrap confidence intervals of the metrics "
             "(per group too with --by).", CI, check_bool, type="bool")
CI_REPS = Opt("ci_reps", ("--ci-reps",), 1000, "Bootstrap replicates of --ci (>= 10).", CI,
              check_count(10, 10_000_000), "N", "int")
CI_LEVEL = Opt("ci_level", ("--ci-level",), 0.95, "Confidence level of --ci, in (0, 1).", CI,
               check_open_unit, "LEVEL", "float")
SEED = Opt("seed", ("--seed",), 0, "Seed of the random draws (bootstrap, T-Cal's simulation); "
           "the same seed gives the same output.", CI, check_count(0, MAX_SEED), "N", "int")

METHODS = Opt("methods", ("--method",), None, "Tests: " + ", ".join(registry.methods()) +
              ", or all; comma-separated or repeated (default tcal).", TESTS,
              check_list(check_text), "METHODS", "list")
TCAL_BINS = Opt("bins", ("--bins",), None, "T-Cal with this fixed number of bins m (bin id "
                "⌊m·s⌋) instead of adaptive T-Cal; under --compat, the library's bin or group "
                "count.", TESTS, check_bins, "M", "int")
ADAPTIVE = Opt("adaptive", ("--adaptive",), False, "Adaptive T-Cal over the dyadic levels "
               "2^1..2^B (the default without --bins).", TESTS, check_bool, type="bool")
TRIALS = Opt("trials", ("--trials",), 1000, "Monte Carlo draws of T-Cal's null distribution.",
             TESTS, check_count(1, 100_000_000), "N", "int")
RESAMPLE = Opt("resample", ("--resample",), "labels", "Null simulation: labels (redraw y ~ "
               "Bernoulli(s); exact) or consistency (the authors': redraw scores, then labels).",
               TESTS, choice("labels", "consistency"), "SCHEME")
ADAPTIVE_GRID = Opt("adaptive_grid", ("--adaptive-grid",), "bounded", "Levels of adaptive "
                    "T-Cal: bounded (default; m up to about n^(2/3), the optimal bin count for "
                    "smoothness >= 1/2) or paper (m up to about n^2/ln n).", TESTS,
                    choice("bounded", "paper"), "GRID")
ADAPTIVE_CORRECTION = Opt("adaptive_correction", ("--adaptive-correction",), "minp",
                          "Joint calibration of the adaptive levels: minp (default; the "
                          "smallest level p-value against its own null) or bonferroni (the "
                          "paper's alpha/L).", TESTS, choice("minp", "bonferroni"), "RULE")
HL_DF = Opt("hl_df", ("--hl-df",), "external", "Hosmer–Lemeshow reference: external (default; "
            "chi-squared(G), predictions not fitted to these rows) or fitted (chi-squared(G - 2), "
            "a logistic model fitted to these rows).", TESTS, choice("external", "fitted"), "DF")
SKCE_BANDWIDTH = Opt("skce_bandwidth", ("--skce-bandwidth",), None, "Bandwidth nu of the SKCE "
                     "kernel exp(-||p - q|| / nu) (default: the median pairwise distance).",
                     TESTS, lambda v, label: check_positive(v, label), "NU", "float")
SCORE_SKCE_BANDWIDTH = dataclasses.replace(SKCE_BANDWIDTH, panel=METRICS)
TEST_CI_LEVEL = Opt("ci_level", ("--ci-level",), 0.95, "Level of the Wald intervals of Cox's "
                    "intercept and slope, in (0, 1).", TESTS, check_open_unit, "LEVEL", "float")
DISCRETE_MAX = Opt("discrete_max", ("--discrete-max",), 50, "With at most this many distinct "
                   "scores, also run the exact binomial test per value.", TESTS,
                   check_count(0), "N", "int")
FAMILY = Opt("family", ("--family",), "holm", "How a verdict that reads several p-values (several "
             "tests, --by groups, --time windows) keeps its false-alarm rate at --alpha: holm "
             "(default), bonferroni, or none (each p-value on its own: the any-rejects rule).",
             TESTS, choice("holm", "bonferroni", "none"), "RULE")
SCORE_FAMILY = dataclasses.replace(FAMILY, help="With --by or --time: how the verdicts of the "
                                   "groups or windows keep their false-alarm rate at --alpha "
                                   "(holm, default; bonferroni; none), and with --ci the "
                                   "windows' simultaneous intervals (bonferroni unless none).",
                                   panel=VARIABLES)
COMPARE_FAMILY = dataclasses.replace(FAMILY, help="How the summary's verdict over the "
                                     "calibration errors keeps its false-alarm rate at the "
                                     "interval's level: holm (default), bonferroni or none.",
                                     panel=OUTPUT)
FAIL_ON_REJECT = Opt("fail_on_reject", ("--fail-on-reject",), False, "Exit 1 when any selected "
                     "test rejects calibration.", OUTPUT, check_bool, type="bool")

FORMAT = Opt("format", ("--format", "-f"), None, "Output: table (default), json, csv or "
             "markdown (or md).", OUTPUT, choice(*OUTPUT_FORMATS, aliases={"md": "markdown"}),
             "FORMAT")
JSON = Opt("json", ("--json",), False, "Shorthand for --format json.", OUTPUT, check_bool,
           type="bool")
OUTPUT_FILE = Opt("output", ("--output", "-o"), None, "Also write the report to this file "
                  "(format from --format, else from the extension: .json, .csv, .md).",
                  OUTPUT, check_path, "FILE")
FAIL_IF = Opt("fail_if", ("--fail-if",), None, "Exit 1 when a condition holds, e.g. 'ece>0.02' "
              "(repeatable; >, >=, <, <=).", OUTPUT, check_gates, "CONDITION", "list")
TEXT_PLOT = Opt("plot", ("--plot",), False, "Also draw a compact reliability diagram in the "
                "terminal (table output only).", OUTPUT, check_bool, type="bool")
QUIET = Opt("quiet", ("--quiet", "-q"), False, "No notes on stderr.", OUTPUT, check_bool,
            type="bool")
NO_PROGRESS = Opt("no_progress", ("--no-progress",), False, "No progress bar on stderr (there "
                  "is none anyway when stderr is not a terminal, with -q or TERM=dumb).", OUTPUT,
                  check_bool, type="bool")
PER_CLASS = Opt("per_class", ("--per-class",), False, "Multiclass input: also show a table of "
                "each class's classwise errors (SCE, classwise ACE, TACE, classwise TCE).",
                OUTPUT, check_bool, type="bool")
PLOT_PER_CLASS = Opt("per_class", ("--per-class",), False, "Multiclass input, --kind "
                     "reliability: one one-vs-rest diagram per class (small multiples).",
                     OUTPUT, check_bool, type="bool")
DETAILS = Opt("details", ("--details",), False, "Show every setting of every metric and every "
              "level of adaptive T-Cal in the table and markdown output.", OUTPUT, check_bool,
              type="bool")
GATE_GROUPS = Opt("gate_groups", ("--gate-groups",), False, "Apply every --fail-if to each "
                  "--by group too (groups under --min-group-size are skipped, and said so).",
                  OUTPUT, check_bool, type="bool")

ENGINE_OPT = Opt("engine", ("--engine",), DEFAULT_ENGINE, "memory (default: every metric, exact), "
                 "stream (Parquet files or directories in bounded memory) or dask (the same on "
                 "a Dask cluster; pip install 'calcheck[dask]').", ENGINE, choice(*ENGINES),
                 "ENGINE")
SCHEDULER = Opt("scheduler", ("--scheduler",), None, "Dask scheduler address for --engine dask "
                "(default: local threads).", ENGINE, check_text, "ADDRESS")
BATCH_ROWS = Opt("batch_rows", ("--batch-rows",), DEFAULT_BATCH_ROWS, "Rows per batch of --engine "
                 "stream/dask (about: a Parquet row group is read in equal parts of about N "
                 "rows).", ENGINE, check_count(1, MAX_BATCH_ROWS), "N", "int")

KIND = Opt("kind", ("--kind",), "tce", "reliability, tce (test-based reliability diagram), "
           "corp (PAV reliability diagram with its consistency band and decomposition), "
           "variable, drift (a metric per --window) or monitor (the monitor's e-value path and "
           "offset confidence sequence).", OUTPUT, choice(*PLOT_KINDS), "KIND")
BAND_LEVEL = Opt("band_level", ("--band-level",), 0.9, "Level of the CORP diagram's consistency "
                 "band.", METRICS, check_open_unit, "LEVEL", "float")
BAND_REPS = Opt("band_reps", ("--band-reps",), 200, "Draws of the CORP consistency band.",
                METRICS, check_count(10, 100_000), "N", "int")
PLOT_OUTPUT = Opt("output", ("--output", "-o"), None, "Required: the image file to write, "
                  ".png, .svg or .pdf (from Python, calcheck.figure returns the figure).", OUTPUT,
                  check_path, "FILE", required=True)
PLOT_VAR = Opt("variables", ("--var",), None, "The variable of --kind variable.", VARIABLES,
               check_list(check_column), "COLUMN", "list")
PLOT_BY = Opt("by", ("--by",), None, "--kind reliability: one diagram with a curve per value of "
              "this column and a legend (the 10 largest groups).", VARIABLES, check_column,
              "COLUMN")
PLOT_BINS = Opt("bins", ("--bins",), None, "Bins of the reliability diagram (default 10, or "
                "15 for multiclass input, as score).", METRICS, check_bins, "N", "int")
BINNING = Opt("binning", ("--binning",), "uniform", "Reliability diagram bins: uniform or "
              "quantile.", METRICS, choice("uniform", "quantile"), "BINNING")
YSCALE = Opt("yscale", ("--yscale",), "auto", "Probability axis of the TCE diagram: auto (logit "
             "when predictions crowd near 0 or 1), linear or logit.", OUTPUT,
             choice("auto", "linear", "logit"), "SCALE")
REPORT_OUTPUT = Opt("output", ("--output", "-o"), None, "Required: the report file to write, "
                    ".html (or .pdf).", OUTPUT,
                    check_path, "FILE", required=True)
REPORT_FORMAT = Opt("format", ("--format", "-f"), None, "html (default) or pdf; default from "
                    "the extension.", OUTPUT, choice(*REPORT_FORMATS), "FORMAT")
REPORT_CI = Opt("ci", ("--ci/--no-ci",), True, "Bootstrap confidence intervals of the metrics "
                "(default on in a report; per group too with --by).", CI, check_bool,
                type="toggle")
PAPER = Opt("paper", ("--paper",), "a4", "Page size of the PDF report: a4 (default) or letter.",
            OUTPUT, choice("a4", "letter"), "SIZE")
TCAL_TOGGLE = Opt("adaptive", ("--adaptive/--no-tcal",), True, "Run adaptive T-Cal (default) "
                  "or skip it.", TESTS, check_bool, type="toggle")

TOLERANCE = Opt("tolerance", ("--tolerance",), None, "How large METRIC may be and still count "
                "as calibrated, e.g. ece:0.02 (repeatable): the headline adds an equivalence "
                "verdict from the metric's covering interval — within tolerance, beyond "
                "tolerance or inconclusive at this n.", OUTPUT, check_tolerance,
                "METRIC:VALUE", "list")
FAIL_IF_BEYOND = Opt("fail_if_beyond", ("--fail-if-beyond",), False, "Exit 1 when a "
                     "--tolerance verdict is 'beyond tolerance' (the interval lies above "
                     "VALUE): a CI gate on how much the miscalibration matters.", OUTPUT,
                     check_bool, type="bool")
COMPARE_SCORE = Opt("score", ("--score",), None, "Score column: once (the column of both "
                    "files) or twice (OLD's then NEW's: two models' columns of one file, or "
                    "each file's own).", INPUT, check_list(check_column), "COLUMN", "list")
COMPARE_PROBS = Opt("probs", ("--probs",), None, "Multiclass: class-probability columns (names, "
                    "comma list or glob); twice for two models' columns in one file.", INPUT,
                    check_list(check_column), "COLUMNS", "list")
ID = Opt("id", ("--id",), None, "Match the rows of OLD and NEW by this id column (default: by "
         "position, when the files have the same number of rows).", INPUT, check_column,
         "COLUMN")
FAIL_IF_WORSE = Opt("fail_if_worse", ("--fail-if-worse",), None, "Exit 1 when NEW is worse "
                    "calibrated: the lower end of METRIC's change interval is above MARGIN "
                    "(default 0); repeatable, e.g. ece or ece:0.005.", OUTPUT,
                    check_gates_worse, "METRIC[:MARGIN]", "list")
COMPARE_CI_REPS = dataclasses.replace(CI_REPS, help="Paired bootstrap replicates (>= 10).")
COMPARE_CI_LEVEL = dataclasses.replace(CI_LEVEL, help="Level of the change intervals, in (0, 1).")
TIME = Opt("time", ("--time",), None, "Timestamp column: with --window, every metric per time "
           "window.", VARIABLES, check_column, "COLUMN")
WINDOW = Opt("window", ("--window",), None, "Window length of --time: 1h, 6h, 1d, 7d (ISO weeks "
             "from Monday), 1mo, 3mo …, aligned to calendar boundaries.", VARIABLES, check_window,
             "LENGTH")
TZ = Opt("tz", ("--tz",), "UTC", "Time zone whose calendar --window follows (IANA name, e.g. "
         "Europe/Paris).", VARIABLES, check_tz, "ZONE")

PLOT_METRIC = Opt("metrics", ("--metrics", "-m"), None, "--kind drift: the metric drawn over "
                  "time (default ece, or ece_top for multiclass input).", METRICS,
                  check_list(check_text), "ID", "list")

SEGMENT = Opt("segments", ("--segment",), None, "A column whose values (numeric: quantile "
              "buckets) define segments; repeatable, their intersections up to --depth are "
              "searched too.", VARIABLES, check_list(check_column), "COLUMN", "list",
              required=True)
BUCKETS = Opt("buckets", ("--buckets",), 4, "Quantile buckets of a numeric --segment column "
              "with more distinct values than this.", VARIABLES, check_count(2, 1000), "N", "int")
DEPTH = Opt("depth", ("--depth",), 2, "Intersections of up to this many --segment columns.",
            VARIABLES, check_count(1, 5), "D", "int")
MIN_SIZE = Opt("min_size", ("--min-size",), 200, "Skip (and count) segments with fewer rows.",
               VARIABLES, check_count(1), "N", "int")
MAX_SEGMENTS = Opt("max_segments", ("--max-segments",), 1000, "Search at most this many "
                   "segments (the shallower, then the larger first; the rest are counted).",
                   VARIABLES, check_count(1, 100_000), "N", "int")
MAX_LEVELS = Opt("max_levels", ("--max-levels",), 1000, "Refuse a categorical --segment column "
                 "with more distinct values than this.", VARIABLES, check_count(1, 1_000_000),
                 "N", "int")
SCORE_CELLS = Opt("score_cells", ("--score-cells",), 100, "Equal-mass score cells of the "
                  "segments' shape statistic and its null draws.", TESTS,
                  check_count(2, 10_000), "N", "int")
AUDIT_TRIALS = dataclasses.replace(TRIALS, help="Null draws of the labels behind the segments' "
                                   "p-values and their adjustment.")
AUDIT_REJECT = dataclasses.replace(FAIL_ON_REJECT, help="Exit 1 when a segment is "
                                   "miscalibrated after adjusting for every segment searched.")
TOP = Opt("top", ("--top",), 20, "Segments shown in the table and markdown (worst first; the "
          "JSON and CSV hold every one).", OUTPUT, check_count(1), "N", "int")
MONITOR_TIME = dataclasses.replace(TIME, help="Timestamp column: the monitor reads the windows "
                                   "in time order.", required=True)
MONITOR_WINDOW = dataclasses.replace(WINDOW, help="Window length: 1h, 6h, 1d, 7d, 1mo …, "
                                     "aligned to calendar boundaries.", required=True)
STATE = Opt("state", ("--state",), None, "Continue the e-process from this state file (if it "
            "exists) and write it back with the new windows (atomically).", INPUT, check_path,
            "FILE")
MONITOR_DETAILS = dataclasses.replace(DETAILS, help="Show every window in the table and "
                                      "markdown (by default the last 30).")
FAIL_ON_ALARM = Opt("fail_on_alarm", ("--fail-on-alarm",), False, "Exit 1 when the alarm is "
                    "raised (now or in an earlier window of the state).", OUTPUT, check_bool,
                    type="bool")
REPORT_AUDIT = Opt("audit", ("--audit",), None, "Add an audit section: the segments of this "
                   "column (repeatable) and their intersections, worst first.", VARIABLES,
                   check_list(check_column), "COLUMN", "list")
TEST_BY = dataclasses.replace(BY, help="Also run every selected test per value of this "
                              "column; the verdict reads every group's p-values together "
                              "(--family).")
_INPUT = (SCORE, LABEL, POS_LABEL, PROBS, RENORMALIZE, INPUT_FORMAT, DROP_INVALID, MAX_DROPPED,
          WHERE, WEIGHT, COUNT, WEIGHT_NULL, TIES)
_ENGINE = (ENGINE_OPT, SCHEDULER, BATCH_ROWS)
# audit and monitor cut no tie group (and take no weights yet)
_ROWS = tuple(o for o in _INPUT if o not in (TIES, WEIGHT_NULL))

COMMANDS: dict[str, tuple[Opt, ...]] = {
    "score": (*_INPUT, METRIC_IDS, BINS, ALPHA, TEST, TCE_NMIN, TCE_NMAX, TACE_THRESHOLD,
              SMECE_SIGMA, SCORE_SKCE_BANDWIDTH, COMPAT_OPT, VARS, LOESS_SPAN, CORRECT_FROM,
              BY, MAX_GROUPS, MIN_GROUP_SIZE, TIME, WINDOW, TZ, SCORE_FAMILY, CI_OPT, CI_REPS,
              CI_LEVEL, SEED, FORMAT, JSON, OUTPUT_FILE, FAIL_IF, GATE_GROUPS, TOLERANCE,
              FAIL_IF_BEYOND, BINS_TABLE, PER_CLASS, TEXT_PLOT, DETAILS, QUIET, NO_PROGRESS,
              *_ENGINE),
    "test": (*_INPUT, METHODS, TCAL_BINS, ADAPTIVE, TRIALS, RESAMPLE, ADAPTIVE_GRID,
             ADAPTIVE_CORRECTION, HL_DF, SKCE_BANDWIDTH, TEST_CI_LEVEL, SEED, ALPHA, DISCRETE_MAX,
             FAMILY, COMPAT_TEST, FAIL_ON_REJECT, TOLERANCE, FAIL_IF_BEYOND, TEST_BY, MAX_GROUPS,
             MIN_GROUP_SIZE, TIME, WINDOW, TZ, FORMAT, JSON, OUTPUT_FILE, DETAILS, QUIET,
             NO_PROGRESS, *_ENGINE),
    "plot": (*_INPUT, KIND, PLOT_OUTPUT, PLOT_VAR, PLOT_BY, PLOT_BINS, BINNING, YSCALE, LOESS_SPAN,
             CORRECT_FROM, BAND_LEVEL, BAND_REPS, PLOT_METRIC, TIME, WINDOW, TZ, CI_REPS, CI_LEVEL,
             SEED, PLOT_PER_CLASS, QUIET, *_ENGINE),
    "compare": (COMPARE_SCORE, LABEL, POS_LABEL, COMPARE_PROBS, RENORMALIZE, INPUT_FORMAT,
                WHERE, WEIGHT, COUNT, WEIGHT_NULL, TIES, ID, METRIC_IDS, BINS, ALPHA, TEST,
                TCE_NMIN, TCE_NMAX, TACE_THRESHOLD, SMECE_SIGMA, BY, MAX_GROUPS, MIN_GROUP_SIZE,
                COMPARE_CI_REPS, COMPARE_CI_LEVEL, SEED, COMPARE_FAMILY, FORMAT, JSON,
                OUTPUT_FILE, FAIL_IF_WORSE, QUIET, NO_PROGRESS, *_ENGINE),
    "audit": (*_ROWS, SEGMENT, BUCKETS, DEPTH, MIN_SIZE, MAX_SEGMENTS, MAX_LEVELS,
              SCORE_CELLS, AUDIT_TRIALS, SEED, ALPHA, AUDIT_REJECT, FORMAT, JSON, OUTPUT_FILE,
              TOP, QUIET, NO_PROGRESS, *_ENGINE),
    "monitor": (*_ROWS, MONITOR_TIME, MONITOR_WINDOW, TZ, STATE, ALPHA, FAIL_ON_ALARM, FORMAT,
                JSON, OUTPUT_FILE, MONITOR_DETAILS, QUIET, NO_PROGRESS, *_ENGINE),
    "report": (*_INPUT, REPORT_OUTPUT, METRIC_IDS, BINS, VARS, BY, MAX_GROUPS, MIN_GROUP_SIZE,
               REPORT_CI, CI_REPS, CI_LEVEL, TCAL_TOGGLE, TRIALS, SEED, ALPHA, FAMILY, TOLERANCE,
               REPORT_FORMAT, PAPER, LOESS_SPAN, CORRECT_FROM, BAND_LEVEL, BAND_REPS,
               REPORT_AUDIT, BUCKETS, DEPTH, MIN_SIZE, MAX_SEGMENTS, QUIET,
               NO_PROGRESS, *_ENGINE),
}


# ---------------------------------------------------------------------------------------------
# the parsed options


@dataclass(frozen=True)
class Options:
    """The options of one run, validated.  Fields are the union of every command's keywords;
    ``given`` holds the ones the caller set explicitly."""

    command: str = "score"
    given: frozenset[str] = frozenset()
    style: str = "python"
    # not an option: the engines' performance knobs (no number depends on them but
    # exact_pava_rows'); a caller or a test hands one over with dataclasses.replace
    tuning: Tuning = DEFAULT_TUNING
    # input
    score: str | None = None
    label: str | None = None
    pos_label: str | None = None
    probs: list[str] | None = None
    renormalize: bool = False
    input_format: str | None = None
    drop_invalid: bool = False
    max_dropped: float = 0.5
    where: str | None = None
    weight: str | None = None
    count: str | None = None
    weight_null: str = "auto"
    # metrics
    metrics: list[str] | None = None
    bins: int | None = None
    alpha: float = 0.05
    test: str = "binomial"
    tce_nmin: int | None = None
    tce_nmax: int | None = None
    tace_threshold: float = 0.01
    smece_sigma: float | None = None
    compat: str | None = None
    ties: str = "share"
    bins_table: list[str] | None = None
    # variables and groups
    variables: list[str] | None = None
    loess_span: float = 0.75
    correct_from: str | None = None
    by: str | None = None
    time: str | None = None
    window: str | None = None
    tz: str = "UTC"
    min_group_size: int = 100
    max_groups: int = 1000
    # uncertainty
    ci: bool = False
    ci_reps: int = 1000
    ci_level: float = 0.95
    seed: int = 0
    # tests
    methods: list[str] | None = None
    adaptive: bool = False
    trials: int = 1000
    resample: str = "labels"
    discrete_max: int = 50
    adaptive_grid: str = "bounded"
    adaptive_correction: str = "minp"
    hl_df: str = "external"
    skce_bandwidth: float | None = None
    family: str = "holm"
    fail_on_reject: bool = False
    # compare
    id: str | None = None
    fail_if_worse: list[str] | None = None
    # output
    format: str | None = None
    json: bool = False
    output: str | None = None
    fail_if: list[str] | None = None
    tolerance: list[str] | None = None
    fail_if_beyond: bool = False
    plot: bool = False
    quiet: bool = False
    no_progress: bool = False
    details: bool = False
    gate_groups: bool = False
    per_class: bool = False
    # audit and monitor
    segments: list[str] | None = None
    audit: list[str] | None = None
    buckets: int = 4
    depth: int = 2
    min_size: int = 200
    max_segments: int = 1000
    max_levels: int = 1000
    score_cells: int = 100
    top: int = 20
    state: str | None = None
    fail_on_alarm: bool = False
    # engine
    engine: str = "memory"
    scheduler: str | None = None
    batch_rows: int = DEFAULT_BATCH_ROWS
    # plot
    kind: str = "tce"
    binning: str = "uniform"
    band_level: float = 0.9
    band_reps: int = 200
    yscale: str = "auto"
    paper: str = "a4"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def name_of(self, name: str) -> str:
        """How messages name option ``name``: the keyword or the flag."""
        for opt in COMMANDS.get(self.command, ()):
            if opt.name == name:
                return opt.label(self.style)
        return name if self.style == "python" else "--" + name.replace("_", "-")

    def replace(self, **changes: Any) -> Options:
        return dataclasses.replace(self, **changes)

    @property
    def out_format(self) -> str:
        """The stdout format of ``score`` and ``test``."""
        return "json" if self.json else (self.format or "table")

    @property
    def weighting(self) -> tuple[str, str] | None:
        """(column, "count" or "weight") of ``--count`` / ``--weight``, or None."""
        if self.count:
            return self.count, "count"
        if self.weight:
            return self.weight, "weight"
        return None

    @property
    def score_list(self) -> list[str]:
        """``--score`` as a list (compare takes it twice)."""
        s: Any = self.score
        return [] if s is None else [s] if isinstance(s, str) else list(s)

    @property
    def probs_groups(self) -> list[str]:
        """compare's ``--probs``: one entry per model (each a comma list or a glob)."""
        return list(self.probs or [])

    @property
    def asks_multiclass(self) -> bool:
        """A multiclass metric named (``-m ece_top``, ``sce``, …) or per-class figures: two
        auto-detected probability columns then stay multiclass instead of being read as a
        binary score (:func:`calcheck.data.binary_pair`)."""
        ids = registry.split_ids(self.metrics or [])
        return self.per_class or any(
            registry.METRICS[m].kind == registry.MULTICLASS for m in ids if m in registry.METRICS)

    @property
    def variable_list(self) -> list[str]:
        return list(dict.fromkeys(self.variables or []))


def default_bins(opts: Options, multiclass: bool) -> int:
    """``--bins``, else the compat library's default, else 10 (binary) or 15 (multiclass)."""
    if opts.bins is not None:
        return opts.bins
    if opts.compat:
        from calcheck import compat

        return compat.mode(opts.compat).default_bins
    return 15 if multiclass else 10


def score_fold_bins(opts: Options) -> tuple[int, ...]:
    """The equal-width bins a ``score`` run's ECE, ECE-l2 or MCE will use on binary input,
    which the in-memory reader can fold while it reads (:func:`calcheck.io.load_predictions`);
    none when the run asks for none of them (or computes as a peer library does).  The
    ``score`` pipeline asks (:func:`calcheck.pipeline.run_score`); no other command folds."""
    if opts.compat:
        return ()
    ids = set(registry.split_ids(opts.metrics)) if opts.metrics is not None else \
        set(registry.default_ids(False))
    return (default_bins(opts, False),) if ids & {"ece", "ece_l2", "mce", "all"} else ()
