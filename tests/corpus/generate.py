"""Write the hardening corpus: malformed inputs and hostile names that once crashed calcheck,
printed raw terminal sequences or gave a silently wrong number (tests/test_hardening.py runs
each one).  Deterministic; run from anywhere::

    python tests/corpus/generate.py

The files are small and committed; this script documents how each was made.
"""

from __future__ import annotations

import bz2
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent / "files"
N = 300


def base(seed: int = 0, n: int = N) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    s = np.round(rng.random(n), 6)
    y = (rng.random(n) < s).astype(int)
    return pd.DataFrame({"score": s, "label": y})


def main() -> None:
    if HERE.exists():
        shutil.rmtree(HERE)
    HERE.mkdir(parents=True)
    df = base()
    n = len(df)
    i = np.arange(n)
    df.to_csv(HERE / "ok.csv", index=False)
    df.to_parquet(HERE / "ok.parquet", index=False)

    # escaping: rich markup and terminal control sequences in values and column names
    d = df.copy()
    d["grp"] = np.select([i % 4 == 0, i % 4 == 1, i % 4 == 2],
                         ["[/x]", "[bold red]x[/]", "\x1b[31mred\x07"], "a|b<c>")
    d.to_csv(HERE / "hostile_values.csv", index=False)
    d.to_parquet(HERE / "hostile_values.parquet", index=False)
    df.rename(columns={"score": "sc\x1b[2Jore"}).to_csv(HERE / "hostile_column.csv", index=False)
    df.assign(**{"v[red]|<b>": df["score"] * 3}).to_csv(HERE / "hostile_var.csv", index=False)

    # labels: booleans; --by with nulls beside a literal "(missing)"
    pd.DataFrame({"score": df["score"], "label": df["label"].astype(bool)}).to_parquet(
        HERE / "bool_labels.parquet", index=False)
    g = np.where(i % 3 == 0, None, np.where(i % 3 == 1, "(missing)", "a"))
    df.assign(g=g).to_parquet(HERE / "by_missing.parquet", index=False)

    # subnormal and tiny scores (scipy's beta functions overflow below ~1e-304)
    d = df.copy()
    d.loc[:40, "score"] = 1e-308
    d.loc[41:60, "score"] = 5e-324
    d.to_csv(HERE / "subnormal.csv", index=False)
    d.to_parquet(HERE / "subnormal.parquet", index=False)

    # --var columns: ±inf, constant, two-valued, all missing
    rng = np.random.default_rng(1)
    v = df.assign(v_inf=np.where(i % 10 == 0, np.inf, rng.random(n)),
                  v_ninf=np.where(i % 7 == 0, -np.inf, rng.random(n)),
                  v_const=1.0, v_two=(i % 2).astype(float), v_nan=np.nan,
                  v_some_nan=np.where(i % 5 == 0, np.nan, rng.random(n)))
    v.to_parquet(HERE / "vars.parquet", index=False)

    # not CSV at all, or compressed in a way calcheck does not read
    (HERE / "json_as.csv").write_text(json.dumps(df.head(3).to_dict("records")))
    raw = (HERE / "ok.csv").read_bytes()
    (HERE / "ok.csv.bz2").write_bytes(bz2.compress(raw))
    (HERE / "ok.csv.gz.gz").write_bytes(gzip.compress(gzip.compress(raw)))
    (HERE / "ok.csv.zst").write_bytes(pa.compress(raw, "zstd", asbytes=True))
    (HERE / "ok.csv.gz").write_bytes(gzip.compress(raw))
    (HERE / "truncated.csv.gz").write_bytes(gzip.compress(raw)[:200])
    (HERE / "binary.csv").write_bytes(bytes(range(256)) * 4)
    (HERE / "latin1.csv").write_bytes("score,label,city\n0.5,1,Malm\xf6\n".encode("latin-1"))

    # delimiters and headers
    df.to_csv(HERE / "semicolon.csv", sep=";", index=False)
    df.to_csv(HERE / "tabs.csv", sep="\t", index=False)
    (HERE / "padded_header.csv").write_text(" score , label \n0.1,0\n0.5,1\n")
    (HERE / "header_only.csv").write_text("score,label\n")
    (HERE / "empty.csv").write_text("")
    (HERE / "ragged.csv").write_text("score,label\n0.1,0\n0.2,1,5\n0.3,1\n")
    (HERE / "text_score.csv").write_text("score,label\n0.1,0\nabc,1\n0.3,1\n" * 10)

    # Parquet problems: duplicate names, a flipped byte under page checksums
    t = pa.table([pa.array(df["score"]), pa.array(df["label"]), pa.array(df["score"])],
                 names=["score", "label", "score"])
    pq.write_table(t, HERE / "duplicate_columns.parquet")
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), HERE / "checksummed.parquet",
                   write_page_checksum=True, compression="none", use_dictionary=False)
    data = bytearray((HERE / "checksummed.parquet").read_bytes())
    data[200] ^= 0x01                      # inside the score column's first data page
    (HERE / "corrupt_page.parquet").write_bytes(bytes(data))
    (HERE / "truncated.parquet").write_bytes((HERE / "ok.parquet").read_bytes()[:300])

    # datasets: a README among the parts; a part without the score column
    (HERE / "dataset_readme").mkdir()
    df.iloc[:150].to_parquet(HERE / "dataset_readme" / "part-0.parquet", index=False)
    df.iloc[150:].to_parquet(HERE / "dataset_readme" / "part-1.parquet", index=False)
    (HERE / "dataset_readme" / "README.txt").write_text("exported 2026-11-01\n")
    (HERE / "dataset_readme" / "_SUCCESS").write_text("")
    (HERE / "dataset_part_missing").mkdir()
    df.iloc[:150].to_parquet(HERE / "dataset_part_missing" / "a.parquet", index=False)
    df.iloc[150:][["label"]].to_parquet(HERE / "dataset_part_missing" / "b.parquet",
                                        index=False)

    # small inputs and multiclass slips
    df.head(12).to_csv(HERE / "small.csv", index=False)
    pd.DataFrame({"prob_0": [0.5, 0.3, 0.2], "prob_1": [0.5, 0.7, 0.8],
                  "label": [0, 1, 1]}).to_csv(HERE / "multiclass.csv", index=False)
    pd.DataFrame({"prob_0": [0.6, 0.5, 0.3], "prob_1": [0.5, 0.6, 0.8],
                  "label": [0, 1, 1]}).to_csv(HERE / "multiclass_over.csv", index=False)
    pd.DataFrame({"prob_0": [1.2, 0.5, 0.6], "prob_1": [0.8, 0.5, 1.4],
                  "label": [0, 1, 1]}).to_csv(HERE / "multiclass_above_one.csv", index=False)

    # a miscalibrated model on 6,000 rows (ECE ≈ 0.23): adaptive T-Cal must reject at α 0.01
    rng = np.random.default_rng(7)
    s = rng.random(6000)
    y = (rng.random(6000) < np.clip(0.5 + 1.6 * (s - 0.5), 0, 1) ** 0.3).astype(int)
    pd.DataFrame({"score": s, "label": y}).to_parquet(HERE / "miscalibrated_6000.parquet",
                                                      index=False)


if __name__ == "__main__":
    main()
