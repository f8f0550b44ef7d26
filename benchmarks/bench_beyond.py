"""Benchmark the binning-free and decomposition metrics (issue: each < 1 s on 10^6 rows in
memory; the streamed smooth ECE within 3x of a Parquet scan).

    python benchmarks/bench_beyond.py [--rows 1000000] [--repeat 3]

Kernel time: each metric alone on arrays already in memory (the sort shared by nothing), the
median of ``--repeat`` runs; then ``calcheck score -m smece`` on a Parquet file with the memory
and the stream engine, next to a bare pyarrow scan of the same columns.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _common import binary_parquet, run_cli_timed

IDS = ["smece", "ecce_mad", "ici", "e50", "corp_mcb", "corp_mcb_log", "ece_sweep"]


def kernel_times(n: int, repeat: int) -> None:
    from calcheck.metrics import MetricOptions, Prepared, compute_metrics

    rng = np.random.default_rng(0)
    x = rng.normal(size=n)
    s = 1.0 / (1.0 + np.exp(-(0.3 + 1.7 * x)))
    y = (rng.uniform(size=n) < s).astype(np.int64)
    for mid in IDS:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            compute_metrics(Prepared(s, y, validate=False), [mid], MetricOptions())
            times.append(time.perf_counter() - t0)
        print(f"  {mid:14s} {statistics.median(times):6.3f} s  (sort included)")


def scan_time(path: str, repeat: int) -> float:
    import pyarrow.parquet as pq

    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        pq.read_table(path, columns=["score", "label"])
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(f"each metric on {a.rows:,} rows in memory:")
    kernel_times(a.rows, a.repeat)
    path = str(binary_parquet(a.rows))
    scan = scan_time(path, a.repeat)
    for engine in ("memory", "stream"):
        runs = [run_cli_timed(["score", path, "-m", "smece", "--engine", engine, "--json"])
                for _ in range(a.repeat)]
        run_s = statistics.median(r[2] for r in runs)
        print(f"calcheck score -m smece --engine {engine}: {run_s:.3f} s in the command "
              f"({run_s / scan:.1f}x a {scan:.3f} s Parquet scan)")


if __name__ == "__main__":
    main()
