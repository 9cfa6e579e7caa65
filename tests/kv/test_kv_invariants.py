"""The foundation's invariants for every KV policy, prefix caching on/off, swap mode and
the admission rules: conservation of requests and blocks (free + cached + used = total,
reference counts = table entries), budgets, completion, determinism."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from sim.sched.base import Status
from sim.sched.v0 import V0Scheduler
from tests.kv.helpers import build
from tests.kv.strategies import memory_runs


def check_run(arrival, prompt, output, knobs):
    sim = build(arrival, prompt, output, **knobs)
    orca = knobs["scheduler"] == "orca"
    whole = orca or knobs["scheduler"] == "prefill-first"  # the budget fits a whole prompt
    budget = max(knobs["max_num_batched_tokens"], knobs["max_model_len"] if whole else 0)

    def checking(plan, starts, durations, outcome):
        sim.plans.append(plan)
        sim.kv.check_integrity()
        u = sim.kv.usage()
        assert u.used + u.free == u.total and 0 <= u.cached <= u.free
        assert plan.total_tokens <= budget
        assert outcome.num_running <= knobs["max_num_seqs"]
        assert (outcome.kv_blocks_used <= knobs["usable_blocks"]).all()
        assert (outcome.kv_tokens <= outcome.kv_blocks_used * knobs["block_size"]).all()
        assert (plan.num_tokens >= 1).all()
        assert plan.swap_out_bytes >= 0 and plan.swap_in_bytes >= 0
        if sim.kv.reserves_up_front:  # a reservation never grows: nobody is ever preempted
            assert len(plan.preempted) == 0
        if orca:  # whole prompts: a request's first step computes its entire prompt
            first = sim.scheduler.generated[plan.req_ids] == 0
            assert (plan.context_lens[first] + plan.num_tokens[first]
                    >= np.asarray(prompt)[plan.req_ids[first]]).all()

    sim.engine.on_plan = checking
    status = sim.engine.run()
    sim.kv.check_integrity()
    st_ = sim.scheduler.status
    aborted = st_ == Status.ABORTED  # swap space full (vLLM v0: the engine stops)
    if aborted.any():
        assert knobs["swap_blocks"] is not None and knobs["swap_full"] != "recompute"
        assert bool(sim.scheduler.stopped) == (knobs["swap_full"] == "stop_engine")
    if sim.scheduler.stopped:  # nothing is left running, waiting or swapped out
        assert not np.isin(st_, (Status.PENDING, Status.WAITING, Status.RUNNING)).any()
        assert sim.kv.num_used == 0 and (sim.kv.host is None or sim.kv.host.used == 0)
    if knobs["stop_s"] == 1e9:
        assert not status.stopped_at_limit
        assert np.isin(st_, (Status.FINISHED, Status.REJECTED, Status.ABORTED)).all()
        assert sim.kv.num_used == 0 and int(sim.kv.held.sum()) == 0
        assert sim.kv.host is None or sim.kv.host.used == 0
        c = sim.kv.counters()
        if not aborted.any():
            assert c.get("swap_out_events", 0) == c.get("swap_in_events", 0)
    done = st_ == Status.FINISHED
    assert (sim.scheduler.generated[done] == sim.specs.output_tokens[done]).all()
    assert (sim.recorder.first_token_s[done] > np.asarray(arrival)[done]).all()
    exact = knobs["admission"] == "reserve" and knobs["admission_params"].expect == "max_tokens"
    if exact and not isinstance(sim.scheduler, V0Scheduler):
        # exact reservations never run out under v1's rule (preempt only when an allocation
        # fails); v0's can_append_slots asks for a free block before every decode whether or
        # not the decode needs one, so a pool reserved to its last block preempts there
        assert sim.scheduler.num_preemptions.sum() == 0
    if knobs["swap_blocks"] is None:
        assert all(p.swap_out_bytes == p.swap_in_bytes == 0 for p in sim.plans)
    return sim


@settings(max_examples=200, deadline=None)
@given(memory_runs())
def test_memory_policies_conserve_and_complete(case):
    check_run(*case)


@settings(max_examples=40, deadline=None)
@given(memory_runs())
def test_memory_policies_are_deterministic(case):
    a, b = check_run(*case), check_run(*case)
    assert a.steps == b.steps
    np.testing.assert_array_equal(a.recorder.finish_s, b.recorder.finish_s)
    assert a.kv.counters() == b.kv.counters()


@settings(max_examples=200, deadline=None)
@given(memory_runs(pressure=True))
def test_under_kv_pressure_preemption_swap_and_eviction_conserve(case):
    sim = check_run(*case)
    if case[3]["stop_s"] == 1e9 and case[3]["swap_blocks"] is None:
        assert sim.scheduler.recomputed_tokens >= 0 and not len(sim.scheduler.swapped)
