"""A stand-in for :class:`calcheck.streaming.engine.StreamSource` over arrays: the streaming
wing's computations run on it in tests (it meets the runner's ``Source`` protocol)."""

from __future__ import annotations

from typing import Any

from calcheck._typing import IntArray, PassSpec, S
from calcheck.tuning import DEFAULT, Tuning


class ArraySource:
    """Every pass folds the rows split into partitions at ``cuts`` (one state per partition,
    merged in reverse order, as a cluster may), with row ids = positions.
    ``extra`` holds the per-row values a pass asks for beyond (scores, labels); ``tuning`` the
    knobs its computations read (:class:`calcheck.tuning.Tuning`); ``file_passes`` counts the
    passes, as a file's source does."""

    def __init__(self, scores: Any, labels: Any, cuts: Any = (), *extra: Any,
                 tuning: Tuning = DEFAULT) -> None:
        self.scores, self.labels, self.extra = scores, labels, extra
        self.tuning = tuning
        n = len(scores)
        self.cuts = [0, *sorted({int(c) for c in cuts if 0 < int(c) < n}), n]
        self.file_passes = 0
        self.engine = "stream"

    def run(self, spec: PassSpec[S], labels: IntArray | None = None) -> tuple[S, None]:
        self.file_passes += 1
        parts = []
        for a, b in zip(self.cuts[:-1], self.cuts[1:]):
            st = spec.new()
            st.update(self.scores[a:b], self.labels[a:b], a, *(x[a:b] for x in self.extra))
            parts.append(st)
        out = parts[-1]
        for p in reversed(parts[:-1]):
            out = out.merge(p)
        return out, None

    def id_bound(self, n: int) -> int:
        return n
