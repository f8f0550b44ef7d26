"""The streaming engines' tests (:meth:`calcheck.engines.stream.StreamEngine.tests`): T-Cal on
the grid state (fixed or adaptive), Hosmer–Lemeshow after a rank search, Spiegelhalter from the
grid's sums, Cox by Newton passes and, for discrete scores, the binomial test per value."""

from __future__ import annotations

import numpy as np

from calcheck.engines.base import Outcome, top_label_note
from calcheck.hypotests import TestOptions
from calcheck.streaming.engine import StreamSource
from calcheck.streaming.states import StreamState


def stream_tests(source: StreamSource, state: StreamState, methods: list[str],
                 topts: TestOptions, *, classes: int = 0) -> Outcome:
    """T-Cal, Hosmer–Lemeshow (after a rank search), Spiegelhalter, Cox (a few Newton
    passes) and, for discrete scores, the binomial test per value, on ``source`` whose grid
    pass gave ``state`` (``topts.bins``: T-Cal's fixed m, else adaptive; ``classes``:
    multiclass input of that many classes, tested on its top-label view, as in memory)."""
    from calcheck.streaming import tests as stests
    from calcheck.streaming.positional import positional_results
    from calcheck.streaming.rowtests import cox_stream

    out = Outcome()
    results = out.values
    if classes:
        out.notes.append(top_label_note(classes))
    if "tcal" in methods:
        _tcal(source, state, methods, topts, out)
    if "hl" in methods:
        from calcheck.hypotests import tcal_trials

        hl_trials, _ = tcal_trials(None if topts.auto_trials else topts.trials, topts.alpha, 1,
                                   auto=topts.auto_trials,
                                   family=topts.family_size(methods, False))
        more, _ = positional_results(source, state, [], alpha=topts.alpha,
                                     hl_groups=topts.hl_groups, ties=topts.ties,
                                     hl_df=topts.hl_df, hl_trials=hl_trials, seed=topts.seed)
        results["hosmer_lemeshow"] = more["hosmer_lemeshow"]
    if "spiegelhalter" in methods:
        results["spiegelhalter"] = stests.spiegelhalter_stream(state, alpha=topts.alpha)
    if "cox" in methods:
        results["cox"] = cox_stream(source, state, alpha=topts.alpha,
                                    ci_level=topts.ci_level)
    return out


def _tcal(source: StreamSource, state: StreamState, methods: list[str], topts: TestOptions,
          out: Outcome) -> None:
    """T-Cal of the tests (fixed m or adaptive on the grid's dyadic levels) and, for
    discrete scores, the binomial test per value, into ``out``."""
    from calcheck.hypotests import discrete_note, tcal_trials
    from calcheck.hypotests.tcal import adaptive_ms
    from calcheck.streaming import tests as stests
    from calcheck.streaming.rowtests import discrete_stream

    results = out.values
    levels = 1 if topts.bins is not None or topts.adaptive_correction == "minp" else \
        min(len(adaptive_ms(state.n, topts.adaptive_grid, dyadic=True)), state.grid_bits)
    few = int(np.count_nonzero(state.cell_count.reshape(-1, 2).sum(axis=1))) \
        <= topts.discrete_max
    trials, note = tcal_trials(topts.trials, topts.alpha, levels,
                               auto=topts.auto_trials, label=topts.trials_label,
                               family=topts.family_size(methods, few))
    if note:
        out.notes.append(note)
    out.settings["trials"] = trials
    if topts.bins is not None:
        results["tcal"] = stests.tcal_fixed_stream(state, alpha=topts.alpha,
                                                   trials=trials, seed=topts.seed,
                                                   resample=topts.resample)
    else:
        r = stests.tcal_adaptive_stream(state, alpha=topts.alpha, trials=trials,
                                        seed=topts.seed, resample=topts.resample,
                                        grid=topts.adaptive_grid,
                                        correction=topts.adaptive_correction)
        results["tcal_adaptive"] = r
        if r.details["levels_omitted"]:
            out.notes.append(
                f"adaptive T-Cal on the {source.engine} engine tests the levels "
                f"{r.settings['levels']} (bins of at least one 2^-{state.grid_bits} grid "
                f"cell); finer levels of the B = {r.details['B_spec']} dyadic levels "
                "are omitted")
        if topts.adaptive_grid == "bounded":
            out.notes.append(f"adaptive T-Cal on the {source.engine} engine tests the "
                             "bounded grid's powers of two (bins are unions of grid "
                             "cells); in memory it also tests the levels between them")
    tc = results.get("tcal") or results["tcal_adaptive"]
    width = round(float(np.log2(tc.settings["null_unit_width"])))
    out.notes.append(f"T-Cal's null: {tc.settings['engine_null']} (units up to "
                     f"2^{width} wide), not per row; relative variance excess "
                     f"{tc.settings['null_variance_excess']:.1e}")
    discrete, distinct = discrete_stream(source, state, limit=topts.discrete_max,
                                         alpha=topts.alpha)
    if discrete is not None:
        results["binomial_discrete"] = discrete
        out.notes.append(discrete_note(distinct, topts.discrete_max))
