"""Regenerate the golden corpus's expected reports (tests/golden/cases.py says when)::

    python -m tests.golden.update [NAME_PREFIX ...]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.golden.cases import EXPECTED, cases, data_folder, expected_path, run


def main(argv: list[str]) -> int:
    chosen = [c for c in cases() if not argv or any(c.key.startswith(p) for p in argv)]
    EXPECTED.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, data_folder(Path(tmp)):
        for case in chosen:
            expected_path(case).write_text(run(case), encoding="utf-8")
            print(f"wrote {expected_path(case).relative_to(EXPECTED.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
