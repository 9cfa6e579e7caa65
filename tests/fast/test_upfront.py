"""KV reserved up front (``contiguous-max``, ``contiguous-exact``; sim/fast/upfront.py) on
the fast core gives the general engine's results.

The comparison of tests/fast/test_equivalence.py (every step column, per-request time, ITL
sample, counter, hook log) on the shipped "why PagedAttention" scenario with each
reservation policy under vllm, vllm-priority and orca, synchronous and async, open and
closed loops; a pool of one reservation where the second request waits for the first's
finish; and a hypothesis property over random knobs and bursts.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.engine.requests import RequestSpecs
from tests.fast.equivalence import prepared, same_random, same_runs, same_scenario
from tests.fast.test_priority import with_priorities
from tests.fast.test_properties import knobs, requests

SCENARIO = "contiguous-vs-paged"


@pytest.mark.parametrize("overrides", [
    (),
    ("kv.name=contiguous-exact",),
    ("scheduler=orca",),
    ("scheduler=orca", "kv.name=contiguous-exact", "engine.async_scheduling=true"),
    ("scheduler=vllm-priority",),
    ("workload.arrival={process: closed, concurrency: 16}",),
    ("engine.scheduler_reserve_full_isl=false", "kv.watermark=0.05"),
])
def test_the_shipped_scenario(overrides):
    a, b = same_scenario(SCENARIO, "workload.num_requests=150", *overrides)
    assert b.core == "fast"
    assert a.num_preemptions.sum() == 0  # a reservation never grows: nobody is preempted
    # 4,096 usable blocks hold 8 reservations of max_model_len (512 blocks) at once; 7 when
    # admissions leave a 5 % watermark (204 blocks) free
    if "kv.name=contiguous-exact" not in overrides:
        most = 7 if "kv.watermark=0.05" in overrides else 8
        assert a.recorder.steps()["num_running"].max() == most


@pytest.mark.parametrize("kv", ["contiguous-max", "contiguous-exact"])
def test_one_reservation_at_a_time(kv):
    # 32 usable blocks of 16 tokens; contiguous-max reserves max_model_len 512 = 32 blocks,
    # contiguous-exact 100 + 20 tokens = 8 blocks: with max the second request waits for
    # the first's finish (its blocks freed at that step's end), with exact both run
    r, _ = prepared(None, f"kv.name={kv}", "engine.block_size=16", "engine.max_model_len=512",
                    "engine.num_gpu_blocks_override=33", "engine.async_scheduling=false")
    specs = RequestSpecs.from_arrays([0.0, 0.001], [100, 100], [20, 20])
    a, _ = same_runs(r, specs)
    first, finish = a.recorder.first_scheduled_s, a.recorder.finish_s
    if kv == "contiguous-max":
        assert first[1] >= finish[0]
    else:
        assert first[1] < finish[0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), requests(), st.sampled_from(["contiguous-max", "contiguous-exact"]),
       st.sampled_from(["vllm", "vllm-priority", "orca"]), st.booleans())
def test_reservations_on_the_fast_core_equal_the_general_engine(sets, specs, kv, sched,
                                                                 async_):
    sets = (*sets, f"kv.name={kv}", f"scheduler={sched}",
            f"engine.async_scheduling={str(async_).lower()}")
    if sched == "vllm-priority":
        specs = with_priorities(specs, np.arange(len(specs)) % 3)
    same_random(sets, specs)
