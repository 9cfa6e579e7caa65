"""How long a generated workload runs when it gives neither num_requests nor duration_s.

A count fixed whatever the rate (the old 2,000 requests) is 33 s of traffic at 60 req/s:
too short for a queue to build or drain, yet a capacity search judged it. The default is
a duration, so a search raising the rate sends more requests, not shorter traffic:

    duration_s = max(DEFAULT_SPAN_S, DEFAULT_MIN_REQUESTS / rate)

DEFAULT_MIN_REQUESTS is `vllm bench serve --num-prompts`' default (1,000), so a slow rate
still gets the benchmark's sample; DEFAULT_SPAN_S (5 minutes) is 10 x the 30 s lifetime of
a long chat request (hundreds of output tokens at 50 ms each, behind a queue), the ratio
``sim.metrics.stability`` asks before it judges a trend. Above 3,333 req/s the span
shrinks to keep the default at DEFAULT_MAX_REQUESTS (a million requests, minutes of
simulation); ask for more with duration_s or num_requests.
"""

from __future__ import annotations

from traces.errors import TraceError

DEFAULT_MIN_REQUESTS = 1000  # requests: vllm bench serve --num-prompts' default
DEFAULT_SPAN_S = 300.0  # seconds of arrivals at least
DEFAULT_MAX_REQUESTS = 1_000_000  # requests at most, whatever the rate


def default_duration_s(rate: float) -> float:
    """Seconds of generated arrivals at ``rate`` requests/s when the workload sets no
    length (see the module docstring)."""
    return min(max(DEFAULT_SPAN_S, DEFAULT_MIN_REQUESTS / rate), DEFAULT_MAX_REQUESTS / rate)


def check_warmup(trace, warmup_s: float):
    """``trace`` unless the warm-up (``workload.warmup_s``) leaves no request to measure."""
    last = float(trace.arrival_s[-1]) if len(trace) else 0.0
    if warmup_s and warmup_s > last:
        raise TraceError(f"workload.warmup_s: {warmup_s:g} s leaves out every request (the "
                         f"last arrives at {last:,.1f} s); shorten the warm-up or send more "
                         "requests")
    return trace
