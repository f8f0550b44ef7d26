"""The golden corpus: reports that must not change when the code is reorganised.

Every case is one command on one input with one engine; its JSON report (the calcheck version
removed, paths relative to the data folder) is kept under ``tests/golden/expected/`` and
``tests/test_golden.py`` checks it byte for byte.  The inputs are the bundled sample files, a
few files of the hardening corpus and small versions of the benchmark shapes (ties, crowded
scores, multiclass, groups, variables, windows), generated here deterministically.

A commit that changes a number on purpose regenerates the snapshots and says why::

    python -m tests.golden.update            # rewrite every expected report
    python -m tests.golden.update score_tied  # or some cases (a prefix of their names)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).resolve().parent / "expected"
CORPUS = ROOT / "tests" / "corpus" / "files"


@dataclass(frozen=True)
class Case:
    name: str
    command: str            # score, test, compare, audit, report
    inputs: tuple[str, ...]
    options: dict[str, Any]
    engine: str = "memory"

    @property
    def key(self) -> str:
        return f"{self.name}__{self.engine}"


def write_inputs(folder: Path) -> None:
    """The generated inputs (small versions of the benchmark shapes)."""
    import pandas as pd

    rng = np.random.default_rng(2026)
    n = 12_000
    s = rng.random(n)
    y = (rng.random(n) < s ** 1.1).astype(np.int8)
    pd.DataFrame({"score": np.round(s, 3), "label": y}).to_parquet(folder / "tied.parquet")
    c = rng.beta(0.2, 20.0, n)
    pd.DataFrame({"score": c, "label": (rng.random(n) < c).astype(np.int8)}).to_parquet(
        folder / "crowded.parquet")
    u = rng.beta(0.05, 0.05, n)
    pd.DataFrame({"score": u, "label": (rng.random(n) < u).astype(np.int8)}).to_parquet(
        folder / "u_shaped.parquet")
    P = rng.dirichlet(np.full(4, 0.5), n)
    lab = (P.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1).clip(0, 3)
    mc = pd.DataFrame({f"prob_{k}": P[:, k] for k in range(4)})
    mc["label"] = lab
    mc.to_parquet(folder / "multiclass.parquet")
    site = rng.choice(["north", "south", "east"], n)
    age = rng.uniform(18, 90, n)
    t = pd.Timestamp("2026-03-01", tz="UTC") + pd.to_timedelta(
        rng.integers(0, 14 * 86400, n), "s")
    pg = np.where(site == "east", s ** 1.3, s)
    pd.DataFrame({"score": s, "label": (rng.random(n) < pg).astype(np.int8), "site": site,
                  "age": age, "ts": t}).to_parquet(folder / "rich.parquet")
    ids = np.arange(n)
    pd.DataFrame({"example_id": ids, "score": s, "label": y}).to_parquet(folder / "old.parquet")
    pd.DataFrame({"example_id": ids, "score": s ** 1.2, "label": y}).to_parquet(
        folder / "new.parquet")
    pd.DataFrame({"example_id": ids[::-1], "score": (s ** 1.2)[::-1],
                  "label": y[::-1]}).to_parquet(folder / "new_reversed.parquet")
    region = rng.choice(["north", "south", "east", "west", "centre"], n)
    tier = rng.integers(1, 7, n).astype(np.float64)
    income = np.where(rng.random(n) < 0.05, np.nan, rng.lognormal(10.0, 0.6, n))
    pa = np.where((region == "west") & (tier > 4), s ** 1.6, s)
    pd.DataFrame({"score": s, "label": (rng.random(n) < pa).astype(np.int8), "region": region,
                  "tier": tier, "visits": rng.integers(0, 3, n), "income": income}).to_parquet(
        folder / "segments.parquet")


SAMPLES = ("calibrated_50", "miscalibrated_50", "calibrated_01", "miscalibrated_01")
ENGINES = ("memory", "stream", "dask")


def cases() -> list[Case]:
    out: list[Case] = []
    for f in SAMPLES:
        for e in ENGINES if f == "miscalibrated_50" else ("memory", "stream"):
            out.append(Case(f"score_{f}", "score", (f"sample/{f}.parquet",), {}, e))
    for e in ENGINES:
        out.append(Case("score_ci", "score", ("sample/miscalibrated_50.parquet",),
                        {"ci": True, "ci_reps": 100}, e))
        out.append(Case("test_hl_spiegelhalter_cox", "test", ("sample/miscalibrated_50.parquet",),
                        {"method": "hl,spiegelhalter,cox"}, e))
    out.append(Case("test_all", "test", ("sample/calibrated_50.parquet",),
                    {"method": "all", "trials": 200}))
    out.append(Case("test_tcal_fixed", "test", ("sample/miscalibrated_01.parquet",),
                    {"bins": 15, "trials": 300}, "memory"))
    out.append(Case("test_tcal_fixed", "test", ("sample/miscalibrated_01.parquet",),
                    {"bins": 15, "trials": 300}, "stream"))
    for shape in ("tied", "crowded", "u_shaped"):
        for e in ("memory", "stream"):
            out.append(Case(f"score_{shape}", "score", (f"gen/{shape}.parquet",), {}, e))
    for e in ("memory", "stream", "dask"):
        out.append(Case("score_multiclass", "score", ("gen/multiclass.parquet",), {}, e))
    out.append(Case("test_multiclass", "test", ("gen/multiclass.parquet",), {"trials": 200}))
    for e in ("memory", "stream"):
        out.append(Case("score_by", "score", ("gen/rich.parquet",),
                        {"by": "site", "metrics": "ece,ace,brier,tce_q"}, e))
        out.append(Case("score_var", "score", ("gen/rich.parquet",),
                        {"var": "age", "metrics": "ece,ace"}, e))
        out.append(Case("score_windows", "score", ("gen/rich.parquet",),
                        {"time": "ts", "window": "7d", "metrics": "ece,ace", "ci": True,
                         "ci_reps": 50}, e))
        out.append(Case("compare", "compare", ("gen/old.parquet", "gen/new.parquet"),
                        {"metrics": "ece,ace,brier,log_loss", "ci_reps": 100}, e))
    out.append(Case("compare_id", "compare", ("gen/old.parquet", "gen/new_reversed.parquet"),
                    {"id": "example_id", "ci_reps": 100}))
    out.append(Case("test_by", "test", ("gen/rich.parquet",),
                    {"by": "site", "method": "hl,cox"}))
    for e in ENGINES:
        out.append(Case("audit", "audit", ("gen/segments.parquet",),
                        {"segment": ["region", "tier", "visits", "income"], "trials": 200}, e))
    out.append(Case("report", "report", ("sample/miscalibrated_50.parquet",),
                    {"adaptive": False, "ci_reps": 50}))
    for f in ("by_missing.parquet", "bool_labels.parquet", "subnormal.parquet", "vars.parquet",
              "multiclass.csv", "semicolon.csv"):
        out.append(Case(f"score_corpus_{f.replace('.', '_')}", "score", (f"corpus/{f}",), {}))
    return out


@contextmanager
def data_folder(tmp: Path) -> Iterator[Path]:
    """A folder with ``sample/``, ``corpus/`` and the generated ``gen/`` inputs, made the
    working directory so that reports name their inputs relatively."""
    (tmp / "gen").mkdir(parents=True, exist_ok=True)
    write_inputs(tmp / "gen")
    for name, src in (("sample", ROOT / "sample_data"), ("corpus", CORPUS)):
        link = tmp / name
        if not link.exists():
            link.symlink_to(src, target_is_directory=True)
    before = Path.cwd()
    os.chdir(tmp)
    try:
        yield tmp
    finally:
        os.chdir(before)


def run(case: Case) -> str:
    """The case's report as the snapshot keeps it: JSON text without the version."""
    import warnings

    import calcheck

    opts = dict(case.options)
    if case.engine != "memory":
        opts["engine"] = case.engine
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case.command == "score":
            rep = calcheck.score(case.inputs[0], **opts)
        elif case.command == "test":
            rep = calcheck.run_tests(case.inputs[0], **opts)
        elif case.command == "compare":
            rep = calcheck.compare(*case.inputs, **opts)
        elif case.command == "audit":
            rep = calcheck.audit(case.inputs[0], **opts)
        else:
            rep = calcheck.write_report(case.inputs[0], "report.html", **opts)
    data = rep.to_dict()
    data.pop("calcheck_version", None)
    return json.dumps(data, indent=1, sort_keys=False, allow_nan=False) + "\n"


def expected_path(case: Case) -> Path:
    return EXPECTED / f"{case.key}.json"
