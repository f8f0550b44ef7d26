"""Benchmark multiclass metrics (issue: K = 100, n = 1,000,000 < 30 s) and VECE for 10
variables on 10 million binary rows (< 30 s), through the CLI.

    python benchmarks/bench_multiclass.py [--skip-vece] [--skip-multiclass]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from _common import DATA, binary_parquet, run_cli


def multiclass_parquet(n: int, k: int, seed: int = 0):
    path = DATA / f"multiclass_{n}_{k}.parquet"
    if not path.exists():
        DATA.mkdir(exist_ok=True)
        rng = np.random.default_rng(seed)
        logits = rng.normal(size=(n, k)).astype(np.float64) * 2.5
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        y = (rng.uniform(size=n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1).clip(0, k - 1)
        df = pd.DataFrame({f"prob_{j}": p[:, j] for j in range(k)})
        df["label"] = y
        df.to_parquet(path, index=False)
    return path


def variables_parquet(n: int, n_vars: int = 10, seed: int = 1):
    path = DATA / f"binary_vars_{n}.parquet"
    if not path.exists():
        base = pd.read_parquet(binary_parquet(n))
        rng = np.random.default_rng(seed)
        for j in range(n_vars):
            base[f"v{j}"] = (rng.normal(size=n) if j % 2 == 0
                             else rng.integers(18, 90, size=n).astype(np.float64))
        base.to_parquet(path, index=False)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-vece", action="store_true")
    ap.add_argument("--skip-multiclass", action="store_true")
    a = ap.parse_args()
    if not a.skip_multiclass:
        t0 = time.perf_counter()
        path = multiclass_parquet(1_000_000, 100)
        print(f"(generated multiclass file in {time.perf_counter() - t0:.0f} s)")
        wall, peak = run_cli(["score", str(path), "--json"])
        print(f"all multiclass metrics (ece_top, mce_top, ace_top, sce, ace_cw, tace, tce_cw), "
              f"K=100, n=1,000,000: {wall:.1f} s, peak RSS {peak:.2f} GB")
        wall, peak = run_cli(["score", str(path), "--json", "--compat", "nixon",
                              "-m", "ece_top,ace_top,sce,ace_cw,tace"])
        print(f"--compat nixon metrics, same file: {wall:.1f} s, peak RSS {peak:.2f} GB")
    if not a.skip_vece:
        path = variables_parquet(10_000_000)
        args = ["score", str(path), "--json", "-m", "ece"]
        for j in range(10):
            args += ["--var", f"v{j}"]
        wall, peak = run_cli(args)
        print(f"VECE + VCE(v*) for 10 variables, 10,000,000 binary rows: {wall:.1f} s, "
              f"peak RSS {peak:.2f} GB")


if __name__ == "__main__":
    main()
