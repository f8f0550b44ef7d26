"""The golden corpus (tests/golden/cases.py): every report as recorded — the proof that a
reorganisation changed nothing a user sees.  A change of a number on purpose regenerates the
snapshots (``python -m tests.golden.update``) and says why in its commit.

A report equals its snapshot byte for byte on the machine that recorded it.  Another CPU
(AVX-512 or AVX2 kernels of the BLAS under ``np.dot`` and ``@``, numpy's SIMD loops) rounds
the last bits of some sums differently, so a report that differs passes when it differs only
there: the same keys, texts and integers, every float within 1e-9 relative (or 1e-12 absolute)
— the tolerance of every deterministic parity in this project.  Anything else fails with the
diff."""

from __future__ import annotations

import difflib
import json
import math
from typing import Any

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
    if got != want and not _float_noise(json.loads(want), json.loads(got)):
        diff = "".join(list(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                 "expected", "now", n=1))[:60])
        pytest.fail(f"{case.key}: the report changed (python -m tests.golden.update "
                    f"{case.key} if on purpose):\n{diff}")


def _float_noise(want: Any, got: Any) -> bool:
    """Whether ``got`` equals ``want`` but for floats' last bits (module docstring)."""
    if isinstance(want, dict):
        return isinstance(got, dict) and want.keys() == got.keys() and \
            all(_float_noise(want[k], got[k]) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and \
            all(_float_noise(a, b) for a, b in zip(want, got))
    if isinstance(want, float) and isinstance(got, (float, int)) and \
            not isinstance(got, bool):
        return math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(want, int) and isinstance(got, float) and not isinstance(want, bool):
        return math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-12)
    return bool(want == got) and type(want) is type(got)


def test_float_noise_is_all_a_report_may_differ_by():
    want = {"a": [1.0, 2, "x"], "b": {"p": 0.7568180952357904, "n": 300.0}}
    assert _float_noise(want, {"a": [1.0 + 1e-15, 2, "x"],
                               "b": {"p": 0.7568180952357906, "n": 299.9999999999999}})
    for bad in ({"a": [1.0, 3, "x"], "b": want["b"]}, {"a": [1.0, 2, "y"], "b": want["b"]},
                {"a": [1.001, 2, "x"], "b": want["b"]}, {"a": [1.0, 2], "b": want["b"]},
                {"a": [1.0, 2, "x"], "b": {"p": 0.7568180952357904}}):
        assert not _float_noise(want, bad)


def test_every_snapshot_has_a_case():
    keys = {expected_path(c).name for c in CASES}
    on_disk = {p.name for p in expected_path(CASES[0]).parent.glob("*.json")}
    assert on_disk == keys
