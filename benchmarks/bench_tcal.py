"""Benchmark adaptive T-Cal (issue: 1000 trials on calibrated data, n = 10,000 < 1.5 s;
n = 1,000,000 < 60 s with peak memory < 4 GB), and its size and power with more replications
than the unit tests.

    python benchmarks/bench_tcal.py [--reps 1000] [--skip-big]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import binary_parquet, run_cli

import calcheck


def size_and_power(reps: int, n: int = 2000, trials: int = 1000) -> None:
    rng = np.random.default_rng(12345)
    t0 = time.perf_counter()
    null_rej = power_rej = 0
    for i in range(reps):
        z = rng.uniform(size=n)
        null_rej += calcheck.tcal(z, rng.binomial(1, z), trials=trials, rng=i).reject
        power_rej += calcheck.tcal(z, rng.binomial(1, z ** 1.5), trials=trials, rng=i).reject
    print(f"size  (Z~U[0,1], Y~Bern(Z),     n={n}, {reps} reps, {trials} trials): "
          f"{null_rej / reps:.3f} rejected at alpha=0.05")
    print(f"power (Z~U[0,1], Y~Bern(Z^1.5), n={n}, {reps} reps, {trials} trials): "
          f"{power_rej / reps:.3f} rejected  [{time.perf_counter() - t0:.0f} s]")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--skip-big", action="store_true")
    a = ap.parse_args()
    sizes = (10_000,) if a.skip_big else (10_000, 1_000_000)
    for n in sizes:
        path = binary_parquet(n, seed=7)
        rng = np.random.default_rng(0)
        s = rng.uniform(size=n)
        y = rng.binomial(1, s)
        t0 = time.perf_counter()
        r = calcheck.tcal(s, y, trials=1000, rng=0)
        engine = time.perf_counter() - t0
        wall, peak = run_cli(["test", str(path), "--json", "--trials", "1000"])
        print(f"adaptive T-Cal, n={n:,}, 1000 trials, calibrated: engine {engine:.2f} s "
              f"(B={r.details['B']}, p={r.pvalue:.3f}); CLI wall {wall:.2f} s, "
              f"peak RSS {peak:.2f} GB")
    size_and_power(a.reps)


if __name__ == "__main__":
    main()
