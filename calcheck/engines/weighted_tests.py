"""The tests of the weighted passes' engine (:class:`calcheck.engines.weighted.
WeightedStreamEngine`): T-Cal from one pass over its units (:mod:`calcheck.hypotests.unit_tcal`),
Hosmer–Lemeshow on the bins pass's mass axis (its small-count null per group's effective
size, :func:`_group_null`), Spiegelhalter from the first pass's sums and the bins pass's
denominator, and Cox by weighted Newton passes and one pass for its sandwich — each the
in-memory engine's statistic (docs/weights.md, "Engines"); KS, Kuiper and SKCE by the
in-memory tests on the rows held (:func:`calcheck.engines.base.held_methods`).

The passes' tests of one set of rows are a program (:func:`tests_program`): the file's
rows drive it alone, the ``--by`` groups' (``--time`` windows') in lockstep
(:meth:`calcheck.engines.weighted.WeightedStreamEngine.group_tests`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from calcheck._typing import Passes
from calcheck.engines.base import PASSES_METHODS, Outcome
from calcheck.engines.weighted_rows import WeightedRows
from calcheck.hypotests.weighted import regime_note
from calcheck.streaming.runner import one_pass
from calcheck.streaming.weighted import SandwichSpec
from calcheck.weights import mass_cuts

if TYPE_CHECKING:
    from calcheck.hypotests import TestOptions

# ``eng`` below: the weighted passes' engine (calcheck.engines.weighted.WeightedStreamEngine,
# which imports this module: so typed Any here)


def weighted_tests(eng: Any, methods: list[str], topts: TestOptions
                   ) -> Outcome:
    """The tests ``methods`` of the weighted passes' engine ``eng`` (module docstring)."""
    for m in methods:
        if m not in PASSES_METHODS and m not in (eng.capabilities.only or ()):
            raise eng.refuse(f"--method {m}")
    done: tuple[Outcome, int] = eng.drive(tests_program(eng.all_rows, methods, topts, eng.name))
    out, trials = done
    held = [m for m in methods if m not in PASSES_METHODS]
    if held:                          # KS, Kuiper, SKCE: the in-memory tests on the rows held
        from calcheck.engines.memory import tests_of
        from calcheck.hypotests import family_of

        kept = eng.kept()
        got = tests_of(kept, held, replace(           # read in the whole run's family, with
            topts, trials=trials,                     # T-Cal's trials, as in memory
            family_members=family_of(methods, topts.family, _discrete(kept, methods, topts))))
        out.values.update(got.values)
        out.notes += got.notes
    return out


def tests_program(rows: WeightedRows, methods: list[str], topts: TestOptions,
                  engine: str) -> Passes[tuple[Outcome, int]]:
    """The tests of ``methods`` that have weighted passes (:data:`PASSES_METHODS`; the others
    are left to the caller) on one set of streamed ``rows`` — the file's, or a ``--by``
    group's in lockstep with the others' — as a program of passes: their Outcome, and the
    Monte Carlo trials the run's other tests take (T-Cal's, or Hosmer–Lemeshow's)."""
    from calcheck.hypotests import tcal_trials
    from calcheck.hypotests.weighted import hl_on_axis, spiegelhalter_of_sums

    first = rows.first
    regime, cw = rows.regime()
    total = first.scalar("mass")
    how = regime_note(regime, cw)
    if "hl" in methods:                     # one bins pass for every test
        yield from rows.bins_pass(rows.cuts(topts.hl_groups))
    out = Outcome()
    trials = topts.trials
    for m in methods:
        if m == "tcal":
            trials = yield from _tcal(rows, methods, topts, out, engine)
        elif m == "spiegelhalter":
            den = float((yield from rows.bins_pass([])).den.value[0])
            res = spiegelhalter_of_sums(first.scalar("spiegelhalter_num"), den, total,
                                        first.scalar("score"), first.scalar("label"),
                                        alpha=topts.alpha)
            out.values["spiegelhalter"] = _noted(res, how)
        elif m == "hl":
            trials, _ = tcal_trials(None if topts.auto_trials else topts.trials,
                                    topts.alpha, 1, auto=topts.auto_trials,
                                    family=topts.family_size(methods, rows.frequency))
            groups = topts.hl_groups
            exact = regime == "labels"
            ax, vcum = (yield from rows.bins_pass(rows.cuts(groups))).axis(exact)
            cuts = mass_cuts(ax.total, groups, rows.frequency)
            res = hl_on_axis(ax, vcum, cuts, exact, groups=groups, alpha=topts.alpha,
                             df=topts.hl_df, trials=trials, seed=topts.seed,
                             null=_group_null(ax, vcum, cuts, exact, topts.seed),
                             null_how=GROUP_NULL)
            out.values["hosmer_lemeshow"] = _noted(res, how, ties="share")
        elif m == "cox":
            out.values["cox"] = yield from cox_program(rows, topts.alpha, topts.ci_level)
    return out, trials


def _discrete(kept: Any, methods: list[str], topts: TestOptions) -> bool:
    """Whether the in-memory tests count T-Cal's binomial test per value in the family, as
    :func:`calcheck.hypotests.run_tests` decides: counts whose scores (of positive count)
    take at most ``discrete_max`` values — all counts when T-Cal is not run."""
    w = kept.weights
    if not w.frequency:
        return False
    return "tcal" not in methods or \
        np.unique(kept.scores[w.values > 0]).shape[0] <= topts.discrete_max


def _tcal(rows: WeightedRows, methods: list[str], topts: TestOptions, out: Outcome,
          engine: str) -> Passes[int]:
    """T-Cal (fixed m, or adaptive over the dyadic levels) from one pass over its units
    (:mod:`calcheck.hypotests.unit_tcal`), into ``out``; its Monte Carlo trials."""
    from calcheck.hypotests import levels_n, tcal_trials
    from calcheck.hypotests.tcal import adaptive_ms, check_null_size
    from calcheck.hypotests.unit_tcal import UnitNull, unit_tcal
    from calcheck.streaming.weighted import TCAL_BITS, TcalSpec

    first = rows.first
    mass = first.scalar("mass")
    n = levels_n(mass, mass ** 2 / first.scalar("mass_sq"), rows.frequency)
    ms = [topts.bins] if topts.bins is not None else \
        adaptive_ms(n, topts.adaptive_grid, dyadic=True)[:TCAL_BITS]
    levels = 1 if topts.bins is not None or topts.adaptive_correction == "minp" \
        else len(ms)
    trials, note = tcal_trials(topts.trials, topts.alpha, levels, auto=topts.auto_trials,
                               label=topts.trials_label,
                               family=topts.family_size(methods, False))
    if note:
        out.notes.append(note)
    check_null_size(len(ms), trials)
    regime, cw = rows.regime()
    state = yield from one_pass(TcalSpec(topts.bins, cw if regime == "labels" else None,
                                         count=rows.frequency))
    u = state.table()
    res = unit_tcal(u, UnitNull.of(u, regime, cw), ms=ms, fixed=topts.bins is not None,
                    alpha=topts.alpha, trials=trials, seed=topts.seed,
                    correction=topts.adaptive_correction, grid=topts.adaptive_grid,
                    bits=TCAL_BITS, settings={"weights": regime_note(regime, cw),
                                              "engine_null": TCAL_NULL,
                                              "null_unit_width": 2.0 ** -TCAL_BITS})
    out.values["tcal" if topts.bins is not None else "tcal_adaptive"] = res
    out.notes.append(f"T-Cal on --engine {engine}: {TCAL_NULL}, not per row; relative "
                     f"variance excess {res.settings['null_variance_excess']:.1e}")
    if topts.bins is None and topts.adaptive_grid == "bounded":
        out.notes.append(f"adaptive T-Cal on --engine {engine} tests the bounded "
                         "grid's powers of two (bins are unions of 2^-16 cells); in "
                         "memory it also tests the levels between them")
    return trials


def recalibration(eng: Any, alpha: float, ci_level: float) -> Any:
    """Cox's test of the file's rows (:func:`cox_program`)."""
    return eng.drive(cox_program(eng.all_rows, alpha, ci_level))


def cox_program(rows: WeightedRows, alpha: float, ci_level: float) -> Passes[Any]:
    """Cox's fit by weighted Newton passes and one pass for its Hessian (and, for sampling
    weights, its sandwich): for counts the likelihood-ratio test of the expanded file,
    for sampling weights the robust Wald test (:mod:`calcheck.hypotests.weighted`)."""
    from calcheck.hypotests.classical import cox_result
    from calcheck.hypotests.weighted import robust_cox
    from calcheck.streaming.rowtests import cells_start, newton_program

    cnt, tot = rows.first.label_cells()
    fit = yield from newton_program(cells_start(cnt, tot), cells_start(cnt, tot, True),
                                    weighted=True)
    a, b, ll_fit = fit.fit
    state = yield from one_pass(SandwichSpec(((a, b), (fit.intercept, 1.0))))
    s = state.sums.value
    settings = {"engine_fit": "weighted Newton passes from the first pass's key buckets' "
                              "fit", "passes": fit.passes + 1}
    if rows.frequency:
        return _noted(cox_result(a, b, ll_fit, fit.ll_null, alpha=alpha, ci_level=ci_level,
                                 settings=settings, hessian=s[0:3],
                                 citl=(fit.intercept, float(s[6]))),
                      regime_note("count", None))

    def moments(v: Any) -> Any:
        return np.array([[v[0], v[1]], [v[1], v[2]]])

    return robust_cox(a, b, ll_fit, fit.ll_null, fit.intercept, moments(s[0:3]),
                      moments(s[3:6]), float(s[6]), float(s[9]), alpha=alpha,
                      ci_level=ci_level, settings=settings)


def _noted(res: Any, how: str, **more: Any) -> Any:
    import dataclasses

    return dataclasses.replace(res, settings={**res.settings, "weights": how, **more})


TCAL_NULL = ("one Binomial draw per score unit (a 2^-16 cell, within one bin), the unit's sums "
             "moved linearly in it (calcheck.hypotests.unit_tcal)")
GROUP_NULL = ("per group, a Binomial on its effective size (the unweighted rows whose count at "
              "its mean score has its null variance), scaled to its mass: an approximation "
              "of the exact null (the streamed rows are not at hand)")


def _group_null(ax: Any, vcum: Any, cuts: Any, exact: bool, seed: int) -> Any:
    """Hosmer–Lemeshow's small-count simulation on streamed weighted rows, whose rows are not
    at hand: each group's O*_g = E_g + (m/k)(K − k·p̄), K ~ Binomial(k, p̄), k = max(⌊n_e⌋, 1),
    with m its mass, p̄ = E_g/m and n_e = m²·p̄(1 − p̄)/V_g its effective size — V_g the
    group's null variance of O_g as the statistic takes it (Σ Var w(y − s) under the
    ``labels`` null (``exact``), else Σw²·p̄(1 − p̄)) — so each O*_g has the exact null's mean
    and, n_e rounded down, at least its variance (conservative)."""
    mass = np.diff(cuts)
    exp = np.diff(ax.at(ax.S, cuts))
    pbar = np.clip(np.divide(exp, mass, out=np.zeros_like(mass), where=mass > 0), 0.0, 1.0)
    var = np.diff(ax.at(ax.V, cuts)) if exact else \
        np.diff(ax.at(vcum, cuts)) * pbar * (1.0 - pbar)
    eff = np.divide(mass * mass * pbar * (1.0 - pbar), var, out=np.zeros_like(mass),
                    where=var > 0)
    size = np.maximum(np.floor(eff), 1).astype(np.int64)

    def null(trials: int) -> Any:
        rng = np.random.default_rng(seed)
        k = rng.binomial(size, pbar, size=(trials, mass.shape[0]))
        return exp + (mass / size) * (k - size * pbar)

    return null
