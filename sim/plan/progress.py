"""A progress bar over points with an ETA, on a terminal, for work longer than a second.

The bar appears one second after the work starts (short runs print nothing extra) and
is drawn on stderr, so a piped table on stdout stays clean.
"""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

SHOW_AFTER_S = 1.0


class PointProgress:
    """``with PointProgress("sweep", total) as bar: ... bar.advance(label)``."""

    def __init__(self, what: str, total: int, *, done: int = 0, quiet: bool = False):
        console = Console(stderr=True)
        self.p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("points"), TimeElapsedColumn(), TextColumn("ETA"),
                          TimeRemainingColumn(), TextColumn("{task.fields[last]}"),
                          console=console, transient=True,
                          disable=quiet or not console.is_terminal)
        self.task = self.p.add_task(what, total=total, completed=done, last="")
        self.timer = threading.Timer(SHOW_AFTER_S, self.p.start)
        self.timer.daemon = True

    def __enter__(self) -> PointProgress:
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.cancel()
        self.p.stop()

    def advance(self, last: str = "") -> None:
        self.p.update(self.task, advance=1, last=last)

    def grow(self, total: int) -> None:
        """A search learns how many probes it needs as it goes."""
        self.p.update(self.task, total=total)
