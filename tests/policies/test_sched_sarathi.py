"""sarathi: decodes first, then partial prefills, then new prefills, under chunk_size."""

from __future__ import annotations

import pytest

from sim.kv.paged import PagedParams
from sim.sched.sarathi import SarathiParams
from tests.sim.helpers import build, run


def sarathi(chunk_size: int) -> dict:
    return {"scheduler": "sarathi", "params": SarathiParams(chunk_size=chunk_size)}


def test_step_budget_is_the_smaller_of_chunk_size_and_the_engine_budget():
    small_chunk = run([0.0], [100], [1], max_num_batched_tokens=2048, **sarathi(32))
    assert [s[1] for s in small_chunk.steps] == [{0: 32}, {0: 32}, {0: 32}, {0: 4}]
    small_engine = run([0.0], [100], [1], max_num_batched_tokens=48, **sarathi(4096))
    assert [s[1] for s in small_engine.steps] == [{0: 48}, {0: 48}, {0: 4}]


def test_chunking_is_on_even_when_the_engine_turns_it_off():
    sim = run([0.0, 0.0], [30, 30], [1, 1], max_num_batched_tokens=48, max_model_len=48,
              chunked=False, **sarathi(512))
    assert sim.steps[0][1] == {0: 30, 1: 18}


def test_decodes_then_partial_prefills_oldest_first_then_new_requests():
    # budget 8: r0's 20-token prompt takes every token of the first two steps; r1 starts
    # with what r0's last chunk leaves; decodes come first, then the partial prefill
    sim = run([0.0, 0.0, 0.0], [20, 20, 1], [10, 10, 10], **sarathi(8))
    assert [s[1] for s in sim.steps[:7]] == [
        {0: 8}, {0: 8}, {0: 4, 1: 4}, {0: 1, 1: 7}, {0: 1, 1: 7}, {0: 1, 1: 2, 2: 1},
        {0: 1, 1: 1, 2: 1}]


# ---- Sarathi-Serve's memory rules (sarathi/core/scheduler/sarathi_scheduler.py and the
# block manager it forked from vLLM v0): whole prompts allocated at admission, beyond a 1%
# watermark; a partial prefill never allocates again, so it never preempts.
WATERMARK = PagedParams(watermark=0.01)


def test_a_prompt_that_cannot_be_allocated_whole_waits_instead_of_thrashing():
    # 100 blocks of 16 slots. r0: 400-token prompt (25 blocks), 600 outputs (63 blocks at the
    # end). r1, 1 ms later: a 1,200-token prompt (75 blocks) never fits beside r0 with the
    # 1-block watermark, so it waits for r0 to finish: r0's prefill (10 + 400 ms) and 599
    # decode steps of 10 ms end at 6.40 s; r1's chunks (512, 512, 176) take 1.23 s more.
    sim = run([0.0, 0.001], [400, 1200], [600, 10], usable_blocks=100, block_size=16,
              kv_params=WATERMARK, **sarathi(512))
    assert sim.scheduler.num_preemptions.sum() == 0 and sim.scheduler.recomputed_tokens == 0
    rec = sim.recorder
    assert rec.finish_s[0] == pytest.approx(6.40)
    assert rec.first_scheduled_s[1] == pytest.approx(rec.finish_s[0])
    assert rec.first_token_s[1] - 0.001 == pytest.approx(6.40 + 1.23 - 0.001)


def test_admission_allocates_the_whole_prompt_and_chunks_never_allocate():
    # a 100-token prompt in 32-token chunks holds all 7 blocks of 16 from its first chunk on
    sim = build([0.0], [100], [3], usable_blocks=50, block_size=16, **sarathi(32))
    held = []
    sim.engine.on_plan = lambda plan, *_: held.append(int(sim.kv.held[0]))
    sim.engine.run()
    assert held[:4] == [7, 7, 7, 7]  # chunks 32, 32, 32, 4


def test_admission_keeps_the_watermark_free():
    # 100 blocks, watermark 1 block: r0 (784 + 1 tokens) holds 50 blocks once decoding; r1's
    # 50-block prompt would leave none free, so it waits for r0; without a watermark it fits
    args = ([0.0, 0.001], [784, 800], [3, 2])
    kw = dict(usable_blocks=100, block_size=16, max_num_batched_tokens=4096, **sarathi(4096))
    rec = run(*args, kv_params=WATERMARK, **kw).recorder
    assert rec.first_scheduled_s[1] == pytest.approx(rec.finish_s[0])
    rec = run(*args, **kw).recorder
    assert rec.first_scheduled_s[1] < rec.finish_s[0]


def test_a_decode_preempts_the_newest_as_soon_as_no_free_block_is_left():
    # 4 blocks of 4 slots; two 6-token prompts hold 2 blocks each, none is free. Their next
    # decodes need no new block (7 tokens fit 8 slots), yet Sarathi-Serve's can_append_slot
    # (one free block per sequence, as vLLM v0) preempts the newest, r1; vLLM v1 would not
    sim = run([0.0, 0.0], [6, 6], [3, 3], usable_blocks=4, block_size=4, max_model_len=16,
              **sarathi(64))
    assert sim.steps[0][1] == {0: 6, 1: 6}
    assert sim.steps[1][2] == [1] and 0 in sim.steps[1][1]
    v1 = run([0.0, 0.0], [6, 6], [3, 3], usable_blocks=4, block_size=4, max_model_len=16)
    assert v1.steps[1][1] == {0: 1, 1: 1} and v1.steps[1][2] == []
