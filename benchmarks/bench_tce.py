"""Benchmark the TCE engine (issue: PAVA-BC TCE on 50,000 rows < 0.1 s, on 10 M rows < 5 s;
issue 30: PAVA-BC TCE <= 1.5x a stable argsort + scipy isotonic_regression, at 10^6 and 10^7).

Engine time = ``calcheck.metrics.tce.tce`` on validated arrays (sort included), reported next
to a plain ``numpy.argsort`` of the same scores, the floor this metric cannot beat.  Also times
the ImageNet files of ../shared/data/tce when present.

    python benchmarks/bench_tce.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from calcheck.metrics._data import Prepared
from calcheck.metrics.tce import tce

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "tce"


def model_like(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    s = 1.0 / (1.0 + np.exp(-(0.3 + 1.7 * x)))
    y = (rng.uniform(size=n) < np.clip(s * 1.05, 0, 1)).astype(np.int64)  # mildly miscalibrated
    return s, y


def time_it(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def floor(s: np.ndarray, y: np.ndarray) -> None:
    """Issue 30's floor of PAVA-BC TCE: one stable argsort of the scores and scipy's compiled
    PAVA (``isotonic_regression``) of the sorted labels."""
    from scipy.optimize import isotonic_regression

    isotonic_regression(y[np.argsort(s, kind="stable")].astype(np.float64))


def report(label: str, s: np.ndarray, y: np.ndarray, repeat: int) -> None:
    from calcheck import pava as _pava

    _pava.compiled_pava(_pava.COMPILE_AT)          # load numba's scan outside the timing
    t_sort = time_it(lambda: np.argsort(s), repeat)
    t_stable = time_it(lambda: np.argsort(s, kind="stable"), repeat)
    t_floor = time_it(lambda: floor(s, y), repeat)
    times = {}
    for binning in ("pava-bc", "quantile", "pava", "uniform"):
        times[binning] = time_it(lambda b=binning: tce(Prepared(s, y, validate=False), binning=b),
                                 repeat)
    value = tce(Prepared(s, y, validate=False)).value
    print(f"{label:>28}: TCE={value:8.4f}%  engine pava-bc {times['pava-bc']:.3f} s | "
          f"quantile {times['quantile']:.3f} s | pava {times['pava']:.3f} s | "
          f"uniform {times['uniform']:.3f} s | numpy.argsort {t_sort:.3f} s "
          f"(stable {t_stable:.3f} s) | floor (stable argsort + isotonic_regression) "
          f"{t_floor:.3f} s: pava-bc / floor = {times['pava-bc'] / t_floor:.2f}x "
          f"(target <= 1.5x; compiled scan: {_pava.compiled_pava(1) is not None})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    for n in (50_000, 1_000_000, 10_000_000):
        s, y = model_like(n)
        report(f"synthetic n={n:,}", s, y, a.repeat if n < 10_000_000 else 1)
    if SHARED.exists():
        import pandas as pd

        for f in sorted(SHARED.glob("*.parquet")):
            df = pd.read_parquet(f)
            report(f.stem, df["score"].to_numpy(), df["label"].to_numpy().astype(np.int64),
                   a.repeat)


if __name__ == "__main__":
    main()
