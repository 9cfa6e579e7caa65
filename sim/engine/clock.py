"""The simulated clock's unit: integer nanoseconds.

Every time the engine compares (an arrival against a step start, a decode run
against the next arrival) is an integer count of nanoseconds. Trace arrival
times and step durations are rounded to the nearest nanosecond once, where they
enter the engine; after that, time only advances by integer additions, so a step
that starts at 0.1772 s starts at exactly 177_200_000 ns, and a request arriving
at 0.1772 s (177_200_000 ns) joins it. A running sum of float seconds cannot
promise that: 0.0108 plus 37 steps of 0.0045 sums to 0.17730000000000007, which
is after a request arriving at 0.1773, so that request would miss the step.

Seconds (float) are what the rest of servesim reports; they are derived from the
integer clock, never accumulated.
"""

from __future__ import annotations

import numpy as np

NS_PER_S = 1_000_000_000
MAX_NS = 1 << 62  # far beyond any run (146 years); keeps sums inside int64


def to_ns(seconds) -> np.ndarray:
    """Seconds (float, array-like) to the nearest integer nanosecond (int64 array)."""
    s = np.asarray(seconds, dtype=np.float64)
    return np.rint(np.minimum(s, MAX_NS / NS_PER_S) * NS_PER_S).astype(np.int64)


def ns(seconds: float) -> int:
    """One time in seconds to the nearest integer nanosecond."""
    return int(to_ns(seconds))


def to_s(nanoseconds) -> np.ndarray:
    """Nanoseconds (integer, array-like) to seconds (float64)."""
    return np.asarray(nanoseconds, dtype=np.int64) / NS_PER_S
