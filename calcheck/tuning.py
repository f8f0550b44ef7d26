"""Every performance knob and switch of the reading and streaming code, in one frozen object.

A :class:`Tuning` is data: the stream engine carries one (on its source, so that every pass
of every plan sees the same), the readers take one, and a test that wants to reach a code path
— a pass over the file instead of the held rows, a row group read at a time, classes too large
to hold — hands one over instead of changing a module global.  Nothing in ``calcheck`` changes a
knob at run time.

No knob changes a reported number except :attr:`Tuning.exact_pava_rows` (beyond it, PAVA-BC
runs on :attr:`Tuning.pava_blocks` equal-mass blocks: the stream engine's one approximation,
reported in the metric's settings).  The rest choose how the same numbers are reached: how many
rows a pass keeps, how many passes run, how much a read takes at a time.  The invariants that
make them free are listed in ``docs/streaming.md``, each beside the test that holds it.

Sizes are rows unless named otherwise; the memory each implies is noted beside it.  Imports
nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tuning:
    """The knobs (see the module docstring).  Picklable: Dask workers receive it with a pass."""

    # -- reading (calcheck.io.source) ---------------------------------------------------------
    # a Parquet file of more values (rows × columns read) is read in steps, so that progress
    # shows and the in-memory engine can fold its first bins on the way
    read_step_values: int = 1 << 24
    # ... each step reading consecutive small row groups together, up to this many values
    read_run_values: int = 1 << 21
    # ... with the next ones decoding ahead when its reads are this small on average
    prefetch_values: int = 1 << 22

    # -- the positional passes (calcheck.streaming.positional, prospect, select) --------------
    # the first rank search guesses the bins' edges and keeps the rows of the cells the row
    # pass will need (False: the row pass reads the source)
    prospect: bool = True
    prospect_rows: int = 1 << 22      # rows a search pass keeps at most (9-17 bytes a row)
    prospect_share: int = 16          # ... and at most 1/16 of the rows
    window_blocks: int = 1            # PAVA's guessed bins may end this many blocks away
    # exact PAVA holds every row's (score, label), and the later passes of that computation
    # run over the held rows (False: they read the source again)
    replay: bool = True
    replay_rows: int = 1 << 20        # the held rows' passes: this many rows a batch
    # PAVA / PAVA-BC exactly up to this many rows (9 bytes a row held); beyond, PAVA-BC over
    # ``pava_blocks`` equal-mass blocks — the one knob that changes a number.  Weighted rows
    # beyond ``hold_weighted_rows`` hold this many rows (17 bytes a row and the --var columns;
    # the in-memory kernels' working memory ~175 bytes a row at peak) for what the weighted
    # passes lack (TCE, pc, the other metrics, --var); beyond, counts stream expanded
    exact_pava_rows: int = 10_000_000
    pava_blocks: int = 4096
    pending_rows: int = 1 << 18       # TCE's row pass tests its rows this many at a time
    sure_rows: int = 1024             # row-pass cells of this many rows: TCE's tests decided
    #                                   by bounds before the rows are read one by one
    # the rank search (calcheck.streaming.select)
    collect_rows: int = 1 << 21       # collect ranges outright up to this many rows a pass
    collect_keys: int = 1 << 23       # ... with shared ties, as 8-byte keys (the same memory)
    hist_buckets: int = 1 << 20       # at most this many histogram sub-ranges a pass (25 MB)
    tie_rows: int = 1 << 20           # collected keys unpacked this many at a time
    # the variables' and segments' rank searches (calcheck.streaming.ranks)
    rank_collect_rows: int = 1 << 22  # collect every range outright up to this many rows
    rank_hist_buckets: int = 1 << 20  # at most this many histogram buckets a pass (8 MB)

    # -- multiclass (calcheck.streaming.engine, classwise) ------------------------------------
    hold_top_rows: int = 10_000_000   # a file this small keeps its top-label view in pass one
    hold_rows: int = 10_000_000       # a --by group this small: its classes' rows are held

    # -- weighted rows (calcheck.engines.held) -------------------------------------------------
    # --weight / --count on the streaming engines: inputs of at most this many rows are read
    # into memory (17 bytes a row kept: score, weight, label; the in-memory computation's
    # working memory peaks at ~0.45 GB for 2·10⁶ rows); beyond, the weighted passes
    # (calcheck.engines.weighted) compute what they can — sampling weights, and counts of a
    # run that asks only for that — and other counted runs stream expanded (the same numbers
    # as the expanded file)
    hold_weighted_rows: int = 2_000_000

    # -- Dask (calcheck.engines.dask) ---------------------------------------------------------
    connect_timeout: int = 15         # seconds to reach a --scheduler address

    # -- the budgets together ------------------------------------------------------------------
    # the most the rows kept under the budgets above may take at once (:meth:`kept_bytes`):
    # the stream engine's 0.6 GB goal for multiclass input, less the interpreter with its
    # libraries (~0.18 GB) and the batches in flight (~0.1 GB)
    kept_goal: int = 320 << 20

    def __post_init__(self) -> None:
        for name, value in self.__dict__.items():
            if isinstance(value, bool):
                continue
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"Tuning.{name} must be a non-negative integer, got {value!r}")
        for name in ("replay_rows", "pava_blocks", "pending_rows", "prospect_share",
                     "collect_keys", "hist_buckets", "tie_rows", "read_run_values",
                     "rank_hist_buckets"):
            if getattr(self, name) < 1:
                raise ValueError(f"Tuning.{name} must be at least 1, got {getattr(self, name)}")
        if self.kept_bytes() > self.kept_goal:
            raise ValueError(f"the budgets of kept rows take up to {self.kept_bytes():,} bytes "
                             f"at once, over Tuning.kept_goal = {self.kept_goal:,}")

    def kept_bytes(self) -> int:
        """The most memory the rows kept under these budgets take at once, phase by phase of a
        stream run (the pass runner's kept rows, docs/streaming.md): the top-label or binary
        positional passes (a small multiclass file's held top-label view and classes, 10
        bytes a row;
        exact PAVA's sorted rows, 9 bytes, or the first search's kept cells, 17 bytes with
        row ids; a rank search's collected rows, 32 bytes, or keys, 8 bytes; its histogram,
        24 bytes a bucket), the class passes (the held classes' keys, 8 bytes a row, beside a
        search), the variables' and segments' rank searches (8 bytes a value or bucket), a
        weighted run's held rows (17 bytes a row) or a counted run's rows held for TCE (17
        bytes a row)."""
        search = max(self.collect_rows * 32, self.collect_keys * 8) + self.hist_buckets * 24
        positional = self.hold_top_rows * 10 + search + max(
            self.exact_pava_rows * 9, self.prospect_rows * 17 if self.prospect else 0)
        classes = self.hold_rows * 8 + search
        ranks = (self.rank_collect_rows + self.rank_hist_buckets) * 8
        weighted = max(self.hold_weighted_rows, self.exact_pava_rows) * 17
        return max(positional, classes, ranks, weighted)

    @property
    def key_share(self) -> int:
        """How many more rows a by-value search collects than one keeping row ids."""
        return max(1, self.collect_keys // max(self.collect_rows, 1))


DEFAULT = Tuning()
