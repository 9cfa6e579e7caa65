"""The ``lanes`` scheduler on the fast core (sim/fast/lanes.py) gives the general engine's
results.

The same comparison as tests/fast/test_equivalence.py (every step column, per-request time,
ITL sample, counter, hook log) with ``scheduler: lanes``, prefix caching off and on: the
shipped lanes scenario, no batch step cap, a large interactive KV share (batch requests
preempt each other at the share), prefixes shared within and across the lanes (physical
block counts from the tables), a closed loop, and hypothesis properties over random knobs,
lane shares, lane tags and prefix chains.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from sim.config.load import load_scenario
from sim.config.resolve import ConfigError
from sim.engine.requests import RequestSpecs
from sim.pipeline import resolve_loaded
from tests.fast.equivalence import prepared, same_runs, same_scenario
from tests.fast.test_prefix_caching import shared_requests
from tests.fast.test_properties import knobs, requests
from traces.errors import InputError

OFF = "engine.enable_prefix_caching=false"
SHORT = ("workload.mix.0.duration_s=10", "workload.mix.1.duration_s=10", OFF)
TIGHT = ("scheduler.interactive_kv_share=0.6", "engine.num_gpu_blocks_override=3000")
SHARED = ("workload.mix.0.shared_prefix={tokens: 512, num_prefixes: 3, hash_block_size: 16}",
          "workload.mix.1.shared_prefix={tokens: 1024, num_prefixes: 2, hash_block_size: 16}")


@pytest.mark.parametrize("overrides", [
    (),
    ("scheduler.batch_step_tokens=0",),
    ("scheduler.interactive_kv_share=0.5", "scheduler.interactive_seq_share=0.5"),
    ("engine.num_gpu_blocks_override=2500",),
    ("engine.max_num_batched_tokens=512", "engine.long_prefill_token_threshold=128"),
])
def test_shipped_lanes_scenario(overrides):
    a, b = same_scenario("lanes", *SHORT, *overrides)
    assert (a.core, b.core) == ("general", "fast")
    assert a.recorder.num_steps > a.recorder.num_plans > 100


def test_batch_requests_preempt_at_the_share():
    a, _ = same_scenario("lanes", *SHORT, *TIGHT)
    assert a.num_preemptions.sum() > 0 and a.counters["alloc_failures"] > 0


@pytest.mark.parametrize("overrides", [(), TIGHT, SHARED, (*SHARED, *TIGHT)])
def test_lanes_with_prefix_caching(overrides):
    a, b = same_scenario("lanes", *SHORT[:2], *overrides)
    assert b.core == "fast" and a.counters["prefix_queries"] > 0
    if overrides[:2] == SHARED:
        assert a.counters["prefix_hits"] > 0


@pytest.mark.parametrize("caching", ["true", "false"])
def test_batch_decodes_beyond_the_step_cap(caching):
    # 3 interactive and 9 batch requests decode together; a step carrying interactive work
    # lets the batch lane compute 4 tokens: 5 batch decodes fall behind in each such step
    r, _ = prepared(None, "scheduler={name: lanes, batch_step_tokens: 4}",
                    f"engine.enable_prefix_caching={caching}", "engine.max_num_seqs=16")
    lanes = ["interactive"] * 3 + ["batch"] * 9
    specs = RequestSpecs.from_arrays([0.0] * 12, [30] * 12, [40 + 3 * i for i in range(12)],
                                     lane=lanes)
    a, _ = same_runs(r, specs)
    assert (a.status == 3).all()


def with_lanes(specs: RequestSpecs, lanes) -> RequestSpecs:
    names, codes = np.unique(np.asarray(lanes, dtype=str), return_inverse=True)
    return dataclasses.replace(specs, lane=codes.astype(np.int64),
                               lane_names=tuple(str(x) for x in names))


def test_a_closed_loop_of_lanes():
    r, specs = prepared(None, "scheduler=lanes", OFF, "workload.num_requests=300",
                        "workload.arrival={process: closed, concurrency: 24}")
    lanes = np.where(np.arange(len(specs)) % 3 == 0, "interactive", "batch")
    a, _ = same_runs(r, with_lanes(specs, lanes))
    assert a.client_queue_s is not None and a.core == "general"


def lanes_run(data, sets, specs, caching: bool) -> None:
    """Both cores on ``specs`` with random lane tags and lane parameters."""
    lanes = data.draw(st.lists(st.sampled_from(["interactive", "batch"]), min_size=len(specs),
                               max_size=len(specs)))
    share = data.draw(st.sampled_from([0.0, 0.25, 0.5]))
    kv_share = data.draw(st.sampled_from([0.0, 0.25, 0.6]))
    step = data.draw(st.sampled_from([0, 4, 16, 64, 1024]))
    policy = (f"scheduler={{name: lanes, interactive_seq_share: {share}, "
              f"interactive_kv_share: {kv_share}, batch_step_tokens: {step}}}")
    try:
        r = resolve_loaded(load_scenario(None, (*sets, policy,
                                               f"engine.enable_prefix_caching={caching}".lower())))
        same_runs(r, with_lanes(specs, lanes))
    except (ConfigError, InputError):  # a share that leaves a long request no room, say
        reject()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), requests(), st.data())
def test_lanes_fast_core_equals_general_engine(sets, specs, data):
    lanes_run(data, sets, specs, caching=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), shared_requests(), st.data())
def test_lanes_with_prefix_caching_equals_general_engine(sets, specs, data):
    lanes_run(data, sets, specs, caching=True)
