"""Wall-clock time per phase of a run (load, simulate, summarize, write).

These are the only non-deterministic numbers a run reports: they live in summary.json
under ``sim.wall_s`` and nowhere else, so everything outside that block stays identical
between two runs with the same seed. The block also names the simulation core that ran
(``core``: fast or general, sim/fast), which decides the times but not the results.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

PHASES = ("load", "simulate", "summarize", "write")


class PhaseTimer:
    """Accumulates seconds per named phase (a phase timed twice adds up)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the body of a ``with`` block as phase ``name``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def block(self) -> dict:
        """The ``sim.wall_s`` block: every phase (0 when it did not run) and the total (s)."""
        out = {p: round(self.seconds.get(p, 0.0), 6) for p in PHASES}
        out["total"] = round(sum(self.seconds.values()), 6)
        return out


def format_wall(block: dict) -> str:
    """One line for the console, e.g. ``wall time (s): load 0.12, ..., total 1.90``."""
    parts = ", ".join(f"{p} {block[p]:.3f}" for p in (*PHASES, "total"))
    core = f" ({block['core']} core)" if "core" in block else ""
    return f"wall time (s): {parts}{core}"
