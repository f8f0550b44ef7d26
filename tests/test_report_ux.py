"""What a reviewer reads and what a notebook user types: the HTML report's layout at 1600 and
420 px, the PDF as a document, ``report`` with score's options, the notebook view, explicit
signatures and array input, ``figure(ax=)``, terminal conventions, the one number formatter,
the headline's p-value and the one figures package."""

from __future__ import annotations

import ast
import html as htmllib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import calcheck
from calcheck.formatting import number, significant
from calcheck.options import COMMANDS
from tests.conftest import SAMPLE

mpl = pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
mpl.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    """Binary predictions with a segment column: miscalibrated in two of three segments."""
    rng = np.random.default_rng(7)
    n = 6000
    s = rng.beta(2, 3, n)
    seg = rng.choice(["north", "south", "east"], n)
    y = (rng.uniform(size=n) < np.where(seg == "north", s, s ** 1.4)).astype(int)
    df = pd.DataFrame({"score": s, "label": y, "segment": seg, "age": rng.uniform(20, 80, n)})
    path = tmp_path_factory.mktemp("ux") / "seg.parquet"
    df.to_parquet(path, index=False)
    return path, df


# ---------------------------------------------------------------------------------------------
# HTML report


def _measure(html_path: Path, width: int, tmp: Path) -> dict:
    """Load the page in an iframe ``width`` px wide (headless windows have a minimum width)
    and report the document's scroll width and each image's natural and shown width."""
    text = html_path.read_text()
    text = re.sub(r"<meta http-equiv='Content-Security-Policy'[^>]*>", "", text)
    js = ("<script>window.addEventListener('load',()=>{const d=document.documentElement;"
          "parent.postMessage(JSON.stringify({sw:d.scrollWidth,cw:d.clientWidth,"
          "imgs:[...document.images].map(i=>[i.naturalWidth,i.getBoundingClientRect().width])"
          "}),'*');});</script>")
    inner = tmp / f"inner{width}.html"
    inner.write_text(text.replace("</body>", js + "</body>"))
    outer = tmp / f"outer{width}.html"
    outer.write_text(f"<html><body style='margin:0'><iframe src='{inner.name}' width='{width}' "
                     "height='900' style='border:0'></iframe><script>addEventListener("
                     "'message',e=>{document.title=e.data})</script></body></html>")
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          f"--user-data-dir={tmp / f'prof{width}'}", "--window-size=1800,1000",
                          "--allow-file-access-from-files", "--virtual-time-budget=8000",
                          "--dump-dom", outer.as_uri()],
                         capture_output=True, text=True, timeout=180).stdout
    m = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert m, dom[:500]
    return json.loads(htmllib.unescape(m.group(1)))


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CALCHECK_REQUIRE_CHROMIUM"),
                    reason="chromium is not installed (.ci/run installs it)")
def test_html_figures_at_most_natural_width_and_no_sideways_scroll(cli, grouped, tmp_path):
    assert CHROMIUM is not None
    out = tmp_path / "r.html"
    r = cli(["report", grouped[0], "--by", "segment", "--var", "age", "-o", out, "--trials",
             "200"])
    assert r.code == 0, r.stderr
    for width in (1600, 420):
        got = _measure(out, width, tmp_path)
        assert got["sw"] <= got["cw"], (width, got)             # no horizontal scrollbar
        assert len(got["imgs"]) >= 5
        for natural, shown in got["imgs"]:
            assert shown <= natural + 0.5, (width, got["imgs"])
        if width == 1600:                        # a figure narrower than the page: full size
            assert all(abs(shown - natural) <= 0.5 for natural, shown in got["imgs"]
                       if natural <= 1000)
        else:
            assert all(shown <= width for _, shown in got["imgs"])


def test_html_img_tags_carry_their_natural_size(cli, grouped, tmp_path):
    from calcheck.report.html import png_size

    out = tmp_path / "r.html"
    assert cli(["report", grouped[0], "--no-tcal", "-o", out]).code == 0
    text = out.read_text()
    assert not re.search(r"(?<![-\w])width: 100%", text)
    for w, h, data in re.findall(r'<img alt="[^"]*" width="(\d+)" height="(\d+)" '
                                 r'src="data:image/png;base64,([^"]+)"', text):
        import base64

        assert png_size(base64.b64decode(data)) == (int(w), int(h))


# ---------------------------------------------------------------------------------------------
# PDF report

pypdf = pytest.importorskip("pypdf")


@pytest.mark.parametrize("paper, size", [("a4", (595, 842)), ("letter", (612, 792))])
def test_pdf_is_a_document(cli, grouped, tmp_path, paper, size):
    out = tmp_path / "r.pdf"
    r = cli(["report", grouped[0], "--by", "segment", "-o", out, "--paper", paper,
             "--trials", "200"])
    assert r.code == 0, r.stderr
    pdf = pypdf.PdfReader(out)
    sizes = {(round(float(p.mediabox.width)), round(float(p.mediabox.height)))
             for p in pdf.pages}
    assert sizes == {size}
    first = pdf.pages[0].extract_text()
    assert "Miscalibrated" in first
    assert re.search(r"ECE\s+0\.\d{4}\s+\[0\.\d{4}, 0\.\d{4}\]", first), first
    assert "Calibration tests" in first and "Hosmer" in first
    fonts = {f.get_object()["/BaseFont"] for f in
             pdf.pages[0]["/Resources"].get_object()["/Font"].values()}
    assert fonts and all("DejaVuSans" in f and "Mono" not in f for f in fonts), fonts
    n = len(pdf.pages)
    for i, page in enumerate(pdf.pages, 1):
        assert f"page {i} of {n}" in page.extract_text()
    assert n >= 6                                  # text, then a page per figure


def test_paper_needs_a_pdf(cli, grouped, tmp_path):
    r = cli(["report", grouped[0], "-o", tmp_path / "r.html", "--paper", "letter"])
    assert r.code == 2 and "--paper has no effect without a PDF report" in r.stderr


# ---------------------------------------------------------------------------------------------
# report with score's options


def test_report_takes_by_ci_metrics_var(cli, grouped, tmp_path):
    out = tmp_path / "r.html"
    r = cli(["report", grouped[0], "--by", "segment", "--ci", "-m", "ece,ace", "--var", "age",
             "--ci-reps", "100", "-o", out, "--trials", "200"])
    assert r.code == 0, r.stderr
    text = out.read_text()
    seen = re.sub(r"<[^>]+>", " ", text)
    assert "Groups by segment" in seen
    for g in ("north", "south", "east"):
        assert re.search(rf"\b{g}\b", seen)
    assert "95% interval" in seen and "Variable-based calibration" in seen
    metrics = seen.split(" Metrics ")[1].split(" Groups ")[0]
    assert "ECE" in metrics and "ACE" in metrics and "Brier" not in metrics
    assert "Reliability diagrams by segment, overlaid" in text


def test_report_api_with_the_same_options(grouped, tmp_path):
    rep = calcheck.write_report(grouped[0], tmp_path / "r.html", by="segment",
                                metrics=["ece"], ci_reps=50, adaptive=False)
    assert set(rep.data["groups"]) == {"north", "south", "east"}
    assert rep.data["metrics"]["ece"]["ci"]["reps"] == 50
    assert rep.data["settings"]["by"] == "segment"


# ---------------------------------------------------------------------------------------------
# the notebook view


def test_repr_html_is_the_compact_report(grouped):
    rep = calcheck.score(grouped[0], by="segment", ci=True, ci_reps=50, metrics=["ece", "ace"])
    h = rep._repr_html_()
    assert "<style>" in h and "class='calcheck fragment'" in h
    assert h.index("class='summary") < h.index("<h2>Metrics")           # verdict first
    assert "95% interval" in h and re.search(r"\[0\.\d{4}, 0\.\d{4}\]", h)
    assert "Groups by segment" in h and "north" in h
    assert "data:image/png;base64," in h                                # the small diagram
    assert not re.search(r"(src|href)=['\"]https?:", h)                # nothing remote
    assert "<script" not in h


# ---------------------------------------------------------------------------------------------
# signatures and array input

API_ONLY = {"source", "scores", "labels", "ax", "output", "old", "new"}


@pytest.mark.parametrize("fn, command", [(calcheck.score, "score"),
                                         (calcheck.run_tests, "test"),
                                         (calcheck.figure, "plot"),
                                         (calcheck.write_report, "report"),
                                         (calcheck.compare, "compare")])
def test_signatures_are_explicit_and_named_like_the_long_options(fn, command):
    params = inspect.signature(fn).parameters
    assert not any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in params.values())
    longs = {o.flags[0].split("/")[0][2:].replace("-", "_") for o in COMMANDS[command]}
    assert set(params) - API_ONLY <= longs, set(params) - API_ONLY - longs
    assert all(p.kind == p.KEYWORD_ONLY for n, p in params.items() if n not in API_ONLY)
    assert ("var" in params) == (command in ("score", "plot", "report"))
    assert ("method" in params) == (command == "test")
    for name in set(params) - API_ONLY:                  # help() documents every keyword
        assert f"    {name} : " in fn.__doc__


def test_old_keyword_names_warn_but_work(grouped):
    with pytest.warns(DeprecationWarning, match=r"variables=.*use var="):
        old = calcheck.score(grouped[0], variables=["age"], metrics=["ece"])
    new = calcheck.score(grouped[0], var=["age"], metrics=["ece"])
    assert old.to_dict()["variables"] == new.to_dict()["variables"]
    with pytest.warns(DeprecationWarning, match=r"methods=.*use method="):
        t = calcheck.run_tests(grouped[0], methods=["hl"])
    assert list(t.tests) == ["hosmer_lemeshow"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        calcheck.run_tests(grouped[0], method=["hl"])


def test_arrays_in(grouped):
    _, df = grouped
    s, y = df["score"].to_numpy(), df["label"].to_numpy()
    a = calcheck.score(scores=s, labels=y, metrics=["ece", "ace", "brier"])
    b = calcheck.score(df[["score", "label"]], metrics=["ece", "ace", "brier"])
    assert a.to_dict()["metrics"] == b.to_dict()["metrics"]
    g = calcheck.score(scores=s, labels=y, by=df["segment"].to_numpy(), metrics=["ece"])
    assert set(g.to_dict()["groups"]) == {"north", "south", "east"}
    v = calcheck.score(scores=list(s), labels=list(y), var={"age": df["age"]}, metrics=["ece"])
    assert "age" in v.to_dict()["variables"]
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(4), 800)
    yy = np.array([rng.choice(4, p=p) for p in P])
    m = calcheck.score(probs=P, labels=yy, metrics=["sce", "ece_top"])
    assert m.to_dict()["input"]["kind"] == "multiclass"
    cols = pd.DataFrame({f"prob_{j}": P[:, j] for j in range(4)}).assign(label=yy)
    assert m.value("sce") == calcheck.score(cols, metrics=["sce"]).value("sce")
    assert calcheck.run_tests(scores=s, labels=y, method="hl").tests["hosmer_lemeshow"]


@pytest.mark.parametrize("kwargs, message", [
    ({"scores": [0.2, 0.4]}, "labels= is required"),
    ({"labels": [0, 1]}, "give scores="),
    ({"scores": [0.2], "probs": [[0.5, 0.5]], "labels": [0]}, "not both"),
    ({}, "give a source"),
])
def test_array_input_errors(kwargs, message):
    with pytest.raises(calcheck.UsageError, match=message):
        calcheck.score(**kwargs)


def test_array_and_source_exclude_each_other(grouped):
    with pytest.raises(calcheck.UsageError, match="not both"):
        calcheck.score(grouped[0], scores=[0.1], labels=[0])
    with pytest.raises(calcheck.UsageError, match="names a column"):
        calcheck.score(grouped[0], by=np.zeros(10))


# ---------------------------------------------------------------------------------------------
# matplotlib conventions


@pytest.mark.parametrize("kind", ["reliability", "tce", "corp"])
def test_figure_draws_into_the_given_axes(grouped, kind):
    import matplotlib.pyplot as plt

    fig, (ax, other) = plt.subplots(1, 2)
    got = calcheck.figure(grouped[0], kind=kind, ax=ax)
    assert got is ax and ax.has_data() and not other.has_data()
    assert len(fig.axes) == 2                                # nothing added to the figure
    plt.close(fig)


def test_figure_by_overlays_the_groups(grouped):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    got = calcheck.figure(grouped[0], by="segment", ax=ax)
    labels = [t.get_text() for t in got.get_legend().get_texts()]
    assert {"north", "south", "east"} <= {lab.split(" (")[0] for lab in labels}
    plt.close(fig)
    whole = calcheck.figure(grouped[0], by="segment")           # its own figure
    assert whole.axes and whole.axes[0].get_legend() is not None


def test_plot_by_on_the_command_line(cli, grouped, tmp_path):
    out = tmp_path / "by.png"
    r = cli(["plot", grouped[0], "--by", "segment", "-o", out])
    assert r.code == 0, r.stderr
    assert out.read_bytes().startswith(b"\x89PNG")
    r = cli(["plot", grouped[0], "--by", "segment", "--kind", "tce", "-o", out])
    assert r.code == 2 and "--kind reliability" in r.stderr


# ---------------------------------------------------------------------------------------------
# terminal conventions


def _run(args, cwd=None, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERM", "NO_COLOR")}
    e.update(env)
    return subprocess.run([sys.executable, "-m", "calcheck", *map(str, args)],
                          capture_output=True, env=e, timeout=300, cwd=cwd)


def test_dumb_terminal_and_pipes_get_no_escape_and_no_box_drawing():
    for env in ({"TERM": "dumb"}, {"TERM": "xterm-256color"}):
        r = _run(["score", SAMPLE / "miscalibrated_50.parquet", "--plot"], **env)
        assert r.returncode == 0
        assert b"\x1b" not in r.stdout + r.stderr
        assert not re.search("[\u2500-\u257f]", r.stdout.decode())


def _tokens(text: str) -> list[str]:
    text = re.sub(r"[|+]|-{2,}", " ", text)
    return text.split()


@pytest.mark.parametrize("args", [
    ["score", "sample_data/miscalibrated_50.parquet"],
    ["test", "sample_data/miscalibrated_50.parquet", "--method", "hl,cox,ks,spiegelhalter"],
    ["score", "sample_data/miscalibrated_50.parquet", "--ci", "--ci-reps", "50"],
])
def test_narrow_terminal_breaks_no_word(args):
    # run from the repository root with a relative path: the header names the input as given,
    # and a clone's absolute path can be longer than the narrowest width tried
    wide = set(_tokens(_run(args, cwd=ROOT, COLUMNS="1000").stdout.decode()))
    for cols in ("60", "80"):
        out = _run(args, cwd=ROOT, COLUMNS=cols).stdout.decode()
        assert max(map(len, out.splitlines())) <= int(cols)
        broken = [t for t in _tokens(out) if t not in wide and not t.endswith(":") and t != "-"]
        assert broken == [], (cols, broken)


def test_a_path_longer_than_the_terminal_is_folded_not_cut(tmp_path):
    deep = tmp_path / ("d" * 70)
    deep.mkdir()
    shutil.copy(SAMPLE / "miscalibrated_50.parquet", deep / "m.parquet")
    out = _run(["score", deep / "m.parquet", "-m", "ece"], COLUMNS="60").stdout.decode()
    assert max(map(len, out.splitlines())) <= 60
    assert str(deep / "m.parquet") in out.replace("\n", "")


def test_plot_without_output_says_it_is_required(cli):
    r = cli(["plot", SAMPLE / "calibrated_50.parquet"])
    assert r.code == 2 and "needs -o/--output FILE" in r.stderr
    r = cli(["plot", "--help"])
    assert re.search(r"-o, --output FILE\s+Required", r.stdout)


# ---------------------------------------------------------------------------------------------
# numbers and the headline


def test_number_formatter_caps_significant_digits():
    for v in (0.013154610000000086, 226.99305123, 123456789.123, 1e-9, -0.00012345678,
              99999.999999, 0.5):
        for d in (1, 2, 4, 6):
            assert significant(number(v, d)) <= 6, (v, d, number(v, d))
    assert number(0.013154610000000086) == "0.0132"
    assert number(226.99305123, 6) == "226.993"
    assert number(12345) == "12,345"
    assert number(None) == "–" and number(float("inf")) == "∞"


def _numbers(text: str) -> list[str]:
    return re.findall(r"(?<![\w.])-?\d+\.\d+(?:e[-+]?\d+)?", text)


@pytest.mark.parametrize("args", [
    ["score", SAMPLE / "miscalibrated_50.parquet", "-m", "all", "--details"],
    ["test", SAMPLE / "miscalibrated_50.parquet", "--method", "hl,cox,ks,kuiper,spiegelhalter",
     "--details"],
    ["score", SAMPLE / "miscalibrated_50.parquet", "--bins-table", "all", "-f", "markdown"],
])
def test_no_printed_number_has_more_than_six_significant_digits(cli, args):
    r = cli(args)
    assert r.code == 0, r.stderr
    bad = [x for x in _numbers(r.stdout) if significant(x) > 6]
    assert bad == []


def test_headline_quotes_the_deciding_tests_pvalue():
    rng = np.random.default_rng(0)
    s = rng.uniform(0.05, 0.95, 20000)
    y = (rng.uniform(size=s.size) < s ** 2).astype(int)         # far from calibrated
    rep = calcheck.run_tests(scores=s, labels=y, method=["tcal", "hl"], trials=200)
    tests = rep.tests
    assert tests["hosmer_lemeshow"]["pvalue"] < 1e-300 < tests["tcal_adaptive"]["pvalue"]
    summary = rep.to_dict()["summary"]
    assert summary["decided_by"][0] == "hosmer_lemeshow"
    assert summary["pvalue"] == tests["hosmer_lemeshow"]["pvalue"]
    assert summary["text"].startswith("MISCALIBRATED: rejected by Hosmer–Lemeshow (p < 1e-300, "
                                      "adjusted p < 1e-300)")
    assert "also by adaptive T-Cal" in summary["text"]


# ---------------------------------------------------------------------------------------------
# one figures package


def test_matplotlib_is_imported_in_one_package_only():
    users = set()
    for path in (ROOT / "calcheck").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "matplotlib" or n.startswith("matplotlib.") for n in names):
                users.add(path.relative_to(ROOT).parts[:2])
    assert users == {("calcheck", "figures")}
    assert not (ROOT / "calcheck" / "plots.py").exists()
    assert not (ROOT / "calcheck" / "streaming" / "figures.py").exists()


# ---------------------------------------------------------------------------------------------
# docs/api.md


def _api_sections() -> tuple[str, dict[str, str]]:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    parts = re.split(r"^### `([^`]+)`\n", text, flags=re.M)
    return parts[0], dict(zip(parts[1::2], parts[2::2]))


def test_api_doc_lists_every_public_name_with_its_signature():
    _, sections = _api_sections()
    assert set(sections) == set(calcheck.__all__)
    for name, body in sections.items():
        obj = getattr(calcheck, name)
        assert body.count("```python") >= 1, name
        try:
            params = inspect.signature(obj).parameters if callable(obj) else {}
        except ValueError:                       # exception classes of the builtin kind
            params = {}
        if params:
            shown = body.split("```python", 2)[1]
            for p, par in params.items():
                assert re.search(rf"\b{re.escape(p)}\b", shown), (name, p)
                if par.default is not inspect.Parameter.empty:   # defaults shown as they are
                    assert re.search(rf"\b{re.escape(p)}\b[^=\n]*= {re.escape(repr(par.default))}"
                                     r"\s*[,)\n]", shown), (name, p, par.default)


def test_api_doc_examples_run(tmp_path, monkeypatch):
    head, sections = _api_sections()
    setup = re.search(r"```python\n(.*?)```", head, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(setup, "api.md setup", "exec"), ns)
    for name, body in sections.items():
        blocks = re.findall(r"```python\n(.*?)```", body, re.S)
        example = blocks[-1]
        try:
            exec(compile(example, f"api.md {name}", "exec"), dict(ns))
        except Exception as exc:
            raise AssertionError(f"the example of {name} fails: {exc!r}") from exc
        import matplotlib.pyplot as plt

        plt.close("all")


def test_report_intervals_are_the_covering_ones(cli, tmp_path):
    rep = calcheck.write_report(SAMPLE / "calibrated_50.parquet", tmp_path / "a.html",
                                adaptive=False, ci_reps=50)
    metrics = rep.data["metrics"]
    assert "ci" in metrics["ece"] and "ci" in metrics["brier"]
    assert all("ci" not in metrics[m] for m in ("tce", "tce_q", "pde"))
    assert any(n.startswith("tce: a biased estimator") for n in rep.data["notes"])
    off = calcheck.write_report(SAMPLE / "calibrated_50.parquet", tmp_path / "c.html",
                                adaptive=False, ci=False)
    assert all("ci" not in m for m in off.data["metrics"].values())


def test_compare_report_has_a_notebook_view_and_a_styled_page():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=3000)
    df = pd.DataFrame({"a": p, "b": np.clip(p * 0.8, 0, 1),
                       "label": (rng.uniform(size=3000) < p).astype(int)})
    c = calcheck.compare(df, score=["a", "b"], ci_reps=50)
    h = c._repr_html_()
    assert "<style>" in h and "class='calcheck fragment'" in h and "Change per metric" in h
    page = c.html()
    assert "<main class='calcheck page'>" in page and page.rstrip().endswith("</html>")
