import base64
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")

import calcheck
from calcheck.figures import arrays as figures
from calcheck.figures import draw as plots
from calcheck.metrics._data import Prepared
from tests.conftest import SAMPLE

MAGIC = {".png": b"\x89PNG", ".pdf": b"%PDF", ".svg": b"<?xml"}


def sample(name="miscalibrated_01"):
    df = pd.read_parquet(SAMPLE / f"{name}.parquet")
    return df["score"].to_numpy(), df["label"].to_numpy(), df


@pytest.mark.parametrize("kind, extra", [("reliability", []), ("tce", []),
                                         ("variable", ["--var", "x"])])
@pytest.mark.parametrize("ext", [".png", ".svg", ".pdf"])
def test_cli_plot_writes_each_kind(cli, tmp_path, kind, extra, ext):
    out = tmp_path / f"fig{ext}"
    r = cli(["plot", SAMPLE / "miscalibrated_50.csv", "--kind", kind, *extra, "-o", out])
    assert r.code == 0, r.stderr
    data = out.read_bytes()
    assert data.startswith(MAGIC[ext]) and len(data) > 10_000
    assert [p.name for p in tmp_path.iterdir()] == [out.name]        # no temporary left


def test_tce_figure_draws_every_bin_and_contains_the_data():
    s, y, _ = sample()
    data = Prepared(s, y)
    res = calcheck.tce(s, y)
    fig = figures.test_based(data, yscale="linear")
    main, _hist, bars = fig.axes[0], fig.axes[1], fig.axes[2]
    n_bins = len(res.bin_rows())
    assert len(bars.patches) == 2 * n_bins               # bin size + rejected share per bin
    assert len(bars.get_xticks()) == n_bins
    lo, hi = main.get_ylim()
    assert lo <= s.min() and hi >= s.max()
    assert sum(1 for t in bars.texts if t.get_text().endswith("%")) == n_bins
    plots._mpl().close(fig)


def test_tce_figure_logit_axis_for_imbalanced_scores():
    s, y, _ = sample()                                   # 1% prevalence: scores near 0
    assert plots.choose_scale(s) == "logit"
    fig = figures.test_based(Prepared(s, y))
    assert fig.axes[0].get_yscale() == "logit"
    plots._mpl().close(fig)


def test_reliability_figure_points_equal_nonempty_bins():
    s, y, _ = sample("miscalibrated_50")
    res = calcheck.ece(s, y)
    fig = figures.reliability(Prepared(s, y))
    ax = fig.axes[0]
    points = ax.containers[0].lines[0].get_xdata()       # the errorbar markers
    assert len(points) == sum(1 for r in res.bin_rows() if r["n"] > 0)
    lo, hi = ax.get_xlim()
    assert lo <= s.min() and hi >= s.max()
    assert len(fig.axes[2].patches) == sum(1 for r in res.bin_rows() if r["n"] > 0)
    plots._mpl().close(fig)


def test_variable_figure_from_the_report_curve():
    s, y, df = sample("miscalibrated_50")
    fig = calcheck.plot_variable(s, y, df["x"].to_numpy(), "x")
    ax = fig.axes[0]
    assert len(ax.lines) >= 2 and len(ax.collections) >= 2    # two curves, two bands
    lo, hi = ax.get_xlim()
    assert lo <= np.percentile(df["x"], 5) and hi >= np.percentile(df["x"], 95)
    plots._mpl().close(fig)


def test_missing_matplotlib_exits_2(cli, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    out = tmp_path / "x.png"
    r = cli(["plot", SAMPLE / "miscalibrated_50.csv", "-o", out])
    assert r.code == 2 and 'pip install -e ".[plot]"' in r.stderr and not out.exists()
    r = cli(["report", SAMPLE / "miscalibrated_50.csv", "-o", tmp_path / "r.html"])
    assert r.code == 2 and not (tmp_path / "r.html").exists()


def test_plot_usage_errors(cli, tmp_path):
    path = SAMPLE / "miscalibrated_50.csv"
    assert cli(["plot", path, "--kind", "pie", "-o", tmp_path / "a.png"]).code == 2
    assert "needs --var" in cli(["plot", path, "--kind", "variable", "-o",
                                 tmp_path / "a.png"]).stderr
    assert "extension" in cli(["plot", path, "-o", tmp_path / "a.gif"]).stderr


def test_score_text_plot(cli):
    r = cli(["score", SAMPLE / "miscalibrated_50.csv", "-m", "ece", "--plot"])
    # stdout is not a terminal here: plain ASCII bars
    assert r.code == 0 and "reliability diagram" in r.stdout and "####" in r.stdout
    assert r.stdout.isascii()
    import calcheck

    rich = calcheck.score(SAMPLE / "miscalibrated_50.csv", metrics=["ece"], plot=True)
    assert "▇" in rich.render("table")


# ------------------------------------------------------------------ the HTML report

def make_report(cli, tmp_path):
    out = tmp_path / "report.html"
    r = cli(["report", SAMPLE / "miscalibrated_01.parquet", "-o", out, "--var", "x",
             "--trials", "300"])
    assert r.code == 0, r.stderr
    return out


def test_html_report_is_self_contained(cli, tmp_path):
    out = make_report(cli, tmp_path)
    text = out.read_text()
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    srcs = re.findall(r'\b(?:src|href)\s*=\s*["\']([^"\']+)', text)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert not re.search(r"<(script|link|iframe|object)\b", text, re.I)
    for s in srcs:
        assert base64.b64decode(s.split(",", 1)[1]).startswith(b"\x89PNG")
    assert len(srcs) == 5                               # TCE, ECE, ACE, CORP, variable x
    assert "adaptive T-Cal" in text and "Hosmer" in text and "TCE" in text
    # the reader's order: summary, input (file, columns, filter, rows), tests, metrics, figures
    order = [text.index(k) for k in ("class='summary", "<h2>Input", "score column",
                                      "filter (--where)", "rows used", "<h2>Calibration tests",
                                      "<h2>Metrics", "<h2>Figures", "<h2>Settings")]
    assert order == sorted(order)
    assert "Direction:" in text and "under-predicting" in text
    assert "None" not in re.sub(r"<[^>]+>", " ", text.split("<h2>Settings")[1])


def test_pdf_report_has_the_whole_report(cli, tmp_path):
    out = tmp_path / "r.pdf"
    r = cli(["report", SAMPLE / "miscalibrated_50.csv", "-o", out, "--no-tcal"])
    assert r.code == 0 and out.read_bytes().startswith(b"%PDF")
    data = out.read_bytes()
    assert data.count(b"/Type /Page\n") + data.count(b"/Type /Page ") >= 5   # text + 4 figures


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CALCHECK_REQUIRE_CHROMIUM"),
                    reason="Debian's chromium is not installed (apt-get install chromium; "
                    ".ci/run installs it); the static self-containment test still runs")
def test_html_report_renders_offline_in_headless_chromium(cli, tmp_path):
    assert CHROMIUM is not None, "CALCHECK_REQUIRE_CHROMIUM is set but chromium is missing"
    out = make_report(cli, tmp_path)
    shot, netlog = tmp_path / "shot.png", tmp_path / "net.json"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--disable-quic",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--log-net-log={netlog}",
                    "--window-size=1200,2400", f"--screenshot={shot}", out.as_uri()],
                   capture_output=True, timeout=120, check=False)
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 50_000
    log = json.loads(netlog.read_text())
    kinds = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    page_requests = [e["params"]["url"] for e in log["events"]
                     if kinds.get(e["type"]) == "URL_REQUEST_START_JOB"
                     and e.get("params", {}).get("initiator") != "not an origin"
                     and re.match(r"(https?|wss?)://", e["params"].get("url", ""))]
    assert page_requests == []       # the browser's own update pings have no page initiator
    # what a reader sees: the rendered DOM in order, and the verdict box at the top
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          f"--user-data-dir={tmp_path / 'profile2'}", "--dump-dom",
                          out.as_uri()], capture_output=True, timeout=120, text=True).stdout
    seen = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))
    assert seen.index("Miscalibrated") < seen.index("Input") < seen.index("Calibration tests")
    assert seen.index("Calibration tests") < seen.index("Metrics") < seen.index("Figures")
    from matplotlib.image import imread

    img = imread(shot)[:400, :, :3]                      # the first 400 px of the page
    pink = (abs(img[..., 0] - 0xfd / 255) < 0.02) & (abs(img[..., 1] - 0xec / 255) < 0.02)
    assert pink.sum() > 20_000                          # the red-bordered verdict box


def test_tce_tick_labels_keep_crowded_bins_apart():
    """Bins whose edges crowd near 1 (or 0) get enough digits to stay distinct: never "1–1"."""
    from calcheck.figures.draw import range_labels

    rows = [{"lower": 0.99931, "upper": 0.99982}, {"lower": 0.99982, "upper": 0.999991},
            {"lower": 2e-6, "upper": 3.1e-6}, {"lower": 0.25, "upper": 0.25}]
    labels = range_labels(rows)
    assert labels[0] == "0.9993–0.9998" and len(set(labels)) == 4
    assert all(a != b for a, b in (lab.split("–") for lab in labels if "–" in lab))
    assert labels[3] == "= 0.25"
