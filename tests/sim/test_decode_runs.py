"""Decode runs are an optimization only: folding steps must not change any result."""

from __future__ import annotations

from hypothesis import given, settings

import sim.sched.vllm as vllm_mod
from sim.cost.linear import LinearParams
from tests.sim.helpers import assert_same_results, folded_and_single, run
from tests.sim.test_invariants import runs


@settings(max_examples=80, deadline=None)
@given(runs())
def test_runs_equal_single_steps(case):
    arrival, prompt, output, knobs = case
    knobs = dict(knobs, cost=LinearParams(base_ms=2, prefill_token_ms=0.05, decode_seq_ms=0.1,
                                          context_token_ms=0.001))
    assert_same_results(*folded_and_single(run, arrival, prompt, output, **knobs))


@settings(max_examples=80, deadline=None)
@given(runs())
def test_async_runs_equal_single_steps(case):
    """Async scheduling: each step's plan is made while the step before runs and sees the
    arrivals up to that step's start; a folded run records the waiting count each plan
    saw (sim.engine.arrivals.seen_by_step), as its single steps do."""
    arrival, prompt, output, knobs = case
    knobs = dict(knobs, cost=LinearParams(base_ms=2, prefill_token_ms=0.05, decode_seq_ms=0.1,
                                          context_token_ms=0.001))
    assert_same_results(*folded_and_single(run, arrival, prompt, output,
                                           async_scheduling=True, **knobs))


def test_runs_actually_fold_steps(monkeypatch):
    # one long decode: 1 prefill step + one run of 99 decode steps
    monkeypatch.setattr(vllm_mod, "MAX_RUN_STEPS", 4096)
    sim = run([0.0], [10], [100])
    assert sim.recorder.num_plans == 2 and sim.recorder.num_steps == 100


def test_arrival_interrupts_a_run(monkeypatch):
    # r1 arrives during r0's decode run: the run stops at the first step starting after it
    sim = run([0.0, 0.05], [10, 5], [100, 2])
    starts = [s[0] for s in sim.steps]
    first_with_r1 = next(i for i, s in enumerate(sim.steps) if 1 in s[1])
    assert starts[first_with_r1 - 1] < 0.05 <= starts[first_with_r1]
