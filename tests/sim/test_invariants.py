"""Invariants over random small traces and knobs (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cost.linear import LinearParams
from sim.sched.base import Status
from tests.sim.helpers import build


@st.composite
def runs(draw):
    n = draw(st.integers(1, 25))
    arrival = np.sort(np.array(draw(st.lists(st.floats(0, 0.3), min_size=n, max_size=n))))
    prompt = draw(st.lists(st.integers(1, 60), min_size=n, max_size=n))
    output = draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    bs = draw(st.sampled_from([1, 4, 16]))
    max_len = draw(st.sampled_from([48, 80]))
    knobs = dict(
        usable_blocks=draw(st.integers(-(-max_len // bs), -(-max_len // bs) + 30)),
        block_size=bs, max_num_seqs=draw(st.integers(1, 8)),
        max_num_batched_tokens=draw(st.integers(max_len, 2 * max_len)),
        max_model_len=max_len, chunked=draw(st.booleans()),
        threshold=draw(st.sampled_from([0, 5])), full_isl=draw(st.booleans()),
        adaptive=draw(st.booleans()),
        cost=LinearParams(base_ms=2, prefill_token_ms=0.05, decode_seq_ms=0.1,
                          context_token_ms=0.001),
        stop_s=draw(st.sampled_from([1e9, 0.2])),
    )
    return arrival, prompt, output, knobs


def check_run(arrival, prompt, output, knobs):
    sim = build(arrival, prompt, output, **knobs)
    seen = []

    def checking(plan, starts, durations, outcome):
        sim.kv.check_integrity()
        assert plan.total_tokens <= knobs["max_num_batched_tokens"]
        assert outcome.num_running <= knobs["max_num_seqs"]
        assert plan.batch_size <= knobs["max_num_seqs"]
        assert (outcome.kv_blocks_used <= knobs["usable_blocks"]).all()
        assert (plan.num_tokens >= 1).all()
        seen.append(plan.num_steps)

    sim.engine.on_plan = checking
    status = sim.engine.run()
    sim.kv.check_integrity()
    st_ = sim.scheduler.status
    # every request that arrived ends finished, rejected or (only when cut short) unfinished
    assert set(np.unique(st_)) <= {Status.FINISHED, Status.REJECTED, Status.WAITING,
                                   Status.RUNNING, Status.PENDING}
    if knobs["stop_s"] == 1e9:
        assert not status.stopped_at_limit
        assert ((st_ == Status.FINISHED) | (st_ == Status.REJECTED)).all()
        assert sim.kv.num_used == 0
    done = st_ == Status.FINISHED
    assert (sim.scheduler.generated[done] == sim.specs.output_tokens[done]).all()
    # served lengths (vLLM's server): shortened to fit max_model_len, never lengthened
    assert (sim.specs.output_tokens <= np.asarray(output)).all()
    total = sim.specs.prompt_tokens + sim.specs.output_tokens
    assert (total <= knobs["max_model_len"])[np.asarray(prompt) < knobs["max_model_len"]].all()
    ttft = sim.recorder.first_token_s - arrival
    assert (ttft[done] > 0).all()
    assert (sim.recorder.finish_s[done] >= sim.recorder.first_token_s[done]).all()
    return sim


@settings(max_examples=120, deadline=None)
@given(runs())
def test_conservation_budgets_and_completion(case):
    check_run(*case)


@settings(max_examples=40, deadline=None)
@given(runs())
def test_same_inputs_same_results(case):
    a, b = check_run(*case), check_run(*case)
    assert a.steps == b.steps
    np.testing.assert_array_equal(a.recorder.finish_s, b.recorder.finish_s)
