"""sarathi: decodes first, then partial prefills, then new prefills, under chunk_size."""

from __future__ import annotations

from sim.sched.sarathi import SarathiParams
from tests.sim.helpers import run


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


def test_a_decode_is_served_before_an_older_partial_prefill_and_never_preempted():
    # 11 blocks of 4 slots. r0's 40-token prompt is chunked 8 tokens a step (threshold);
    # r1 (1-token prompt) is decoding alongside. When blocks run out, vLLM serves r0 first
    # and preempts the newest request, r1; Sarathi serves r1's decode first and the victim
    # is the tail of its service order: r0's partial prefill.
    kw = dict(usable_blocks=11, block_size=4, max_model_len=48, max_num_batched_tokens=48,
              threshold=8)
    vllm = run([0.0, 0.0], [40, 1], [2, 20], **kw)
    assert 1 in {p for s in vllm.steps for p in s[2]}
    sim = run([0.0, 0.0], [40, 1], [2, 20], **kw, **sarathi(48))
    assert {p for s in sim.steps for p in s[2]} == {0}
    # stall-free: r1 computes a token in every step until it finishes
    last = max(i for i, s in enumerate(sim.steps) if 1 in s[1])
    assert all(s[1].get(1) == 1 for s in sim.steps[1:last + 1])
