"""Progress: the stream engine reports every pass's rows to the progress callback the CLI
turns into a bar on a terminal; ``--no-progress`` (and -q, TERM=dumb, a pipe) turn it off."""

from __future__ import annotations

import numpy as np
import pandas as pd

import calcheck.api as api
from calcheck.option_checks import parse


def recorder():
    """A progress factory that records every (done, total) call per bar label."""
    calls: dict[str, list[tuple[int, int]]] = {}

    def factory(label):
        calls[label] = []
        return lambda done, total: calls[label].append((done, total))

    return calls, factory


def write_predictions(path, rng, n, row_group_size=None):
    """n calibrated binary predictions as a Parquet file."""
    s = rng.uniform(size=n)
    pd.DataFrame({"score": s, "label": (rng.uniform(size=s.size) < s).astype(int)}).to_parquet(
        path, row_group_size=row_group_size)


def assert_pass_bars(calls, where, rows):
    """One bar per pass over ``where``, each counting up to every row."""
    assert len(calls) >= 2
    for label, seen in calls.items():
        assert label.startswith("pass ") and str(where) in label
        done = [d for d, _ in seen]
        assert done == sorted(done) and done[-1] == rows and seen[-1][1] == rows


def test_stream_passes_report_their_rows(tmp_path):
    path = tmp_path / "p.parquet"
    write_predictions(path, np.random.default_rng(0), 30_000, row_group_size=7_000)
    calls, factory = recorder()
    opts = parse("score", {"engine": "stream", "batch_rows": 5_000,
                           "metrics": ["ece", "ace", "tce"]}, style="python")
    api.run_score(path, opts, progress=factory)
    assert_pass_bars(calls, path, 30_000)


def test_dask_passes_report_their_rows_on_local_threads(tmp_path):
    import pytest

    pytest.importorskip("dask")
    rng = np.random.default_rng(1)
    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(3):
        write_predictions(folder / f"part-{i}.parquet", rng, 10_000, row_group_size=4_000)
    calls, factory = recorder()
    opts = parse("score", {"engine": "dask", "batch_rows": 3_000,
                           "metrics": ["ece", "ace"]}, style="python")
    api.run_score(folder, opts, progress=factory)
    assert_pass_bars(calls, folder, 30_000)


def test_no_progress_is_an_option_of_the_long_commands():
    for command in ("score", "test", "compare", "report"):
        extra = {"output": "r.html"} if command == "report" else {}
        assert parse(command, {"no_progress": True, **extra}, style="cli").no_progress


def test_memory_engine_reports_the_read_and_each_metric(tmp_path):
    import dataclasses

    from calcheck.tuning import Tuning

    # several read steps, of one row group each
    tuning = Tuning(read_step_values=5_000, read_run_values=1)
    path = tmp_path / "p.parquet"
    write_predictions(path, np.random.default_rng(2), 20_000, row_group_size=4_000)
    calls, factory = recorder()
    opts = dataclasses.replace(parse("score", {"metrics": ["ece", "ace", "tce"]},
                                     style="python"), tuning=tuning)
    rep = api.run_score(path, opts, progress=factory)
    reading = calls[f"reading {path}"]
    assert [d for d, _ in reading] == [4_000, 8_000, 12_000, 16_000, 20_000]   # by row group
    assert reading[-1][1] == 20_000
    (label, seen), = [(k, v) for k, v in calls.items() if k.startswith("computing")]
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)] and "20,000 rows" in label
    plain = api.run_score(path, opts)                   # the stepped read changes no value
    assert rep.to_dict()["metrics"] == plain.to_dict()["metrics"]


def test_memory_engine_reports_a_directory_read(tmp_path):
    rng = np.random.default_rng(3)
    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(3):
        write_predictions(folder / f"part-{i}.parquet", rng, 5_000)
    calls, factory = recorder()
    opts = parse("score", {"metrics": ["ece"]}, style="python")
    rep = api.run_score(folder, opts, progress=factory)
    reading = calls[f"reading {folder}"]
    done = [d for d, _ in reading]
    assert done == sorted(done) and reading[-1] == (15_000, 15_000)
    assert rep.to_dict()["metrics"] == api.run_score(folder, opts).to_dict()["metrics"]


def test_a_bar_shows_after_a_second_even_without_a_new_report(monkeypatch):
    import time

    from calcheck.report.progress import ProgressBar

    shown = []
    bar = ProgressBar("one slow step")
    monkeypatch.setattr(bar, "start", time.monotonic() - 0.9)     # 0.1 s left before it shows
    monkeypatch.setattr(ProgressBar, "_show", lambda self: shown.append(self.done))
    bar(0, 3)                                               # then nothing for a while
    time.sleep(0.4)
    bar.close()
    assert shown == [0]
