"""The terminal side of a CLI run: whether the terminal takes colour, boxes and progress
bars, and the progress bars the engines report to (rich, imported when a bar first shows)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any


def dumb_terminal() -> bool:
    """TERM=dumb: a terminal that shows no colour, no box drawing and no progress bar."""
    return os.environ.get("TERM", "") == "dumb"


class ProgressBar:
    """A progress bar on stderr, shown only on a TTY and only once its work has taken a
    second: from the first report on, a timer shows it then even when the next report is
    long in coming (one slow step), and rich keeps its clock running."""

    def __init__(self, label: str) -> None:
        self.label, self.start = label, time.monotonic()
        self.bar: Any = None
        self.task: Any = None
        self.done, self.total = 0, 0
        self.lock = threading.Lock()
        self.timer: Any = None
        self.closed = False

    def __call__(self, done: int, total: int) -> None:
        with self.lock:
            self.done, self.total = done, total
            if self.bar is not None:
                self.bar.update(self.task, completed=done, total=total)
                return
            wait = 1.0 - (time.monotonic() - self.start)
            if wait > 0:
                if self.timer is None:
                    self.timer = threading.Timer(wait, self._show)
                    self.timer.daemon = True
                    self.timer.start()
                return
        self._show()

    def _show(self) -> None:
        with self.lock:
            if self.closed or self.bar is not None:
                return
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=self.total, completed=self.done)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            if self.timer is not None:
                self.timer.cancel()
            if self.bar is not None:
                self.bar.stop()


class Bars:
    """The progress bars of one run (none when stderr is not a terminal or with -q)."""

    def __init__(self, quiet: bool) -> None:
        self.on = sys.stderr.isatty() and not quiet and not dumb_terminal()
        self.bars: list[ProgressBar] = []

    def __call__(self, label: str) -> Callable[[int, int], None] | None:
        if not self.on:
            return None
        bar = ProgressBar(label)
        self.bars.append(bar)
        return bar

    def close(self) -> None:
        for b in self.bars:
            b.close()
