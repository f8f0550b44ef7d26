"""Every row of the README's performance table, each beside its floor, measured in one run.

    python benchmarks/bench_scale.py                  # every row (~10 min, ~1.5 GB of data)
    python benchmarks/bench_scale.py memory stream    # some rows
    python benchmarks/bench_scale.py --rows 100000000 # the 10^8-row rows at another size
    python benchmarks/bench_scale.py duckdb --duckdb-python /path/to/venv/bin/python

Rows (the goal in brackets; "peak" is the process's peak resident memory):
  tce        calcheck.tce (PAVA-BC) at 10^6 and 10^7 rows
             vs one stable argsort + scipy.optimize.isotonic_regression           [<= 1.5x]
  memory     calcheck score FILE (default metrics), --rows rows (default 3*10^7)
             vs a pyarrow read + stable argsort script              [<= 3x, <= 45 B/row peak]
  stream     calcheck score FILE --engine stream (default metrics, and -m ece; and the default
             metrics on the scores rounded to 3 decimals: tied; and the default metrics at
             10^7 rows, the largest n whose PAVA is exact, with every row held)
             vs a pyarrow scan of the same columns                  [<= 3x, <= 0.4 GB peak]
  layouts    the stream row and the duckdb row on the same --rows rows as DuckDB (122,880-row
             groups) and polars (131,072-row groups, zstd, no dictionary) write them
  duckdb     calcheck score FILE -m ece --json vs DuckDB's one-SQL ECE, 10^6 and --rows rows
             (DuckDB from --duckdb-python, a separate environment; skipped without it) [<= 1.5x]
  startup    calcheck -V vs python -c pass; score SMALL -m ece --json (10^4 rows)
             vs python -c "import numpy, pyarrow.parquet"                           [<= 2x]
  mc10       multiclass K = 10, 5*10^6 rows, --engine stream (best of 3) vs a pyarrow scan
             (best of 3; and the pyarrow.parquet-only scan, for the record)  [<= 4x, 0.6 GB]
  mc1000     multiclass K = 1,000, n = 10^5, memory engine (default metrics)
             vs a per-class sort of every column                       [<= 10x, <= 3 GB]
  ci         calcheck score FILE --ci (default metrics), 500k rows, and the same with
             OPENBLAS_NUM_THREADS=1                                     [<= 10 s, <= 1.3x]
  dask       calcheck score DIR --engine dask vs --engine stream, 4 files (best of 3 each)
                                                                                 [<= 1.3x]
  compare    calcheck compare OLD NEW --id (default metrics), 10^4 rows, best of 3
             vs calcheck score OLD (best of 3)                                    [<= 3 s]
  audit      calcheck audit --segment region --segment device --segment age (depth 2,
             1,000 null draws), 10^6 rows, vs calcheck score -m ece           [<= 10 s]
  monitor    calcheck monitor --time ts --window 1d, 10^6 rows over 60 days,
             vs calcheck score -m ece                                       [one pass]
  weights    calcheck score FILE --count n on 10^6 aggregated rows (10^9 predictions of a
             calibrated model, as a GROUP BY score, label writes them) vs
             the unweighted run on the same file [<= 1.5x]; --weight w vs unweighted, the
             metrics --weight takes                                               [<= 1.3x];
             and --engine stream --weight w (--count n) on 10^7 rows (beyond the held
             budget: the weighted passes) vs the unweighted stream run   [<= 1.3x (1.5x)];
             and there --ci, --by (8 groups) and test (adaptive T-Cal)        [record];
             and --weight w of multiclass input (K = 10, 5*10^6 rows) there  [record];
             and -m ece --var v --var age --weight w on 1.5*10^7 rows (beyond the rows
             held: the weighted variables' passes) vs the same run unweighted  [record]

Data are generated once into benchmarks/_data/ (float64 scores, int8 labels).  Times are wall
seconds of whole processes (interpreter start included on both sides), best of a few runs for
the short rows and the stream rows (the scan floor varies by 2x from run to run on a shared
machine).  The duckdb and startup rows run the ``calcheck`` console script (``python -m
calcheck`` without one) as a plain process, as the other side runs; the rows that report peak
memory run ``calcheck`` inside a small wrapper that reads it at exit.  Not part of the test
suite.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _common import DATA, PEAK_KB

# runs a module ("calcheck") or a script in a child process and reports its peak RSS
WRAP = ("import atexit, resource, runpy, sys\n"
        "atexit.register(lambda: sys.stderr.write('PEAK_KB=%d\\n' % " + PEAK_KB + "))\n"
        "sys.argv = sys.argv[1:]\n"
        "if sys.argv[0] == 'calcheck':\n"
        "    runpy.run_module('calcheck', run_name='__main__', alter_sys=True)\n"
        "else:\n"
        "    runpy.run_path(sys.argv[0], run_name='__main__')\n")

READ_SORT = """
import sys, numpy as np, pyarrow.parquet as pq
t = pq.read_table(sys.argv[1], columns=["score", "label"])
s = t.column("score").to_numpy(); y = t.column("label").to_numpy()
o = np.argsort(s, kind="stable")
print(s[o[0]], y[o].sum())
"""

SCAN = """
import sys, pyarrow.dataset as ds
n = 0
for b in ds.dataset(sys.argv[1], format="parquet").to_batches(columns=sys.argv[2].split(",")):
    n += b.num_rows
print(n)
"""

# the same scan through pyarrow.parquet alone: pyarrow.dataset's import loads pandas (~0.2 s
# of SCAN's process), this one does not — printed beside the stream rows, for the record
SCAN_PQ = """
import sys, pyarrow.parquet as pq
n = 0
for b in pq.ParquetFile(sys.argv[1]).iter_batches(columns=sys.argv[2].split(",")):
    n += b.num_rows
print(n)
"""

DUCK = """
import sys, duckdb
q = f'''SELECT SUM(ABS(sy - ss)) / SUM(c) FROM (
  SELECT LEAST(FLOOR(score * 10), 9) AS b, COUNT(*) AS c, SUM(score) AS ss, SUM(label) AS sy
  FROM read_parquet('{sys.argv[1]}') GROUP BY b)'''
print(duckdb.connect().execute(q).fetchone()[0])
"""

CLASSWISE_SORT = """
import sys, numpy as np, pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
y = t.column("label").to_numpy()
for name in t.column_names:
    if name.startswith("prob_"):
        p = t.column(name).to_numpy()
        o = np.argsort(p)
        p[o].sum(); (y[o] == int(name[5:])).sum()
"""


def _children_cpu() -> float:
    """User + system seconds of the child processes waited for so far."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """(wall seconds, peak GB, CPU seconds: user + system) of ``python WRAP args`` in a fresh
    process.  The runs here are CPU-bound on two cores: a row's CPU next to its floor's says
    how much of the ratio is work rather than waiting."""
    t0, c0 = time.perf_counter(), _children_cpu()
    r = subprocess.run([sys.executable, "-c", WRAP, *args], capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, check=False)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    peak = [ln for ln in r.stderr.splitlines() if ln.startswith("PEAK_KB=")]
    return wall, int(peak[-1][8:]) / 2**20 if peak else float("nan"), cpu


def best(args: list[str], runs: int) -> tuple[float, float, float]:
    """The fastest of ``runs`` :func:`run` (wall, its peak, its CPU)."""
    return min((run(args) for _ in range(runs)), key=lambda r: r[0])


def script(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def line(name: str, ours: float, ref: float | None, goal: str, extra: str = "") -> None:
    ratio = f"{ours / ref:6.2f}x" if ref else "       "
    refs = f"{ref:8.2f} s" if ref else " " * 10
    print(f"{name:<30} {ours:8.2f} s  {refs}  {ratio}  {extra:<24} goal {goal}", flush=True)


SHAPES = {   # scores besides the logistic-normal ones: name → (file suffix, sampler)
    # a rare-event model: mean 0.01, a fifth of the rows below 1.5e-5 (the stream grid's
    # first cell)
    "concentrated": ("_beta0.2_20", lambda rng, m: rng.beta(0.2, 20.0, size=m)),
    # its mirror: a fifth of the rows within 1.5e-5 of 1, a thousandth exactly 1.0 (ties)
    "near_one": ("_beta20_0.2", lambda rng, m: rng.beta(20.0, 0.2, size=m)),
    # a U: Beta(0.05, 0.05), 29 % of the rows in the grid's first cell, 29 % in its last, 8 %
    # exactly 1.0
    "u_shaped": ("_beta0.05_0.05", lambda rng, m: rng.beta(0.05, 0.05, size=m)),
    # a rare-event logistic model: logit ~ N(-3, 2), mean 0.08, 3 % of the rows below 0.001;
    # its densest 2^-16 cells hold ~8x a uniform grid's share (a moderately crowded grid)
    "rare_logit": ("_rare_logit", lambda rng, m: 1.0 / (1.0 + np.exp(3.0 - 2.0 *
                                                                     rng.normal(size=m)))),
    # a confident classifier: half the rows Beta(50, 1), half Beta(1, 50), crowded near 0 and 1
    "bimodal": ("_bimodal", lambda rng, m: np.where(rng.random(m) < 0.5, rng.beta(50.0, 1.0, m),
                                                    rng.beta(1.0, 50.0, m))),
}


def binary_file(n: int, decimals: int | None = None, *, shape: str | None = None) -> Path:
    """n rows of logistic-normal scores (rounded to ``decimals`` places: tied scores), or of
    another ``shape`` (:data:`SHAPES`)."""
    DATA.mkdir(exist_ok=True)
    path = DATA / (f"scale_{n}{SHAPES[shape][0]}.parquet" if shape else
                   f"scale_{n}.parquet" if decimals is None else
                   f"scale_{n}_round{decimals}.parquet")
    if not path.exists():
        rng = np.random.default_rng(0)
        chunks = []
        for start in range(0, n, 10**7):                 # written in pieces: little memory
            m = min(10**7, n - start)
            s = SHAPES[shape][1](rng, m) if shape else \
                1.0 / (1.0 + np.exp(-(0.3 + 1.7 * rng.normal(size=m))))
            if decimals is not None:
                s = np.round(s, decimals)
            chunks.append(pa.table({"score": s, "label": (rng.random(m) < s).astype(np.int8)}))
        with pq.ParquetWriter(path, chunks[0].schema) as w:
            for c in chunks:
                w.write_table(c)
    return path


# other writers' layouts of the same rows: DuckDB writes 122,880-row groups (snappy); polars
# 131,072-row groups, zstd, no dictionary
LAYOUTS = {"duckdb": (122_880, "snappy", True), "polars": (131_072, "zstd", False)}


def layout_file(n: int, style: str) -> Path:
    """binary_file(n)'s rows as another writer lays them out (:data:`LAYOUTS`)."""
    path = DATA / f"scale_{n}_{style}.parquet"
    if not path.exists():
        group, codec, dictionary = LAYOUTS[style]
        src = pq.ParquetFile(binary_file(n))
        with pq.ParquetWriter(path, src.schema_arrow, compression=codec,
                              use_dictionary=dictionary) as w:
            for batch in src.iter_batches(batch_size=group):      # one row group each
                w.write_batch(batch, row_group_size=group)
    return path


def multiclass_file(n: int, k: int, weighted: bool = False) -> Path:
    """``n`` rows of ``k`` class probabilities and a label (``weighted``: and importance
    weights ``w``, Exponential(1))."""
    DATA.mkdir(exist_ok=True)
    path = DATA / f"multiclass_{n}_{k}{'_w' if weighted else ''}.parquet"
    if not path.exists():
        rng = np.random.default_rng(0)
        extra = [pa.field("w", pa.float64())] if weighted else []
        with pq.ParquetWriter(path, pa.schema([*(pa.field(f"prob_{j}", pa.float64())
                                                 for j in range(k)),
                                               pa.field("label", pa.int64()), *extra])) as w:
            step = max(1, 2 * 10**7 // k)
            for start in range(0, n, step):
                m = min(step, n - start)
                z = rng.normal(size=(m, k)) * 2
                p = np.exp(z - z.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                u = rng.random(m)[:, None]
                y = np.minimum((p.cumsum(axis=1) < u).sum(axis=1), k - 1)
                cols = {**{f"prob_{j}": p[:, j] for j in range(k)}, "label": y.astype(np.int64)}
                if weighted:
                    cols["w"] = rng.exponential(1.0, m)
                w.write_table(pa.table(cols))
    return path


def directory(n: int, parts: int) -> Path:
    root = DATA / f"scale_dir_{n}_{parts}"
    if not root.exists():
        root.mkdir(parents=True)
        rng = np.random.default_rng(1)
        for i in range(parts):
            m = n // parts
            s = rng.random(m)
            pq.write_table(pa.table({"score": s, "label": (rng.random(m) < s).astype(np.int8)}),
                           root / f"part-{i}.parquet")
    return root


# ---------------------------------------------------------------------------------------------

def _clock(f: Callable[..., object], *args: object, runs: int = 3) -> float:
    out = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        f(*args)
        out = min(out, time.perf_counter() - t)
    return out


def _tce_floor(s: np.ndarray, y: np.ndarray) -> None:
    from scipy.optimize import isotonic_regression

    o = np.argsort(s, kind="stable")
    isotonic_regression(y[o].astype(np.float64))


def row_tce(a: argparse.Namespace, folder: Path) -> None:
    import calcheck

    for n in (10**6, 10**7):
        rng = np.random.default_rng(0)
        s = rng.random(n)
        y = (rng.random(n) < s).astype(np.int64)
        calcheck.tce(s, y)                              # numba's one-off load
        line(f"tce {n:.0e}", _clock(calcheck.tce, s, y), _clock(_tce_floor, s, y), "<= 1.5x")


def row_memory(a: argparse.Namespace, folder: Path) -> None:
    path = binary_file(a.rows)
    floor = run([script(folder, "read_sort.py", READ_SORT), str(path)])
    ours = run(["calcheck", "score", str(path), "--no-progress", "-q"])
    line(f"memory {a.rows:.0e}", ours[0], floor[0], "<= 3x, <= 45 B/row",
         f"peak {ours[1]:.2f} GB = {ours[1] * 2**30 / a.rows:.0f} B/row")


def row_stream(a: argparse.Namespace, folder: Path) -> None:
    path = binary_file(a.rows)
    scan = script(folder, "scan.py", SCAN)
    floor = best([scan, str(path), "score,label"], 3)
    tied = binary_file(a.rows, decimals=3)                # the same scores to 3 decimals
    for name, file, extra in (("default", path, []), ("-m ece", path, ["-m", "ece"]),
                              ("tied default", tied, [])):
        cmd = ["calcheck", "score", str(file), "--engine", "stream", "--no-progress", "-q",
               *extra]
        ours = best(cmd, 2)
        line(f"stream {name}", ours[0], floor[0], "<= 3x, <= 0.4 GB",
             f"peak {ours[1]:.2f} GB, cpu {ours[2]:.2f} s (scan {floor[2]:.2f} s)")
        if name == "default":
            pq_floor = best([script(folder, "scan_pq.py", SCAN_PQ), str(path), "score,label"], 3)
            line("  vs pq-only scan", ours[0], pq_floor[0],
                 "(informative: no pandas import)", f"scan cpu {pq_floor[2]:.2f} s")
    if a.rows != EXACT_ROWS:      # the largest file whose PAVA is exact: every row held
        path = binary_file(EXACT_ROWS)
        floor = best([scan, str(path), "score,label"], 3)
        ours = best(["calcheck", "score", str(path), "--engine", "stream", "--no-progress",
                     "-q"], 2)
        line(f"stream default {EXACT_ROWS:.0e}", ours[0], floor[0], "<= 3x, <= 0.4 GB",
             f"peak {ours[1]:.2f} GB, cpu {ours[2]:.2f} s (scan {floor[2]:.2f} s)")
    # scores crowded into a few grid cells (near 0, or near 0 and 1): the positional passes
    # then use finer cells that follow the scores (calcheck.streaming.grid); before 0.5.14 the
    # uniform grid put most rows in cells that the bins cut or a test threshold crosses
    for shape, label, sizes in (("concentrated", "beta(0.2,20)", sorted({EXACT_ROWS, a.rows})),
                                ("near_one", "beta(20,0.2)", [EXACT_ROWS]),
                                ("rare_logit", "rare logit", [a.rows]),
                                ("bimodal", "bimodal", [EXACT_ROWS]),
                                ("u_shaped", "beta(0.05,0.05)", [a.rows])):
        for n in sizes:
            path = binary_file(n, shape=shape)
            floor = best([scan, str(path), "score,label"], 3)
            ours = best(["calcheck", "score", str(path), "--engine", "stream", "--no-progress",
                         "-q"], 2)
            line(f"stream {label} {n:.0e}", ours[0], floor[0], "<= 3x, <= 0.4 GB",
                 f"peak {ours[1]:.2f} GB, cpu {ours[2]:.2f} s (scan {floor[2]:.2f} s)")


def row_layouts(a: argparse.Namespace, folder: Path) -> None:
    """The stream row and the ECE row on the same rows as DuckDB and polars write them."""
    scan, scan_pq = script(folder, "scan.py", SCAN), script(folder, "scan_pq.py", SCAN_PQ)
    duck = duckdb_side(a, folder)
    for style in LAYOUTS:
        path = layout_file(a.rows, style)
        floor = min(run([scan, str(path), "score,label"])[0] for _ in range(3))
        pq_floor = min(run([scan_pq, str(path), "score,label"])[0] for _ in range(3))
        ours = min(run(["calcheck", "score", str(path), "--engine", "stream", "--no-progress",
                        "-q"]) for _ in range(2))
        line(f"stream {style} layout", ours[0], floor, "<= 3x, <= 0.4 GB",
             f"peak {ours[1]:.2f} GB")
        line("  vs pq-only scan", ours[0], pq_floor, "(informative: no pandas import)")
        if duck is not None:
            line(f"-m ece vs duckdb, {style}", *ece_vs_duckdb(duck, path), "<= 1.5x")


EXACT_ROWS = 10**7    # calcheck.tuning.Tuning.exact_pava_rows


def duckdb_side(a: argparse.Namespace, folder: Path) -> tuple[str, str] | None:
    """(a python that imports duckdb, the one-SQL ECE script), or None (said once)."""
    py = a.duckdb_python or sys.executable
    if subprocess.run([py, "-c", "import duckdb"], capture_output=True).returncode:
        print("duckdb: skipped (no duckdb in --duckdb-python; e.g. python -m venv /tmp/duck && "
              "/tmp/duck/bin/pip install duckdb)")
        return None
    return py, script(folder, "duck.py", DUCK)


def ece_vs_duckdb(duck: tuple[str, str], path: Path) -> tuple[float, float]:
    """(calcheck score PATH -m ece --json, DuckDB's ECE): both sides plain processes (no
    peak-memory wrapper), best of the same count of runs."""
    ref = min(_timed([*duck, str(path)]) for _ in range(3))
    ours = min(_timed([*calcheck_command(), "score", str(path), "-m", "ece", "--json",
                       "--no-progress"]) for _ in range(3))
    return ours, ref


def row_duckdb(a: argparse.Namespace, folder: Path) -> None:
    duck = duckdb_side(a, folder)
    if duck is None:
        return
    for n in sorted({10**6, a.rows}):
        line(f"duckdb ece {n:.0e}", *ece_vs_duckdb(duck, binary_file(n)), "<= 1.5x")


def calcheck_command() -> list[str]:
    """The ``calcheck`` command as a user runs it: the console script beside this Python (as
    pip installs it), else ``python -m calcheck``."""
    script_path = Path(sys.executable).with_name("calcheck")
    return [str(script_path)] if script_path.exists() else [sys.executable, "-m", "calcheck"]


def _timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t


def row_startup(a: argparse.Namespace, folder: Path) -> None:
    floor_v = min(_timed([sys.executable, "-c", "pass"]) for _ in range(5))
    ours_v = min(_timed([*calcheck_command(), "-V"]) for _ in range(5))
    line("startup -V", ours_v, floor_v, "no numpy/pandas/pyarrow/scipy (tested)")
    small = binary_file(10**4)
    floor = min(_timed([sys.executable, "-c", "import numpy, pyarrow.parquet"]) for _ in range(5))
    ours = min(_timed([*calcheck_command(), "score", str(small), "-m", "ece", "--json"])
               for _ in range(5))
    line("startup score -m ece", ours, floor, "<= 2x")


def row_mc10(a: argparse.Namespace, folder: Path) -> None:
    path = multiclass_file(5 * 10**6, 10)
    cols = ",".join([*(f"prob_{j}" for j in range(10)), "label"])
    floor = best([script(folder, "scan.py", SCAN), str(path), cols], 3)
    ours = best(["calcheck", "score", str(path), "--engine", "stream", "--no-progress", "-q"], 3)
    line("multiclass K=10 stream", ours[0], floor[0], "<= 4x, <= 0.6 GB",
         f"peak {ours[1]:.2f} GB, cpu {ours[2]:.2f} s (scan {floor[2]:.2f} s)")
    pq_floor = best([script(folder, "scan_pq.py", SCAN_PQ), str(path), cols], 3)
    line("  vs pq-only scan", ours[0], pq_floor[0], "(informative: no pandas import)",
         f"scan cpu {pq_floor[2]:.2f} s")


def row_mc1000(a: argparse.Namespace, folder: Path) -> None:
    path = multiclass_file(10**5, 1000)
    floor = run([script(folder, "classwise.py", CLASSWISE_SORT), str(path)])
    ours = run(["calcheck", "score", str(path), "--no-progress", "-q"])
    line("multiclass K=1000", ours[0], floor[0], "<= 10x, <= 3 GB", f"peak {ours[1]:.2f} GB")


def row_ci(a: argparse.Namespace, folder: Path) -> None:
    path = binary_file(500_000)
    cmd = ["calcheck", "score", str(path), "--ci", "--no-progress", "-q"]
    ours = run(cmd)
    one = run(cmd, env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                        "MKL_NUM_THREADS": "1"})
    line("ci 5e5 (vs 1 thread)", ours[0], one[0], "<= 10 s, <= 1.3x")


def row_dask(a: argparse.Namespace, folder: Path) -> None:
    root = directory(2 * 10**7, 4)
    # best of 3 on both sides, interleaved: one run of either varies by ~30 % on this machine
    stream, ours = (float("inf"), 0.0), (float("inf"), 0.0)
    for _ in range(3):
        stream = min(stream, run(["calcheck", "score", str(root), "--engine", "stream", "-m",
                                  "ece,brier,ace", "--no-progress", "-q"]))
        ours = min(ours, run(["calcheck", "score", str(root), "--engine", "dask", "-m",
                              "ece,brier,ace", "--no-progress", "-q"]))
    line("dask vs stream 2e7", ours[0], stream[0], "<= 1.3x", f"peak {ours[1]:.2f} GB")


def compare_files(n: int) -> tuple[Path, Path]:
    """Two models' predictions of the same n rows, with an example id (NEW = OLD^1.2)."""
    old, new = DATA / f"compare_old_{n}.parquet", DATA / f"compare_new_{n}.parquet"
    if not old.exists() or not new.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        s = rng.random(n)
        y = (rng.random(n) < s).astype(np.int8)
        ids = np.arange(n)
        pq.write_table(pa.table({"example_id": ids, "score": s, "label": y}), old)
        pq.write_table(pa.table({"example_id": ids, "score": s ** 1.2, "label": y}), new)
    return old, new


def row_compare(a: argparse.Namespace, folder: Path) -> None:
    old, new = compare_files(10**4)
    floor = best(["calcheck", "score", str(old), "--no-progress", "-q"], 3)
    ours = best(["calcheck", "compare", str(old), str(new), "--id", "example_id",
                 "--no-progress", "-q"], 3)
    line("compare 1e4 (vs score)", ours[0], floor[0], "<= 3 s")


def audit_file(n: int) -> Path:
    """Scores, labels and three segment columns: region (8 values), device (4), age (numeric)."""
    path = DATA / f"audit_{n}.parquet"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        s = rng.beta(2, 5, n)
        pq.write_table(pa.table({
            "region": rng.choice(list("ABCDEFGH"), n), "device": rng.choice(
                ["mobile", "desktop", "tablet", "tv"], n), "age": rng.integers(18, 90, n),
            "score": s, "label": (rng.random(n) < s).astype(np.int8)}), path)
    return path


def row_audit(a: argparse.Namespace, folder: Path) -> None:
    path = audit_file(10**6)
    floor = best(["calcheck", "score", str(path), "-m", "ece", "--no-progress", "-q"], 3)
    ours = best(["calcheck", "audit", str(path), "--segment", "region", "--segment", "device",
                 "--segment", "age", "--no-progress", "-q"], 3)
    line("audit 1e6, 3 columns, depth 2", ours[0], floor[0], "<= 10 s", f"peak {ours[1]:.2f} GB")


def row_monitor(a: argparse.Namespace, folder: Path) -> None:
    path = DATA / "monitor_1e6.parquet"
    if not path.exists():
        rng = np.random.default_rng(0)
        n = 10**6
        s = rng.beta(2, 5, n)
        ts = np.datetime64("2026-01-01", "s") + rng.integers(0, 60 * 86400, n).astype(
            "timedelta64[s]")
        pq.write_table(pa.table({"ts": ts, "score": s,
                                 "label": (rng.random(n) < s).astype(np.int8)}), path)
    floor = best(["calcheck", "score", str(path), "-m", "ece", "--no-progress", "-q"], 3)
    ours = best(["calcheck", "monitor", str(path), "--time", "ts", "--window", "1d",
                 "--no-progress", "-q"], 3)
    line("monitor 1e6, 60 daily windows", ours[0], floor[0], "one pass", f"peak {ours[1]:.2f} GB")


def weights_file(n: int) -> Path:
    """``n`` aggregated rows standing for 10^9 predictions of a calibrated model, as a
    ``GROUP BY score, label`` writes them: n/2 distinct scores (Beta(2, 5)), each with about
    2,000 predictions split into its positives and negatives (Binomial) — and a sampling
    weight column ``w`` for the --weight row."""
    path = DATA / f"weights_{n}.parquet"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        m = n // 2
        s = np.sort(rng.beta(2, 5, m))
        total = rng.integers(1, 4000, m)
        pos = rng.binomial(total, s)
        pq.write_table(pa.table({
            "score": np.repeat(s, 2), "label": np.tile(np.array([1, 0], np.int8), m),
            "n": np.column_stack((pos, total - pos)).ravel().astype(np.int64),
            "w": rng.exponential(1.0, 2 * m)}), path)
    return path


def row_weights(a: argparse.Namespace, folder: Path) -> None:
    path = weights_file(10**6)
    base = ["calcheck", "score", str(path), "--no-progress", "-q"]
    # the same default metrics on every side: the unweighted run's set without TCE (which
    # --weight leaves out) for --weight; the full default set for --count.  The streaming
    # engines hold weighted rows in memory (calcheck.engines.held): against the same engine's
    # unweighted run on the same file (pc is memory-only)
    for engine, ids in (("memory", "ece,ece_l2,mce,ace,mce_q,brier,log_loss,pde,pc"),
                        ("stream", "ece,ece_l2,mce,ace,mce_q,brier,log_loss,pde")):
        cmd = [*base, "--engine", engine]
        label = "" if engine == "memory" else f"{engine}: "
        for extra, flag, goal, what in (
                ([], ["--count", "n"], "<= 1.5x", "1e6 rows (1e9 predictions)"),
                (["-m", ids], ["--weight", "w"], "<= 1.3x", "1e6 rows")):
            plain = best([*cmd, *extra], 3)
            weighted = best([*cmd, *extra, *flag], 3)
            line(f"{label}score {' '.join(flag)}, {what}", weighted[0], plain[0], goal,
                 f"peak {weighted[1]:.2f} GB")
    # beyond Tuning.hold_weighted_rows: the weighted passes (calcheck.engines.weighted), the
    # metrics they compute, against the unweighted stream run of the same metrics
    path = weights_stream_file(10**7)
    ids = "ece,ece_l2,mce,ace,mce_q,brier,log_loss,pde"
    cmd = ["calcheck", "score", str(path), "--no-progress", "-q", "--engine", "stream",
           "-m", ids]
    plain = best(cmd, 3)
    weighted = best([*cmd, "--weight", "w"], 3)
    line("stream: score --weight w, 1e7 rows (streamed: beyond the held 2e6)", weighted[0],
         plain[0], "<= 1.3x", f"peak {weighted[1]:.2f} GB")
    counted = best([*cmd, "--count", "n"], 3)      # the counts as weights: the file's rows
    line("stream: score --count n, 1e7 rows (1e10 predictions; beyond the held 2e6)",
         counted[0], plain[0], "<= 1.5x", f"peak {counted[1]:.2f} GB")
    # what the passes added in 0.13.0, each beside the same run unweighted (for the record:
    # no goal of their own)
    for name, extra, ref in (
            ("--ci", ["-m", "ece,ace,brier", "--ci"], ["-m", "ece,ace,brier", "--ci"]),
            ("--by g (8 groups)", ["-m", "ece,ace,brier", "--by", "g"],
             ["-m", "ece,ace,brier", "--by", "g"]),
            ("test (adaptive T-Cal)", [], [])):
        cmd = ["calcheck", "test" if name.startswith("test") else "score", str(path),
               "--no-progress", "-q", "--engine", "stream"]
        weighted = best([*cmd, *extra, "--weight", "w"], 2)
        plain = best([*cmd, *ref], 2)
        line(f"stream: {name} --weight w, 1e7 rows", weighted[0], plain[0], "record",
             f"peak {weighted[1]:.2f} GB")
    # what the rows held added in 0.14.0 (the in-memory kernels on the rows the passes lack:
    # TCE of counts, --var), beside the same run unweighted
    cmd = ["calcheck", "score", str(path), "--no-progress", "-q", "--engine", "stream"]
    for name, extra, flag in (("score --count n (default set: TCE from the rows held)", [],
                               ["--count", "n"]),
                              ("score -m ece --var g --weight w (VECE from the rows held)",
                               ["-m", "ece", "--var", "g"], ["--weight", "w"])):
        weighted = best([*cmd, *extra, *flag], 2)
        plain = best([*cmd, *extra], 2)
        line(f"stream: {name}, 1e7 rows", weighted[0], plain[0], "record",
             f"peak {weighted[1]:.2f} GB")
    # multiclass input on the passes (0.16.0): the default multiclass set (the top-label view's
    # metrics; SCE, classwise ACE and TACE from every class's passes in lockstep), K = 10,
    # beside the same run unweighted
    path = multiclass_file(5 * 10**6, 10, weighted=True)
    cmd = ["calcheck", "score", str(path), "--no-progress", "-q", "--engine", "stream"]
    weighted = best([*cmd, "--weight", "w"], 2)
    plain = best(cmd, 2)
    line("stream: score --weight w, multiclass K=10, 5e6 rows", weighted[0], plain[0],
         "record", f"peak {weighted[1]:.2f} GB")
    # --var beyond the rows held (0.17.0): the weighted variables' passes, a continuous and a
    # whole-number variable, beside the same run unweighted (the unweighted variables' passes)
    path = variables_stream_file(15 * 10**6)
    cmd = ["calcheck", "score", str(path), "--no-progress", "-q", "--engine", "stream", "-m",
           "ece", "--var", "v", "--var", "age"]
    weighted = best([*cmd, "--weight", "w"], 2)
    plain = best(cmd, 2)
    line("stream: score -m ece --var v --var age --weight w, 1.5e7 rows (beyond the held)",
         weighted[0], plain[0], "record", f"peak {weighted[1]:.2f} GB")


def variables_stream_file(n: int) -> Path:
    """``n`` rows of scores, labels, importance weights ``w`` (Exponential(1)), a continuous
    variable ``v`` the model's error depends on and a whole-number one ``age``."""
    path = DATA / f"variables_stream_{n}.parquet"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(2)
        v = rng.normal(size=n)
        s = rng.beta(2, 5, n)
        p = np.clip(s + 0.05 * np.sin(2 * v), 0, 1)
        pq.write_table(pa.table({"score": s, "label": (rng.random(n) < p).astype(np.int8),
                                 "w": rng.exponential(1.0, n), "v": v,
                                 "age": rng.integers(18, 90, n).astype(np.float64)}), path)
    return path


def weights_stream_file(n: int) -> Path:
    """``n`` rows of a calibrated model (Beta(2, 5) scores) with importance weights ``w``,
    counts ``n`` (about 1,000 predictions a row) and a group ``g`` of 8."""
    path = DATA / f"weights_stream_{n}.parquet"
    if not path.exists() or "g" not in pq.read_schema(path).names:
        DATA.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(1)
        s = rng.beta(2, 5, n)
        pq.write_table(pa.table({"score": s, "label": (rng.random(n) < s).astype(np.int8),
                                 "w": rng.exponential(1.0, n),
                                 "n": rng.integers(1, 2000, n).astype(np.float64),
                                 "g": rng.integers(0, 8, n).astype(np.int8)}), path)
    return path


ROWS = ["tce", "memory", "stream", "layouts", "duckdb", "startup", "mc10", "mc1000", "ci",
        "dask", "compare", "audit", "monitor", "weights"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("which", nargs="*", metavar="ROW", help=f"rows to run: {', '.join(ROWS)}")
    p.add_argument("--rows", type=int, default=3 * 10**7,
                   help="rows of the 10^8-row targets (default 3e7)")
    p.add_argument("--duckdb-python", default=None, help="a python that can import duckdb")
    a = p.parse_args()
    unknown = set(a.which) - set(ROWS)
    if unknown:
        p.error(f"unknown rows {sorted(unknown)}; choose from {', '.join(ROWS)}")
    print(f"{'row':<30} {'calcheck':>10}  {'floor':>10}  {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.which or ROWS:
            globals()[f"row_{name}"](a, Path(tmp))


if __name__ == "__main__":
    main()
