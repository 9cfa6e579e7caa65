"""The foundation's invariants (tests/sim/test_invariants.py) for the scheduling policies.

Random small traces with lane tags and priorities, random policy parameters:
conservation of requests and KV blocks, each policy's own budgets, completion,
determinism, and decode runs equal to single steps.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.sched.base import Status
from sim.sched.lanes import LanesParams
from sim.sched.sarathi import SarathiParams
from sim.sched.static import StaticParams
from tests.kv.strategies import hash_chains
from tests.sim.helpers import assert_same_results, build, folded_and_single
from tests.sim.test_invariants import runs

# the schedulers that run on paged KV (orca needs a reservation KV policy: its own tests)
ALL = ["vllm", "vllm-priority", "prefill-first", "sarathi", "static", "lanes"]


def _lanes_params(draw, knobs):
    blocks, longest = knobs["usable_blocks"], -(-knobs["max_model_len"] // knobs["block_size"])
    kv_share = draw(st.floats(0, 0.6))
    if blocks - int(kv_share * blocks) < longest:  # the batch lane must hold one request
        kv_share = 0.0
    return LanesParams(interactive_seq_share=draw(st.floats(0, 0.9)),
                       interactive_kv_share=kv_share,
                       batch_step_tokens=draw(st.sampled_from([0, 3, 20, 60]))
                       if knobs["chunked"] else 0)


def _params(draw, name, knobs):
    if name == "sarathi":
        return SarathiParams(chunk_size=draw(st.sampled_from([1, 7, 32, 200])))
    if name == "static":
        return StaticParams(batch_size=draw(st.integers(1, 6)),
                            max_wait_s=draw(st.sampled_from([0.0, 0.01, 0.05])))
    if name == "lanes":
        return _lanes_params(draw, knobs)
    return None


@st.composite
def policy_runs(draw, name):
    arrival, prompt, output, knobs = draw(runs())
    n = len(arrival)
    lane = draw(st.lists(st.sampled_from(["interactive", "batch"]), min_size=n, max_size=n))
    prio = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    knobs = dict(knobs, lane=lane, priority=prio, scheduler=name)
    if name != "sarathi" and draw(st.booleans()):  # Sarathi-Serve has no prefix caching
        chains, hbs = draw(hash_chains(prompt))
        knobs = dict(knobs, prefix_caching=True, prefix_hashes=chains, hash_block_size=hbs)
    return arrival, prompt, output, dict(knobs, params=_params(draw, name, knobs))


def _policy_checks(sim, plan, knobs):
    """Budgets of the policies that have their own."""
    s, name, p = sim.scheduler, knobs["scheduler"], knobs["params"]
    ids, tok, ctx = plan.req_ids, plan.num_tokens, plan.context_lens
    if name == "sarathi":  # running decodes are never left out (stall-free), prefills fit
        decodes = int((plan.num_tokens == 1).sum())
        assert plan.total_tokens <= max(min(p.chunk_size, knobs["max_num_batched_tokens"]),
                                        decodes)
    cached = knobs.get("prefix_caching", False)  # a prefix hit starts a prompt part-way
    if name == "static":  # whole prompts (context phase), or one token per member
        assert plan.batch_size <= min(p.batch_size, knobs["max_num_seqs"])
        assert (tok == 1).all() or (ctx + tok == s.prompt[ids]).all()
        assert cached or (ctx == 0).all() or (tok == 1).all()
    if name == "prefill-first" and not cached:  # all whole prompts, or all decodes
        prefill = (ctx == 0) & (tok >= s.prompt[ids])
        assert prefill.all() or (tok == 1).all() and (ctx >= s.prompt[ids]).all()
    if name == "lanes":
        batch = ~s.interactive[ids]
        if p.batch_step_tokens and not batch.all():  # a step that carries interactive work
            assert int(tok[batch].sum()) <= p.batch_step_tokens
        # physical blocks in batch tables (a shared prefix block counts once)
        batch = [s.kv.block_table(int(r)) for r in s.running if not s.interactive[r]]
        assert len(set().union(*batch)) <= s.kv.num_blocks - s.kv_reserve
        assert int((~s.interactive[s.running]).sum()) <= s.batch_seqs


def _watch_sarathi(sim):
    """Sarathi: a step that carries any prefill carries every running decode (stall-free)."""
    s, orig = sim.scheduler, sim.scheduler.schedule

    def schedule(now):
        r = s.running
        decoding = set(r[s.known_tokens[r] - s.computed[r] == 1].tolist())
        plan = orig(now)
        if plan is not None and not set(plan.req_ids.tolist()) <= decoding:
            assert decoding - set(plan.preempted.tolist()) <= set(plan.req_ids.tolist())
        return plan

    s.schedule = schedule


def _watch_static(sim):
    """Static: members never change while a batch is in flight; plans only use members."""
    s, orig = sim.scheduler, sim.scheduler.schedule

    def schedule(now):
        before = s.members.copy()
        if not len(before):
            assert s.kv.num_used == 0  # the previous batch freed everything
        plan = orig(now)
        if len(before):
            assert np.array_equal(before, s.members)
        if plan is not None:
            assert set(plan.req_ids.tolist()) <= set(s.members.tolist())
        return plan

    s.schedule = schedule


def check_run(arrival, prompt, output, knobs):
    sim = build(arrival, prompt, output, **knobs)
    watch = {"static": _watch_static, "sarathi": _watch_sarathi}.get(knobs["scheduler"])
    if watch:
        watch(sim)

    def checking(plan, starts, durations, outcome):
        sim.kv.check_integrity()
        if knobs["scheduler"] != "static":  # static's context phase is one pass (its budget:
            assert plan.total_tokens <= knobs["max_num_batched_tokens"]  # batch_size)
        assert outcome.num_running <= knobs["max_num_seqs"]
        assert plan.batch_size <= knobs["max_num_seqs"]
        assert (outcome.kv_blocks_used <= knobs["usable_blocks"]).all()
        assert (plan.num_tokens >= 1).all()
        _policy_checks(sim, plan, knobs)

    sim.engine.on_plan = checking
    status = sim.engine.run()
    sim.kv.check_integrity()
    st_ = sim.scheduler.status
    out = sim.specs.output_tokens  # as served: shortened to fit max_model_len (vLLM's server)
    assert (out <= np.asarray(output)).all()
    if knobs["stop_s"] == 1e9:
        assert not status.stopped_at_limit
        assert ((st_ == Status.FINISHED) | (st_ == Status.REJECTED)).all()
        assert sim.kv.num_used == 0
    done = st_ == Status.FINISHED
    assert (sim.scheduler.generated[done] == out[done]).all()
    assert (sim.scheduler.generated <= out).all()
    ttft = sim.recorder.first_token_s - arrival
    assert (ttft[done] > 0).all()
    assert (sim.recorder.finish_s[done] >= sim.recorder.first_token_s[done]).all()
    return sim


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_conservation_budgets_and_completion(name, data):
    check_run(*data.draw(policy_runs(name)))


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_same_inputs_same_results(name, data):
    case = data.draw(policy_runs(name))
    a, b = check_run(*case), check_run(*case)
    assert a.steps == b.steps
    np.testing.assert_array_equal(a.recorder.finish_s, b.recorder.finish_s)


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_decode_runs_equal_single_steps(name, data):
    arrival, prompt, output, knobs = data.draw(policy_runs(name))
    assert_same_results(*folded_and_single(check_run, arrival, prompt, output, knobs))
