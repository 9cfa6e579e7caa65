"""Offered load as a planner reads it: mean rate and busiest-minute rate.

Real traffic is not Poisson at the minute scale: the Azure 2023 conversation trace's
busiest minute (any 60 s window) carries 8.70 req/s against a 5.53 req/s mean (1.57x). A capacity
found with smooth synthetic arrivals holds for the mean, not for the peak minutes, so
``stand_in_warning`` says so whenever generated arrivals stand in for a trace whose
minutes are that uneven.
"""

from __future__ import annotations

import math

import numpy as np

from sim.config.load import LoadedScenario
from traces.errors import InputError
from traces.spec import WorkloadSpec
from traces.workload import build_workload

MINUTE_S = 60.0
PEAK_WARN_RATIO = 1.2  # busiest minute / mean above this: Poisson misstates the load

# Embedded length mixes whose source trace has timestamps: (what, busiest minute / mean).
# Azure conv: 522 requests in its busiest 60 s window = 8.70 req/s / 5.5301 req/s mean
# (AzurePublicDataset AzureLLMInferenceTrace_conv.csv, CC-BY 4.0; Patel et al., Splitwise,
# ISCA 2024). Fixed whole minutes from the first arrival gave 8.45 (1.53x).
MIX_SOURCES = {"azure_conv_like": ("the Azure 2023 conversation trace", 8.70 / 5.5301)}


def busiest_window(arrival_s, window_s: float = MINUTE_S) -> int:
    """Most arrivals in any ``window_s`` window [t, t + window_s) sliding over the arrivals
    (a busiest window can always start at an arrival, so those are the windows tried): for
    each arrival, the first one at or after it + window_s, found for all at once over the
    sorted times (the two-pointer pass, vectorized)."""
    t = np.sort(np.asarray(arrival_s, dtype=np.float64))
    if not len(t):
        return 0
    ends = np.searchsorted(t, t + window_s, side="left")
    return int((ends - np.arange(len(t))).max())


def offered_rates(arrival_s) -> tuple[float, float]:
    """(mean rate, busiest-minute rate) in requests/s.

    mean = (n - 1) / span. The busiest minute is the most arrivals in any 60 s window
    sliding over the arrivals (``busiest_window``), / 60: fixed whole minutes from the
    first arrival would split a burst across two of them and could report less when the
    load grows. A span under a minute has no whole minute and reports the mean for both.
    """
    t = np.asarray(arrival_s, dtype=np.float64)
    if len(t) < 2 or t[-1] <= t[0]:
        return math.nan, math.nan
    span = float(t[-1] - t[0])
    mean = (len(t) - 1) / span
    if span < MINUTE_S:
        return mean, mean
    return mean, busiest_window(t) / MINUTE_S


def _trace_peak_ratio(loaded: LoadedScenario) -> float | None:
    """The replayed trace's busiest minute / its mean, or None if it has no timestamps."""
    w = loaded.scenario.workload
    spec = WorkloadSpec(trace=w.trace, format=w.format, spread_s=w.spread_s, window_s=w.window_s)
    try:
        trace = build_workload(spec, seed=loaded.scenario.seed, base_dir=loaded.base_dir)
    except InputError:  # a lengths-only file: no arrival times to compare with
        return None
    mean, peak = offered_rates(trace.arrival_s)
    return peak / mean if mean and not math.isnan(mean) else None


def stand_in_warning(loaded: LoadedScenario) -> str | None:
    """One line when generated arrivals stand in for a trace with uneven minutes."""
    w = loaded.scenario.workload
    if w.mix is not None or w.arrival.process == "replay":
        return None
    if w.trace is not None:
        what, ratio = f"trace {w.trace}", _trace_peak_ratio(loaded)
    elif w.lengths.dist in MIX_SOURCES:
        what, ratio = MIX_SOURCES[w.lengths.dist]
    else:
        return None
    if ratio is None or ratio <= PEAK_WARN_RATIO:
        return None
    return (f"{loaded.source}: {w.arrival.process} arrivals stand in for {what}, whose busiest "
            f"minute runs at {ratio:.2f}x its mean rate; what smooth arrivals sustain overstates "
            f"what that traffic sustains at its peaks (replay the trace and search "
            f"rate_scale, or plan for mean capacity / {ratio:.2f})")
