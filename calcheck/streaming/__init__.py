"""Mergeable partial states: update(batch) → merge(other) → finalize().

calcheck's scale-out engine: one dyadic grid state (:class:`StreamState`) serves the metrics
on fixed bin edges (ECE, ECE-l2, MCE), Brier, log loss, Spiegelhalter's Z and T-Cal (fixed m
and adaptive, :mod:`calcheck.streaming.tests`), as exact int64 counts and compensated float64
sums, so any partitioning of the rows, merged in any order, gives the same counts and the same
values to ~1e-15 relative.  Positional bins (ACE, MCE(Q), PDE, TCE and its variants,
Hosmer–Lemeshow) take a few more passes: an exact rank search
(:mod:`calcheck.streaming.select`) and a row pass, owned by
:class:`calcheck.streaming.positional.PositionalPass` (its parts: ``passbins``, ``passrows``,
``rowpass``, ``heldrows``);
:mod:`calcheck.streaming.views` runs many of those (per class, per ``--by`` group) in shared
passes; :mod:`calcheck.streaming.rowtests` runs Cox's Newton passes and counts discrete scores.
:mod:`calcheck.streaming.engine` folds batches in this process;
:mod:`calcheck.engines.dask` runs the same passes on Dask.
"""

from calcheck.streaming.states import GRID_METRICS, CompensatedSum, StreamState

__all__ = ["GRID_METRICS", "CompensatedSum", "StreamState"]
