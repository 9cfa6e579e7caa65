"""Closed loops and concurrency caps on the fast core (sim/fast/arrivals.py) give the general
engine's results.

The same comparison as tests/fast/test_equivalence.py (every step column, per-request time,
ITL sample, counter, hook log; the send times and client queue times of a gated run too),
with ``workload.arrival.concurrency`` set: closed loops with and without think time,
caps on a Poisson stream, ingress/egress (the client's turnaround), a horizon that leaves
requests unsent, rejected requests (their slot frees at once), the drain limit, and a
hypothesis property over random knobs, ready times, concurrency and think time.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import sim.runner
from sim.config.load import load_scenario
from sim.config.resolve import ConfigError
from sim.pipeline import resolve_loaded
from sim.sched.base import Status
from tests.fast.equivalence import assert_same, prepared, run_both, same_runs, same_scenario
from tests.fast.test_properties import knobs, requests

SMALL = "workload.num_requests=300"


def closed(c: int, think_s: float = 0.0) -> str:
    return f"workload.arrival={{process: closed, concurrency: {c}, think_s: {think_s}}}"


def assert_same_sends(a, b) -> None:
    """The requests' send times (the result's arrivals) and client queue times agree."""
    assert np.array_equal(a.specs.arrival_s, b.specs.arrival_s)
    assert np.array_equal(a.client_queue_s, b.client_queue_s)


@pytest.mark.parametrize("overrides", [
    (closed(8),),
    (closed(64),),
    (closed(16, 0.5),),
    ("workload.arrival.concurrency=4",),  # a cap on the default Poisson stream
    ("workload.arrival.concurrency=32", "workload.arrival.rate=40"),
    (closed(64), "engine.ingress_ms=2", "engine.egress_ms=3"),
    (closed(24), "engine.enable_prefix_caching=false"),
])
def test_gated_arrivals(overrides):
    a, b = same_scenario(None, SMALL, *overrides)
    assert_same_sends(a, b)
    assert (a.status == Status.FINISHED).all() and a.recorder.num_steps > a.recorder.num_plans


def test_a_closed_loop_in_a_tight_pool_preempts():
    a, b = same_scenario("small-kv-pressure", "workload.num_requests=200", closed(48))
    assert_same_sends(a, b)
    assert a.num_preemptions.sum() > 0


def test_a_horizon_leaves_requests_unsent():
    a, b = same_scenario(None, SMALL, closed(32), "horizon_s=20")
    assert_same_sends(a, b)
    assert a.run.stopped_at_limit and a.never_sent > 0


def test_rejected_requests_free_their_slot():
    a, b = same_scenario(None, SMALL, closed(8, 0.2), "engine.max_model_len=1024")
    assert_same_sends(a, b)
    assert (a.status == Status.REJECTED).sum() > 0


def test_a_gated_overload_hits_the_drain_limit(monkeypatch):
    monkeypatch.setattr(sim.runner, "DRAIN_MIN_PLANS", 200)
    # a cap no client reaches: every request is sent early, then the backlog drains
    r, specs = prepared(None, "workload.num_requests=150", "workload.arrival.rate=1000",
                        "workload.arrival.concurrency=150", "engine.max_num_seqs=2",
                        "engine.max_num_batched_tokens=64")
    with pytest.warns(RuntimeWarning, match="drain limit"):
        a, b = run_both(r, specs)
    assert_same(a, b)
    assert_same_sends(a, b)
    assert a.drain_cut and b.drain_cut


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), requests(), st.integers(1, 40), st.sampled_from([0.0, 0.0, 0.003, 0.05]))
def test_gated_fast_core_equals_general_engine(sets, specs, concurrency, think_s):
    # the requests' times are their ready times: bursts at one instant are closed loops
    gate = f"workload.arrival={{process: closed, concurrency: {concurrency}, think_s: {think_s}}}"
    try:
        # the specs are given below; a closed loop's scenario still needs a count
        r = resolve_loaded(load_scenario(None, (*sets, gate, "workload.num_requests=100")))
    except ConfigError:
        reject()
    a, b = same_runs(r, specs)
    assert_same_sends(a, b)
