"""Mergeable partial states: update(batch) → merge(other) → finalize().

The first piece of calcheck's scale-out engine: metrics on fixed bin edges (ECE, ECE-l2, MCE),
Brier, log loss, Spiegelhalter's Z and T-Cal's DPE / plug-in statistics for a fixed m, as exact
int64 counts and compensated float64 sums, so any partitioning of the rows, merged in any
order, gives the same counts and the same values to ~1e-15 relative.
"""

from calcheck.streaming.states import STREAMABLE, CompensatedSum, StreamState

__all__ = ["STREAMABLE", "CompensatedSum", "StreamState"]
