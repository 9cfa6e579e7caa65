"""lanes: interactive first, reserved seqs and KV for it, the batch lane in what is left."""

from __future__ import annotations

import numpy as np
import pytest

from sim.sched.lanes import LanesParams
from tests.sim.helpers import build, run
from traces.errors import InputError

INTER, BATCH = "interactive", "batch"


def lanes(**kw) -> dict:
    return {"scheduler": "lanes", "params": LanesParams(**kw)}


def test_interactive_request_jumps_the_batch_queue():
    # max_num_seqs 2, half reserved: one batch request runs, two wait; the interactive
    # arrival starts at the next step. One shared vLLM queue makes it wait for both.
    args = ([0.0, 0.0, 0.0, 0.001], [4, 4, 4, 4], [30, 30, 30, 2])
    kw = dict(max_num_seqs=2, lane=[BATCH, BATCH, BATCH, INTER])
    sim = run(*args, **kw, **lanes(interactive_seq_share=0.5))
    assert sim.steps[1][1] == {0: 1, 3: 4}
    shared = run(*args, **kw)
    assert shared.recorder.first_token_s[3] > shared.recorder.finish_s[:2].min()


def test_batch_lane_never_takes_the_reserved_seqs():
    sim = build([0.0] * 5, [4] * 5, [6] * 5, max_num_seqs=4, lane=[BATCH] * 5,
                **lanes(interactive_seq_share=0.5))
    peak = []
    sim.engine.on_plan = lambda plan, *_: peak.append(plan.batch_size)
    sim.engine.run()
    assert max(peak) == 2


def test_batch_lane_stays_out_of_the_reserved_kv():
    # 20 blocks, 50% reserved: batch requests hold at most 10 blocks together, growth included
    sim = build([0.0] * 4, [16] * 4, [20] * 4, usable_blocks=20, block_size=4, max_model_len=40,
                lane=[BATCH] * 4, **lanes(interactive_kv_share=0.5))
    held = []
    sim.engine.on_plan = lambda *_: held.append(sim.kv.num_used)
    sim.engine.run()
    assert max(held) == 10
    assert sim.scheduler.num_preemptions.sum() > 0  # growth past the share preempts


def test_kv_shortage_preempts_batch_before_interactive():
    # the batch request came first, so vLLM's victim (the newest) would be the interactive one
    args = ([0.0, 0.0], [8, 8], [12, 12])
    kw = dict(usable_blocks=6, block_size=4, max_model_len=24, lane=[BATCH, INTER])
    sim = run(*args, **kw, **lanes(interactive_kv_share=0.0))
    assert {p for s in sim.steps for p in s[2]} == {0}
    assert {p for s in run(*args, **kw).steps for p in s[2]} == {1}


def test_batch_tokens_are_capped_only_in_steps_with_interactive_work():
    sim = run([0.0, 0.0], [100, 4], [2, 20], max_num_batched_tokens=512, lane=[BATCH, INTER],
              **lanes(batch_step_tokens=16))
    assert sim.steps[0][1] == {1: 4, 0: 16}
    alone = run([0.0], [100], [2], max_num_batched_tokens=512, lane=[BATCH],
                **lanes(batch_step_tokens=16))
    assert alone.steps[0][1] == {0: 100}


def test_a_blocked_interactive_head_stops_batch_admission():
    # the interactive head's prompt (40 tokens) does not fit the free KV, a batch prompt
    # would: the batch request still waits
    sim = build([0.0, 0.001, 0.002], [30, 40, 4], [20, 2, 2], usable_blocks=16, block_size=4,
                lane=[INTER, INTER, BATCH], **lanes(interactive_kv_share=0.0))
    sim.engine.run()
    rec = sim.recorder
    assert rec.first_scheduled_s[2] >= rec.first_scheduled_s[1]


def test_a_kv_share_that_leaves_no_room_for_one_request_is_refused():
    with pytest.raises(InputError, match="interactive_kv_share"):
        build([0.0], [4], [2], usable_blocks=10, block_size=16, max_model_len=128,
              **lanes(interactive_kv_share=0.5))


def test_lane_summary_has_goodput_and_verdict_per_lane():
    from tests.policies.test_sched_experiments import simulate_scenario

    res, s = simulate_scenario({
        "cost": {"name": "linear"},
        "workload": {"mix": [
            {"arrival": {"process": "constant", "rate": 10}, "num_requests": 10, "lane": INTER,
             "lengths": {"dist": "fixed", "prompt": 8, "output": 4}},
            {"arrival": {"process": "constant", "rate": 10}, "num_requests": 6, "lane": BATCH,
             "lengths": {"dist": "fixed", "prompt": 8, "output": 4}}]},
    })
    lanes_ = s["lanes"]
    assert set(lanes_) == {INTER, BATCH}
    assert lanes_[INTER]["finished"] == 10 and lanes_[BATCH]["finished"] == 6
    assert lanes_[INTER]["slo"]["met"] is True and "ttft_ms" in lanes_[BATCH]["slo"]
    # each lane's throughput over its own duration (its first arrival to its last finish, as
    # a benchmark of that lane alone measures it), not the whole run's: the batch lane's 6
    # requests end well before the interactive lane's 10
    inter, batch = lanes_[INTER], lanes_[BATCH]
    assert batch["duration_s"] < inter["duration_s"] == pytest.approx(s["duration_s"])
    for lane, tokens in ((inter, 40), (batch, 24)):
        assert np.isclose(lane["throughput"]["output_token_per_s"] * lane["duration_s"], tokens)
        assert np.isclose(lane["throughput"]["request_per_s"] * lane["duration_s"],
                          lane["finished"])


def _physical(sim, reqs) -> int:
    """Distinct KV blocks in the tables of ``reqs`` (a shared prefix block counts once)."""
    tables = [sim.kv.block_table(int(r)) for r in reqs]
    return len(set().union(*tables)) if tables else 0


def test_batch_lane_room_counts_shared_prefix_blocks_once():
    # the batch lane may hold 100 of 200 blocks. r0 holds an 80-block shared prefix plus 5
    # blocks of its own (85); r1 arrives after r0's prefill and hits the prefix, so it needs
    # 5 new blocks: 90 blocks are physically in use, r1 must not wait for r0 to finish
    prefix = list(range(80))
    chains = [np.array(prefix + [1000 + i for i in range(5)]),
              np.array(prefix + [2000 + i for i in range(5)])]
    sim = build([0.0, 1.5], [1360, 1360], [40, 40], usable_blocks=200, block_size=16,
                max_model_len=1600, lane=[BATCH, BATCH], prefix_caching=True,
                prefix_hashes=chains, hash_block_size=16, **lanes(interactive_kv_share=0.5))
    peak = []
    sim.engine.on_plan = lambda *_: peak.append(_physical(sim, sim.scheduler.running))
    sim.engine.run()
    rec = sim.recorder
    assert sim.scheduler.cached_tokens[1] == 80 * 16
    assert rec.first_scheduled_s[1] < rec.finish_s[0]
    assert max(peak) <= 100 and sim.scheduler.num_preemptions.sum() == 0
