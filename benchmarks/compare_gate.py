"""The ``compare`` gate under simulation: its false-alarm rate when the two models are equally
calibrated and its power when the new one is not.

    python benchmarks/compare_gate.py                   # the table of docs/compare.md
    python benchmarks/compare_gate.py --samples 100     # quicker
    python benchmarks/compare_gate.py --write docs/compare-table.md

Every sample draws n rows: p ~ U(0, 1), y ~ Bernoulli(p).  OLD and NEW are two models' scores
of those rows:

* ``same``        NEW = OLD = p (identical models);
* ``coarse``      OLD = p, NEW = the midpoint of p's 1/20 cell (calibrated and less sharp:
                  E[y | NEW] = NEW);
* ``two-coarse``  OLD = 1/10 midpoints, NEW = 1/20 midpoints (both calibrated);
* ``s^1.5``       OLD = p, NEW = p^1.5 (NEW over-confident toward 0: worse calibrated);
* ``s^1.2``       OLD = p, NEW = p^1.2 (slightly worse).

For each metric the gate ``--fail-if-worse METRIC`` as ``compare`` decides it: for ECE (and
ECE-l2) the paired studentized test of the change of the debiased squared error, for the
others the lower end of the change's ``--ci-level`` interval above 0 (``gates[].decided_by``
says which).  A false alarm is a failed gate in the first three rows (the population changes
are 0 there); power is the failed share in the last two.  Seeded: the
table is reproducible.  Not part of the test suite.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

import calcheck

METRICS = ["ece", "ace", "brier"]


def pair(case: str, n: int, rng: np.random.Generator) -> pd.DataFrame:
    p = rng.random(n)
    y = (rng.random(n) < p).astype(np.int8)

    def mid(k: int) -> np.ndarray:
        return (np.floor(p * k) + 0.5) / k

    old, new = {"same": (p, p), "coarse": (p, mid(20)), "two-coarse": (mid(10), mid(20)),
                "s^1.5": (p, p ** 1.5), "s^1.2": (p, p ** 1.2)}[case]
    return pd.DataFrame({"old": old, "new": new, "label": y})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--reps", type=int, default=500, help="bootstrap replicates per compare")
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument("--write", default=None, help="also write the markdown table here")
    a = ap.parse_args()
    rows = []
    t0 = time.time()
    for case in ("same", "coarse", "two-coarse", "s^1.5", "s^1.2"):
        for n in (1000, 5000):
            rng = np.random.default_rng([n, len(case)])
            fails = dict.fromkeys(METRICS, 0)
            for r in range(a.samples):
                rep = calcheck.compare(pair(case, n, rng), score=["old", "new"],
                                       metrics=METRICS, ci_reps=a.reps, ci_level=a.level,
                                       seed=r, fail_if_worse=METRICS)
                for gate in rep.to_dict()["gates"]:
                    fails[gate["metric"]] += bool(gate["failed"])
            rate = {m: fails[m] / a.samples for m in METRICS}
            se = math.sqrt((1 - a.level) * a.level / a.samples)
            kind = "false alarm" if case in ("same", "coarse", "two-coarse") else "power"
            rows.append((case, n, kind, rate))
            print(f"{case:<11} n={n:<5} {kind:<11} " + "  ".join(
                f"{m}={rate[m]:.3f}" for m in METRICS) + f"   (2 SE at nominal {2 * se:.3f})",
                flush=True)
    lines = [f"| case | n | rate | {' | '.join(METRICS)} |", "|---|---:|---|" + "---:|" *
             len(METRICS)]
    lines += [f"| {c} | {n:,} | {k} | " + " | ".join(f"{r[m]:.3f}" for m in METRICS) + " |"
              for c, n, k, r in rows]
    text = "\n".join(lines) + (f"\n\n{a.samples} samples per row, {a.reps} paired bootstrap "
                               f"replicates, level {a.level}; {time.time() - t0:.0f} s.\n")
    print(text)
    if a.write:
        with open(a.write, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
