"""``static`` batching on the fast core (sim/fast/static.py) gives the general engine's results.

The comparison of tests/fast/test_equivalence.py (every step column, per-request time, ITL
sample, counter, hook log) on the shipped offline scenario, batches cut short by the KV pool,
Poisson arrivals that start batches at the oldest request's deadline (synchronous and
async), a closed loop, a horizon inside a batch; a golden case of two batches; and a
hypothesis property over random knobs, batch sizes, deadlines and bursts.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.engine.requests import RequestSpecs
from tests.fast.equivalence import prepared, same_random, same_runs, same_scenario
from tests.fast.test_properties import knobs, requests

SMALL = "scheduler={name: static, batch_size: 16, max_wait_s: 0.25}"


@pytest.mark.parametrize("scenario,overrides", [
    ("static-offline", ()),
    ("static-offline", ("engine.num_gpu_blocks_override=3000",)),  # batches of 62
    ("static-offline", ("workload.arrival={process: poisson, rate: 3}", SMALL)),
    ("static-offline", ("workload.arrival={process: poisson, rate: 3}", SMALL,
                        "engine.async_scheduling=true")),
    ("static-offline", ("workload.arrival={process: closed, concurrency: 24}", SMALL)),
    (None, ("scheduler={name: static, batch_size: 8, max_wait_s: 0.0}",
            "workload.num_requests=200", "horizon_s=5")),
])
def test_shipped_scenarios(scenario, overrides):
    a, b = same_scenario(scenario, *overrides)
    assert b.core == "fast"
    assert a.num_preemptions.sum() == 0


def test_two_batches_and_a_deadline():
    # batch_size 2, max_wait_s 0.5, a 10 ms step: requests 0 and 1 (arriving at 0 and 0.1 s)
    # form a full batch at 0.1 s; request 2 (0.2 s) is alone, so its batch starts at its
    # deadline 0.7 s, after the first batch (prompt step + 2 decode steps) ended at 0.13 s
    r, _ = prepared(None, "scheduler={name: static, batch_size: 2, max_wait_s: 0.5}",
                    "engine.enable_prefix_caching=false", "engine.async_scheduling=false",
                    "cost={name: linear, base_ms: 10, prefill_token_ms: 0, decode_seq_ms: 0, "
                    "context_token_ms: 0}")
    specs = RequestSpecs.from_arrays([0.0, 0.1, 0.2], [8, 8, 8], [3, 2, 2])
    a, _ = same_runs(r, specs)
    assert list(a.recorder.first_scheduled_s) == pytest.approx([0.1, 0.1, 0.7])
    assert list(a.recorder.finish_s) == pytest.approx([0.13, 0.12, 0.72])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), requests(), st.integers(1, 12), st.sampled_from([0.0, 0.05, 0.3]),
       st.booleans())
def test_static_on_the_fast_core_equals_the_general_engine(sets, specs, size, wait, async_):
    sets = (*sets, f"scheduler={{name: static, batch_size: {size}, max_wait_s: {wait}}}",
            "engine.enable_prefix_caching=false",
            f"engine.async_scheduling={str(async_).lower()}")
    same_random(sets, specs)
