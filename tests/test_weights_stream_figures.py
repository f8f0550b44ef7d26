"""Figures of weighted rows beyond ``Tuning.hold_weighted_rows`` on ``stream`` and Dask
(calcheck/engines/weighted.py): the reliability diagrams — equal-width (ECE's) and equal-mass
(ACE's) bins, the ``--by`` overlay — are drawn from the weighted passes with the in-memory
engine's bin tables and weighted histogram, so the PNG files are byte-identical; ``report``
draws them with the passes' metrics and tests, and says which figures need the rows.

The figures rely on the passes' bin tables being the in-memory ones (held in
tests/test_weights_stream.py) and on the streamed histogram adding the batches' weighted
counts (``test_weighted_spread_merges_to_the_array_spread``)."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")

from calcheck.engines.weighted import WeightedStreamEngine
from calcheck.figures.draw import Spread
from calcheck.figures.stream import SpreadSpec
from tests.test_weights_stream import SMALL, TIGHT, _file, _grouped_file


def _png(cli, argv, out, tuning=None):
    r = cli([*argv, "-o", out], tuning=tuning)
    assert r.code == 0, r.stderr
    return out.read_bytes()


@pytest.fixture
def drawn(monkeypatch):
    """The kinds the weighted passes' engine drew (so a test knows the passes drew them, not
    an expanded stream)."""
    kinds: list[str] = []
    real = WeightedStreamEngine.figure

    def spy(self, kind, *args, **kw):
        kinds.append(kind)
        return real(self, kind, *args, **kw)

    monkeypatch.setattr(WeightedStreamEngine, "figure", spy)
    return kinds


@pytest.mark.parametrize("kind,column", [("--weight", "iw"), ("--weight", "w"),
                                         ("--count", "n")])
@pytest.mark.parametrize("binning", ["uniform", "quantile"])
def test_streamed_weighted_reliability_diagram_is_the_in_memory_one(tmp_path, cli, drawn,
                                                                    kind, column, binning):
    path = _file(tmp_path)
    argv = ["plot", path, kind, column, "--kind", "reliability", "--binning", binning,
            "--bins", "12"]
    mem = _png(cli, argv, tmp_path / "m.png")
    got = _png(cli, [*argv, "--engine", "stream"], tmp_path / "s.png", SMALL)
    assert got == mem
    assert drawn == ["reliability"]


@pytest.mark.parametrize("kind,column,figure", [("--count", "n", "tce"),
                                                ("--count", "n", "corp"),
                                                ("--weight", "iw", "corp")])
def test_diagrams_from_the_rows_held(tmp_path, cli, drawn, kind, column, figure):
    """The test-based (counts) and CORP diagrams from the rows held: the in-memory figure;
    beyond the rows held, counts stream expanded (TCE) or the CORP diagram is refused."""
    path = _file(tmp_path)
    argv = ["plot", path, kind, column, "--kind", figure]
    mem = _png(cli, argv, tmp_path / "m.png")
    assert _png(cli, [*argv, "--engine", "stream"], tmp_path / "s.png", SMALL) == mem
    assert drawn == [figure]
    r = cli([*argv, "--engine", "stream", "-o", tmp_path / "t.png"], tuning=TIGHT)
    if figure == "tce":                 # beyond the rows held: the expanded stream's figure
        assert r.code == 0, r.stderr    # (its PAVA-BC on blocks past TIGHT's budget)
    else:
        assert r.code == 2 and "--engine memory" in r.stderr
        assert not (tmp_path / "t.png").exists()


@pytest.mark.parametrize("kind,column", [("--weight", "iw"), ("--count", "n")])
def test_streamed_weighted_overlay_by_group_is_the_in_memory_one(tmp_path, cli, kind, column):
    """``plot --by``: every group's equal-width bins (with their effective sizes, which the
    intervals read) from one grouped first pass and the groups' passes in lockstep; a group of
    zero weight is left out, as in memory."""
    pytest.importorskip("dask")
    path = _grouped_file(tmp_path)
    argv = ["plot", path, kind, column, "--kind", "reliability", "--by", "g"]
    mem = _png(cli, argv, tmp_path / "m.png")
    for engine in ("stream", "dask"):
        assert _png(cli, [*argv, "--engine", engine], tmp_path / f"{engine}.png", SMALL) == mem


def test_streamed_weighted_drift_figure(tmp_path, cli):
    """``plot --kind drift`` of weighted rows: each window's metric and its interval (on the
    passes, the per-unit Poisson bootstrap's: near, not equal to, memory's)."""
    path = _grouped_file(tmp_path)
    argv = ["plot", path, "--weight", "iw", "--kind", "drift", "--time", "ts", "--window",
            "1d", "-m", "ace"]
    for engine in ("memory", "stream"):
        png = _png(cli, [*argv, "--engine", engine], tmp_path / f"{engine}.png", SMALL)
        assert png.startswith(b"\x89PNG")


def _report(cli, argv, out, tuning=None):
    r = cli([*argv, "-o", out, "--trials", "200"], tuning=tuning)
    assert r.code == 0, r.stderr
    html = out.read_text()
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", html)
    return images, cells, html


@pytest.mark.parametrize("kind,column,extra,kinds", [
    ("--weight", "iw", [], ["reliability", "reliability", "corp"]),
    ("--count", "n", ["-m", "ece,ace,brier"], ["reliability", "reliability", "corp"]),
    ("--count", "n", [], ["tce", "reliability", "reliability", "corp"])])
def test_streamed_weighted_report(tmp_path, cli, drawn, kind, column, extra, kinds):
    """``report`` on the weighted passes: the in-memory reliability diagrams byte for byte
    and, from the rows held, the CORP and (counts) test-based diagrams; the passes' metrics
    and the classical tests as memory displays them."""
    path = _file(tmp_path)
    argv = ["report", path, kind, column, *extra]
    m_img, m_cells, _ = _report(cli, argv, tmp_path / "m.html")
    s_img, s_cells, html = _report(cli, [*argv, "--engine", "stream"], tmp_path / "s.html",
                                   SMALL)
    assert drawn == kinds and s_img == m_img
    assert "rows were streamed" in html
    far, _, html = _report(cli, [*argv, "--engine", "stream"], tmp_path / "t.html", TIGHT)
    assert len(far) == 2 + (kinds[0] == "tce") and "CORP diagram needs" in html
    def row(cells, name, width):
        i = next(k for k, c in enumerate(cells) if c.startswith(name))
        return cells[i:i + width]

    for name in ("ece", "ace", "brier"):                  # id, title, value (the intervals:
        assert row(s_cells, name, 3) == row(m_cells, name, 3)      # each engine's bootstrap)
    for name in ("Hosmer–Lemeshow", "Spiegelhalter Z", "Cox intercept/slope"):
        assert row(s_cells, name, 5) == row(m_cells, name, 5)      # statistic, p, adjusted


def test_what_the_passes_do_not_draw_is_refused(tmp_path, cli):
    path = _file(tmp_path)
    for argv in (["--kind", "corp"], ["--kind", "reliability", "--ties", "order"]):
        r = cli(["plot", path, "--weight", "iw", "--engine", "stream", *argv, "-o",
                 tmp_path / "x.png"], tuning=TIGHT)      # (CORP's: beyond the held)
        assert r.code == 2 and "--engine memory" in r.stderr, r.stderr
        assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("unit", ["rows", "weight"])
def test_weighted_spread_merges_to_the_array_spread(unit):
    rng = np.random.default_rng(3)
    s = np.concatenate([rng.uniform(size=5000), [0.0, 1.0, 0.01, 0.99]])
    w = rng.integers(0, 5, s.shape[0]).astype(float) if unit == "rows" else \
        rng.gamma(2.0, 1.0, s.shape[0])
    edges = np.linspace(0.0, 1.0, 41)
    spec = SpreadSpec(edges=tuple(edges), clip=(1e-6, 1 - 1e-6), weighted=True)
    parts = [spec.new().update(s[i::3], s[i::3], 0, w[i::3]) for i in range(3)]
    whole = parts[2].merge(parts[0]).merge(parts[1])
    ref = Spread.of(s, w, unit=unit)
    assert (whole.lo, whole.hi, whole.integer) == (ref.lo, ref.hi, ref.integer)
    assert whole.extreme / whole.mass == pytest.approx(ref.extreme, rel=1e-12)
    np.testing.assert_allclose(whole.counts, ref.histogram(edges, (1e-6, 1 - 1e-6)),
                               rtol=1e-12)
