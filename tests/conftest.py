"""Shared fixtures: paths, the ../shared/data skip rule, hypothesis profiles, a CLI runner and
its JSON helper, and the writer of hive-partitioned Parquet datasets the engine tests read."""

from __future__ import annotations

import io
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"
SHARED = ROOT.parent / "shared" / "data"

settings.register_profile("dev", derandomize=True, database=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.register_profile("ci", derandomize=True, database=None, max_examples=200,
                          suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def shared_path(*parts: str) -> Path:
    """A path under ../shared/data; skip the test when it is absent (fail when required)."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        if os.environ.get("CALCHECK_REQUIRE_SHARED") == "1":
            pytest.fail(f"{p} is missing but CALCHECK_REQUIRE_SHARED=1")
        pytest.skip(f"{p} not found: the papers' data live in ../shared/data beside the repo")
    return p


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run ``calcheck`` in-process: ``cli(["score", path], stdin=b"...")``."""
    from calcheck.cli import run

    def invoke(args: list[str], stdin: bytes | None = None, tuning=None) -> CliResult:
        if stdin is not None:
            fake = io.TextIOWrapper(io.BytesIO(stdin))
            monkeypatch.setattr(sys, "stdin", fake)
        capsys.readouterr()
        code = run([str(a) for a in args], tuning=tuning)
        out = capsys.readouterr()
        return CliResult(code, out.out, out.err)

    return invoke


def run_json(cli, *args, cmd: str | None = "score", tuning=None):
    """``calcheck CMD ARGS --json`` in-process, asserted to exit 0; the parsed report.  With
    ``cmd=None`` the command is the first of ``args``; ``tuning`` the engines' knobs
    (:class:`calcheck.tuning.Tuning`)."""
    argv = [*([cmd] if cmd else []), *map(str, args), "--json"]
    r = cli(argv, tuning=tuning)
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)


def write_dataset(root: Path, df, partition_cols: list[str], name: str = "ds") -> Path:
    """``df`` as a hive-partitioned Parquet dataset ``root/name``; returns its path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_to_dataset(pa.Table.from_pandas(df, preserve_index=False), root / name,
                        partition_cols=partition_cols)
    return root / name
