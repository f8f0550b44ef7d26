"""``--by`` on the streaming engines: one grid state per group, ``update`` → ``merge`` →
``finalize`` like every other state.

Each batch arrives with its group keys (``str(value)``, None for null — the in-memory
engine's keys) and a code per row; the rows of each group are folded into that group's
:class:`StreamState` (multiclass input: its classwise state, which carries the top-label grid),
so every group's fixed-bin metrics (ECE, ECE-l2, MCE, Brier, log loss; SCE) are exact, and
merging the group states gives the whole table's state, from which the overall metrics are
computed as without ``--by``.  Equal-mass and PAVA bins per group come from a rank search per
group on that group's rows (:func:`group_positional`, through
:mod:`calcheck.streaming.views`); a metric that cannot be computed on a group (TCE under 20
rows) is reported with its reason, as in memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calcheck._typing import FloatArray, IntArray
from calcheck.errors import InputError
from calcheck.streaming.states import StreamState

MAX_GROUPS = 64          # each group keeps a 2^16-cell grid (~5 MB; ~7 MB with tied scores)


@dataclass(frozen=True)
class GroupedSpec:
    """What a grouped partial state keeps: ``spec`` (a :class:`StateSpec`, or for multiclass
    input a :class:`~calcheck.streaming.classwise.ClasswiseSpec`) per value of ``by``."""

    spec: Any
    by: str

    @property
    def view(self) -> str:
        return getattr(self.spec, "view", "top")

    def new(self) -> GroupedState:
        return GroupedState(self.spec, self.by)


@dataclass
class GroupedState:
    """A :class:`StreamState` per group (see the module docstring)."""

    spec: Any
    by: str
    groups: dict[str | None, StreamState] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return sum(g.n for g in self.groups.values())

    def _group(self, key: str | None) -> StreamState:
        state: StreamState = group_state(self.groups, key, self.spec.new, self.by, "a grid")
        return state

    def update(self, scores: FloatArray, labels: IntArray, start: int = 0,
               groups: tuple[list[str | None], IntArray] | None = None) -> GroupedState:
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
        total: StreamState = self.spec.new()
        for key in sorted(self.groups, key=lambda k: (k is None, k or "")):
            total.merge(self.groups[key])                   # reads the group state only
        return total


def group_state(groups: dict[Any, Any], key: Any, new: Any, by: str, what: str) -> Any:
    """The state of group ``key`` in ``groups``, made by ``new()`` the first time — at most
    :data:`MAX_GROUPS` of them (``what`` each group keeps, ~5 MB, says why)."""
    state = groups.get(key)
    if state is None:
        if len(groups) >= MAX_GROUPS:
            raise InputError(f"--by {by}: more than {MAX_GROUPS} groups; the streaming engines "
                             f"keep {what} per group (~5 MB each). Select groups with --where, "
                             "or use --engine memory")
        state = groups[key] = new()
    return state


def group_positional(source: Any, states: dict[str, StreamState], by: str, ids: list[str], *,
                     bins: int = 10,
                     alpha: float = 0.05, test: str = "binomial", n_min: int | None = None,
                     n_max: int | None = None, ties: str = "share",
                     ) -> dict[str, tuple[dict[str, Any], dict[str, str]]]:
    """The positional metrics ``ids`` of every group: group → (results, errors by id), as the
    in-memory engine's ``--by`` gives them (a metric that cannot be computed on a group is
    reported with its reason).  Each group's rank search runs on its
    own rows (:mod:`calcheck.streaming.views`), all groups in shared passes.  ``states`` are
    the groups' grid states (of the top-label view, for multiclass input)."""
    from calcheck.errors import CalcheckError
    from calcheck.metrics.tce import check_pava_bc_rows
    from calcheck.streaming.positional import positional_passes
    from calcheck.streaming.runner import drive_lockstep
    from calcheck.streaming.views import CHUNK, SubStream

    tuning = source.tuning

    out: dict[str, tuple[dict[str, Any], dict[str, str]]] = {}
    id_bound = source.id_bound(sum(st.n for st in states.values()))
    todo: dict[str, list[str]] = {}
    for key in sorted(states, key=lambda k: (k is None, k or "")):
        n = states[key].n
        errors = {}
        try:
            if "tce" in ids:
                check_pava_bc_rows(n, n_min, n_max)
        except CalcheckError as exc:
            errors["tce"] = str(exc)
        out[key] = ({}, errors)
        todo[key] = [m for m in ids if m not in errors]
    comps = {key: (SubStream(group=key), positional_passes(
        states[key], todo[key], id_bound=id_bound, bins=bins, alpha=alpha, test=test,
        n_min=n_min, n_max=n_max, ties=ties, collect_rows=tuning.collect_rows // CHUNK,
        tuning=tuning))
        for key in todo if todo[key]}
    res = drive_lockstep(source, comps, by=by, rows={key: states[key].n for key in comps},
                         max_rows=tuning.exact_pava_rows)
    for key, r in res.items():
        if isinstance(r, Exception):
            out[key][1].update({m: str(r) for m in todo[key]})
        else:
            out[key][0].update(r[0])
    return out
