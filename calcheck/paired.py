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

The Brier score and log loss (means) get the percentile interval of the paired replicate
differences θ*_new − θ*_old, which covers their change.  Every other metric gets no interval,
as for one model.

**The sharper test of a change in an equal-width binned error** (ECE, ECE-l2, their debiased
and top-label forms).  The interval above is conservative by construction — at n = 2,000 it
is ±0.047 wide for a change of 0.045 — and its verdict rarely says "worse".  The verdict and
the ``--fail-if-worse`` gate without a margin therefore come from a test of the change of the
*squared* l2 calibration error on the metric's bins, whose estimator is unbiased for any model
(Kumar, Liang & Ma 2019): per model

    U = Σ_b (n_b/n)·(d̂_b² − s²_b/n_b),   d̂_b = ȳ_b − s̄_b,  s²_b the variance of y − s in b,

and z = (U_new − U_old)/se, se from the delta method with its second-order terms
(:func:`squared_change`; the bootstrap's spread of U* overstates it by 4 v_b² a bin, three times
the variance where a model is calibrated).  Under "equally calibrated" (the two squared errors
equal) z is approximately standard normal whatever the two models' sharpness, since neither U
carries the plug-in's bias.  "worse" when z ≥ z_{(1+level)/2}, "better"
when z ≤ −z_{(1+level)/2}; the two-sided p-value 2Φ(−|z|) enters ``compare``'s family.
Measured in docs/validity.md: the gate against p^1.2 at n = 2,000, and its false alarms on
equally calibrated models of different sharpness.  A gate with a margin (``ece:0.005``) is a
claim about the size of the change in the metric's own units and keeps the interval.

References
----------
.. [1] Efron, Tibshirani. An Introduction to the Bootstrap. Chapman & Hall, 1993 (paired
       resampling, percentile intervals).
.. [2] Kumar, Liang, Ma. Verified uncertainty calibration. NeurIPS 2019 (the debiased squared
       calibration error).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from calcheck._prefetch import prefetch
from calcheck._typing import FloatArray
from calcheck.errors import InputError
from calcheck.uncertainty import (
    POPULATION,
    ConfidenceInterval,
    ModelReplicates,
    NormReplicates,
    RowWeightReplicates,
    check_ci_options,
    check_reps_size,
    estimand_of,
    percentile_interval,
    replicate_weights,
)
from calcheck.unit_bootstrap import (
    NORM_BINNING,
    UnitReplicates,
    poisson_draws,
    weighted_units,
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


SQUARED_TEST = ("paired studentized difference of the debiased squared l2 calibration error "
                "on the metric's equal-width bins: (U_new - U_old) / se, se from the delta "
                "method with the second-order terms (one pass, no resampling)")
# the metrics whose verdict comes from the squared-error test on their equal-width bins
SQUARED_TESTED = ("ece", "ece_l2", "ece_debiased", "ece_l2_debiased", "ece_top")


@dataclass(frozen=True)
class PairSums:
    """What the squared-error test needs of two models on the same rows, with r = y − s:
    per bin of each model its rows N, Σ r and Σ r² (``*_new``, ``*_old``: arrays of B), and
    per joint cell (NEW's bin, OLD's bin) its rows, Σ r_new, Σ r_old and Σ r_new·r_old
    (B × B arrays).  Sums of rows add, so a stream accumulates them batch by batch."""

    n_new: FloatArray
    s_new: FloatArray
    q_new: FloatArray
    n_old: FloatArray
    s_old: FloatArray
    q_old: FloatArray
    joint_n: FloatArray
    joint_new: FloatArray
    joint_old: FloatArray
    joint_cross: FloatArray

    @staticmethod
    def of(old_scores: FloatArray, new_scores: FloatArray, old_labels: np.ndarray,
           new_labels: np.ndarray, bins: int, counts: FloatArray | None = None) -> PairSums:
        """The sums of one set of rows (the labels of each model's view: the same for binary
        input, each model's correctness for the top-label view); ``counts``: aggregated rows,
        each standing for that many (the expanded rows' sums)."""
        from calcheck.binning import uniform_assign

        so, sn = np.asarray(old_scores, dtype=np.float64), np.asarray(new_scores, dtype=np.float64)
        io, inew = uniform_assign(so, bins), uniform_assign(sn, bins)
        ro = np.asarray(old_labels, dtype=np.float64) - so
        rn = np.asarray(new_labels, dtype=np.float64) - sn
        cell = inew * bins + io

        def by(ids: np.ndarray, w: np.ndarray | None, k: int) -> FloatArray:
            if counts is not None:
                w = counts if w is None else w * counts
            return np.asarray(np.bincount(ids, weights=w, minlength=k), dtype=np.float64)

        k2 = bins * bins
        return PairSums(by(inew, None, bins), by(inew, rn, bins), by(inew, rn * rn, bins),
                        by(io, None, bins), by(io, ro, bins), by(io, ro * ro, bins),
                        by(cell, None, k2).reshape(bins, bins),
                        by(cell, rn, k2).reshape(bins, bins),
                        by(cell, ro, k2).reshape(bins, bins),
                        by(cell, rn * ro, k2).reshape(bins, bins))

    def __add__(self, other: PairSums) -> PairSums:
        from dataclasses import fields

        return PairSums(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


def _bin_parts(N: FloatArray, S: FloatArray, Q: FloatArray
               ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per bin: the mean residual d̂_b, the estimated variance v̂_b = s²_b/N_b of d̂_b (bins of
    fewer than two rows: 0 and 0) and the centred sum of squares Σ (r − d̂_b)²."""
    ok = N > 1.5
    d, v, ss = (np.zeros_like(N) for _ in range(3))
    d[ok] = S[ok] / N[ok]
    ss[ok] = np.maximum(Q[ok] - S[ok] ** 2 / N[ok], 0.0)
    v[ok] = ss[ok] / (N[ok] - 1.0) / N[ok]
    return d, v, ss


def squared_change(sums: PairSums, *, level: float) -> dict[str, Any]:
    """The paired test of the change of the squared l2 calibration error (module docstring).

    U = Σ_b w_b (d̂_b² − v̂_b), w_b = N_b/n, per model; D = U_new − U_old.  Var(D) is the
    delta method's Σ_i (ψ_new,i − ψ_old,i)² with ψ_i = (2 d_b/n)(r_i − d_b) (d_b² estimated by
    max(d̂_b² − v̂_b, 0), d_b^new·d_c^old by d̂_b d̂_c − Ĉ_bc) plus the second-order terms
    2Σ w_b² v_b² of each model and −4 Σ w_b w_c C_bc² between them, C_bc = Cov(d̂_b^new,
    d̂_c^old) estimated from the joint cells — the terms that carry the variance where a model
    is calibrated (d = 0) and the first-order term vanishes.  z = D/√Var(D)."""
    from statistics import NormalDist

    n = float(sums.n_new.sum())
    dn, vn, ssn = _bin_parts(sums.n_new, sums.s_new, sums.q_new)
    do, vo, sso = _bin_parts(sums.n_old, sums.s_old, sums.q_old)
    okn, oko = sums.n_new > 1.5, sums.n_old > 1.5
    wn, wo = sums.n_new / n, sums.n_old / n
    u_new = float(np.sum((wn * (dn * dn - vn))[okn]))
    u_old = float(np.sum((wo * (do * do - vo))[oko]))
    # Σ over the joint cell (b, c) of (r_new − d̂_b)(r_old − d̂_c)
    P = (sums.joint_cross - do[None, :] * sums.joint_new - dn[:, None] * sums.joint_old
         + sums.joint_n * dn[:, None] * do[None, :])
    den = np.outer(sums.n_new, sums.n_old)
    C = np.divide(P, den, out=np.zeros_like(P), where=den > 0)
    lin_new = 4.0 / n ** 2 * float(np.sum(np.maximum(dn * dn - vn, 0.0) * ssn))
    lin_old = 4.0 / n ** 2 * float(np.sum(np.maximum(do * do - vo, 0.0) * sso))
    cross = 4.0 / n ** 2 * float(np.sum((np.outer(dn, do) - C) * P))
    second = 2.0 * float(np.sum(wn ** 2 * vn ** 2) + np.sum(wo ** 2 * vo ** 2)) - \
        4.0 * float(np.sum(np.outer(wn, wo) * C * C))
    var = lin_new + lin_old - 2.0 * cross + second
    d = u_new - u_old
    se = float(np.sqrt(var)) if var > 0 else 0.0
    z = d / se if se > 0 else (0.0 if d == 0 else float(np.sign(d)) * np.inf)
    crit = NormalDist().inv_cdf((1.0 + level) / 2.0)
    p = 2.0 * NormalDist().cdf(-abs(z)) if np.isfinite(z) else 0.0
    verdict = "worse" if z >= crit else "better" if z <= -crit else "no detectable difference"
    return {"statistic": z, "pvalue": p, "verdict": verdict, "delta_squared": d, "se": se,
            "squared_old": u_old, "squared_new": u_new, "level": level,
            "method": SQUARED_TEST,
            "estimand": "change of the squared l2 calibration error at the metric's bins"}


def norm_pvalue(old: NormReplicates, new: NormReplicates, norm: str) -> float | None:
    """The two-sided p-value of "no change" that the paired norm interval inverts: the
    interval at level L excludes 0 exactly when this is at most 1 − L (+1 correction)."""
    keep = (np.isfinite(old.dev[norm]) & np.isfinite(old.lin[norm])
            & np.isfinite(new.dev[norm]) & np.isfinite(new.lin[norm]))
    if keep.sum() < 10:
        return None
    delta = new.theta[norm] - old.theta[norm]
    down = new.dev[norm][keep] + old.lin[norm][keep]
    up = new.lin[norm][keep] + old.dev[norm][keep]
    r = int(keep.sum())
    worse = (1 + int(np.sum(down >= delta))) / (r + 1)
    better = (1 + int(np.sum(up >= -delta))) / (r + 1)
    return float(min(1.0, 2.0 * min(worse, better)))


def percentile_pvalue(old: FloatArray, new: FloatArray) -> float | None:
    """The two-sided p-value the percentile interval of new − old inverts."""
    d = np.asarray(new) - np.asarray(old)
    d = d[np.isfinite(d)]
    if d.shape[0] < 10:
        return None
    r = d.shape[0]
    return float(min(1.0, 2.0 * min((1 + int(np.sum(d <= 0))) / (r + 1),
                                    (1 + int(np.sum(d >= 0))) / (r + 1))))


def paired_bootstrap(old: Any, new: Any, ids: list[str], options: Any,
                     compute: Callable[[Any, list[str], Any], Mapping[str, Any]], *,
                     reps: int, level: float, seed: int,
                     progress: Callable[[int, int], None] | None = None
                     ) -> dict[str, PairedChange]:
    """The change of each metric in ``ids`` (those with a bootstrap interval) between ``old``
    and ``new`` (:class:`~calcheck.data.Predictions` of the same rows, in the same order, with
    the same labels): its interval, p-value and, for an equal-width binned error, the
    squared-error test."""
    from calcheck import registry

    check_ci_options(reps, level)
    ids = [m for m in ids if registry.METRICS[m].ci]
    check_reps_size(reps, 2 * len(ids))
    n = old.n
    if new.n != n:
        raise ValueError(f"paired bootstrap of {old.n} and {new.n} rows")
    weights = old.weights
    rng = np.random.default_rng(seed)
    models: list[Any]
    if weights is not None:             # new weights per replicate, the same for both models
        models = [RowWeightReplicates(d, ids, options, compute, reps) for d in (old, new)]
        for r in range(reps):
            drawn = replicate_weights(weights, rng)
            for m in models:
                m.add(r, drawn)
            if progress is not None:
                progress(r + 1, reps)
    else:
        models = [ModelReplicates(d, ids, options, compute, reps) for d in (old, new)]
        # draws index the rows in the matched order, the same for both models
        draws = prefetch((rng.integers(0, n, size=n) for _ in range(reps)), depth=4)
        for r, idx in enumerate(draws):
            counts = np.bincount(idx, minlength=n)
            for m in models:
                m.add(r, counts[m.canon])
            if progress is not None:
                progress(r + 1, reps)
    a, b = models
    out: dict[str, PairedChange] = {}
    # the squared-error test counts rows: counts (frequency weights) are rows; sampling weights
    # have no such test here, and their verdict comes from the interval
    tested = any(m in SQUARED_TESTED for m in ids) and not getattr(options, "compat", None) \
        and (weights is None or weights.frequency)
    test = squared_change(PairSums.of(old.top[0], new.top[0], old.top[1], new.top[1],
                                      int(options.bins),
                                      None if weights is None else weights.values),
                          level=level) if tested else None
    for mid in ids:
        na, nb = a.normed(mid), b.normed(mid)
        if na is not None and nb is not None:
            out[mid] = PairedChange(
                delta_norm_interval(na[0], nb[0], na[1], level=level, seed=seed),
                norm_pvalue(na[0], nb[0], na[1]), test if mid in SQUARED_TESTED else None)
        else:
            va, vb = a.replicate_values(mid), b.replicate_values(mid)
            out[mid] = PairedChange(delta_percentile_interval(va, vb, mid, level=level,
                                                              seed=seed),
                                    percentile_pvalue(va, vb), None)
    return out


@dataclass(frozen=True)
class PairedChange:
    """One metric's change: its paired interval, the two-sided p-value that interval
    inverts, and — for an equal-width binned error — the sharper squared-error test."""

    ci: ConfidenceInterval
    pvalue: float | None
    test: dict[str, Any] | None = None


# ---------------------------------------------------------------------------------------------
# the streaming engines' paired units
#
# ``compare`` on the streaming engines (:func:`calcheck.comparison.compare_stream` runs these
# kernels): both models' metrics from their own passes, and the
# **paired Poisson bootstrap** of their changes from one more pass over the two models in step.
#
# Each model's metrics come from the engine (``stream`` or ``dask``) exactly as ``score`` computes
# them, so the changes equal the in-memory ones.  The paired intervals need the two models'
# residuals on the same resampled rows: one pass reads both models' (score, label) in step (two
# files by position, or two columns of one file) and keeps **joint units** — the rows of one
# label whose OLD score falls in one (ECE bin, 1/64-wide block) and whose NEW score falls in one
# (ECE bin, 1/64-wide block): at most 2·(B + 64)² units whatever n, with each unit's count and
# sums.  A replicate gives every unit a Poisson(count) weight, the same for both models (the
# streamed analogue of resampling rows jointly), and rows inside a unit are taken as
# exchangeable, as in :mod:`calcheck.streaming.bootstrap` (means exact; the within-unit variance
# of the scores, under 1/64² / 12 per row, is left out and reported as ``variance_deficit``).
# The intervals of the changes are then built as in memory (above): the paired
# norm bootstrap for ECE, ECE-l2 and ACE (their debiased forms too), the paired percentile
# bootstrap for the Brier score and log loss.  Other metrics get no interval on these engines.
# Draws depend only on the seed and the units, so a run is reproducible for any batch size.

BLOCKS = 64
UNIT_MEANS = ("brier", "log_loss")
UNIT_CI_IDS = (*NORM_BINNING, *UNIT_MEANS)
UNIT_RESAMPLING = ("Poisson bootstrap per joint unit (both models' ECE bin and 1/64 block, and the "
              "label), the same weights for both models")
UNIT_WEIGHTS = {
    "count": "counts: each unit's rows the expanded rows, drawn Poisson(Σk)",
    "weight": "sampling weights: each unit's mass drawn as (Σw²/Σw)·Poisson((Σw)²/Σw²), the "
              "mean and variance of Σ c·w under Poisson(1) row multipliers c"}
SUMS = ("count", "s_old", "s_new", "s2_old", "s2_new", "sq_old", "sq_new", "ll_old", "ll_new",
        "y_old", "y_new")


def _unit_key(s: FloatArray, bins: int) -> np.ndarray:
    """(ECE bin, 1/64 block) as one integer, increasing with the score."""
    from calcheck.binning import uniform_assign

    b = uniform_assign(s, bins).astype(np.int64)
    k = np.minimum((s * BLOCKS).astype(np.int64), BLOCKS - 1)
    return b * (BLOCKS + 1) + k


class PairedUnits:
    """The joint units of one pass (module docstring), merged batch by batch; ``weights``:
    the rows' kind of weight, when they carry one (``"count"``: each row that many rows, the
    expanded file's units; ``"weight"``: sampling weights, each unit's Σw² kept too)."""

    def __init__(self, bins: int, weights: str | None = None) -> None:
        from calcheck.metrics.scoring import LOG_LOSS_EPS

        self.bins, self.eps, self.weights = bins, LOG_LOSS_EPS, weights
        self.side = bins * (BLOCKS + 1) + BLOCKS + 1
        self.keys = np.zeros(0, dtype=np.int64)
        self.sums = np.zeros((len(SUMS) + (weights == "weight"), 0))
        self.pair: PairSums | None = None       # the squared-error test's sums

    def update(self, so: FloatArray, sn: FloatArray, yo: FloatArray, yn: FloatArray,
               w: FloatArray | None = None) -> None:
        """A batch: both models' scores and (binary, or top-label correct) labels (``w``:
        the rows' weights; a row of weight 0 is in no unit)."""
        if w is not None:
            live = w > 0
            so, sn, yo, yn, w = so[live], sn[live], yo[live], yn[live], w[live]
        if self.weights != "weight":          # (sampling weights: no squared-error test)
            batch = PairSums.of(so, sn, yo, yn, self.bins, w)
            self.pair = batch if self.pair is None else self.pair + batch
        key = (_unit_key(so, self.bins) * self.side + _unit_key(sn, self.bins)) * 4 + \
            yo.astype(np.int64) * 2 + yn.astype(np.int64)
        uniq, inv = np.unique(key, return_inverse=True)

        def ll(s: FloatArray, y: FloatArray) -> FloatArray:
            c = np.clip(s, self.eps, 1.0 - self.eps)
            return np.where(y > 0, np.log(c), np.log1p(-c))

        cols: tuple[FloatArray, ...] = (
            np.ones_like(so), so, sn, so * so, sn * sn, (so - yo) ** 2, (sn - yn) ** 2,
            ll(so, yo), ll(sn, yn), yo, yn)
        if w is not None:
            cols = (w, *(w * c for c in cols[1:]), *((w * w,) if self.weights == "weight"
                                                     else ()))
        sums = np.stack([np.bincount(inv, weights=c, minlength=uniq.shape[0]) for c in cols])
        keys = np.concatenate([self.keys, uniq])
        allsums = np.concatenate([self.sums, sums], axis=1)
        self.keys, inv = np.unique(keys, return_inverse=True)
        self.sums = np.stack([np.bincount(inv, weights=r, minlength=self.keys.shape[0])
                              for r in allsums])

    def columns(self) -> dict[str, Any]:
        out = {name: self.sums[j] for j, name in enumerate(SUMS)}
        if self.weights == "weight":
            out["count_sq"] = self.sums[len(SUMS)]
        pair = self.keys // 4
        out["key_old"], out["key_new"] = pair // self.side, pair % self.side
        return out


def _model_view(u: dict[str, Any], side: str, bins: int) -> dict[str, Any]:
    """One model's side of the joint units, sorted by its (bin, block) then label: the
    permutation, bins, block starts and mean scores."""
    key = u["key_" + side]
    label = np.rint(u["y_" + side] / u["count"])          # one label per unit and side
    perm = np.lexsort((label, key))
    k = key[perm]
    n = u["count"][perm]
    return {"perm": perm, "bin": k // (BLOCKS + 1), "label": label[perm],
            "block_starts": np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1]))),
            "bin_starts": np.flatnonzero(np.concatenate(([True], (k // (BLOCKS + 1))[1:]
                                                         != (k // (BLOCKS + 1))[:-1]))),
            "count": n, "mean_score": u["s_" + side][perm] / n,
            "mean_sq": u["sq_" + side][perm] / n, "mean_ll": u["ll_" + side][perm] / n,
            "bins": bins}


def paired_intervals(units: PairedUnits, ids: list[str], *, reps: int, level: float,
                     seed: int) -> tuple[dict[str, PairedChange], dict[str, Any]]:
    """The paired intervals of the changes of ``ids`` (those in :data:`UNIT_CI_IDS`), with the
    p-value each inverts and the sharper squared-error test of the equal-width binned
    errors (:mod:`calcheck.paired`)."""
    check_ci_options(reps, level)
    ids = [m for m in ids if m in UNIT_CI_IDS]
    u = units.columns()
    scale = None
    if units.weights == "weight":       # each unit's mass: (Σw²/Σw)·Poisson((Σw)²/Σw²)
        lam, scale = weighted_units(u["count"], u["count_sq"])
        n = float(u["count"].sum())
    else:                               # rows, or counts: the expanded file's units
        lam = np.rint(u["count"]).astype(np.int64)
        n = float(lam.sum())
    views = [_model_view(u, side, units.bins) for side in ("old", "new")]
    reps_of = [UnitReplicates(v, ids, n=n, bins=units.bins, reps=reps,   # (equal-mass cuts:
                              at=v["bin"][v["bin_starts"]],              # at whole rows, or
                              whole=scale is None) for v in views]       # at masses j·W*/B)
    for sl, W, n_star in poisson_draws(lam, reps, seed, scale):
        for v, rep in zip(views, reps_of):
            rep.add(sl, W[:, v["perm"]], n_star)
    test = squared_change(units.pair, level=level) \
        if units.pair is not None and any(m in SQUARED_TESTED for m in ids) else None
    cis: dict[str, PairedChange] = {}
    for mid in ids:
        if mid in NORM_BINNING:
            kind, norm = NORM_BINNING[mid]
            a, b = reps_of[0].norms[kind], reps_of[1].norms[kind]
            cis[mid] = PairedChange(delta_norm_interval(a, b, norm, level=level, seed=seed,
                                                        resampling=UNIT_RESAMPLING),
                                    norm_pvalue(a, b, norm),
                                    test if mid in SQUARED_TESTED else None)
        else:
            old, new = reps_of[0].values[mid], reps_of[1].values[mid]
            cis[mid] = PairedChange(delta_percentile_interval(old, new, mid, level=level,
                                                              seed=seed,
                                                              resampling=UNIT_RESAMPLING),
                                    percentile_pvalue(old, new))
    within = sum(float(np.sum(np.maximum(u[f"s2_{s}"] - u[f"s_{s}"] ** 2 / u["count"], 0.0)))
                 for s in ("old", "new"))
    total = sum(float(np.sum(u[f"s2_{s}"])) for s in ("old", "new"))
    out = {"units": int(lam.shape[0]), "unit_width": 1.0 / BLOCKS,
           "variance_deficit": within / total if total > 0 else 0.0,
           "resampling": UNIT_RESAMPLING}
    if units.weights is not None:
        out["weights"] = UNIT_WEIGHTS[units.weights]
    return cis, out


# ---------------------------------------------------------------------------------------------
# the pass over both models in step


def in_step(a: Iterator[Any], b: Iterator[Any], names: tuple[str, str], weight: str = ""
            ) -> Iterator[tuple[Any, Any, np.ndarray, FloatArray | None]]:
    """(old scores, new scores, labels, OLD's weights or None) of two validated batch streams
    (binary scores, or multiclass probability matrices with class indices; weighted batches
    carry the rows' weights third), re-cut to the same rows; different row counts, labels or
    weights (when NEW's batches carry them too; ``weight``: their column) are errors naming
    how many and the first row."""
    bufs: tuple[list[Any], list[Any]] = ([], [])
    have = [0, 0]
    done = [False, False]
    row = 0
    differ = {"labels": [0, -1], "weights": [0, -1]}     # how many rows, the first

    def take(buf: list[Any], k: int) -> tuple[Any, ...]:
        cols = tuple(np.concatenate([np.asarray(x[j]) for x in buf])
                     for j in range(len(buf[0])))
        buf.clear()
        if cols[0].shape[0] > k:
            buf.append(tuple(c[k:] for c in cols))
        return tuple(c[:k] for c in cols)

    def note(what: str, bad: np.ndarray) -> None:
        if bad.size:
            differ[what][0] += int(bad.size)
            if differ[what][1] < 0:
                differ[what][1] = row + int(bad[0])

    streams = (a, b)
    while True:
        for j in (0, 1):
            while not done[j] and have[j] <= have[1 - j]:
                nxt = next(streams[j], None)
                if nxt is None:
                    done[j] = True
                else:
                    bufs[j].append(tuple(nxt[:3]))
                    have[j] += len(nxt[0])
        k = min(have)
        if k == 0:
            break
        old, new = take(bufs[0], k), take(bufs[1], k)
        have = [have[0] - k, have[1] - k]
        note("labels", np.flatnonzero(old[1] != new[1]))
        w = old[2] if len(old) > 2 else None
        if w is not None and len(new) > 2:
            note("weights", np.flatnonzero(new[2] != w))
        row += k
        yield old[0], new[0], old[1], w
        if all(done) and not bufs[0] and not bufs[1]:
            break
    if have[0] or have[1]:
        raise InputError(f"{names[0]} and {names[1]} have different numbers of rows "
                         f"({row + have[0]:,} and {row + have[1]:,} read): rows are matched by "
                         "position on --engine stream/dask; match them by id with --engine "
                         "memory (--id)")
    count, first = differ["labels"]
    if count:
        raise InputError(f"the labels differ between {names[0]} and {names[1]} on {count:,} of "
                         f"{row:,} rows (first: row {first + 1}); both models must be scored on "
                         "the same examples with the same labels")
    count, first = differ["weights"]
    if count:
        raise InputError(f"{names[1]}: its weight column {weight!r} differs from {names[0]}'s "
                         f"on {count:,} of {row:,} matched rows (first: row {first + 1}): both "
                         "models' rows must carry the same weight", column=weight or None)
