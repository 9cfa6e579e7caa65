"""Step clocks: how long one live step took, and how much of it the layers took.

* ``CudaClock``: CUDA events recorded when the step starts (before its inputs are built
  and copied), around the layers and after sampling; the step ends with a synchronise
  (the sampled tokens go back to the host, as in a serving engine), so the events measure
  the device timeline of the step including any gaps while the host launched work.
* ``CpuClock``: torch runs ``threads`` threads (1: every op runs in the calling thread)
  with the thread pinned to one core. It reads both the monotonic wall clock
  (``perf_counter``) and the thread's CPU time (``thread_time``) and reports the chosen
  one (``clock``); both are recorded per step. On a shared machine the wall clock also
  counts time the OS gave the core to other processes; the CPU time does not (NOTES.md
  has the measurements behind the default, ``thread``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from traces.errors import InputError


@dataclass(frozen=True)
class StepTiming:
    step_s: float  # the step's duration by the chosen clock (s)
    layers_s: float  # of which the transformer blocks (s)
    wall_s: float  # wall clock (s; CUDA: the events' elapsed time)
    cpu_s: float  # the thread's CPU time (s; CUDA: host CPU time of the step)


def _cores(cores: set[int]) -> str:
    """``{0, 1, 2, 5}`` as ``0-2, 5``."""
    runs, out = sorted(cores), []
    start = prev = runs[0]
    for c in [*runs[1:], None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        out.append(f"{start}-{prev}" if prev > start else str(start))
        if c is not None:
            start = prev = c
    return ", ".join(out)


class CpuClock:
    def __init__(self, clock: str = "thread", threads: int = 1, core: int | None = None):
        self.use_thread = clock in ("thread", "auto")
        self.threads, self.core = threads, core
        self._saved = None
        self._marks: dict[str, tuple[float, float]] = {}

    @property
    def name(self) -> str:
        return "thread" if self.use_thread else "wall"

    def __enter__(self):
        import torch

        allowed = os.sched_getaffinity(0)
        core = self.core if self.core is not None else max(allowed)
        if core not in allowed:
            raise InputError(f"cost.params.cpu_core {core}: not a core this process may run "
                             f"on (allowed: {_cores(allowed)})")
        self.core = core
        self._saved = (torch.get_num_threads(), allowed)
        torch.set_num_threads(self.threads)
        os.sched_setaffinity(0, {core})  # 0: the calling thread
        return self

    def __exit__(self, *exc) -> None:
        import torch

        threads, allowed = self._saved
        torch.set_num_threads(threads)
        os.sched_setaffinity(0, allowed)

    @staticmethod
    def _now() -> tuple[float, float]:
        return time.perf_counter(), time.thread_time()

    def start(self) -> None:
        self._marks = {"start": self._now()}

    def mark(self, name: str) -> None:
        self._marks[name] = self._now()

    def stop(self) -> StepTiming:
        end = self._now()
        m = self._marks
        i = 1 if self.use_thread else 0
        lay = m.get("layers_end", end)[i] - m.get("layers_start", end)[i]
        wall, cpu = end[0] - m["start"][0], end[1] - m["start"][1]
        return StepTiming(cpu if self.use_thread else wall, lay, wall, cpu)


class CudaClock:
    name = "cuda-events"

    def __init__(self):
        import torch

        self.torch = torch
        self._events = {n: torch.cuda.Event(enable_timing=True)
                        for n in ("start", "layers_start", "layers_end", "end")}
        self._cpu0 = 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def start(self) -> None:
        self._cpu0 = time.thread_time()
        self._events["start"].record()

    def mark(self, name: str) -> None:
        self._events[name].record()

    def stop(self) -> StepTiming:
        ev = self._events
        ev["end"].record()
        ev["end"].synchronize()
        step = ev["start"].elapsed_time(ev["end"]) * 1e-3
        layers = ev["layers_start"].elapsed_time(ev["layers_end"]) * 1e-3
        return StepTiming(step, layers, step, time.thread_time() - self._cpu0)


def make_clock(device: str, clock: str, threads: int, core: int | None):
    return CudaClock() if device == "cuda" else CpuClock(clock, threads, core)
