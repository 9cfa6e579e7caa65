"""Bounds on workload numbers, each with its reason (shown by the config error messages).

A bound keeps a value where the simulator can represent it and a deployment could mean it:
a 30-digit count or a 1e300 s window would otherwise overflow or allocate terabytes.
"""

from __future__ import annotations

from traces.errors import TraceError

MAX_REQUESTS = 10_000_000  # requests of one workload: ~2 KB of simulator state each
MAX_TOKENS = 1 << 24  # tokens of one prompt or output (16,777,216)
MAX_TIME_S = 1e9  # seconds (31.7 years): arrival times keep sub-microsecond resolution below
TOK = {"why": "longer than any model's context window", "unit": "tokens"}
TIME = {"why": "31.7 years; the simulated clock counts integer nanoseconds", "unit": "s"}
REQ = {"why": "the simulator holds ~2 KB per request", "unit": "requests"}


def check_span(trace):
    """``trace`` unless its arrivals run past MAX_TIME_S (a 1e308 s timestamp, a huge
    window or a tiny rate_scale would leave the clock no resolution)."""
    last = float(trace.arrival_s[-1]) if len(trace) else 0.0
    if last > MAX_TIME_S:
        raise TraceError(f"{trace.source}: arrivals reach {last:.3g} s, after {MAX_TIME_S:g} s "
                         f"({TIME['why']}); window the trace or raise rate_scale")
    return trace
