"""Benchmark ``score --engine stream`` on a partitioned Parquet directory (issue: 100 M rows,
fixed-bin metrics, peak memory < 1 GB, wall time within 3x of a plain pyarrow scan of the same
columns).

    python benchmarks/bench_stream.py [--rows 100000000] [--parts 20]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _common import DATA, run_cli

SCAN = """
import sys, time, resource, pyarrow.dataset as ds
t = time.perf_counter()
n = 0
for b in ds.dataset(sys.argv[1], format="parquet", partitioning="hive").scanner(
        columns=["score", "label"], batch_readahead=2, fragment_readahead=1).to_batches():
    n += b.num_rows
print(n, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def dataset(rows: int, parts: int):
    root = DATA / f"stream_{rows}"
    if not root.exists():
        rng = np.random.default_rng(0)
        per = rows // parts
        for i in range(parts):
            d = root / f"day={i}"
            d.mkdir(parents=True)
            s = rng.uniform(size=per)
            y = (rng.uniform(size=per) < s).astype(np.int8)
            pq.write_table(pa.table({"score": s, "label": y}), d / "part.parquet")
    return root


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--parts", type=int, default=20)
    a = ap.parse_args()
    t0 = time.perf_counter()
    root = dataset(a.rows, a.parts)
    print(f"(dataset ready in {time.perf_counter() - t0:.0f} s)")
    r = subprocess.run([sys.executable, "-c", SCAN, str(root)], capture_output=True, text=True,
                       check=True)
    n, scan_s, scan_kb = r.stdout.split()
    print(f"plain pyarrow scan of score,label: {float(scan_s):.1f} s, {int(n):,} rows, "
          f"peak RSS {int(scan_kb) / 2**20:.2f} GB")
    wall, peak = run_cli(["score", str(root), "--engine", "stream", "--json",
                          "--batch-rows", "1000000"])
    print(f"calcheck score --engine stream (ece, ece_l2, mce, brier, log_loss): {wall:.1f} s "
          f"({wall / float(scan_s):.1f}x the scan), peak RSS {peak:.2f} GB")


if __name__ == "__main__":
    main()
