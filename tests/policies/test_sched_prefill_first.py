"""prefill-first (vLLM v0's default): steps are all whole-prompt prefill or all decode.

Golden cost: 10 ms per step + 1 ms per prefill token, decodes free.
"""

from __future__ import annotations

from tests.sim.helpers import ms, run


def test_a_prefill_step_pauses_running_decodes():
    # r1 arrives while r0 decodes: the next step prefills r1 alone (vllm would mix them)
    sim = run([0.0, 0.015], [4, 4], [10, 2], scheduler="prefill-first")
    assert sim.steps[0][:2] == (0.0, {0: 4})  # 14 ms
    assert sim.steps[1][:2] == (ms(14), {0: 1})  # r1 not there yet
    assert sim.steps[2][:2] == (ms(24), {1: 4})  # prefill only: r0 waits
    assert sim.steps[3][1] == {0: 1, 1: 1}
    mixed = run([0.0, 0.015], [4, 4], [10, 2])
    assert mixed.steps[2][1] == {0: 1, 1: 4}


def test_whole_prompts_up_to_the_budget_then_decode():
    # two 30-token prompts do not fit a 48-token budget together and are never split
    sim = run([0.0, 0.0], [30, 30], [3, 3], max_num_batched_tokens=48, max_model_len=48,
              scheduler="prefill-first")
    assert [s[1] for s in sim.steps[:3]] == [{0: 30}, {1: 30}, {0: 1, 1: 1}]
    chunked = run([0.0, 0.0], [30, 30], [3, 3], max_num_batched_tokens=48, max_model_len=48)
    assert chunked.steps[0][1] == {0: 30, 1: 18}


def test_decode_shortage_preempts_the_newest_and_recomputes_it_whole():
    # 4 blocks of 4: both prompts (8 tokens) fill the pool; r0's first decode needs a block
    sim = run([0.0, 0.0], [8, 8], [3, 3], usable_blocks=4, block_size=4,
              scheduler="prefill-first")
    assert sim.steps[0][1] == {0: 8, 1: 8}
    assert sim.steps[1][1:3] == ({0: 1}, [1])
    recompute = next(s for s in sim.steps[2:] if 1 in s[1])
    assert recompute[1] == {1: 9}  # prompt + the token it had generated, as one prefill


def test_budget_below_max_model_len_is_raised_to_fit_a_whole_prompt():
    sim = run([0.0], [40], [2], max_num_batched_tokens=32, max_model_len=48,
              scheduler="prefill-first")
    assert sim.scheduler.limits.max_num_batched_tokens == 48
    assert sim.steps[0][1] == {0: 40}
