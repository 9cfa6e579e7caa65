"""Decode runs are an optimization only: folding steps must not change any result."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

import sim.sched.vllm as vllm_mod
from sim.cost.linear import LinearParams
from tests.sim.helpers import run
from tests.sim.test_invariants import runs


def both(arrival, prompt, output, knobs):
    saved = vllm_mod.MAX_RUN_STEPS
    try:
        folded = run(arrival, prompt, output, **knobs)
        vllm_mod.MAX_RUN_STEPS = 1  # every plan a single step
        single = run(arrival, prompt, output, **knobs)
    finally:
        vllm_mod.MAX_RUN_STEPS = saved
    return folded, single


@settings(max_examples=80, deadline=None)
@given(runs())
def test_runs_equal_single_steps(case):
    arrival, prompt, output, knobs = case
    knobs = dict(knobs, cost=LinearParams(base_ms=2, prefill_token_ms=0.05, decode_seq_ms=0.1,
                                          context_token_ms=0.001))
    a, b = both(arrival, prompt, output, knobs)
    for col in ("first_scheduled_s", "first_token_s", "finish_s", "max_itl_s"):
        np.testing.assert_allclose(getattr(a.recorder, col), getattr(b.recorder, col),
                                   rtol=1e-9, atol=1e-12)
    sa, sb = a.recorder.steps(), b.recorder.steps()
    assert len(sa["start_s"]) == len(sb["start_s"])
    for col, va in sa.items():
        if va.dtype == object:
            assert (va == sb[col]).all(), col
        else:
            np.testing.assert_allclose(va, sb[col], rtol=1e-9, atol=1e-12, err_msg=col)
    va, wa = a.recorder.itl_samples()
    vb, wb = b.recorder.itl_samples()
    np.testing.assert_allclose(np.sort(np.repeat(va, wa)), np.sort(np.repeat(vb, wb)),
                               rtol=1e-9, atol=1e-12)
    assert (a.scheduler.num_preemptions == b.scheduler.num_preemptions).all()
    assert a.scheduler.memory_blocked.sum() == b.scheduler.memory_blocked.sum()


def test_runs_actually_fold_steps(monkeypatch):
    # one long decode: 1 prefill step + one run of 99 decode steps
    monkeypatch.setattr(vllm_mod, "MAX_RUN_STEPS", 4096)
    sim = run([0.0], [10], [100])
    assert len(sim.recorder._plan_steps) == 2 and sim.recorder.num_steps == 100


def test_arrival_interrupts_a_run(monkeypatch):
    # r1 arrives during r0's decode run: the run stops at the first step starting after it
    sim = run([0.0, 0.05], [10, 5], [100, 2])
    starts = [s[0] for s in sim.steps]
    first_with_r1 = next(i for i, s in enumerate(sim.steps) if 1 in s[1])
    assert starts[first_with_r1 - 1] < 0.05 <= starts[first_with_r1]
