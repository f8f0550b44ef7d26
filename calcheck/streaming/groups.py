"""``--by`` on the streaming engines: one grid state per group, ``update`` → ``merge`` →
``finalize`` like every other state.

Each batch arrives with its group keys (``str(value)``, "(missing)" for null — the in-memory
engine's keys) and a code per row; the rows of each group are folded into that group's
:class:`StreamState`, so every group's fixed-bin metrics (ECE, ECE-l2, MCE, Brier, log loss)
are exact, and merging the group states gives the whole table's grid state, from which the
overall metrics — positional ones included — are computed as without ``--by``.  Equal-mass and
PAVA bins per group would need a rank search per group; they are reported per group as not
computed, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.errors import InputError
from calcheck.streaming.states import StreamState

MAX_GROUPS = 64          # each group keeps a 2^16-cell grid (~5 MB)


@dataclass(frozen=True)
class GroupedSpec:
    """What a grouped partial state keeps: ``spec`` (a :class:`StateSpec`) per value of ``by``."""

    spec: Any
    by: str

    def new(self) -> GroupedState:
        return GroupedState(self.spec, self.by)


@dataclass
class GroupedState:
    """A :class:`StreamState` per group (see the module docstring)."""

    spec: Any
    by: str
    groups: dict[str, StreamState] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return sum(g.n for g in self.groups.values())

    def _group(self, key: str) -> StreamState:
        state = self.groups.get(key)
        if state is None:
            if len(self.groups) >= MAX_GROUPS:
                raise InputError(
                    f"--by {self.by}: more than {MAX_GROUPS} groups; the streaming engines keep "
                    "a grid per group (~5 MB each). Select groups with --where, or use "
                    "--engine memory")
            state = self.groups[key] = self.spec.new()
        return state

    def update(self, scores: FloatArray, labels: IntArray, start: int = 0,
               groups: tuple[list[str], IntArray] | None = None) -> GroupedState:
        """Add a batch with its (group keys, code per row)."""
        if groups is None:
            raise ValueError("a grouped state needs the group codes of every batch")
        keys, codes = groups
        if len(keys) == 1:
            self._group(keys[0]).update(scores, labels, start)
            return self
        small = codes.astype(np.int16) if len(keys) < 2**15 else codes
        order = np.argsort(small, kind="stable")             # radix sort for 16-bit codes
        bounds = np.cumsum(np.bincount(codes, minlength=len(keys)))
        lo = 0
        for key, hi in zip(keys, bounds.tolist()):
            if hi > lo:
                rows = order[lo:hi]
                self._group(key).update(scores[rows], labels[rows], start)
            lo = hi
        return self

    def merge(self, other: GroupedState) -> GroupedState:
        for key, st in other.groups.items():
            mine = self.groups.get(key)
            if mine is not None:
                mine.merge(st)
            elif len(self.groups) >= MAX_GROUPS:
                self._group(key)                            # raises the error
            else:
                self.groups[key] = st
        return self

    def overall(self) -> StreamState:
        """The grid state of all rows: the group states merged (in key order)."""
        total = self.spec.new()
        for key in sorted(self.groups):
            total.merge(self.groups[key])                   # reads the group state only
        return total
