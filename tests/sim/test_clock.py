"""The integer-nanosecond clock: arrivals given in decimal land exactly on step starts."""

from __future__ import annotations

import numpy as np

from sim.cost.linear import LinearParams
from sim.engine.clock import to_ns, to_s
from tests.sim.helpers import run

# 4.5 ms per step + 0.1 ms per prefill token or decode request: r0's 128-token prefill takes
# 17.3 ms, then each of its lone decodes 4.6 ms, so decode step j starts at 0.0173 + 0.0046 j
COST = LinearParams(base_ms=4.5, prefill_token_ms=0.1, decode_seq_ms=0.1, context_token_ms=0)


def test_to_ns_rounds_once_and_back():
    assert to_ns([0.1772, 0.018000000000000002, 1e-10]).tolist() == [177_200_000, 18_000_000, 0]
    assert to_s(np.array([177_200_000])).tolist() == [0.1772]


def test_groups_arriving_exactly_on_decimal_step_starts_join_those_steps():
    # Steps start at 0.1001 s (0.0173 + 18 x 0.0046) and, later, at 0.2021, 0.3041 and
    # 0.4015 s. A float running sum of the step durations falls short of each of them
    # (0.10009999999999994, ...), so a float clock started those steps an ulp before the
    # groups arrived and left them out; with integer nanoseconds each group joins the step
    # that starts the moment it arrives.
    groups = [0.1001, 0.2021, 0.3041, 0.4015]
    arrival = [0.0] + [g for g in groups for _ in range(4)]
    sim = run(arrival, [128] + [40, 41, 42, 43] * 4, [300] + [6, 7, 8, 9] * 4, cost=COST)
    starts = [s[0] for s in sim.steps]
    assert all(g in starts for g in groups)
    first = sim.recorder.first_scheduled_s
    assert first[1:].tolist() == [g for g in groups for _ in range(4)]
    float_clock = np.cumsum(sim.recorder.steps()["duration_s"])[:-1].tolist()
    early = [t for t in float_clock if any(0 < g - t < 1e-9 for g in groups)]
    assert len(early) == 4  # the float running sum reaches every group's step an ulp early
