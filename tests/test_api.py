"""The report API: calcheck.score() / run_tests() return what the CLI prints with --json, on
every engine and from every kind of source."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import calcheck
from calcheck.errors import UsageError
from tests.conftest import SAMPLE, run_json

ENGINES = ["memory", "stream", "dask"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    df = pd.read_parquet(SAMPLE / "miscalibrated_50.parquet")
    rng = np.random.default_rng(2)
    df["site"] = rng.choice(["north", "south", "east"], len(df))
    df["age"] = rng.integers(18, 80, len(df)).astype(float)
    path = root / "binary.parquet"
    df.to_parquet(path, index=False)
    k = 3
    P = rng.dirichlet(np.ones(k), 3000)
    mc = pd.DataFrame({f"prob_{j}": P[:, j] for j in range(k)})
    mc["label"] = [rng.choice(k, p=p) for p in P]
    mc_path = root / "multi.parquet"
    mc.to_parquet(mc_path, index=False)
    return path, df, mc_path, mc


def _cli_args(options):
    out = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        for v in (value if isinstance(value, list) else [value]):
            if v is True:
                out.append(flag)
            else:
                out += [flag, str(v)]
    return out


SCORE_CASES = [
    {},
    {"metrics": ["ece", "ace", "tce", "brier", "log_loss"], "bins": 15},
    {"metrics": ["ece", "ace", "mce_q"], "by": "site", "ci": True, "ci_reps": 40, "seed": 3},
    {"metrics": ["ece"], "var": ["age"], "bins_table": ["ece"]},
    {"metrics": ["ece", "mce"], "fail_if": ["ece>0.01"], "where": "score > 0.05"},
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("options", SCORE_CASES)
def test_score_api_equals_cli_json(cli, data, engine, options):
    path = data[0]
    opts = {**options, "engine": engine}
    rep = calcheck.score(str(path), **opts)
    r = cli(["score", path, *_cli_args(opts), "--json"])
    assert r.code == rep.exit_code, r.stderr
    import json

    assert rep.to_dict() == json.loads(r.stdout)


@pytest.mark.parametrize("engine", ENGINES)
def test_run_tests_api_equals_cli_json(cli, data, engine):
    path = data[0]
    opts = {"method": ["all"], "trials": 200, "seed": 4, "engine": engine}
    rep = calcheck.run_tests(path, **opts)
    assert rep.to_dict() == run_json(cli, path, *_cli_args(opts), cmd="test")
    assert set(rep.tests) >= {"tcal_adaptive", "hosmer_lemeshow", "spiegelhalter", "cox"}


@pytest.mark.parametrize("engine", ENGINES)
def test_multiclass_through_the_same_calls(cli, data, engine):
    mc_path = data[2]
    ids = ["ece_top", "sce", "ace_cw", "tace", "tce_cw"]
    rep = calcheck.score(mc_path, metrics=ids, engine=engine)
    assert rep.to_dict() == run_json(cli, mc_path, "-m", ",".join(ids), "--engine", engine)
    assert list(rep.metrics) == ids and rep.to_dict()["input"]["kind"] == "multiclass"


def test_memory_and_stream_reports_have_the_same_keys(data):
    path = data[0]
    mem = calcheck.score(path, by="site", var=["age"]).to_dict()
    st = calcheck.score(path, by="site", var=["age"], engine="stream").to_dict()
    assert mem.keys() == st.keys()
    assert set(mem["settings"]) <= set(st["settings"])
    assert set(mem["input"]) <= set(st["input"])
    t_mem = calcheck.run_tests(path).to_dict()
    t_st = calcheck.run_tests(path, engine="stream").to_dict()
    assert t_mem.keys() == t_st.keys() and set(t_mem["settings"]) <= set(t_st["settings"])


def _without_source(rep):
    d = rep.to_dict()
    for key in ("path", "format"):
        d["input"].pop(key)
    return d


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_dataframe_arrow_and_predictions_sources(data, engine):
    path, df, _, _ = data
    opts = {"metrics": ["ece", "ace", "tce", "brier"], "by": "site", "engine": engine}
    want = _without_source(calcheck.score(path, **opts))
    from_df = calcheck.score(df, **opts)
    assert from_df["input"]["path"] == "<DataFrame>"
    assert _without_source(from_df) == want
    from_table = calcheck.score(pa.Table.from_pandas(df, preserve_index=False), **opts)
    assert from_table["input"]["path"] == "<Table>"
    assert _without_source(from_table) == want


def test_predictions_source(data):
    _, df, _, mc = data
    p = calcheck.Predictions(scores=df["score"].to_numpy(), labels=df["label"].to_numpy(),
                             columns={"site": df["site"].to_numpy()})
    rep = calcheck.score(p, metrics=["ece", "ace"], by="site")
    want = calcheck.score(df, metrics=["ece", "ace"], by="site")
    assert rep.metrics == want.metrics and rep.to_dict()["groups"] == want.to_dict()["groups"]
    probs = mc[[c for c in mc if c.startswith("prob_")]].to_numpy()
    m = calcheck.score(calcheck.Predictions(probs=probs, labels=mc["label"].to_numpy()),
                       metrics=["sce", "ece_top"])
    assert m.value("sce") == pytest.approx(calcheck.score(mc, metrics=["sce"]).value("sce"))
    with pytest.raises(UsageError, match="already in memory"):
        calcheck.score(p, engine="stream")


def test_polars_source_when_installed(data):
    pl = pytest.importorskip("polars")
    _, df, _, _ = data
    rep = calcheck.score(pl.from_pandas(df), metrics=["ece"])
    assert rep.value("ece") == pytest.approx(calcheck.score(df, metrics=["ece"]).value("ece"))


@pytest.mark.parametrize("kwargs, api_msg, argv, cli_msg", [
    ({"bins": 0}, "bins must be an integer >= 1", ["--bins", "0"], "--bins must be an integer"),
    ({"alpha": 1.5}, "alpha must be in the open interval", ["--alpha", "1.5"],
     "--alpha must be in the open interval"),
    ({"var": ["nope"]}, "no column 'nope' (var", ["--var", "nope"],
     "no column 'nope' (--var"),
    ({"metrics": ["ecee"]}, "metrics: unknown metric id 'ecee'", ["-m", "ecee"],
     "--metrics: unknown metric id 'ecee'"),
    ({"engine": "spark"}, "unknown engine 'spark'", ["--engine", "spark"],
     "unknown --engine 'spark'"),
])
def test_errors_name_the_keyword_in_python_and_the_flag_on_the_command_line(
        cli, data, kwargs, api_msg, argv, cli_msg):
    path = data[0]
    with pytest.raises(calcheck.CalcheckError) as err:
        calcheck.score(path, **kwargs)
    assert api_msg in str(err.value)
    r = cli(["score", path, *argv])
    assert r.code == 2 and cli_msg in r.stderr, r.stderr


def test_unknown_keyword_suggests_the_closest(data):
    with pytest.raises(UsageError, match=r"unknown option 'metric' \(did you mean 'metrics'\?\)"):
        calcheck.score(data[0], metric=["ece"])


def test_report_object(data, tmp_path):
    rep = calcheck.score(data[0], metrics=["ece", "ace"], fail_if=["ece>0.001"])
    assert rep.value("ece") == rep.metrics["ece"]["value"]
    assert rep.exit_code == 1 and rep.failed_gates[0]["metric"] == "ece"
    assert "ECE" in rep.render("table") and rep.render("csv").startswith("metric,")
    assert "<table>" in rep._repr_html_()
    rep.save(str(tmp_path / "r.json"))
    import json

    assert json.loads((tmp_path / "r.json").read_text()) == rep.to_dict()
    with pytest.raises(KeyError, match="no metric 'mce'"):
        rep.value("mce")
    t = calcheck.run_tests(data[0], method=["hl"], fail_on_reject=True)
    assert t.rejected == ["hosmer_lemeshow"] and t.exit_code == 1


def test_api_defaults_are_the_option_tables():
    """Each keyword default of the report API is its command's option default (the option
    table is the one place defaults are written: a drift here would make the API and the
    command line compute different things for the same omitted option)."""
    import inspect

    from calcheck.options import COMMANDS

    for fn, command in ((calcheck.score, "score"), (calcheck.run_tests, "test"),
                        (calcheck.figure, "plot"), (calcheck.write_report, "report"),
                        (calcheck.compare, "compare")):
        table = {o.kw: o for o in COMMANDS[command]}
        for name, par in inspect.signature(fn).parameters.items():
            if name not in table or par.default is inspect.Parameter.empty:
                continue
            opt = table[name]
            if opt.type == "toggle":                 # None: not given, the table's default
                assert par.default is None, (command, name)
                continue
            assert par.default == opt.default, (command, name, par.default, opt.default)
        missing = [o.kw for o in COMMANDS[command]
                   if o.kw not in inspect.signature(fn).parameters
                   and o.kw not in ("output", "format", "json", "quiet", "no_progress",
                                    "details", "file")]
        assert not missing or command == "plot", (command, missing)
