"""The streaming engines' tests (:meth:`calcheck.engines.stream.StreamEngine.tests`): T-Cal on
the grid state (fixed or adaptive), Hosmer–Lemeshow after a rank search, Spiegelhalter from the
grid's sums, Cox by Newton passes and, for discrete scores, the binomial test per value."""

from __future__ import annotations

import numpy as np

from calcheck.engines.base import Outcome, top_label_note
from calcheck.options import Options
from calcheck.streaming.engine import StreamSource
from calcheck.streaming.states import StreamState


def stream_tests(source: StreamSource, state: StreamState, methods: list[str], opts: Options,
                 *, groups: int = 1, fixed: int | None = None, classes: int = 0) -> Outcome:
    """T-Cal, Hosmer–Lemeshow (after a rank search), Spiegelhalter, Cox (a few Newton
    passes) and, for discrete scores, the binomial test per value, on ``source`` whose grid
    pass gave ``state`` (``fixed``: T-Cal's bins; else adaptive; ``classes``: multiclass input
    of that many classes, tested on its top-label view, as in memory)."""
    from calcheck.streaming import tests as stests
    from calcheck.streaming.positional import positional_results
    from calcheck.streaming.rowtests import cox_stream

    out = Outcome()
    results = out.values
    if classes:
        out.notes.append(top_label_note(classes))
    if "tcal" in methods:
        _tcal(source, state, methods, opts, groups, fixed, out)
    if "hl" in methods:
        from calcheck.hypotests import family_of, tcal_trials

        hl_trials, _ = tcal_trials(None if "trials" not in opts.given else opts.trials,
                                   opts.alpha, 1, auto="trials" not in opts.given,
                                   family=family_of(methods, opts.family, False)
                                   * (groups if opts.family != "none" else 1))
        more, _ = positional_results(source, state, [], alpha=opts.alpha,
                                     hl_groups=10, ties=opts.ties, hl_df=opts.hl_df,
                                           hl_trials=hl_trials, seed=opts.seed)
        results["hosmer_lemeshow"] = more["hosmer_lemeshow"]
    if "spiegelhalter" in methods:
        results["spiegelhalter"] = stests.spiegelhalter_stream(state, alpha=opts.alpha)
    if "cox" in methods:
        results["cox"] = cox_stream(source, state, alpha=opts.alpha,
                                    ci_level=opts.ci_level)
    return out


def _tcal(source: StreamSource, state: StreamState, methods: list[str], opts: Options,
          groups: int, fixed: int | None, out: Outcome) -> None:
    """T-Cal of the tests (fixed m or adaptive on the grid's dyadic levels) and, for
    discrete scores, the binomial test per value, into ``out``."""
    from calcheck.hypotests import discrete_note, family_of, tcal_trials
    from calcheck.hypotests.tcal import adaptive_ms
    from calcheck.streaming import tests as stests
    from calcheck.streaming.rowtests import discrete_stream

    results = out.values
    levels = 1 if fixed is not None or opts.adaptive_correction == "minp" else \
        min(len(adaptive_ms(state.n, opts.adaptive_grid, dyadic=True)), state.grid_bits)
    few = int(np.count_nonzero(state.cell_count.reshape(-1, 2).sum(axis=1))) \
        <= opts.discrete_max
    trials, note = tcal_trials(opts.trials, opts.alpha, levels,
                               auto="trials" not in opts.given,
                               label=opts.name_of("trials"),
                               family=family_of(methods, opts.family, few)
                               * (groups if opts.family != "none" else 1))
    if note:
        out.notes.append(note)
    out.settings["trials"] = trials
    if fixed is not None:
        results["tcal"] = stests.tcal_fixed_stream(state, alpha=opts.alpha,
                                                   trials=trials, seed=opts.seed,
                                                   resample=opts.resample)
    else:
        r = stests.tcal_adaptive_stream(state, alpha=opts.alpha, trials=trials,
                                        seed=opts.seed, resample=opts.resample,
                                        grid=opts.adaptive_grid,
                                        correction=opts.adaptive_correction)
        results["tcal_adaptive"] = r
        if r.details["levels_omitted"]:
            out.notes.append(
                f"adaptive T-Cal on the {source.engine} engine tests the levels "
                f"{r.settings['levels']} (bins of at least one 2^-{state.grid_bits} grid "
                f"cell); finer levels of the B = {r.details['B_spec']} dyadic levels "
                "are omitted")
        if opts.adaptive_grid == "bounded":
            out.notes.append(f"adaptive T-Cal on the {source.engine} engine tests the "
                             "bounded grid's powers of two (bins are unions of grid "
                             "cells); in memory it also tests the levels between them")
    tc = results.get("tcal") or results["tcal_adaptive"]
    width = round(float(np.log2(tc.settings["null_unit_width"])))
    out.notes.append(f"T-Cal's null: {tc.settings['engine_null']} (units up to "
                     f"2^{width} wide), not per row; relative variance excess "
                     f"{tc.settings['null_variance_excess']:.1e}")
    discrete, distinct = discrete_stream(source, state, limit=opts.discrete_max,
                                         alpha=opts.alpha)
    if discrete is not None:
        results["binomial_discrete"] = discrete
        out.notes.append(discrete_note(distinct, opts.discrete_max))
