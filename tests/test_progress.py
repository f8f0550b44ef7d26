"""Progress: the stream engine reports every pass's rows to the progress callback the CLI
turns into a bar on a terminal; ``--no-progress`` (and -q, TERM=dumb, a pipe) turn it off."""

from __future__ import annotations

import numpy as np
import pandas as pd

import calcheck.api as api
from calcheck.options import parse


def recorder():
    """A progress factory that records every (done, total) call per bar label."""
    calls: dict[str, list[tuple[int, int]]] = {}

    def factory(label):
        calls[label] = []
        return lambda done, total: calls[label].append((done, total))

    return calls, factory


def test_stream_passes_report_their_rows(tmp_path):
    rng = np.random.default_rng(0)
    s = rng.uniform(size=30_000)
    path = tmp_path / "p.parquet"
    pd.DataFrame({"score": s, "label": (rng.uniform(size=s.size) < s).astype(int)}).to_parquet(
        path, row_group_size=7_000)
    calls, factory = recorder()
    opts = parse("score", {"engine": "stream", "batch_rows": 5_000,
                           "metrics": ["ece", "ace", "tce"]}, style="python")
    api.run_score(path, opts, progress=factory)
    assert len(calls) >= 2                                      # one bar per pass
    for label, seen in calls.items():
        assert label.startswith("pass ") and str(path) in label
        done = [d for d, _ in seen]
        assert done == sorted(done) and done[-1] == 30_000 and seen[-1][1] == 30_000


def test_dask_passes_report_their_rows_on_local_threads(tmp_path):
    import pytest

    pytest.importorskip("dask")
    rng = np.random.default_rng(1)
    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(3):
        s = rng.uniform(size=10_000)
        pd.DataFrame({"score": s, "label": (rng.uniform(size=s.size) < s).astype(int)}
                     ).to_parquet(folder / f"part-{i}.parquet", row_group_size=4_000)
    calls, factory = recorder()
    opts = parse("score", {"engine": "dask", "batch_rows": 3_000,
                           "metrics": ["ece", "ace"]}, style="python")
    api.run_score(folder, opts, progress=factory)
    assert len(calls) >= 2                                      # one bar per pass
    for label, seen in calls.items():
        assert label.startswith("pass ") and str(folder) in label
        done = [d for d, _ in seen]
        assert done == sorted(done) and done[-1] == 30_000 and seen[-1][1] == 30_000


def test_no_progress_is_an_option_of_the_long_commands():
    for command in ("score", "test", "compare", "report"):
        extra = {"output": "r.html"} if command == "report" else {}
        assert parse(command, {"no_progress": True, **extra}, style="cli").no_progress
