"""The house of modules: no import cycle, the CLI on top, the API below it, engines below the
API, kernels at the bottom (checked on the source, imports inside functions included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "calcheck"


def _module(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, *, top_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = _module(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    nodes = tree.body if top_only else list(ast.walk(tree))
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.If) and top_only:
            continue                                   # `if TYPE_CHECKING:` blocks
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("calcheck")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            if name.startswith("calcheck"):
                out.add(name)
                out |= {f"{name}.{a.name}" for a in node.names}
    return out


def _graph(top_only: bool) -> dict[str, set[str]]:
    files = {_module(p): p for p in PKG.rglob("*.py")}
    graph = {}
    for mod, path in files.items():
        deps = set()
        for name in _imports(path, top_only=top_only):
            while name and name not in files:            # `from pkg import name` → pkg
                name = name.rsplit(".", 1)[0] if "." in name else ""
            if name and name != mod:
                deps.add(name)
        graph[mod] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    """The import cycles a depth-first walk of ``graph`` meets (a package's __init__ importing
    its own submodules is not a cycle of layers)."""
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1 and not m.startswith(d + ".") and not d.startswith(m + "."):
                cycles.append(" -> ".join([*stack[stack.index(d):], d]))
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return cycles


def test_no_import_cycle_at_module_level():
    assert not _cycles(_graph(top_only=True))


LAYERS = [
    ("calcheck.cli", 5),
    ("calcheck.__main__", 5),
    ("calcheck.api", 4),
    ("calcheck.pipeline", 4),
    ("calcheck.signatures", 4),
    ("calcheck.comparison", 4),
    ("calcheck.auditing", 4),
    ("calcheck.monitoring", 4),
    ("calcheck.report", 3),
    ("calcheck.engines", 3),
    ("calcheck.figures", 2),
    ("calcheck.streaming", 2),
    ("calcheck.io", 2),
    ("calcheck.hypotests", 2),                 # tests may use metrics, never the reverse
    ("calcheck.compat", 2),
    ("calcheck.metrics", 1),
    ("calcheck.segments", 1),
    ("calcheck.binning", 0),                   # kernels on arrays
    ("calcheck.pava", 0),
    ("calcheck.tuning", 0),                    # the knobs: data, imported by every layer
    ("calcheck.binomial", 0),
    ("calcheck._binom_dist", 0),
]


def _layer(mod: str) -> int | None:
    for prefix, level in LAYERS:
        if mod == prefix or mod.startswith(prefix + "."):
            return level
    return None


@pytest.mark.parametrize("top_only", [True, False])
def test_imports_only_go_down(top_only):
    bad = []
    for mod, deps in _graph(top_only).items():
        lm = _layer(mod)
        if lm is None:
            continue
        for d in deps:
            ld = _layer(d)
            if ld is not None and ld > lm:
                bad.append(f"{mod} -> {d}")
    assert not bad, "imports that go up a layer:\n" + "\n".join(sorted(bad))


def test_nothing_imports_the_cli():
    users = [m for m, deps in _graph(False).items() if "calcheck.cli" in deps
             and m != "calcheck.__main__"]
    assert users == []


def test_the_graph_sees_the_imports():
    graph = _graph(False)
    assert "calcheck.pipeline" in graph["calcheck.cli"]
    assert "calcheck.engines.base" in graph["calcheck.pipeline"]
    assert any(d.startswith("calcheck.metrics") for d in graph["calcheck.engines.memory"])


# the one module global calcheck changes at run time, and why: the PAVA-BC scan's runs walked
# by the Python loop in this process, so that numba's compiled scan is loaded once the calls
# together (a bootstrap's replicates) would pay for it — process-wide on purpose
GLOBAL_STATE = {("calcheck/pava.py", "_loop_runs")}


def test_no_module_global_is_changed_at_run_time():
    """Knobs are data (calcheck.tuning.Tuning) or arguments: no function rebinds a module
    global (a ``global`` statement) but the documented process-wide counter above, and no
    module assigns an attribute of another module (but calcheck/_hooks.py, the one home of the
    hooks into other libraries)."""
    found, foreign = set(), []
    for path in PKG.rglob("*.py"):
        rel = str(path.relative_to(PKG.parent))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = {a.asname or a.name for node in ast.walk(tree)
                   if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found.update((rel, name) for name in node.names)
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                            and target.value.id in modules and path.name != "_hooks.py":
                        foreign.append(f"{rel}:{node.lineno} {target.value.id}.{target.attr}")
    assert found == GLOBAL_STATE
    assert foreign == []


def test_streaming_invariants_name_real_tests():
    """docs/streaming.md's invariants name the tests that hold them: each must exist."""
    import re

    doc = (PKG.parent / "docs" / "streaming.md").read_text(encoding="utf-8")
    section = doc.split("## The invariants", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", section)
    assert len(named) >= 11
    missing = []
    for path, name in named:
        source = (PKG.parent / path).read_text(encoding="utf-8")
        if not re.search(rf"^def {name}\(", source, flags=re.M):
            missing.append(f"{path}::{name}")
    assert missing == []


PRIVATE_HOOKS = ("typer._", "_runtime_param", "_usage_display_name", "ensure_blas",
                 "gc.freeze", "scipy.special._ufuncs", "_bootstrap._load", "unraisablehook")


def test_hooks_into_private_code_live_in_one_module():
    """Every reach into another library's private code is in calcheck/_hooks.py, behind one
    switch (CALCHECK_NO_HOOKS)."""
    found = []
    for path in PKG.rglob("*.py"):
        if path.name == "_hooks.py":
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{path.name}: {h}" for h in PRIVATE_HOOKS if h in text]
    assert found == []


def test_the_command_runs_the_same_without_the_hooks(tmp_path):
    """CALCHECK_NO_HOOKS=1: typer's own coercion, numba's own BLAS check, the collection at
    exit — the same report."""
    import json
    import os
    import subprocess
    import sys

    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    s = rng.random(2_000)
    pd.DataFrame({"score": s, "label": (rng.random(2_000) < s).astype(int)}).to_csv(
        tmp_path / "p.csv", index=False)
    out = []
    for flag in ("", "1"):
        env = {**os.environ, "CALCHECK_NO_HOOKS": flag}
        r = subprocess.run([sys.executable, "-m", "calcheck", "score", str(tmp_path / "p.csv"),
                            "-m", "ece,tce", "--bins", "12", "--json"], env=env,
                           capture_output=True, text=True, check=True)
        rep = json.loads(r.stdout)
        rep.pop("timing", None)
        out.append(rep["metrics"])
    assert out[0] == out[1]


def test_every_pass_spec_conforms_to_the_protocol():
    """Every class in calcheck whose ``new()`` makes a state that updates and merges (a pass
    spec) is listed in calcheck.streaming.conformance, where mypy --strict checks it against
    the typed protocol (calcheck._typing.PassSpec / PassState, no Any); and the protocol's
    own definitions carry no Any."""
    import importlib
    import inspect

    from calcheck.figures.stream import PASS_SPECS
    from calcheck.streaming import conformance

    found = set()
    for path in PKG.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(f, ast.FunctionDef) and f.name == "new" for f in node.body):
                cls = getattr(importlib.import_module(_module(path)), node.name)
                made = inspect.signature(cls.new).return_annotation
                state = getattr(importlib.import_module(_module(path)), str(made), None)
                if state is not None and hasattr(state, "update") and hasattr(state, "merge"):
                    found.add(cls)
    listed = set(conformance.SPECS) | set(PASS_SPECS)
    assert found == listed, found ^ listed
    source = (PKG / "_typing.py").read_text(encoding="utf-8")
    protocol = source[source.index("class PassState"):]
    assert "Any" not in protocol


def test_sizes_stay_readable():
    """No module over 800 lines, no class over 300, no function over 80 in calcheck/."""
    big = []
    for path in PKG.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 800:
            big.append(f"{path.name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            limit = 300 if isinstance(node, ast.ClassDef) else 80 if isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
            if limit is not None and node.end_lineno - node.lineno + 1 > limit:
                big.append(f"{path.name}: {node.name} {node.end_lineno - node.lineno + 1}")
    assert not big, big


def test_no_import_cycle_counting_imports_inside_functions():
    """The graph with every import, those inside functions too, has no cycle between modules
    (a package's __init__ importing its own submodules aside)."""
    cycles = _cycles(_graph(top_only=False))
    assert not cycles, cycles[:5]
