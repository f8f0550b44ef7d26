"""Paired bootstrap intervals of the change of a metric between two models on the same rows.

``calcheck compare`` asks whether a new model is better or worse calibrated than an old one
*on the same examples*.  The change Δ = θ_new − θ_old is estimated by Δ̂ = θ̂_new − θ̂_old, and
its interval comes from replicates that resample the **rows jointly**: replicate r takes row i
(in the matched order: OLD's order) c_i times, (c_1 … c_n) ~ Multinomial(n; 1/n, …, 1/n), for
both models at once, so the correlation between the two models' errors — which is what makes a
paired comparison sharper than two separate intervals — is kept.

Binned calibration errors (ECE, ECE-l2, ACE, SCE and their debiased forms) use the same
honest construction as the single-model intervals (:mod:`calcheck.uncertainty`): with m the
bin vector of residual means, N its norm and ĝ the norm's gradient at m̂,

* θ_new ≥ θ̂_new − N(m̂_new − m_new)           (triangle inequality)
* θ_old ≤ θ̂_old + ⟨g_old, m_old − m̂_old⟩      (convexity)

so Δ ≥ Δ̂ − [N(m̂_new − m_new) + ⟨g_old, m_old − m̂_old⟩], and symmetrically for the upper end.
The (1 + level)/2 quantile of the bracket is taken from the paired replicates
(N(m̂*_new − m̂_new) + ⟨ĝ_old, m̂_old − m̂*_old⟩).  Each end errs with probability at most
(1 − level)/2 (asymptotically), whatever the two models' sharpness: the plug-in bias of each ECE,
which differs between a sharp and a flat model, does not move the interval's coverage of the
population change.  When both models are calibrated the interval holds 0 with probability at
least the level, which bounds the false alarms of ``--fail-if-worse``.  The interval is
conservative (the triangle inequality); docs/compare.md has its measured false-alarm rate and
power.

Every other metric with a bootstrap interval gets the percentile interval of the paired
replicate differences θ*_new − θ*_old (Brier score and log loss: means, whose difference the
interval covers; others: the estimator's sampling distribution).  MCE, MCE(Q) and the
probabilistic count get no interval, as for one model.

References
----------
.. [1] Efron, Tibshirani. An Introduction to the Bootstrap. Chapman & Hall, 1993 (paired
       resampling, percentile intervals).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from calcheck._prefetch import prefetch
from calcheck._typing import FloatArray
from calcheck.uncertainty import (
    POPULATION,
    ConfidenceInterval,
    ModelReplicates,
    NormReplicates,
    check_ci_options,
    check_reps_size,
    estimand_of,
    percentile_interval,
)

DELTA_NORM_METHOD = ("paired norm bootstrap: the change of the plug-ins minus (plus) the "
                     "(1+level)/2 quantile of ||m*_new - m_new|| + <g_old, m_old - m*_old> "
                     "(and symmetrically)")
DELTA_PERCENTILE = "paired percentile bootstrap of new - old"
PAIRED = "rows with replacement, jointly for both models"


def delta_norm_interval(old: NormReplicates, new: NormReplicates, norm: str, *, level: float,
                        seed: int, resampling: str = PAIRED) -> ConfidenceInterval:
    """The interval of θ_new − θ_old from the paired replicates' bin-vector statistics of the
    two models (module docstring)."""
    keep = (np.isfinite(old.dev[norm]) & np.isfinite(old.lin[norm])
            & np.isfinite(new.dev[norm]) & np.isfinite(new.lin[norm]))
    reps = int(keep.shape[0])
    failed = reps - int(keep.sum())
    labels = {"method": DELTA_NORM_METHOD, "estimand": "change of the " + POPULATION,
              "resampling": resampling}
    if keep.sum() < max(2, (reps + 1) // 2):
        return ConfidenceInterval(None, None, level, reps, None, failed, seed, **labels)
    q = (1.0 + level) / 2.0
    delta = new.theta[norm] - old.theta[norm]
    down = new.dev[norm][keep] + old.lin[norm][keep]
    up = new.lin[norm][keep] + old.dev[norm][keep]
    se = float(np.std(new.lin[norm][keep] - old.lin[norm][keep], ddof=1))
    return ConfidenceInterval(delta - max(0.0, float(np.quantile(down, q))),
                              delta + max(0.0, float(np.quantile(up, q))),
                              level, reps, se, failed, seed, **labels)


def delta_percentile_interval(old: FloatArray, new: FloatArray, mid: str, *, level: float,
                              seed: int, resampling: str = PAIRED) -> ConfidenceInterval:
    """The percentile interval of the paired replicate differences new − old."""
    est = estimand_of(mid)
    return percentile_interval(np.asarray(new) - np.asarray(old), level=level, seed=seed,
                               method=DELTA_PERCENTILE, resampling=resampling,
                               estimand="change of the " + est if not est.startswith("sampling")
                               else est)


def paired_bootstrap(old: Any, new: Any, ids: list[str], options: Any,
                     compute: Callable[[Any, list[str], Any], Mapping[str, Any]], *,
                     reps: int, level: float, seed: int,
                     progress: Callable[[int, int], None] | None = None
                     ) -> dict[str, ConfidenceInterval]:
    """Intervals of the change of each metric in ``ids`` (those with a bootstrap interval)
    between ``old`` and ``new`` (:class:`~calcheck.data.Predictions` of the same rows, in the
    same order, with the same labels)."""
    from calcheck import registry

    check_ci_options(reps, level)
    ids = [m for m in ids if registry.METRICS[m].ci]
    check_reps_size(reps, 2 * len(ids))
    n = old.n
    if new.n != n:
        raise ValueError(f"paired bootstrap of {old.n} and {new.n} rows")
    models = [ModelReplicates(d, ids, options, compute, reps) for d in (old, new)]
    rng = np.random.default_rng(seed)
    # draws index the rows in the matched order, the same for both models
    draws = prefetch((rng.integers(0, n, size=n) for _ in range(reps)), depth=4)
    for r, idx in enumerate(draws):
        counts = np.bincount(idx, minlength=n)
        for m in models:
            m.add(r, counts[m.canon])
        if progress is not None:
            progress(r + 1, reps)
    a, b = models
    out = {}
    for mid in ids:
        na, nb = a.normed(mid), b.normed(mid)
        if na is not None and nb is not None:
            out[mid] = delta_norm_interval(na[0], nb[0], na[1], level=level, seed=seed)
        else:
            out[mid] = delta_percentile_interval(a.replicate_values(mid),
                                                 b.replicate_values(mid), mid, level=level,
                                                 seed=seed)
    return out
