"""Reading prediction files and writing reports.

* :mod:`calcheck.io.source` — open a CSV, Parquet file or directory, stdin or an in-memory
  table, and read its columns;
* :mod:`calcheck.io.columns` — Arrow columns to validated numpy arrays (errors name the file,
  column and first bad rows);
* :mod:`calcheck.io.tabular` — a whole input into :class:`~calcheck.data.Predictions`;
* :mod:`calcheck.io.stream` — validated batches of a Parquet dataset, for the streaming engines;
* :mod:`calcheck.io.output` — output files written atomically, never over what they should not
  replace.

DataFrames and Arrow tables stop here: everything below receives numpy arrays.
"""

from calcheck.io.output import atomic_write, check_output, write_output
from calcheck.io.source import Source, from_table, open_source
from calcheck.io.tabular import input_kind, load_predictions

__all__ = ["Source", "atomic_write", "check_output", "from_table", "input_kind",
           "load_predictions", "open_source", "write_output"]
