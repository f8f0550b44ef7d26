"""Speed at the floor: each hot path next to the floor of the hardware or a reference, as a ratio.

    python benchmarks/bench_floor.py            # every row (adaptive T-Cal at 10^6 takes a while)
    python benchmarks/bench_floor.py ece ace    # some rows

Rows (the goal in brackets):
  ece       calcheck.ece(s, y, bins=15), 1e7 rows      vs bin ids + one weighted bincount  [≤ 1.5×]
  ace       calcheck.ace(s, y, bins=15), 1e7 rows      vs one np.sort                      [≤ 2×]
  cli       calcheck score f.parquet -m ece --json, 1e6 rows, whole process
                                                       vs a pyarrow read + bincount script [≤ 1.25×]
  ci        calcheck score f.parquet -m ece,ace,brier --ci (1000 reps), 500k rows, memory
                                                                                           [< 10 s]
  classwise calcheck.score(df, metrics=["ace_cw"]), K = 10, n = 1e6
                                                       vs per-class sort + array_split     [≤ 0.7×]
  tcal      calcheck.tcal(s, y, trials=1000, rng=0), n = 1e6                               [< 10 s]

Times are the best of a few runs on this machine; ratios are what to compare across machines.
Not part of the test suite.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import calcheck


def best(f: Callable[[], object], runs: int = 3) -> float:
    out = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        out = min(out, time.perf_counter() - t0)
    return out


def wall(cmd: list[str], runs: int = 5) -> float:
    return best(lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL), runs)


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    return s, (rng.random(n) < s).astype(np.int64)


def row(name: str, t: float, ref: float | None, goal: str) -> None:
    ratio = f"{t / ref:5.2f}×" if ref else "     "
    refs = f"{ref:8.3f} s" if ref else " " * 10
    print(f"{name:<10} {t:8.3f} s  {refs}  {ratio}  goal {goal}", flush=True)


def bench_ece() -> None:
    s, y = data(10**7)
    calcheck.ece(s, y, bins=15)

    def floor() -> None:
        ids = np.minimum((s * 15).astype(np.intp), 14)
        np.bincount(ids, weights=s, minlength=15)

    row("ece", best(lambda: calcheck.ece(s, y, bins=15), 5), best(floor, 5), "≤ 1.5×")


def bench_ace() -> None:
    s, y = data(10**7)
    row("ace", best(lambda: calcheck.ace(s, y, bins=15)), best(lambda: np.sort(s)), "≤ 2×")


FLOOR_SCRIPT = """
import sys, numpy as np, pyarrow.parquet as pq
t = pq.read_table(sys.argv[1], columns=["score", "label"])
s = t.column("score").to_numpy(); y = t.column("label").to_numpy()
b = np.minimum((s * 10).astype(np.intp), 9)
n = np.bincount(b, minlength=10)
gap = np.abs(np.bincount(b, weights=s, minlength=10) - np.bincount(b, weights=y, minlength=10))
print(gap.sum() / len(s))
"""


def _parquet(folder: Path, n: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    s, y = data(n)
    path = folder / f"preds_{n}.parquet"
    pq.write_table(pa.table({"score": s, "label": y}), path)
    return path


def bench_cli(folder: Path) -> None:
    path = _parquet(folder, 10**6)
    script = folder / "floor.py"
    script.write_text(FLOOR_SCRIPT)
    exe = [sys.executable, "-m", "calcheck", "score", str(path), "-m", "ece", "--json"]
    row("cli", wall(exe), wall([sys.executable, str(script), str(path)]), "≤ 1.25×")


def bench_ci(folder: Path) -> None:
    path = _parquet(folder, 500_000)
    exe = [sys.executable, "-m", "calcheck", "score", str(path), "-m", "ece,ace,brier", "--ci",
           "-q"]
    row("ci", wall(exe, runs=1), None, "< 10 s")


def bench_classwise() -> None:
    import pandas as pd

    rng = np.random.default_rng(0)
    n, k = 10**6, 10
    logits = rng.normal(size=(n, k)) * 2
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    labels = np.array([rng.choice(k, p=row) for row in p[:2000]] * (n // 2000))
    df = pd.DataFrame({f"prob_{j}": p[:, j] for j in range(k)} | {"label": labels})

    def reference() -> float:          # Nixon et al.'s classwise ACE: sort each class, split
        total = 0.0
        for j in range(k):
            order = np.argsort(p[:, j])
            conf = np.array_split(p[order, j], 15)
            acc = np.array_split((labels[order] == j).astype(float), 15)
            total += sum(abs(c.mean() - a.mean()) * len(c) for c, a in zip(conf, acc)) / n
        return total / k

    ours = best(lambda: calcheck.score(df, metrics=["ace_cw"]))
    row("classwise", ours, best(reference), "≤ 0.7×")


def bench_tcal() -> None:
    s, y = data(10**6, seed=1)
    row("tcal", best(lambda: calcheck.tcal(s, y, trials=1000, rng=0), 1), None, "< 10 s")


def main() -> None:
    wanted = sys.argv[1:] or ["ece", "ace", "cli", "ci", "classwise", "tcal"]
    print(f"{'row':<10} {'calcheck':>10}  {'reference':>10}  ratio")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in wanted:
            if name in ("cli", "ci"):
                globals()[f"bench_{name}"](folder)
            else:
                globals()[f"bench_{name}"]()


if __name__ == "__main__":
    main()
