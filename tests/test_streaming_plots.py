"""plot and report --engine stream|dask draw the in-memory figures: same bin tables, violin
points (exact order statistics) and histograms (counted per batch), so the PNG files are
byte-identical."""

import re

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")

from calcheck.figures.draw import Spread
from calcheck.figures.stream import SpreadSpec
from tests.conftest import write_dataset

pytestmark = pytest.mark.slow   # long engine-parity runs: pytest -m "not slow" skips them


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    """Two hive datasets (balanced scores; scores crowded near 0, for the logit axis); bins of
    > 4,000 rows, so violins use order statistics."""
    root = tmp_path_factory.mktemp("plots")
    rng = np.random.default_rng(11)
    n = 60_000
    for name, s in (("even", rng.beta(2, 3, n)), ("rare", rng.beta(0.3, 30, n))):
        s[::5] = np.round(s[::5], 3)                     # ties across files
        age = rng.integers(18, 90, n).astype(float)
        age[::37] = np.nan
        df = pd.DataFrame({"score": s, "label": rng.binomial(1, np.clip(s * 1.2, 0, 1)),
                           "age": age, "x": rng.normal(size=n), "part": rng.integers(0, 4, n)})
        write_dataset(root, df, ["part"], name)
    return root


def _png(cli, path, out, *args):
    r = cli(["plot", str(path), "-o", str(out), *map(str, args)])
    assert r.code == 0, r.stderr
    return out.read_bytes()


@pytest.mark.parametrize("name, args", [
    ("even", ["--kind", "reliability"]),
    ("even", ["--kind", "reliability", "--binning", "quantile", "--bins", "12"]),
    ("rare", ["--kind", "reliability", "--binning", "quantile"]),
    ("even", ["--kind", "tce"]),
    ("rare", ["--kind", "tce"]),                         # auto → logit axis, clipped display
    ("even", ["--kind", "variable", "--var", "age"]),    # integer variable with missing values
    ("even", ["--kind", "reliability", "--where", "age > 40 and score < 0.8"]),
])
def test_stream_figure_equals_memory(cli, ds, tmp_path, name, args):
    mem = _png(cli, ds / name, tmp_path / "m.png", *args)       # same files, same row order
    st = _png(cli, ds / name, tmp_path / "s.png", "--engine", "stream", "--batch-rows", "7000",
              *args)
    assert st == mem


def test_stream_figure_on_dask_equals_memory(cli, ds, tmp_path):
    pytest.importorskip("dask", reason="the Dask extra is not installed")
    args = ["--kind", "tce", "--yscale", "linear"]
    mem = _png(cli, ds / "rare", tmp_path / "m.png", *args)
    dk = _png(cli, ds / "rare", tmp_path / "d.png", "--engine", "dask", *args)
    assert dk == mem


def test_continuous_variable_plot_streams(cli, ds, tmp_path):
    """> 4,096 distinct values: the streamed LOESS is the recorded approximation, so the figure
    is drawn but not byte-equal; the histogram below it is exact."""
    r = cli(["plot", str(ds / "even"), "--engine", "stream", "--kind", "variable", "--var", "x",
             "-o", str(tmp_path / "v.png")])
    assert r.code == 0, r.stderr
    assert (tmp_path / "v.png").read_bytes().startswith(b"\x89PNG")


def test_spread_state_merges_to_the_array_spread():
    rng = np.random.default_rng(3)
    s = np.concatenate([rng.uniform(size=5000), [0.0, 1.0, 0.01, 0.99]])
    edges = np.linspace(0.0, 1.0, 41)
    spec = SpreadSpec(edges=tuple(edges), clip=(1e-6, 1 - 1e-6))
    parts = [spec.new().update(s[i::3], s[i::3], 0) for i in range(3)]
    whole = parts[2].merge(parts[0]).merge(parts[1])
    ref = Spread.of(s)
    assert (whole.n, whole.lo, whole.hi) == (s.shape[0], ref.lo, ref.hi)
    assert whole.extreme / whole.n == ref.extreme and whole.integer == ref.integer
    np.testing.assert_array_equal(whole.counts, ref.histogram(edges, (1e-6, 1 - 1e-6)))


def test_stream_plot_errors(cli, ds, tmp_path):
    r = cli(["plot", str(ds / "even"), "--engine", "stream", "--kind", "tce",
             "--where", "score > 2", "-o", str(tmp_path / "e.png")])
    assert r.code == 2 and "no rows" in r.stderr
    assert not (tmp_path / "e.png").exists()
    r = cli(["plot", str(ds / "even"), "--engine", "stream", "--kind", "variable", "--var",
             "nope", "-o", str(tmp_path / "e.png")])
    assert r.code == 2 and "nope" in r.stderr
    r = cli(["plot", str(ds / "even"), "--scheduler", "tcp://x:1", "-o", str(tmp_path / "e.png")])
    assert r.code == 2 and "--scheduler applies to --engine dask only" in r.stderr


def _report(cli, path, out, *args):
    r = cli(["report", str(path), "-o", str(out), "--trials", "200", "--var", "age", *args])
    assert r.code == 0, r.stderr
    html = out.read_text()
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", html)
    return images, cells, html


@pytest.mark.parametrize("engine", ["stream", "dask"])
def test_stream_report_has_the_memory_figures_and_metrics(cli, ds, tmp_path, engine):
    if engine == "dask":
        pytest.importorskip("dask", reason="the Dask extra is not installed")
    m_img, m_cells, _ = _report(cli, ds / "even", tmp_path / "m.html")
    s_img, s_cells, html = _report(cli, ds / "even", tmp_path / "s.html", "--engine", engine)
    # the same figures, but the CORP diagram (memory only: PAV over every distinct score)
    assert len(m_img) == 5 and len(s_img) == 4 and s_img == m_img[:3] + m_img[4:]
    assert "CORP diagram needs --engine memory" in html
    for metric in ("ece", "ace", "tce", "brier", "Hosmer–Lemeshow", "Spiegelhalter Z",
                   "Cox intercept/slope (LR)", "age"):
        assert metric in s_cells
        i, j = m_cells.index(metric), s_cells.index(metric)
        assert s_cells[j:j + 3] == m_cells[i:i + 3]       # as displayed
    assert f"<tr><th>engine</th><td>{engine}</td></tr>" in html and "pc not computed" in html
