"""Helpers for the benchmark scripts: generated data and timing of CLI runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / "_data"


def binary_parquet(n: int, *, seed: int = 0) -> Path:
    """A Parquet file of n binary predictions (calibrated logistic model), made once."""
    import numpy as np
    import pandas as pd

    DATA.mkdir(exist_ok=True)
    path = DATA / f"binary_{n}.parquet"
    if not path.exists():
        rng = np.random.default_rng(seed)
        x = rng.normal(size=n)
        s = 1.0 / (1.0 + np.exp(-(0.3 + 1.7 * x)))
        y = (rng.uniform(size=n) < s).astype(np.int8)
        pd.DataFrame({"score": s, "label": y}).to_parquet(path, index=False)
    return path


def run_cli(args: list[str]) -> tuple[float, float]:
    """Run ``calcheck ARGS`` in a fresh process; return (wall seconds, peak RSS in GB)."""
    wall, peak, _ = run_cli_timed(args)
    return wall, peak


# The peak RSS of this process image, read at exit: VmHWM (Linux) is reset by exec, whereas
# ru_maxrss also counts the pages a child had at fork, i.e. its parent's resident size — a
# benchmark process holding 0.8 GB of arrays made every child report at least 0.8 GB.
PEAK_KB = ("(lambda: int([l.split()[1] for l in open('/proc/self/status') "
           "if l.startswith('VmHWM:')][0]) if __import__('os').path.exists('/proc/self/status') "
           "else __import__('resource').getrusage(__import__('resource').RUSAGE_SELF)"
           ".ru_maxrss)()")


def run_cli_timed(args: list[str]) -> tuple[float, float, float]:
    """Run ``calcheck ARGS`` in a fresh process; return (wall seconds, peak RSS in GB, seconds
    inside the command after the interpreter started and the CLI and pyarrow were imported)."""
    t0 = time.perf_counter()
    # pyarrow.dataset is imported before the clock starts, as the scan it is compared with does
    code = ("import resource, sys, time; import pyarrow.dataset; from calcheck.cli import run; "
            "t = time.perf_counter(); "
            "rc = run(sys.argv[1:]); sys.stderr.write('RUN_S=%f\\n' % (time.perf_counter() - t));"
            "sys.stderr.write('PEAK_KB=%d\\n' % " + PEAK_KB + ");"
            " sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       env={**os.environ}, check=False)
    wall = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        raise SystemExit(f"calcheck {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    lines = r.stderr.splitlines()
    peak_kb = int([ln for ln in lines if ln.startswith("PEAK_KB=")][-1][8:])
    run_s = float([ln for ln in lines if ln.startswith("RUN_S=")][-1][6:])
    return wall, peak_kb / 1024 / 1024, run_s
