"""The golden corpus (tests/golden/cases.py): every report byte for byte as recorded — the
proof that a reorganisation changed nothing a user sees.  A change of a number on purpose
regenerates the snapshots (``python -m tests.golden.update``) and says why in its commit."""

from __future__ import annotations

import difflib

import pytest

from tests.golden.cases import cases, data_folder, expected_path, run

CASES = cases()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    with data_folder(tmp_path_factory.mktemp("golden")) as path:
        yield path


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_report_is_unchanged(case, folder):
    got = run(case)
    want = expected_path(case).read_text(encoding="utf-8")
    if got != want:
        diff = "".join(list(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                 "expected", "now", n=1))[:60])
        pytest.fail(f"{case.key}: the report changed (python -m tests.golden.update "
                    f"{case.key} if on purpose):\n{diff}")


def test_every_snapshot_has_a_case():
    keys = {expected_path(c).name for c in CASES}
    on_disk = {p.name for p in expected_path(CASES[0]).parent.glob("*.json")}
    assert on_disk == keys
