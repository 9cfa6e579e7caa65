"""Sarathi-Serve (``sarathi``) on the fast core (sim/fast/sarathi.py, sim/fast/v0.py) gives the
general engine's results.

The comparison of tests/fast/test_equivalence.py (every step column, per-request time, ITL
sample, counter, hook log) on shipped scenarios with several chunk sizes (prompts split so
that one token is left, which v0 still serves in the prefill pass), tight pools where v0's
can_append_slot preempts the newest request (synchronous, async, closed loop); a
hand-computed case; and a hypothesis property over random knobs, chunk sizes and bursts.
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

SA = "scheduler=sarathi"


def chunk(n: int) -> str:
    return f"scheduler={{name: sarathi, chunk_size: {n}}}"


@pytest.mark.parametrize("scenario,overrides,preempts", [
    (None, (SA, "workload.num_requests=300"), False),
    (None, (SA, "workload.num_requests=300", "engine.async_scheduling=true"), False),
    (None, (chunk(64), "workload.num_requests=200"), False),
    ("chunked-vs-prefill-first", (SA, "engine.long_prefill_token_threshold=0"), False),
    ("small-kv-pressure", (SA, "workload.num_requests=250"), True),
    ("small-kv-pressure", (chunk(100), "workload.num_requests=250",
                           "engine.async_scheduling=true"), True),
    ("small-kv-pressure", (SA, "workload.num_requests=250",
                           "workload.arrival={process: closed, concurrency: 40}"), True),
])
def test_shipped_scenarios(scenario, overrides, preempts):
    a, b = same_scenario(scenario, *overrides)
    assert b.core == "fast"
    assert (a.num_preemptions.sum() > 0) == preempts


def test_decodes_first_then_the_rest_of_a_prompt():
    # a budget of 8 tokens a step, 10 ms a step. Request 0 (4 prompt tokens, 3 output)
    # prefills in [0, 10 ms). Request 1 (8 prompt tokens, 1 output) arrives at 5 ms: in
    # [10, 20 ms) request 0 decodes first and request 1 computes the 7 tokens left of the
    # budget; in [20, 30 ms) request 0 decodes its last token and request 1 its prompt's
    # last token (v0 still counts it prefilling), which samples its only output token.
    r, _ = prepared(None, chunk(8), "engine.async_scheduling=false",
                    "cost={name: linear, base_ms: 10, prefill_token_ms: 0, decode_seq_ms: 0, "
                    "context_token_ms: 0}")
    specs = RequestSpecs.from_arrays([0.0, 0.005], [4, 8], [3, 1])
    a, _ = same_runs(r, specs)
    assert list(a.recorder.first_token_s) == pytest.approx([0.01, 0.03])
    assert list(a.recorder.finish_s) == pytest.approx([0.03, 0.03])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), requests(), st.sampled_from([16, 64, 100, 512]), st.booleans())
def test_sarathi_on_the_fast_core_equals_the_general_engine(sets, specs, size, async_):
    sets = (*sets, chunk(size), "engine.enable_prefix_caching=false",
            f"engine.async_scheduling={str(async_).lower()}")
    try:
        r = resolve_loaded(load_scenario(None, sets))
    except ConfigError:  # a pool too small for one max_model_len request, say
        reject()
    a, b = same_runs(r, specs)
    assert (a.core, b.core) == ("general", "fast")
