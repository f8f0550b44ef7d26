"""Iterating in a background thread, a bounded number of items ahead."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any


def prefetch(items: Iterable[Any], depth: int = 2) -> Iterator[Any]:
    """Iterate ``items`` in a background thread, at most ``depth`` ahead: Arrow decodes the next
    row group (or the bootstrap draws the next replicate) while the caller computes on this
    one, and memory stays bounded.  An exception in the producer is raised in the caller."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(entry: tuple[bool, Any]) -> bool:
        """Hand ``entry`` to the consumer unless it has stopped listening."""
        while not stop.is_set():
            try:
                q.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
            put((True, done))
        except BaseException as exc:                      # handed to the consumer
            put((False, exc))

    th = threading.Thread(target=produce, daemon=True)
    th.start()
    try:
        while True:
            ok, item = q.get()
            if not ok:
                raise item
            if item is done:
                return
            yield item
    finally:
        stop.set()
        th.join()                     # never leave a producing thread behind at exit
