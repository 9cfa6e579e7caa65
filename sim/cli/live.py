"""Live mode on the command line: ``--live`` / ``--device`` and the live progress bar."""

from __future__ import annotations

import time
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from sim.config.load import LoadedScenario

DEVICES = ("cpu", "cuda")


def live_sets(scenario, live: bool, device: str | None) -> tuple[str, ...]:
    """``--set`` overrides, applied before the user's, for ``--live`` / ``--device``: the
    cost becomes ``{name: live}`` unless the scenario already runs live (its live knobs are
    kept), so ``--live --set cost.layers=4`` works on any scenario."""
    from sim.config.load import load_scenario
    from traces.errors import InputError

    if device is not None and device not in DEVICES:
        raise InputError(f"--device {device!r}: expected cpu or cuda")
    if not live and device is None:
        return ()
    already = is_live(load_scenario(scenario))
    if not live and not already:
        raise InputError("--device applies to live runs: add --live")
    out = () if already else ("cost={name: live}",)
    return out + ((f"cost.device={device}",) if device is not None else ())


def out_name_parts(live: bool, device: str | None) -> tuple[str, ...]:
    """What ``--live`` / ``--device`` add to a default results folder name."""
    return (("live",) if live else ()) + ((f"device={device}",) if device else ())


def is_live(loaded: LoadedScenario) -> bool:
    cost = loaded.scenario.cost
    return cost is not None and cost.name == "live"


class LiveBar:
    """Steps done, tokens computed of all to compute, elapsed and estimated time left."""

    def __init__(self, progress: Progress, label: str, unit: str):
        self.p, self.unit = progress, unit
        self.task = progress.add_task(label, total=1, steps="", unit=unit)  # total: at step 1
        self._last = 0.0

    def __call__(self, steps: int, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last < 0.2 and done < total:
            return
        self._last = now
        shown = f"{steps:,} steps" if self.unit == "tokens" else ""
        self.p.update(self.task, completed=done, total=total, steps=shown)


@contextmanager
def live_bar(console: Console, quiet: bool, label: str = "live", unit: str = "tokens"):
    """A progress bar for live steps (``unit`` tokens) or profiled shapes (``shapes``)."""
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[steps]}"),
               TextColumn("{task.completed:,.0f}/{task.total:,.0f} {task.fields[unit]}"),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True, disable=quiet) as progress:
        yield LiveBar(progress, label, unit)


def live_executor(resolved, progress):
    """The scenario's live cost model, reporting to ``progress``."""
    from sim.live.cost import LiveCost

    sc = resolved.scenario
    return LiveCost(resolved.model, resolved.gpu, resolved.tp, sc.cost.params,
                    resolved=resolved, progress=progress)
