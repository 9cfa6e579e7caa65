"""vLLM v0's ``prefill-first`` and Sarathi-Serve's ``sarathi`` on the fast core
(sim/fast/v0.py, prefill_first.py, sarathi.py) give the general engine's results.

The comparison of tests/fast/test_equivalence.py (every step column, per-request time, ITL
sample, counter, hook log) on shipped scenarios (sarathi with several chunk sizes, so that
prompts are split with one token left, which v0 still serves in the prefill pass), tight
pools where v0's can_append_slot preempts the newest request (synchronous, async, closed
loop); a hand-computed case for each policy; and a hypothesis property over random knobs,
chunk sizes and bursts.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.engine.requests import RequestSpecs
from tests.fast.equivalence import prepared, same_random, same_runs, same_scenario
from tests.fast.test_properties import knobs, requests

PF = "scheduler=prefill-first"
SA = "scheduler=sarathi"
STEP_10MS = ("cost={name: linear, base_ms: 10, prefill_token_ms: 0, decode_seq_ms: 0, "
             "context_token_ms: 0}")


def chunk(n: int) -> str:
    return f"scheduler={{name: sarathi, chunk_size: {n}}}"


@pytest.mark.parametrize("sched", [PF, SA, chunk(100)])
@pytest.mark.parametrize("scenario,overrides,preempts", [
    (None, ("workload.num_requests=300",), False),
    (None, ("workload.num_requests=300", "engine.async_scheduling=true"), False),
    ("chunked-vs-prefill-first", ("engine.long_prefill_token_threshold=0",), False),
    ("small-kv-pressure", ("workload.num_requests=250",), True),
    ("small-kv-pressure", ("workload.num_requests=250", "engine.async_scheduling=true"), True),
    ("small-kv-pressure", ("workload.num_requests=250",
                           "workload.arrival={process: closed, concurrency: 40}"), True),
])
def test_shipped_scenarios(sched, scenario, overrides, preempts):
    a, b = same_scenario(scenario, sched, *overrides)
    assert b.core == "fast"
    assert (a.num_preemptions.sum() > 0) == preempts


def test_prefill_first_a_prefill_step_makes_the_decodes_wait():
    # 10 ms a step whatever it holds. Request 0 (8 prompt tokens, 3 output) prefills in
    # [0, 10 ms); request 1 arrives at 5 ms and is admitted alone in [10, 20 ms) while
    # request 0 waits; both decode in [20, 30 ms) (request 1's last token), request 0's last
    # in [30, 40 ms). Its gap across the prefill step is 20 ms.
    r, _ = prepared(None, PF, "engine.async_scheduling=false", STEP_10MS)
    specs = RequestSpecs.from_arrays([0.0, 0.005], [8, 8], [3, 2])
    a, _ = same_runs(r, specs)
    assert list(a.recorder.first_token_s) == pytest.approx([0.01, 0.02])
    assert list(a.recorder.finish_s) == pytest.approx([0.04, 0.03])
    assert list(a.recorder.max_itl_s) == pytest.approx([0.02, 0.01])


def test_sarathi_decodes_first_then_the_rest_of_a_prompt():
    # a budget of 8 tokens a step, 10 ms a step. Request 0 (4 prompt tokens, 3 output)
    # prefills in [0, 10 ms). Request 1 (8 prompt tokens, 1 output) arrives at 5 ms: in
    # [10, 20 ms) request 0 decodes first and request 1 computes the 7 tokens left of the
    # budget; in [20, 30 ms) request 0 decodes its last token and request 1 its prompt's
    # last token (v0 still counts it prefilling), which samples its only output token.
    r, _ = prepared(None, chunk(8), "engine.async_scheduling=false", STEP_10MS)
    specs = RequestSpecs.from_arrays([0.0, 0.005], [4, 8], [3, 1])
    a, _ = same_runs(r, specs)
    assert list(a.recorder.first_token_s) == pytest.approx([0.01, 0.03])
    assert list(a.recorder.finish_s) == pytest.approx([0.03, 0.03])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), requests(), st.sampled_from([PF, chunk(16), chunk(64), chunk(100), SA]),
       st.booleans())
def test_v0_policies_on_the_fast_core_equal_the_general_engine(sets, specs, sched, async_):
    same_random((*sets, sched, "engine.enable_prefix_caching=false",
                 f"engine.async_scheduling={str(async_).lower()}"), specs)
