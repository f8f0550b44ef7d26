"""Benchmark `calcheck score` (issue: 10 M rows < 10 s, peak < 2.5 GB; --help < 0.3 s).

    python benchmarks/bench_score.py [--rows 10000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from _common import binary_parquet, run_cli


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--metrics", default=None, help="comma-separated ids (default: the defaults)")
    a = ap.parse_args()

    path = binary_parquet(a.rows)
    args = ["score", str(path), "--json"] + (["-m", a.metrics] if a.metrics else [])
    runs = [run_cli(args) for _ in range(a.repeat)]
    walls = [w for w, _ in runs]
    print(f"calcheck score, {a.rows:,} rows ({a.metrics or 'default metrics'}): "
          f"median {statistics.median(walls):.2f} s (min {min(walls):.2f}), "
          f"peak RSS {max(p for _, p in runs):.2f} GB")

    helps = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "calcheck", "--help"], capture_output=True,
                       check=True)
        helps.append(time.perf_counter() - t0)
    print(f"calcheck --help: median {statistics.median(helps):.3f} s")


if __name__ == "__main__":
    main()
