"""Time one operation: warm-up calls dropped, then ``repeats`` timed calls.

``cuda``: CUDA events around each call (device time), with the L2 cache flushed before
every timed call (a 256 MiB write, as ``triton.testing.do_bench`` does) because in a real
step each layer's weights and KV pages arrive cold. ``cpu``: the CPU-time clock of the
calling thread around each call (``time.thread_time``; the profiler runs torch with one
thread, so the op runs in this thread): on a shared CI machine a wall clock would also
count the time the OS gave the core to other processes, which for ops longer than a
scheduler slice is most of the reading. The CPU caches are flushed before every timed call
too (a 64 MiB write, twice the last-level cache of the CI machine, untimed): a small GEMM
timed hot in a loop runs 2-3x faster than the same GEMM inside a model step.
``wall=True`` times host wall clock (``time.perf_counter``) on either device,
synchronising after the call (the empty step).

Nothing here touches CUDA unless ``device == "cuda"``: torch.cuda is only used inside the
cuda branches, so the module imports and runs on machines without a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

_FLUSH_BYTES = 256 << 20
_flush_buf = None


@dataclass(frozen=True)
class Timing:
    """Summary of the timed calls (milliseconds)."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    repeats: int


def summarize(samples_ms: np.ndarray) -> Timing:
    s = np.asarray(samples_ms, dtype=np.float64)
    return Timing(float(np.median(s)), float(np.percentile(s, 10)),
                  float(np.percentile(s, 90)), len(s))


def _flush_l2() -> None:
    import torch

    global _flush_buf
    if _flush_buf is None:
        _flush_buf = torch.empty(_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    _flush_buf.zero_()


def _cuda_samples(fn: Callable[[], object], repeats: int) -> np.ndarray:
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for s, e in zip(starts, ends):
        _flush_l2()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return np.array([s.elapsed_time(e) for s, e in zip(starts, ends)])


_CPU_FLUSH_BYTES = 64 << 20
_cpu_flush_buf = None


def _flush_cpu_caches() -> None:
    import torch

    global _cpu_flush_buf
    if _cpu_flush_buf is None:
        _cpu_flush_buf = torch.empty(_CPU_FLUSH_BYTES, dtype=torch.int8)
    _cpu_flush_buf.fill_(1)


def _clock_samples(fn: Callable[[], object], repeats: int, sync: Callable[[], None],
                   clock: Callable[[], float], flush: Callable[[], None] | None = None
                   ) -> np.ndarray:
    out = np.empty(repeats)
    for i in range(repeats):
        if flush is not None:
            flush()
        sync()
        t0 = clock()
        fn()
        sync()
        out[i] = (clock() - t0) * 1e3
    return out


def measure(fn: Callable[[], object], device: str, *, warmup: int = 3, repeats: int = 10,
            wall: bool = False) -> Timing:
    """Median and spread of ``repeats`` calls of ``fn`` after ``warmup`` untimed calls."""
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device must be cuda or cpu, not {device!r}")
    sync: Callable[[], None] = lambda: None  # noqa: E731
    if device == "cuda":
        import torch

        sync = torch.cuda.synchronize
    for _ in range(warmup):
        fn()
    sync()
    if device == "cuda" and not wall:
        return summarize(_cuda_samples(fn, repeats))
    clock = time.perf_counter if wall else time.thread_time
    flush = _flush_cpu_caches if device == "cpu" and not wall else None
    return summarize(_clock_samples(fn, repeats, sync, clock, flush))
