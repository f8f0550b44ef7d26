"""The ``calcheck`` command line: parse → API → emit → exit code.

The options of every command come from one table (:data:`calcheck.options.COMMANDS`), so the
command line and the Python API (:mod:`calcheck.api`) take the same options under the same
names; each command here parses its values, calls the API, writes what was asked for and
returns the exit code.  Only typer is imported at module level, so ``calcheck --help`` stays
fast.  :func:`run` is the one place that maps exceptions to exit codes (0 ok, 1 a requested gate
failed, 2 usage or input error, 3 internal error, 130 interrupted).
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer

from calcheck import _hooks as hooks
from calcheck import options as O
from calcheck.errors import CalcheckError, ExitCode

if TYPE_CHECKING:
    from calcheck.report.model import Report
    from calcheck.tuning import Tuning

try:  # typer >= 0.22 vendors click; older releases raise click's own exceptions
    from typer import TyperException as _UsageBase
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import ClickException as _UsageBase  # type: ignore[assignment]

# the tuning one run() call hands to its command (a context variable: set and reset by run,
# never shared between calls)
_TUNING: contextvars.ContextVar[Tuning | None] = contextvars.ContextVar("tuning", default=None)

HELP = "Is this classifier calibrated? Calibration metrics and tests, exact to the papers."
EXIT_CODES = ("Exit codes: 0 ran fine (whatever the values); 1 a --fail-if or --fail-if-worse "
              "gate tripped, a test (or an audit's segment) rejected with --fail-on-reject, the "
              "--tolerance verdict is beyond tolerance with --fail-if-beyond, or the monitor's "
              "alarm is raised with --fail-on-alarm; 2 usage or input error; "
              "3 internal error; 130 interrupted.")
EXAMPLES = {
    "score": ["calcheck score preds.parquet", "calcheck score preds.csv -m ece,ace --bins 15",
              "calcheck score preds.csv --json | jq .metrics.ece.value",
              "calcheck score preds.csv --by site --ci", "calcheck score preds.csv --var age",
              "calcheck score preds.csv --fail-if 'ece>0.02'",
              "calcheck score preds.csv --tolerance ece:0.02 --fail-if-beyond",
              "calcheck score events/ --engine stream --where \"split = 'test'\""],
    "test": ["calcheck test preds.parquet", "calcheck test preds.parquet --method all --json",
             "calcheck test preds.parquet --bins 15 --seed 1 --fail-on-reject"],
    "plot": ["calcheck plot preds.parquet --kind tce -o tce.png",
             "calcheck plot preds.parquet --kind reliability --binning quantile -o rel.svg",
             "calcheck plot preds.csv --kind variable --var age -o age.pdf"],
    "compare": ["calcheck compare old.parquet new.parquet --id example_id",
                "calcheck compare preds.parquet --score old_score --score new_score",
                "calcheck compare old.csv new.csv --fail-if-worse ece --fail-if-worse brier:0.001",
                "calcheck compare old.parquet new.parquet -o comparison.html"],
    "audit": ["calcheck audit preds.parquet --segment region --segment device",
              "calcheck audit preds.parquet --segment region --segment age --depth 2 --json",
              "calcheck audit preds.parquet --segment site --fail-on-reject"],
    "monitor": ["calcheck monitor preds.parquet --time ts --window 1d",
                "calcheck monitor today.parquet --time ts --window 1d --state monitor.json "
                "--fail-on-alarm"],
    "report": ["calcheck report preds.parquet -o report.html",
               "calcheck report preds.parquet --var age -o report.pdf"],
}
DOCS = {
    "score": "Compute calibration metrics side by side (binary or multiclass), per variable "
             "and per group.",
    "test": "Test calibration: T-Cal / adaptive T-Cal with p-values, and the classical tests.",
    "plot": "Draw a reliability diagram, the test-based reliability diagram, or a variable plot.",
    "compare": "Compare two models' calibration on the same rows: each metric's change with a "
               "paired bootstrap interval and a verdict (better, worse, no detectable "
               "difference); --fail-if-worse gates a CI pipeline.",
    "audit": "Find the miscalibrated segments: every value of the --segment columns and their "
             "intersections, worst first, with p-values adjusted for every segment searched.",
    "monitor": "Watch calibration window after window with an anytime-valid e-process: the "
               "alarm's chance of ever sounding on a calibrated model stays below --alpha; "
               "--state continues yesterday's run.",
    "report": "Write one self-contained report: metrics, test verdicts and every figure (HTML or "
              "PDF).",
}

ROOT_EPILOG = ("Examples:\n\n  calcheck score preds.parquet\n\n  calcheck test preds.parquet "
               "--method all\n\n  calcheck report preds.parquet -o report.html\n\n"
               "  calcheck COMMAND -h  (every option of a command)\n\n" + EXIT_CODES)

HELP_OPTIONS = ["-h", "--help"]
app = typer.Typer(name="calcheck", help=HELP, epilog=ROOT_EPILOG, add_completion=True,
                  no_args_is_help=False,
                  pretty_exceptions_enable=False, rich_markup_mode=None,
                  context_settings={"help_option_names": HELP_OPTIONS})


def _version(value: bool) -> None:
    if value:
        from calcheck._version import SCHEMA_VERSION, __version__

        sys.stdout.write(f"calcheck {__version__} (report schema {SCHEMA_VERSION})\n")
        raise typer.Exit(0)


VERSION = typer.Option(False, "--version", "-V", is_eager=True, callback=_version,
                       help="Print the version and exit.")


@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context, version: bool = VERSION) -> None:
    """Is this classifier calibrated? Calibration metrics and tests, exact to the papers."""
    if ctx.invoked_subcommand is None:
        sys.stdout.write(ctx.get_help() + "\n")
        raise typer.Exit(0)


# ---------------------------------------------------------------------------------------------
# commands from the options table


def _parameter(opt: O.Opt) -> inspect.Parameter:
    """The typer parameter of one option.  Values arrive as text and :func:`calcheck.option_checks.parse`
    converts and checks them, so the messages are calcheck's own."""
    shown = None if opt.default in (None, False) or opt.type == "toggle" else str(opt.default)
    text = opt.help + (f"  [default: {shown}]" if shown else "")
    common: dict[str, Any] = {"help": text, "rich_help_panel": opt.panel}
    if opt.type == "bool":
        default = typer.Option(opt.default, *opt.flags, show_default=False, **common)
        annotation: Any = bool
    elif opt.type == "toggle":                  # None when not typed: "given" means typed
        default = typer.Option(None, *opt.flags, show_default=False, **common)
        annotation = bool | None
    else:
        default = typer.Option(None, *opt.flags, metavar=opt.metavar, show_default=False,
                               **common)
        annotation = list[str] | None if opt.type == "list" else str | None
    return inspect.Parameter(opt.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=annotation)


FILE_HELP = "CSV, gzipped CSV, Parquet file or directory of Parquet parts; '-' reads stdin."
FILES_HELP = ("OLD NEW: the two models' prediction files (rows matched by --id, else by "
              "position); or one FILE with --score (or --probs) given twice. " + FILE_HELP)


def _command(name: str, body: Callable[[Any, dict[str, Any]], int]) -> None:
    def command(**values: Any) -> None:
        values.pop("version", None)
        code = body(values.pop("file"), values)
        if code:
            raise typer.Exit(code)

    many = name == "compare"
    params = [inspect.Parameter("file", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                default=typer.Argument(..., metavar="OLD [NEW]" if many
                                                       else "FILE", show_default=False,
                                                       help=FILES_HELP if many else FILE_HELP),
                                annotation=list[str] if many else str),
              *(_parameter(o) for o in O.COMMANDS[name]),
              inspect.Parameter("version", inspect.Parameter.KEYWORD_ONLY, default=VERSION,
                                annotation=bool)]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__doc__ = DOCS[name]
    epilog = "Examples:\n\n" + "\n\n".join(f"  {e}" for e in EXAMPLES[name]) + "\n\n" + EXIT_CODES
    app.command(name, help=DOCS[name], epilog=epilog)(command)


# ---------------------------------------------------------------------------------------------
# output


def _safe(message: str) -> str:
    """A message for the terminal: control characters from data shown as escapes."""
    from calcheck.report.text import clean

    return clean(message)


def note(message: str, *, quiet: bool = False) -> None:
    """A message for the user, on stderr."""
    if not quiet:
        sys.stderr.write(f"calcheck: {_safe(message)}\n")


def _notes(messages: list[str], quiet: bool) -> None:
    for m in messages:
        note(m, quiet=quiet)


def _parse(command: str, file: str, values: dict[str, Any],
           inputs: tuple[str, ...] = ()) -> O.Options:
    """Parse and check everything that can be checked before any input is read (the output
    path included)."""
    from calcheck.io.output import check_output
    from calcheck.option_checks import parse

    opts = parse(command, values, style="cli")
    tuning = _TUNING.get()
    if tuning is not None:                     # handed over by run(argv, tuning=...)
        opts = dataclasses.replace(opts, tuning=tuning)
    if opts.output is not None:
        if command in ("score", "test", "compare", "audit", "monitor"):
            from calcheck.report.render import format_for_path

            if opts.format is None:
                format_for_path(opts.output)
        check_output(opts.output, label=opts.name_of("output"), inputs=inputs or (file,))
    return opts


def _emit(rep: Any, opts: O.Options) -> None:
    """The report file first (atomically), then stdout, then the notes on stderr."""
    from calcheck.report.progress import dumb_terminal
    from calcheck.report.render import format_for_path

    if opts.output:
        rep.save(opts.output, opts.format or format_for_path(opts.output))
    import shutil

    fmt = opts.out_format
    tty = sys.stdout.isatty() and not dumb_terminal()
    text = rep.render(fmt, color=tty and fmt == "table" and not os.environ.get("NO_COLOR"),
                      plain=not tty, width=shutil.get_terminal_size((80, 24)).columns,
                      details=opts.details)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        from calcheck.errors import OutputError

        raise OutputError(f"cannot write to stdout: {exc.strerror or exc}") from None
    if opts.plot and fmt != "table":
        note("--plot draws in the terminal only with --format table", quiet=opts.quiet)
    _notes([*rep.messages, *rep.notes], opts.quiet)


def _with_bars(opts: O.Options, run: Callable[..., Report], source: Any) -> Report:
    """``run(source, opts)`` with the run's progress bars, closed however it ends."""
    from calcheck.report.progress import Bars

    bars = Bars(opts.quiet or opts.no_progress)
    try:
        return run(source, opts, progress=bars)
    finally:
        bars.close()


def _score(file: str, values: dict[str, Any]) -> int:
    from calcheck import pipeline

    opts = _parse("score", file, values)
    rep = _with_bars(opts, pipeline.run_score, file)
    _emit(rep, opts)
    for g in rep.failed_gates:
        where = f" in group {g['group']}" if g.get("group") is not None else ""
        note(f"gate failed{where}: {g['condition']} (value {g['value']})")
    _beyond(rep)
    return rep.exit_code


def _beyond(rep: Report) -> None:
    if rep.fail_if_beyond and rep.beyond_tolerance:
        t = rep.data["summary"]["tolerance"]
        note(f"gate failed: --fail-if-beyond: {t['metric']}'s interval [{t['low']:.6g}, "
             f"{t['high']:.6g}] lies above the tolerance {t['value']:g}")


def _test(file: str, values: dict[str, Any]) -> int:
    from calcheck import pipeline

    opts = _parse("test", file, values)
    rep = _with_bars(opts, pipeline.run_test, file)
    _emit(rep, opts)
    if rep.fail_on_reject and rep.rejected:
        note(f"calibration rejected by: {', '.join(rep.rejected)}")
    _beyond(rep)
    return rep.exit_code


def _plot(file: str, values: dict[str, Any]) -> int:
    from calcheck import figures, pipeline
    from calcheck.report.files import save_figure

    opts = _parse("plot", file, values)
    figures.require_matplotlib()
    out = pipeline.run_figure(file, opts)
    assert opts.output is not None
    save_figure(out.values["figure"], opts.output, opts.name_of("output"))
    _notes([*out.messages, *out.notes, f"wrote {opts.output}"], opts.quiet)
    return 0


def _report(file: str, values: dict[str, Any]) -> int:
    from calcheck import figures, pipeline
    from calcheck.report.files import save_report_file

    opts = _parse("report", file, values)
    figures.require_matplotlib()
    rep = _with_bars(opts, pipeline.run_report, file)
    save_report_file(rep, opts)
    _notes([*rep.messages, *rep.notes, f"wrote {opts.output}"], opts.quiet)
    return 0


def _compare(files: list[str], values: dict[str, Any]) -> int:
    from calcheck import figures, pipeline

    opts = _parse("compare", files[0], values, inputs=tuple(files))
    if opts.output and opts.output.lower().endswith((".html", ".htm")):
        figures.require_matplotlib()
    rep = _with_bars(opts, pipeline.run_compare, files)
    _emit(rep, opts)
    for g in rep.failed_gates:
        note(f"gate failed: --fail-if-worse {g['condition']} (change {g['delta']:.6g}, lower "
             f"end {g['low']:.6g} > margin {g['margin']:g})")
    return rep.exit_code


def _audit(file: str, values: dict[str, Any]) -> int:
    from calcheck import auditing

    opts = _parse("audit", file, values)
    rep = _with_bars(opts, auditing.run_audit, file)
    _emit(rep, opts)
    if rep.fail_on_reject and rep.rejected:
        note(f"miscalibrated segments: {', '.join(rep.rejected[:10])}"
             + (" …" if len(rep.rejected) > 10 else ""))
    return rep.exit_code


def _monitor(file: str, values: dict[str, Any]) -> int:
    from calcheck import monitoring

    opts = _parse("monitor", file, values)
    rep = _with_bars(opts, monitoring.run_monitor, file)
    _emit(rep, opts)
    if rep.fail_on_alarm and rep.alarm is not None:
        note(f"alarm since {rep.alarm['window']}")
    return rep.exit_code


for _name, _body in (("score", _score), ("test", _test), ("plot", _plot), ("report", _report),
                     ("compare", _compare), ("audit", _audit), ("monitor", _monitor)):
    _command(_name, _body)


# ---------------------------------------------------------------------------------------------
# the entry point


PANEL_ORDER = (O.INPUT, O.METRICS, O.TESTS, O.VARIABLES, O.CI, O.OUTPUT, O.ENGINE)


def _help_panels(command: Any) -> None:
    """Plain-text help grouped in panels (input, metrics, tests, …, output, engine), with
    word metavars (FILE, not {FILE} <str>) — click's fast formatter, not rich's."""
    import types

    for name, sub in getattr(command, "commands", {}).items():
        panels = {o.name: o.panel for o in O.COMMANDS.get(name, ())}
        for p in sub.params:
            if getattr(p, "param_type_name", "") == "argument":
                hooks.word_metavars(p)

        def format_options(self: Any, ctx: Any, formatter: Any, panels: Any = panels) -> None:
            groups: dict[str, list[tuple[str, str]]] = {}
            for p in self.get_params(ctx):
                record = p.get_help_record(ctx)
                if record is None:
                    continue
                if getattr(p, "param_type_name", "") == "argument":
                    group = "Arguments"
                else:
                    group = panels.get(p.name, "Other")
                groups.setdefault(group, []).append(record)
            order = ["Arguments", *PANEL_ORDER, "Other"]
            for group in sorted(groups, key=lambda g: order.index(g) if g in order else 99):
                with formatter.section(group):
                    formatter.write_dl(groups[group])

        sub.format_options = types.MethodType(format_options, sub)


def run(argv: list[str] | None = None, *, tuning: Tuning | None = None) -> int:
    """Run the CLI and return the exit code (the one place that maps exceptions to codes).
    ``tuning``: the engines' performance knobs (:class:`calcheck.tuning.Tuning`; no option
    sets them — a program or a test running the command in-process hands one over)."""
    from typer.main import get_command

    args = sys.argv[1:] if argv is None else argv
    command = get_command(app)
    hooks.plain_values(command, HELP_OPTIONS)
    _help_panels(command)
    from calcheck._quiet import silenced

    try:
        with silenced():
            token = _TUNING.set(tuning)        # (this call's context only)
            try:
                rv = command.main(args=args, prog_name="calcheck", standalone_mode=False)
            finally:
                _TUNING.reset(token)
        return int(rv) if isinstance(rv, int) else int(ExitCode.OK)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except SystemExit as exc:                  # shell completion exits on its own
        return exc.code if isinstance(exc.code, int) else int(bool(exc.code))
    except typer.Abort:
        sys.stderr.write("calcheck: interrupted\n")
        return int(ExitCode.INTERRUPTED)
    except _UsageBase as exc:
        sys.stderr.write(f"calcheck: error: {_safe(exc.format_message())} (see calcheck -h)\n")
        return int(ExitCode.USAGE_OR_INPUT)
    except CalcheckError as exc:
        sys.stderr.write(f"calcheck: error: {_safe(str(exc))}\n")
        return int(ExitCode.USAGE_OR_INPUT)
    except KeyboardInterrupt:
        sys.stderr.write("calcheck: interrupted\n")
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        return int(ExitCode.OK)
    except MemoryError:
        sys.stderr.write(f"calcheck: error: out of memory while computing on {_input_size(args)}; "
                         "try --engine stream (bounded memory, Parquet input), fewer --bins, "
                         "--ci-reps or --trials, or a --where filter\n")
        return int(ExitCode.USAGE_OR_INPUT)
    except Exception as exc:
        if os.environ.get("CALCHECK_TRACEBACK"):
            raise
        sys.stderr.write(f"calcheck: internal error: {type(exc).__name__}: {_safe(str(exc))} "
                         "(please report it; set CALCHECK_TRACEBACK=1 for details)\n")
        return int(ExitCode.INTERNAL)


def _input_size(args: list[str]) -> str:
    """``preds.csv (1.2 GB)`` for the first argument that is an existing file or folder."""
    from pathlib import Path

    for a in args:
        if a.startswith("-"):
            continue
        try:
            p = Path(a)
            if p.is_file():
                size = p.stat().st_size
            elif p.is_dir():
                size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
            else:
                continue
        except OSError:
            continue
        return f"{a} ({size / 2 ** 30:.2f} GB)" if size >= 2 ** 30 else \
            f"{a} ({size / 2 ** 20:.1f} MB)"
    return "this input"


def main() -> None:
    """Console-script entry point."""
    # numpy asks Linux for transparent huge pages on every array of 4 MB or more; where the
    # kernel then compacts memory at the first touch (THP defrag "madvise", a common default),
    # a 240 MB column took up to 0.5 s of page faults instead of 0.1 s (README, Performance).
    # Set before numpy is imported; the user's own setting wins.
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
    # OpenBLAS (numpy's, and scipy's own copy) starts its worker threads when it loads, and
    # they spin for 2^28 cycles (~0.1 s) before sleeping: ~0.1 s of CPU per library on every
    # command, which competes with our threads for the cores.  A timeout of 2^4 cycles puts
    # them to sleep at once; BLAS calls still use every thread (they wake them).  Set before
    # numpy and scipy load; the user's own setting wins.
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    code = run()
    # At exit the interpreter collects every object left (typer's, numpy's and pyarrow's module
    # objects among them): ~0.02 s, a tenth of a small run; frozen, they are left to the
    # operating system (calcheck._hooks)
    hooks.freeze_at_exit()
    sys.exit(code)
