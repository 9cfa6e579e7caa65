"""Async scheduling (``engine.async_scheduling``) on the fast core gives the general engine's
results: the plan starting at a step's end sees the arrivals up to that step's start, and
a step's finishes free their KV only when the next plan is committed (no decode run while
frees are held back). The same comparison as tests/fast/test_equivalence.py, on the shipped
scenarios with each scheduler the fast core runs, and a hypothesis property.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from sim.config.load import load_scenario
from sim.config.resolve import ConfigError
from sim.engine.requests import RequestSpecs
from sim.pipeline import resolve_loaded
from tests.fast.equivalence import prepared, same_runs, same_scenario
from tests.fast.test_lanes import lanes_run
from tests.fast.test_properties import knobs, requests

ASYNC = "engine.async_scheduling=true"


@pytest.mark.parametrize("scenario,overrides", [
    (None, ("workload.num_requests=300",)),
    (None, ("workload.num_requests=300", "engine.enable_prefix_caching=false")),
    ("small-kv-pressure", ("workload.num_requests=200",)),
    (None, ("workload.num_requests=300", "scheduler=vllm-priority")),
    (None, ("workload.num_requests=300", "workload.arrival={process: closed, concurrency: 32}")),
    ("lanes", ("workload.mix.0.duration_s=8", "workload.mix.1.duration_s=8")),
    ("lanes", ("workload.mix.0.duration_s=8", "workload.mix.1.duration_s=8",
               "scheduler.interactive_kv_share=0.6", "engine.num_gpu_blocks_override=3000")),
])
def test_async_scheduling(scenario, overrides):
    a, b = same_scenario(scenario, ASYNC, *overrides)
    assert (a.core, b.core) == ("general", "fast")
    assert a.resolved.scenario.engine.async_scheduling


def test_an_arrival_during_a_step_joins_one_step_later():
    # tests/sim/test_async_scheduling.py's hand-computed case, on both cores
    r, _ = prepared(None, ASYNC, "cost={name: linear, base_ms: 10, prefill_token_ms: 1, "
                    "decode_seq_ms: 0, context_token_ms: 0}")
    a, _ = same_runs(r, RequestSpecs.from_arrays([0.0, 0.016], [8, 4], [4, 2]))
    assert a.recorder.first_scheduled_s.tolist() == [0.0, 0.028]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), requests(), st.booleans(), st.sampled_from(["vllm", "vllm-priority"]))
def test_async_fast_core_equals_general_engine(sets, specs, caching, scheduler):
    try:
        r = resolve_loaded(load_scenario(None, (
            *sets, ASYNC, f"scheduler={scheduler}",
            f"engine.enable_prefix_caching={caching}".lower())))
    except ConfigError:
        reject()
    same_runs(r, specs)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), requests(), st.data(), st.booleans())
def test_async_lanes_equal_general_engine(sets, specs, data, caching):
    lanes_run(data, (*sets, ASYNC), specs, caching=caching)
