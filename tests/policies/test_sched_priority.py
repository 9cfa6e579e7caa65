"""vllm-priority against the literal vLLM v1 transcription in policy="priority" mode."""

from __future__ import annotations

from hypothesis import given, settings

from tests.sim.helpers import run
from tests.sim.test_vllm_reference import cases, compare, ours, reference


@settings(max_examples=150, deadline=None)
@given(cases())
def test_priority_matches_reference(case):
    arrival, prompt, output, knobs, prio = case
    ref_steps, rejected, stop = reference(arrival, prompt, output, priority=prio,
                                          priority_policy=True, **knobs)
    sim = ours(arrival, prompt, output, knobs, prio, scheduler="vllm-priority", stop_s=stop)
    compare(sim, ref_steps)
    assert [i for i, s in enumerate(sim.scheduler.status) if s == 4] == rejected


def test_urgent_arrival_is_admitted_first():
    # r0 runs alone (max_num_seqs 1); r1 (priority 1) and r2 (priority 0, later) wait:
    # r2 goes next although it arrived last
    sim = run([0.0, 0.001, 0.002], [4, 4, 4], [20, 2, 2], max_num_seqs=1,
              scheduler="vllm-priority", priority=[0, 1, 0])
    first = [min(i for i, s in enumerate(sim.steps) if r in s[1]) for r in range(3)]
    assert first[0] < first[2] < first[1]


def test_victim_is_least_urgent_not_newest():
    # 4 usable blocks of 4 slots. r0 (priority 2, oldest) and r1 (priority 0) hold 2 blocks
    # each after their prompts; when r0 (served first) needs a third block, vLLM FCFS
    # preempts the newest (r1) but priority preempts the least urgent: r0 itself.
    sim = run([0.0, 0.0], [8, 8], [6, 6], usable_blocks=4, block_size=4,
              scheduler="vllm-priority", priority=[2, 0])
    preempted = [p for s in sim.steps for p in s[2]]
    assert preempted and set(preempted) == {0}
    fcfs = run([0.0, 0.0], [8, 8], [6, 6], usable_blocks=4, block_size=4, priority=[2, 0])
    assert {p for s in fcfs.steps for p in s[2]} == {1}


def test_victim_among_equals_is_first_in_running_order():
    # r0 and r1 share priority and arrival time. When r0 (served first) needs a third block,
    # vLLM takes max(running, key=(priority, arrival)): equal keys, so the first in the
    # running list, r0 itself (scheduler.py:796-800), not the newer r1.
    sim = run([0.0, 0.0], [8, 8], [6, 6], usable_blocks=4, block_size=4,
              scheduler="vllm-priority", priority=[0, 0])
    preempted = [p for s in sim.steps for p in s[2]]
    assert preempted[0] == 0


def test_a_case_vllm_never_ends_is_compared_over_the_same_steps():
    """Eight requests of equal priority and arrival, block 1, long-prefill cap 4: vLLM's
    priority rule preempts the request asking for a block (the first of equal keys) and the
    requests evict each other forever; servesim spins the same way, step for step."""
    knobs = {"num_blocks": 86, "block_size": 1, "max_num_seqs": 6, "max_tokens": 90,
             "max_model_len": 64, "chunked": True, "threshold": 4, "full_isl": False,
             "adaptive": False}
    arrival, prompt = [0.0] * 8, [31, 18, 28, 14, 39, 34, 2, 34]
    output, prio = [6, 13, 20, 13, 9, 16, 11, 18], [0] * 8
    ref_steps, _, stop = reference(arrival, prompt, output, priority=prio,
                                   priority_policy=True, **knobs)
    assert stop < 1e9 and len(ref_steps) > 1000  # it did not end
    compare(ours(arrival, prompt, output, knobs, prio, scheduler="vllm-priority",
                 stop_s=stop), ref_steps)
