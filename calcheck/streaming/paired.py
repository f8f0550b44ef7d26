"""``compare`` on the streaming engines (the kernels; :func:`calcheck.comparison.compare_stream`
runs them): both models' metrics from their own passes, and the
**paired Poisson bootstrap** of their changes from one more pass over the two models in step.

Each model's metrics come from the engine (``stream`` or ``dask``) exactly as ``score`` computes
them, so the changes equal the in-memory ones.  The paired intervals need the two models'
residuals on the same resampled rows: one pass reads both models' (score, label) in step (two
files by position, or two columns of one file) and keeps **joint units** — the rows of one
label whose OLD score falls in one (ECE bin, 1/64-wide block) and whose NEW score falls in one
(ECE bin, 1/64-wide block): at most 2·(B + 64)² units whatever n, with each unit's count and
sums.  A replicate gives every unit a Poisson(count) weight, the same for both models (the
streamed analogue of resampling rows jointly), and rows inside a unit are taken as
exchangeable, as in :mod:`calcheck.streaming.bootstrap` (means exact; the within-unit variance
of the scores, under 1/64² / 12 per row, is left out and reported as ``variance_deficit``).
The intervals of the changes are then built as in memory (:mod:`calcheck.paired`): the paired
norm bootstrap for ECE, ECE-l2 and ACE (their debiased forms too), the paired percentile
bootstrap for the Brier score and log loss.  Other metrics get no interval on these engines.
Draws depend only on the seed and the units, so a run is reproducible for any batch size.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from calcheck._typing import FloatArray
from calcheck.errors import InputError
from calcheck.paired import (
    SQUARED_TESTED,
    PairedChange,
    PairSums,
    delta_norm_interval,
    delta_percentile_interval,
    norm_pvalue,
    percentile_pvalue,
    squared_change,
)
from calcheck.streaming.bootstrap import REP_CHUNK, _quantile_replicates
from calcheck.uncertainty import NormReplicates, check_ci_options

BLOCKS = 64
NORM = {"ece": ("uniform", "l1"), "ece_debiased": ("uniform", "l1"), "ece_l2": ("uniform", "l2"),
        "ece_l2_debiased": ("uniform", "l2"), "ace": ("quantile", "l1")}
MEANS = ("brier", "log_loss")
CI_IDS = (*NORM, *MEANS)
RESAMPLING = ("Poisson bootstrap per joint unit (both models' ECE bin and 1/64 block, and the "
              "label), the same weights for both models")
SUMS = ("count", "s_old", "s_new", "s2_old", "s2_new", "sq_old", "sq_new", "ll_old", "ll_new",
        "y_old", "y_new")


def _unit_key(s: FloatArray, bins: int) -> np.ndarray:
    """(ECE bin, 1/64 block) as one integer, increasing with the score."""
    from calcheck.binning import uniform_assign

    b = uniform_assign(s, bins).astype(np.int64)
    k = np.minimum((s * BLOCKS).astype(np.int64), BLOCKS - 1)
    return b * (BLOCKS + 1) + k


class PairedUnits:
    """The joint units of one pass (module docstring), merged batch by batch."""

    def __init__(self, bins: int) -> None:
        from calcheck.metrics.scoring import LOG_LOSS_EPS

        self.bins, self.eps = bins, LOG_LOSS_EPS
        self.side = bins * (BLOCKS + 1) + BLOCKS + 1
        self.keys = np.zeros(0, dtype=np.int64)
        self.sums = np.zeros((len(SUMS), 0))
        self.pair: PairSums | None = None       # the squared-error test's sums

    def update(self, so: FloatArray, sn: FloatArray, yo: FloatArray, yn: FloatArray) -> None:
        """A batch: both models' scores and (binary, or top-label correct) labels."""
        batch = PairSums.of(so, sn, yo, yn, self.bins)
        self.pair = batch if self.pair is None else self.pair + batch
        key = (_unit_key(so, self.bins) * self.side + _unit_key(sn, self.bins)) * 4 + \
            yo.astype(np.int64) * 2 + yn.astype(np.int64)
        uniq, inv = np.unique(key, return_inverse=True)

        def ll(s: FloatArray, y: FloatArray) -> FloatArray:
            c = np.clip(s, self.eps, 1.0 - self.eps)
            return np.where(y > 0, np.log(c), np.log1p(-c))

        cols = (np.ones_like(so), so, sn, so * so, sn * sn, (so - yo) ** 2, (sn - yn) ** 2,
                ll(so, yo), ll(sn, yn), yo, yn)
        sums = np.stack([np.bincount(inv, weights=c, minlength=uniq.shape[0]) for c in cols])
        keys = np.concatenate([self.keys, uniq])
        allsums = np.concatenate([self.sums, sums], axis=1)
        self.keys, inv = np.unique(keys, return_inverse=True)
        self.sums = np.stack([np.bincount(inv, weights=r, minlength=self.keys.shape[0])
                              for r in allsums])

    def columns(self) -> dict[str, Any]:
        out = {name: self.sums[j] for j, name in enumerate(SUMS)}
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
    """The paired intervals of the changes of ``ids`` (those in :data:`CI_IDS`), with the
    p-value each inverts and the sharper squared-error test of the equal-width binned
    errors (:mod:`calcheck.paired`)."""
    check_ci_options(reps, level)
    ids = [m for m in ids if m in CI_IDS]
    u = units.columns()
    lam = np.rint(u["count"]).astype(np.int64)
    n = float(lam.sum())
    views = [_model_view(u, side, units.bins) for side in ("old", "new")]
    kinds = {NORM[m][0] for m in ids if m in NORM}
    norms: list[dict[str, NormReplicates]] = []
    for v in views:
        N = v["count"]
        nr = {}
        if "uniform" in kinds:
            m = np.zeros(units.bins)
            p = np.zeros(units.bins)
            b = v["bin"][v["bin_starts"]]
            m[b] = np.add.reduceat(N * (v["label"] - v["mean_score"]), v["bin_starts"]) / n
            p[b] = np.add.reduceat(N, v["bin_starts"]) / n
            nr["uniform"] = NormReplicates(m, p, reps)
        if "quantile" in kinds:
            _, _, m_q = _quantile_replicates(N[None, :], v, v["mean_score"], v["block_starts"],
                                             np.array([n]), units.bins)
            nr["quantile"] = NormReplicates(m_q[0], np.full(units.bins, 1.0 / units.bins), reps)
        norms.append(nr)
    values = {m: np.empty((2, reps)) for m in ids if m in MEANS}
    rng = np.random.default_rng(seed)
    done = 0
    while done < reps:
        t = min(REP_CHUNK, reps - done)
        W = rng.poisson(lam, size=(t, lam.shape[0])).astype(np.float64)
        n_star = W.sum(axis=1)
        sl = slice(done, done + t)
        for j, v in enumerate(views):
            Wm = W[:, v["perm"]]
            if "uniform" in kinds:
                signed = np.zeros((t, units.bins))
                b = v["bin"][v["bin_starts"]]
                signed[:, b] = np.add.reduceat(Wm * (v["label"] - v["mean_score"]),
                                               v["bin_starts"], axis=1)
                norms[j]["uniform"].add(sl, signed / n_star[:, None])
            if "quantile" in kinds:
                _, _, m_q = _quantile_replicates(Wm, v, v["mean_score"], v["block_starts"],
                                                 n_star, units.bins)
                norms[j]["quantile"].add(sl, m_q)
            if "brier" in values:
                values["brier"][j, sl] = (Wm @ v["mean_sq"]) / n_star
            if "log_loss" in values:
                values["log_loss"][j, sl] = -(Wm @ v["mean_ll"]) / n_star
        done += t
    test = squared_change(units.pair, level=level) \
        if units.pair is not None and any(m in SQUARED_TESTED for m in ids) else None
    cis: dict[str, PairedChange] = {}
    for mid in ids:
        if mid in NORM:
            kind, norm = NORM[mid]
            a, b = norms[0][kind], norms[1][kind]
            cis[mid] = PairedChange(delta_norm_interval(a, b, norm, level=level, seed=seed,
                                                        resampling=RESAMPLING),
                                    norm_pvalue(a, b, norm),
                                    test if mid in SQUARED_TESTED else None)
        else:
            cis[mid] = PairedChange(delta_percentile_interval(values[mid][0], values[mid][1],
                                                              mid, level=level, seed=seed,
                                                              resampling=RESAMPLING),
                                    percentile_pvalue(values[mid][0], values[mid][1]))
    within = sum(float(np.sum(np.maximum(u[f"s2_{s}"] - u[f"s_{s}"] ** 2 / u["count"], 0.0)))
                 for s in ("old", "new"))
    total = sum(float(np.sum(u[f"s2_{s}"])) for s in ("old", "new"))
    return cis, {"units": int(lam.shape[0]), "unit_width": 1.0 / BLOCKS,
                 "variance_deficit": within / total if total > 0 else 0.0,
                 "resampling": RESAMPLING}


# ---------------------------------------------------------------------------------------------
# the pass over both models in step


def in_step(a: Iterator[Any], b: Iterator[Any], names: tuple[str, str]
            ) -> Iterator[tuple[Any, Any, np.ndarray]]:
    """(old scores, new scores, labels) of two validated batch streams (binary scores, or
    multiclass probability matrices with class indices), re-cut to the same rows; different
    row counts or labels are errors naming how many (labels: and the first row)."""
    buf_a: list[Any] = []
    buf_b: list[Any] = []
    have_a = have_b = 0
    done_a = done_b = False
    row = 0
    differ, first = 0, None

    def take(buf: list[Any], k: int) -> tuple[Any, np.ndarray]:
        s = np.concatenate([x[0] for x in buf])
        y = np.concatenate([np.asarray(x[1]) for x in buf])
        buf.clear()
        if s.shape[0] > k:
            buf.append((s[k:], y[k:]))
        return s[:k], y[:k]

    while True:
        while not done_a and have_a <= have_b:
            nxt = next(a, None)
            if nxt is None:
                done_a = True
            else:
                buf_a.append(nxt[:2])
                have_a += len(nxt[0])
        while not done_b and have_b <= have_a:
            nxt = next(b, None)
            if nxt is None:
                done_b = True
            else:
                buf_b.append(nxt[:2])
                have_b += len(nxt[0])
        k = min(have_a, have_b)
        if k == 0:
            break
        sa, ya = take(buf_a, k)
        sb, yb = take(buf_b, k)
        have_a -= k
        have_b -= k
        bad = np.flatnonzero(ya != yb)
        if bad.size:
            differ += bad.size
            first = row + int(bad[0]) if first is None else first
        row += k
        yield sa, sb, ya
        if done_a and done_b and not buf_a and not buf_b:
            break
    if have_a or have_b:
        raise InputError(f"{names[0]} and {names[1]} have different numbers of rows ({row + have_a:,} "
                         f"and {row + have_b:,} read): rows are matched by position on --engine "
                         "stream/dask; match them by id with --engine memory (--id)")
    if differ and first is not None:
        raise InputError(f"the labels differ between {names[0]} and {names[1]} on {differ:,} of "
                         f"{row:,} rows (first: row {first + 1}); both models must be scored on "
                         "the same examples with the same labels")
