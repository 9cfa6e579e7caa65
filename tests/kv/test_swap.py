"""Swap preemption (vLLM v0's preemption_mode=swap): the host pool, the swapped queue and
the transfer time charged to the step."""

from __future__ import annotations

from sim.kv.swap import HostPool
from tests.kv.helpers import BLOCK_BYTES, HOST_BANDWIDTH, run
from tests.sim.helpers import ms

# r0 and r1 decode past their first block on a 5-block pool: r1 (the tail) is preempted
CASE = ([0.0, 0.0, 0.001], [16, 16, 8], [40, 40, 2])
KNOBS = dict(usable_blocks=5, max_model_len=64)


def test_host_pool_accounting_and_refusals():
    host = HostPool(4, 100)
    assert host.room_for(3) and host.take(7, 3) == 300 and host.holds(7)
    assert not host.room_for(2) and host.fallbacks == 1
    assert host.give_back(7) == 300 and host.used == 0 and not host.holds(7)
    assert host.counters()["swap_out_bytes"] == host.counters()["swap_in_bytes"] == 300


def test_swap_keeps_computed_tokens_and_charges_the_transfer():
    rec = run(*CASE, **KNOBS)
    swp = run(*CASE, swap_blocks=10, **KNOBS)
    assert rec.scheduler.num_preemptions.sum() == swp.scheduler.num_preemptions.sum() >= 1
    assert rec.scheduler.recomputed_tokens > 0 and swp.scheduler.recomputed_tokens == 0
    c = swp.kv.counters()
    assert c["swap_out_events"] == c["swap_in_events"] >= 1
    outs = [p for p in swp.plans if p.swap_out_bytes]
    ins = [p for p in swp.plans if p.swap_in_bytes]
    assert sum(p.swap_out_bytes for p in outs) == c["swap_out_bytes"] == c["swap_in_bytes"]
    # a swap-in resumes the victim where it stopped: its context is what it had computed
    victim = int(outs[0].preempted[0])
    back = ins[0]
    assert victim in back.req_ids.tolist()
    assert back.context_lens[back.req_ids.tolist().index(victim)] > 0
    # the step that moves bytes takes base + prefill tokens (golden cost) + bytes / bandwidth
    k = next(j for j, p in enumerate(swp.plans) if p is outs[0])
    i = sum(p.num_steps for p in swp.plans[:k])  # its first step, decode runs expanded
    expected = ms(10 + outs[0].num_prefill_tokens) + outs[0].swap_out_bytes / HOST_BANDWIDTH
    assert swp.recorder.steps()["duration_s"][i] == expected
    assert outs[0].swap_out_bytes % BLOCK_BYTES == 0


def test_swapped_requests_resume_before_new_arrivals():
    # r2 (one block) arrives while r1 is swapped out and would fit now; r1 resumes first
    swp = run([0.0, 0.0, 0.3], [16, 16, 8], [40, 40, 2], swap_blocks=10, **KNOBS)
    resumed = next(k for k, p in enumerate(swp.plans) if p.swap_in_bytes)
    out = next(k for k, p in enumerate(swp.plans) if p.swap_out_bytes)
    start = swp.recorder.steps()["start_s"]
    t_in = start[sum(p.num_steps for p in swp.plans[:resumed])]
    t_out = start[sum(p.num_steps for p in swp.plans[:out])]
    assert t_out < 0.3 < t_in <= swp.recorder.first_scheduled_s[2]
    assert swp.scheduler.recomputed_tokens == 0


def test_full_host_pool_falls_back_to_recompute():
    sim = run(*CASE, swap_blocks=0, **KNOBS)
    c = sim.kv.counters()
    assert c["swap_out_events"] == 0 and c["swap_fallbacks"] >= 1
    assert sim.scheduler.recomputed_tokens > 0
