"""docs/ci.md's recipes run as written: the GitHub Actions job's install and gate lines and the
shell script, against the bundled sample data — the commands taken from the page itself, so the
page cannot drift from what works (a misspelt extra, a removed option)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import SAMPLE

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")


def _block(lang: str, index: int = 0) -> str:
    return re.findall(rf"```{lang}\n(.*?)```", DOC, re.S)[index]


def _job() -> tuple[dict[str, str], list[str]]:
    """The job's env and its ``run`` commands, in order (a ``run: |`` block as one command)."""
    text = _block("yaml")
    env = dict(re.findall(r'^\s+(CALCHECK): "(.*)"$', text, re.M))
    runs: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(?:- )?run: (.*)$", lines[i])
        if m and m.group(2).strip() == "|":
            indent = len(lines[i + 1]) - len(lines[i + 1].lstrip())
            body = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or
                                      len(lines[i]) - len(lines[i].lstrip()) >= indent):
                body.append(lines[i][indent:])
                i += 1
            runs.append("\n".join(body).strip())
            continue
        if m:
            runs.append(m.group(2).strip())
        i += 1
    return env, runs


def _extras(requirement: str) -> list[str]:
    m = re.match(r"^calcheck\[([^\]]+)\]", requirement)
    return [x.strip() for x in m.group(1).split(",")] if m else []


def _predictions(where: Path) -> None:
    """What the job's ``scripts/predict.py`` steps write: two models' predictions of the same
    rows, with an example id (from the bundled sample data)."""
    d = pd.read_parquet(SAMPLE / "calibrated_50.parquet")
    (where / "preds").mkdir(exist_ok=True)
    ids = np.arange(len(d))
    pd.DataFrame({"example_id": ids, "score": d["score"], "label": d["label"]}).to_parquet(
        where / "preds" / "main.parquet")
    pd.DataFrame({"example_id": ids[::-1], "score": np.clip(d["score"] ** 1.3, 0, 1)[::-1],
                  "label": d["label"][::-1]}).to_parquet(where / "preds" / "branch.parquet")


def _bash(command: str, cwd: Path, bindir: str, **env: str) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), **env}
    e.pop("COLUMNS", None)
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=e, capture_output=True,
                          text=True, timeout=600)


def test_the_job_installs_an_extra_that_exists():
    env, runs = _job()
    installs = [r for r in runs if r.startswith("pip install")]
    assert installs == ['pip install "$CALCHECK"'], runs
    extras = _extras(env["CALCHECK"])
    tomllib = pytest.importorskip("tomllib")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras and set(extras) <= set(declared), (extras, list(declared))
    assert any("matplotlib" in req for x in extras for req in declared[x])


def _gate_commands(runs: list[str]) -> list[str]:
    return [r for r in runs if "calcheck " in r]


def test_the_job_and_the_script_gate_the_sample_data(tmp_path):
    """The job's gate step and the shell script, with this environment's calcheck."""
    _, runs = _job()
    _predictions(tmp_path)
    bindir = os.path.dirname(sys.executable)
    gates = _gate_commands(runs)
    assert gates, runs
    for command in gates:
        r = _bash(command, tmp_path, bindir)
        assert r.returncode in (0, 1), (command, r.stderr)
        assert "error" not in r.stderr, r.stderr
    assert (tmp_path / "calibration.html").stat().st_size > 10_000
    script = tmp_path / "gate.sh"
    script.write_text(_block("sh").replace('pip install "${CALCHECK:?set CALCHECK to where '
                                           'calcheck comes from}"', ": installed"))
    r = _bash(f"bash {script} preds/main.parquet preds/branch.parquet", tmp_path, bindir)
    assert r.returncode in (0, 1), r.stderr
    assert (tmp_path / "calibration-comparison.json").exists()


@pytest.mark.slow
def test_the_job_runs_in_a_fresh_virtualenv(tmp_path):
    """The job as written — its install line in a new virtual environment, then its gate —
    with ``$CALCHECK`` pointing at this checkout instead of a git URL."""
    env, runs = _job()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bindir = str(venv / "bin")
    here = f"calcheck[{','.join(_extras(env['CALCHECK']))}] @ {ROOT.as_uri()}"
    r = _bash('pip install --quiet "$CALCHECK"', tmp_path, bindir, CALCHECK=here)
    assert r.returncode == 0, r.stderr[-2000:]
    _predictions(tmp_path)
    for command in _gate_commands(runs):
        r = _bash(command, tmp_path, bindir)
        assert r.returncode in (0, 1), (command, r.stderr)
    assert (tmp_path / "calibration.html").stat().st_size > 10_000
