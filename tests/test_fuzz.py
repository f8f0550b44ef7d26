"""The fuzz corpus of tests/corpus/fuzz.py: no traceback, no exit 3, no dependency warning, no
partial output file, and the same exit code and message on the memory and streaming engines.
Marked slow (about two minutes); CI runs it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))
import fuzz

pytestmark = pytest.mark.slow

BAD = re.compile(r"Traceback|internal error|Warning:|RuntimeWarning|FutureWarning|"
                 r"DeprecationWarning|please report")


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    return root, fuzz.cases(root)


def test_the_corpus_is_large(cases):
    _, all_cases = cases
    assert len(all_cases) >= 525


def test_fuzz_corpus(cli, cases):
    root, all_cases = cases
    seen: dict[str, tuple[int, str]] = {}
    failures = []
    for name, argv, stdin, key in all_cases:
        r = cli(argv, stdin=stdin)
        problem = None
        if r.code not in (0, 1, 2):
            problem = f"exit {r.code}"
        elif BAD.search(r.stderr) or BAD.search(r.stdout):
            problem = "traceback or warning"
        elif r.code == 2 and not r.stderr.startswith("calcheck: error:"):
            problem = "exit 2 without calcheck's error line"
        if problem:
            failures.append((name, problem, r.stderr[-300:]))
            continue
        if key is not None:
            first = r.stderr.splitlines()[0] if r.code == 2 else ""
            got = (r.code, first)
            if key in seen and "--engine memory" not in first + seen[key][1] \
                    and seen[key] != got:
                failures.append((name, "engines differ", f"{seen[key]} vs {got}"))
            seen.setdefault(key, got)
    out = root / "out"
    partial = [p for p in out.rglob("*") if p.name.startswith(".")] if out.exists() else []
    assert not partial, partial
    assert not failures, "\n".join(f"{n}: {p}: {e}" for n, p, e in failures[:20])
