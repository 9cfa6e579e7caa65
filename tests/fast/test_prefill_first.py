"""``prefill-first`` (vLLM v0's default) on the fast core (sim/fast/prefill_first.py) gives the
general engine's results.

The comparison of tests/fast/test_equivalence.py (every step column, per-request time, ITL
sample, counter, hook log) on shipped scenarios, a tight pool where v0's can_append_slot
preempts the newest request (synchronous, async, closed loop); a hand-computed case where a
prefill-only step makes a decode wait; and a hypothesis property over random knobs and
bursts.
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
from tests.fast.test_properties import knobs, requests

PF = "scheduler=prefill-first"


@pytest.mark.parametrize("scenario,overrides,preempts", [
    ("chunked-vs-prefill-first", (PF,), False),
    (None, (PF, "workload.num_requests=300"), False),
    (None, (PF, "workload.num_requests=300", "engine.async_scheduling=true"), False),
    ("small-kv-pressure", (PF, "workload.num_requests=250"), True),
    ("small-kv-pressure", (PF, "workload.num_requests=250", "engine.async_scheduling=true"),
     True),
    ("small-kv-pressure", (PF, "workload.num_requests=250",
                           "workload.arrival={process: closed, concurrency: 40}"), True),
])
def test_shipped_scenarios(scenario, overrides, preempts):
    a, b = same_scenario(scenario, *overrides)
    assert b.core == "fast"
    assert (a.num_preemptions.sum() > 0) == preempts


def test_a_prefill_step_makes_the_decodes_wait():
    # 10 ms a step whatever it holds. Request 0 (8 prompt tokens, 3 output) prefills in
    # [0, 10 ms); request 1 arrives at 5 ms and is admitted alone in [10, 20 ms) while
    # request 0 waits; both decode in [20, 30 ms) (request 1's last token), request 0's last
    # in [30, 40 ms). Its gap across the prefill step is 20 ms.
    r, _ = prepared(None, PF, "engine.async_scheduling=false",
                    "cost={name: linear, base_ms: 10, prefill_token_ms: 0, decode_seq_ms: 0, "
                    "context_token_ms: 0}")
    specs = RequestSpecs.from_arrays([0.0, 0.005], [8, 8], [3, 2])
    a, _ = same_runs(r, specs)
    assert list(a.recorder.first_token_s) == pytest.approx([0.01, 0.02])
    assert list(a.recorder.finish_s) == pytest.approx([0.04, 0.03])
    assert list(a.recorder.max_itl_s) == pytest.approx([0.02, 0.01])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), requests(), st.booleans())
def test_prefill_first_on_the_fast_core_equals_the_general_engine(sets, specs, async_):
    sets = (*sets, PF, "engine.enable_prefix_caching=false",
            f"engine.async_scheduling={str(async_).lower()}")
    try:
        r = resolve_loaded(load_scenario(None, sets))
    except ConfigError:  # a pool too small for one max_model_len request, say
        reject()
    a, b = same_runs(r, specs)
    assert (a.core, b.core) == ("general", "fast")
