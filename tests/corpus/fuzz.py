"""The fuzz corpus: odd files × odd options × source kinds × engines, generated on the fly.

``cases(root)`` writes the files under ``root`` and returns the cases, each a (name, argv,
stdin bytes or None, engine-parity key or None).  tests/test_fuzz.py runs every case and
checks what a hostile but honest user must never see: a traceback, exit 3, a dependency's
warning, a partial output file — and, where two engines read the same file with the same
options, a different exit code or message.

    python tests/corpus/fuzz.py OUT_DIR      # write the files and list the cases
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

N = 200
Case = tuple[str, list[str], "bytes | None", "str | None"]


def _frame(seed: int = 0, n: int = N) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    s = np.round(rng.random(n), 4)
    return pd.DataFrame({"score": s, "label": (rng.random(n) < s).astype(int),
                         "grp": rng.choice(["a", "b", "c and d"], n)})


def _variants() -> dict[str, Callable[[], pd.DataFrame | bytes]]:
    """Name → a DataFrame (written as CSV and Parquet) or raw CSV bytes."""
    def with_scores(f: Callable[[np.ndarray], np.ndarray]) -> Callable[[], pd.DataFrame]:
        def make() -> pd.DataFrame:
            df = _frame()
            df["score"] = f(df["score"].to_numpy().copy())
            return df
        return make

    def nan_some(s: np.ndarray) -> np.ndarray:
        s[::7] = np.nan
        return s

    def inf_one(s: np.ndarray) -> np.ndarray:
        s[3] = np.inf
        return s

    def negative_one(s: np.ndarray) -> np.ndarray:
        s[5] = -0.2
        return s

    def above_one(s: np.ndarray) -> np.ndarray:
        s[9] = 1.3
        return s

    def one_class() -> pd.DataFrame:
        df = _frame()
        df["label"] = 0
        return df

    def text_labels() -> pd.DataFrame:
        df = _frame()
        df["label"] = np.where(df["label"] == 1, "yes", "no")
        return df

    def label_two() -> pd.DataFrame:
        df = _frame()
        df.loc[4, "label"] = 2
        return df

    base = _frame().to_csv(index=False).encode()
    return {
        "ok": _frame,
        "one_row": lambda: _frame(n=1),
        "two_rows": lambda: _frame(n=2),
        "one_class": one_class,
        "all_equal": with_scores(lambda s: np.full_like(s, 0.3)),
        "ties": with_scores(lambda s: np.round(s, 1)),
        "zeros_ones": with_scores(lambda s: np.round(s)),
        "nan_scores": with_scores(nan_some),
        "inf_score": with_scores(inf_one),
        "negative_score": with_scores(negative_one),
        "above_one": with_scores(above_one),
        "percent": with_scores(lambda s: s * 100),
        "logits": with_scores(lambda s: np.log((s + 0.01) / (1.01 - s))),
        "text_labels": text_labels,
        "label_two": label_two,
        "bom": lambda: b"\xef\xbb\xbf" + base,
        "crlf": lambda: base.replace(b"\n", b"\r\n"),
        "semicolon": lambda: base.replace(b",", b";"),
        "quoted": lambda: b'"score","label","grp"\n' + b"".join(
            f'"{s}","{y}","x, y"\n'.encode() for s, y in zip(_frame()["score"], _frame()["label"])),
        "latin1": lambda: base.replace(b"grp", "gr\xfcp".encode("latin-1")),
        "empty": lambda: b"",
        "header_only": lambda: b"score,label\n",
        "ragged": lambda: base + b"0.5,1,a,extra\n",
        "gzip": lambda: gzip.compress(base, mtime=0),
        "unicode_names": lambda: _frame().rename(columns={"grp": "группа ✓"}),
    }


OPTIONS: dict[str, list[str]] = {
    "plain": [],
    "all_metrics": ["-m", "all"],
    "bins_1": ["--bins", "1"],
    "bins_huge": ["--bins", "1000000"],
    "bins_bool": ["--bins", "true"],
    "ci": ["--ci", "--ci-reps", "10", "-m", "ece,ace,brier"],
    "by": ["--by", "grp", "-m", "ece"],
    "where_quoted_and": ["--where", "grp == 'c and d' or score < 0.2", "-m", "ece"],
    "where_missing_column": ["--where", "nope > 1", "-m", "ece"],
    "where_garbage": ["--where", "score >>> (", "-m", "ece"],
    "drop_invalid": ["--drop-invalid", "-m", "ece"],
    "gate": ["--fail-if", "ece>0.5", "-m", "ece"],
    "gate_uncomputed": ["--fail-if", "tce>1"],
    "sigma_tiny": ["-m", "smece", "--smece-sigma", "1e-300"],
    "alpha_zero": ["--alpha", "0"],
    "seed_negative": ["--seed", "-1"],
    "output_no_ext": ["-o", "{tmp}/report"],
    "output_dir": ["-o", "{tmp}/newdir/"],
}
TEST_OPTIONS: dict[str, list[str]] = {
    "plain": ["--trials", "50"],
    "all": ["--method", "all", "--trials", "20"],
    "fixed_m": ["--bins", "15", "--trials", "50"],
    "trials_one": ["--trials", "1"],
    "hl_fitted": ["--method", "hl", "--hl-df", "fitted"],
    "bad_grid": ["--adaptive-grid", "nope"],
}


def cases(root: Path) -> list[Case]:
    """Write the files under ``root`` and return every case."""
    root.mkdir(parents=True, exist_ok=True)
    out: list[Case] = []
    for name, make in _variants().items():
        data = make()
        files: dict[str, Path] = {}
        if isinstance(data, pd.DataFrame):
            files["csv"] = root / f"{name}.csv"
            data.to_csv(files["csv"], index=False)
            files["parquet"] = root / f"{name}.parquet"
            data.to_parquet(files["parquet"], index=False)
        else:
            files["csv"] = root / f"{name}.csv"
            files["csv"].write_bytes(data)
        for kind, path in files.items():
            for opt, args in OPTIONS.items():
                argv = ["score", str(path), *(a.replace("{tmp}", str(root / "out" / f"{name}-"
                                                                        f"{kind}-{opt}"))
                                               for a in args)]
                key = f"score/{name}/{opt}" if kind == "parquet" else None
                out.append((f"score/{name}.{kind}/{opt}", argv, None, key))
                if kind == "parquet" and opt in ("plain", "by", "where_quoted_and", "ci",
                                                 "drop_invalid", "bins_huge", "gate"):
                    out.append((f"score/{name}.{kind}/{opt}/stream",
                                [*argv, "--engine", "stream"], None, key))
                if kind == "parquet" and opt in ("plain", "drop_invalid"):
                    out.append((f"score/{name}.{kind}/{opt}/dask",
                                [*argv, "--engine", "dask"], None, key))
            for opt, args in TEST_OPTIONS.items():
                argv = ["test", str(path), *args]
                key = f"test/{name}/{opt}" if kind == "parquet" else None
                out.append((f"test/{name}.{kind}/{opt}", argv, None, key))
                if kind == "parquet" and opt in ("plain", "fixed_m", "hl_fitted"):
                    out.append((f"test/{name}.{kind}/{opt}/stream",
                                [*argv, "--engine", "stream"], None, key))
        if "csv" in files:                          # the same bytes on stdin
            out.append((f"score/{name}.stdin", ["score", "-", "-m", "ece"],
                        files["csv"].read_bytes(), None))
    return out


if __name__ == "__main__":
    for case in cases(Path(sys.argv[1] if len(sys.argv) > 1 else "fuzz-out")):
        print(case[0], " ".join(case[1]))
