"""Every pass spec of the streaming wing conforms to the typed protocol of
:mod:`calcheck._typing`: a :class:`~calcheck._typing.PassSpec` whose ``new()`` makes a
:class:`~calcheck._typing.PassState` (``update`` and ``merge``, typed without ``Any``).

``mypy --strict`` checks :func:`every_spec`'s return, which lists one of each; nothing calls it
(``tests/test_architecture.py::test_every_pass_spec_conforms_to_the_protocol`` imports this
module and lists the specs it finds against it).  A new spec goes into the list; the figures'
pass (:class:`calcheck.figures.stream.SpreadSpec`, a floor above) is checked there, by
``PASS_SPECS`` and :func:`~calcheck.figures.stream.as_pass`.
"""

from __future__ import annotations

from calcheck._typing import PassSpec, PassState
from calcheck.streaming.classwise import ClasswiseSpec
from calcheck.streaming.engine import StateSpec
from calcheck.streaming.groups import GroupedSpec
from calcheck.streaming.heldrows import SortedRowsSpec
from calcheck.streaming.prospect import HeldCellsSpec
from calcheck.streaming.residuals import ResidualsSpec
from calcheck.streaming.rowpass import RowPassSpec
from calcheck.streaming.rowtests import CoxSpec, DistinctSpec
from calcheck.streaming.segments import CellSpec, ScanSpec
from calcheck.streaming.select import SelectSpec
from calcheck.streaming.variables import BinSpec, RankSpec
from calcheck.streaming.views import ViewsSpec
from calcheck.streaming.weighted import (
    BinsSpec,
    DeviationSpec,
    FirstSpec,
    GroupedFirstSpec,
    HeldRowsSpec,
    MassPassSpec,
    SandwichSpec,
    TcalSpec,
)
from calcheck.streaming.weighted_variables import MassBinsSpec, MassScanSpec

SPECS = (ClasswiseSpec, StateSpec, GroupedSpec, SortedRowsSpec, HeldCellsSpec, RowPassSpec,
         CoxSpec, DistinctSpec, CellSpec, ScanSpec, SelectSpec, BinSpec, RankSpec, ViewsSpec,
         FirstSpec, MassPassSpec, BinsSpec, DeviationSpec, SandwichSpec, GroupedFirstSpec,
         TcalSpec, HeldRowsSpec, ResidualsSpec, MassScanSpec, MassBinsSpec)


def every_spec(a: ClasswiseSpec, b: StateSpec, c: GroupedSpec, d: SortedRowsSpec,
               e: HeldCellsSpec, g: RowPassSpec, h: CoxSpec, i: DistinctSpec, j: CellSpec,
               k: ScanSpec, m: SelectSpec, o: BinSpec, p: RankSpec, q: ViewsSpec,
               r: FirstSpec, s: MassPassSpec, t: BinsSpec, u: DeviationSpec,
               v: SandwichSpec, w: GroupedFirstSpec, x: TcalSpec, y: HeldRowsSpec,
               z: ResidualsSpec, z1: MassScanSpec, z2: MassBinsSpec
               ) -> tuple[PassSpec[PassState], ...]:
    """One of each spec, as the protocol (mypy checks every element's conformance)."""
    return (a, b, c, d, e, g, h, i, j, k, m, o, p, q, r, s, t, u, v, w, x, y, z, z1, z2)
