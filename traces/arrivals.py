"""Arrival processes: arrays of arrival times in seconds, first arrival at t = 0.

Every generator takes exactly one of `n` (number of requests) or `duration_s` (all arrivals in
[0, duration_s)) and a `numpy.random.Generator`; the same generator state gives the same times.
Times are t_0 = 0 and t_i = t_{i-1} + gap_i, so a run starts busy, like a replayed trace.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from traces.errors import TraceError
from traces.schema import Trace


def _positive(name: str, value: float, unit: str) -> float:
    ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise TraceError(f"{name} is {value!r}; must be a finite number > 0 ({unit})")
    return float(value)


def _count(n: int | None, duration_s: float | None) -> tuple[int | None, float | None]:
    """Validate that exactly one of n / duration_s is given."""
    if (n is None) == (duration_s is None):
        raise TraceError("give exactly one of n (requests) or duration_s (seconds)")
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise TraceError(f"n is {n!r}; must be an integer >= 1 (requests)")
        return int(n), None
    return None, _positive("duration_s", duration_s, "seconds")


def _times(
    draw_gaps: Callable[[int], np.ndarray], rate: float, n: int | None, duration_s: float | None
) -> np.ndarray:
    """Cumulate gaps from t = 0 until `n` arrivals or until `duration_s` is reached."""
    n, duration = _count(n, duration_s)
    if n is not None:
        return np.concatenate(([0.0], np.cumsum(draw_gaps(n - 1))))
    expect = rate * duration
    chunks, t = [np.zeros(1)], 0.0
    while t < duration:  # draw in chunks sized to finish in one pass almost always
        part = t + np.cumsum(draw_gaps(int(expect + 4 * math.sqrt(expect)) + 16))
        chunks.append(part)
        t = float(part[-1])
    times = np.concatenate(chunks)
    return times[times < duration]


def poisson(
    rate: float, n: int | None = None, duration_s: float | None = None, *, rng: np.random.Generator
) -> np.ndarray:
    """Poisson arrivals at `rate` req/s: exponential gaps with mean 1/rate (CV 1)."""
    rate = _positive("rate", rate, "requests per second")
    return _times(lambda k: rng.exponential(1.0 / rate, k), rate, n, duration_s)


def gamma(
    rate: float,
    cv: float,
    n: int | None = None,
    duration_s: float | None = None,
    *,
    rng: np.random.Generator,
) -> np.ndarray:
    """Gamma-renewal arrivals: gaps with mean 1/rate s and coefficient of variation `cv`.

    Shape 1/cv^2, scale cv^2/rate. cv > 1 is burstier than Poisson, cv < 1 smoother; cv == 1
    returns exactly `poisson(...)` (the same draws).
    """
    rate = _positive("rate", rate, "requests per second")
    cv = _positive("cv", cv, "std/mean of the gaps")
    if cv == 1.0:
        return poisson(rate, n, duration_s, rng=rng)
    shape, scale = 1.0 / cv**2, cv**2 / rate
    return _times(lambda k: rng.gamma(shape, scale, k), rate, n, duration_s)


def constant(
    rate: float,
    n: int | None = None,
    duration_s: float | None = None,
    *,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Evenly spaced arrivals, i / rate seconds (deterministic; `rng` is accepted and unused)."""
    rate = _positive("rate", rate, "requests per second")
    n, duration = _count(n, duration_s)
    if n is not None:
        return np.arange(n) / rate
    times = np.arange(math.ceil(duration * rate) + 1) / rate
    return times[times < duration]


def replay(
    trace: Trace, rate_scale: float = 1.0, window: tuple[float, float] | None = None
) -> Trace:
    """The trace's own arrivals, optionally windowed and sped up.

    `window` = (start_s, end_s) keeps arrivals in [start_s, end_s) of the ORIGINAL time axis,
    re-zeroed to start_s; then every time is divided by `rate_scale` (2 halves every gap, so
    the mean rate doubles).
    """
    scale = _positive("rate_scale", rate_scale, "speed-up factor")
    if window is not None:
        trace = trace.window(*window)
    return trace if scale == 1.0 else trace.with_arrivals(trace.arrival_s / scale)


def spread_buckets(trace: Trace, spread_s: float, rng: np.random.Generator) -> Trace:
    """Spread requests that share a timestamp uniformly over [t, t + spread_s).

    For traces whose timestamps are quantized (Mooncake: ~3 s buckets). The offsets of a bucket
    are sorted before being assigned, so requests keep their file order within the bucket.
    """
    spread = _positive("spread_s", spread_s, "seconds")
    t = trace.arrival_s
    bucket = np.concatenate(([0], np.cumsum(t[1:] != t[:-1])))
    offsets = rng.uniform(0.0, spread, len(t))
    # t is sorted, so buckets are contiguous runs: sorting by (bucket, offset) and assigning
    # positionally gives each bucket its own offsets in increasing order.
    offsets = offsets[np.lexsort((offsets, bucket))]
    return trace.with_arrivals(t + offsets)
