"""Swap preemption (vLLM v0's preemption_mode=swap): the host pool, the swapped queue and
the transfer time charged to the step."""

from __future__ import annotations

import numpy as np

from sim.kv.swap import HostPool
from sim.sched.base import Status
from tests.kv.e2e import run_file
from tests.kv.helpers import BLOCK_BYTES, HOST_BANDWIDTH, run
from tests.sim.helpers import ms

# r0 and r1 decode past their first block on a 5-block pool: r1 (the tail) is preempted
CASE = ([0.0, 0.0, 0.001], [16, 16, 8], [40, 40, 2])
KNOBS = dict(usable_blocks=5, max_model_len=64)


def test_host_pool_accounting_and_refusals():
    host = HostPool(4, 100)
    assert host.room_for(3) and host.take(7, 3) == 300 and host.holds(7)
    assert not host.room_for(2) and host.refused == 1
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


def test_full_host_pool_stops_the_engine_as_vllm_v0_does():
    # vLLM v0's scheduler raises "Aborted due to the lack of CPU swap space" when a victim
    # does not fit the swap space (core/scheduler.py _swap_out): the engine stops, and every
    # request it had not finished fails with it
    sim = run(*CASE, swap_blocks=0, **KNOBS)
    st = sim.scheduler.status
    assert set(st.tolist()) <= {Status.FINISHED, Status.ABORTED} and (st == Status.ABORTED).any()
    assert "lack of CPU swap space" in sim.scheduler.stopped
    assert sim.kv.num_used == 0 and sim.kv.counters()["swap_space_exhausted"] == 1
    # nothing ran after the failed plan (its 10 ms step; the nanosecond clock reads 0.21 s)
    assert round(sim.status.end_s * 1e9) == round((sim.steps[-1][0] + 0.01) * 1e9)


def test_full_host_pool_can_abort_only_the_victim():
    # the alternative v0's FIXME asks for: the victim fails, the engine goes on
    sim = run(*CASE, swap_blocks=0, swap_full="abort_request", **KNOBS)
    st = sim.scheduler.status
    aborted = np.flatnonzero(st == Status.ABORTED).tolist()
    assert len(aborted) == sim.kv.counters()["swap_space_exhausted"] >= 1
    assert (st[[r for r in range(3) if r not in aborted]] == Status.FINISHED).all()
    assert not sim.scheduler.stopped and sim.scheduler.recomputed_tokens == 0


def test_full_host_pool_falls_back_to_recompute_only_when_asked():
    sim = run(*CASE, swap_blocks=0, swap_full="recompute", **KNOBS)
    c = sim.kv.counters()
    assert c["swap_out_events"] == 0 and c["swap_fallbacks"] >= 1
    assert sim.scheduler.recomputed_tokens > 0
    assert (sim.scheduler.status == Status.FINISHED).all()


def test_a_run_whose_swap_space_runs_out_reports_the_aborted_requests():
    # 0.01 GiB of swap space holds 5 KV blocks of Llama-3-8B: the first long victim stops
    # the engine; the summary counts every request exactly once
    res, s = run_file("swap-preemption", "engine.swap_space=0.01")
    r = s["requests"]
    assert r["aborted"] > 0 and s["sim"]["stopped"].startswith("Aborted due to the lack")
    assert r["total"] == r["finished"] + r["rejected"] + r["unfinished"] + r["aborted"]
    assert s["preemption"]["swap_space_exhausted"] == 1
    assert s["stability"]["verdict"] == "unstable" and not s["slo"]["met"]
