"""``vllm-priority`` on the fast core (sim/fast/priority.py) gives the general engine's results.

The same comparison as tests/fast/test_equivalence.py (every step column, per-request time,
ITL sample, counter, hook log) with ``scheduler: vllm-priority``: shipped scenarios with and
without prefix caching, tight pools where the victim is not the tail of the running list
(and was scheduled earlier in the step: its tokens go back to the budget), priorities that
let an arrival jump the queue, a closed loop, and a hypothesis property over random knobs,
priorities and arrival bursts.
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
from sim.runner import simulate
from tests.fast.equivalence import PlanLog, prepared, same_runs, same_scenario, with_core
from tests.fast.test_properties import knobs, requests

PRIO = "scheduler=vllm-priority"
OFF = "engine.enable_prefix_caching=false"


def with_priorities(specs: RequestSpecs, priority) -> RequestSpecs:
    return dataclasses.replace(specs, priority=np.asarray(priority, dtype=np.int64))


@pytest.mark.parametrize("overrides", [
    (), (OFF,), ("workload.arrival={process: closed, concurrency: 64}",),
])
def test_default_scenario(overrides):
    a, b = same_scenario(None, PRIO, "workload.num_requests=300", *overrides)
    assert b.core == "fast"


@pytest.mark.parametrize("overrides", [(), (OFF,)])
def test_tight_pool_with_random_priorities(overrides):
    r, specs = prepared("small-kv-pressure", PRIO, "workload.num_requests=250", *overrides)
    rng = np.random.default_rng(7)
    a, _ = same_runs(r, with_priorities(specs, rng.integers(0, 4, len(specs))))
    assert a.num_preemptions.sum() > 0


@pytest.mark.parametrize("caching", ["true", "false"])
def test_a_victim_scheduled_earlier_in_the_step(caching):
    # 20 usable blocks of 16: request 0 (priority 5, least urgent; 145 prompt tokens) and request 1
    # (priority 0; 159) hold 10 each. Request 1's second decode step needs an 11th block:
    # the victim is request 0, at the head of the running list, whose token the step had
    # already granted (it goes back to the budget)
    r, _ = prepared(None, PRIO, f"engine.enable_prefix_caching={caching}",
                    "engine.block_size=16", "engine.max_model_len=256",
                    "engine.num_gpu_blocks_override=21", "engine.max_num_seqs=4")
    specs = RequestSpecs.from_arrays([0.0, 0.01], [145, 159], [40, 40], priority=[5, 0])
    a, _ = same_runs(r, specs)
    assert a.num_preemptions.tolist() == [1, 0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), requests(), st.data(), st.booleans())
def test_priority_fast_core_equals_general_engine(sets, specs, data, caching):
    prio = data.draw(st.lists(st.integers(-2, 2), min_size=len(specs), max_size=len(specs)))
    try:
        r = resolve_loaded(load_scenario(None, (*sets, PRIO,
                                               f"engine.enable_prefix_caching={caching}".lower())))
    except ConfigError:
        reject()
    same_runs(r, with_priorities(specs, prio))


def test_a_decode_run_the_pool_ends_where_it_was_first_priced():
    # found by the property above (2026-12-06): the run's first guess (k steps) was short of
    # the next arrival, and the pool then lacked a block at exactly step k, so the further
    # pricing added no step; the fast core recorded one start too many (a run of 38 starts
    # and 37 durations) and failed where the general engine ran its 298 steps
    sets = ("engine.block_size=32", "engine.max_model_len=256", "engine.max_num_seqs=5",
            "engine.max_num_batched_tokens=902", "engine.enable_chunked_prefill=false",
            "engine.num_gpu_blocks_override=17", "engine.long_prefill_token_threshold=0",
            "engine.long_prefill_token_threshold_adaptive=false",
            "engine.scheduler_reserve_full_isl=false", "kv.watermark=0.0",
            "cost={name: linear, base_ms: 2, prefill_token_ms: 0.05, decode_seq_ms: 0.1, "
            "context_token_ms: 0.001}", "horizon_s=1.0", "engine.enable_prefix_caching=false",
            PRIO)
    arrival = [0.0] + [0.140625] * 9 + [0.141625] * 2 + [0.5] * 8 + [0.625] * 10 + [1.0] * 18
    prompt = [252, 54, 1, 242, 1, 1, 1, 148, 1, 1, 130, 184, 1, 1, 1, 1, 96, 1, 1, 93, 1, 1,
              1, 126, 1, 1, 244, 1, 1, 79] + [1] * 18
    output = [1, 202, 1, 10, 1, 1, 1, 77, 1, 1, 126, 72, 1, 1, 1, 1, 49, 1, 1, 5, 1, 3, 1,
              94, 1, 1, 1, 1, 1, 51] + [1] * 18
    prio = [0] * 14 + [-1, -1] + [0] * 6 + [1, -1, 0, 0, -1, -1, -1, -1] + [0] * 18
    r = resolve_loaded(load_scenario(None, sets))
    a, b = same_runs(r, with_priorities(RequestSpecs.from_arrays(arrival, prompt, output),
                                        prio))
    assert a.recorder.num_steps == b.recorder.num_steps == 298


def test_the_long_prefill_cap_is_taken_once_a_step():
    # found by the property above (2026-12-07): async, adaptive cap 878 // (running +
    # waiting). Request 7 finished in the step in flight and is still listed (vLLM's
    # running list until the update); the running pass preempts it for blocks, which
    # shrinks the list by one. vLLM takes the cap once before its passes (scheduler.py
    # 640-655): every prefill of that step gets 31 tokens; the general engine took 32 from
    # the preemption on (878 // 27), the fast core 31
    sets = ("engine.block_size=16", "engine.max_model_len=512", "engine.max_num_seqs=9",
            "engine.max_num_batched_tokens=878", "engine.enable_chunked_prefill=false",
            "engine.num_gpu_blocks_override=69", "engine.long_prefill_token_threshold=16",
            "engine.long_prefill_token_threshold_adaptive=true",
            "engine.scheduler_reserve_full_isl=false", "kv.watermark=0.05",
            "cost={name: linear, base_ms: 0.5, prefill_token_ms: 0.001, decode_seq_ms: 0, "
            "context_token_ms: 0}", "engine.enable_prefix_caching=false", PRIO)
    arrival = [0.79878642] * 17 + [0.79978642] * 8 + [0.81878642] * 7
    prompt = [386, 417, 193, 258, 171, 46, 306, 169, 24, 67, 368, 354, 206, 283, 129, 373,
              125, 170, 322, 299, 74, 213, 159, 521, 347, 84, 215, 113, 269, 223, 511, 130]
    output = [55, 194, 2, 71, 181, 3, 200, 91, 2, 247, 140, 217, 173, 258, 100, 84, 2, 50,
              133, 59, 300, 297, 143, 92, 165, 115, 178, 64, 130, 249, 36, 1]
    r = resolve_loaded(load_scenario(None, sets))
    log = PlanLog()
    same_runs(r, RequestSpecs.from_arrays(arrival, prompt, output))  # the cores agree
    simulate(with_core(r, "general"), RequestSpecs.from_arrays(arrival, prompt, output),
             on_plan=log)
    assert log.rows[406]["num_tokens"] == [1, 31, 31, 31, 31, 31, 31]
