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


def test_a_decode_preempts_the_newest_as_soon_as_no_free_block_is_left():
    # 4 blocks of 4 slots; two 6-token prompts hold 2 blocks each and none is free. Their
    # decodes need no new block (7 tokens fit 8 slots), yet vLLM v0's can_append_slots (one
    # free block per sequence, block manager v1) preempts the newest before r0's decode
    sim = run([0.0, 0.0], [6, 6], [3, 3], usable_blocks=4, block_size=4, max_model_len=16,
              scheduler="prefill-first")
    assert sim.steps[0][1] == {0: 6, 1: 6}
    assert sim.steps[1][1:3] == ({0: 1}, [1])
    assert sim.steps[2][1] == {1: 7}  # recomputed whole: prompt + its one output token


def _resolved(**over):
    from sim.config.load import validate
    from sim.config.resolve import resolve

    data = {"name": "v0", "model": "llama-3-8b", "gpu": "h100-sxm",
            "engine": {"max_model_len": 4096}, "scheduler": {"name": "prefill-first"},
            "workload": {"arrival": {"process": "constant", "rate": 1.0},
                         "lengths": {"dist": "fixed", "prompt": 8, "output": 3},
                         "num_requests": 2}}
    for key, value in over.items():
        data[key] = {**data.get(key, {}), **value}
    return resolve(validate(data, "test"))


def _kv_reserve(r) -> int:
    from sim.engine.requests import RequestSpecs
    from sim.runner import build_kv

    return build_kv(r, RequestSpecs.from_arrays([0.0], [8], [3])).admission_reserve


def test_vllm_v0_defaults_unless_the_scenario_sets_them():
    # v0: max_num_seqs 256, max_num_batched_tokens max(max_model_len, 2048) with chunking off,
    # watermark 0.01 (v1's API server on an H100: 1024 sequences, 8192 tokens, watermark 0)
    r = _resolved()
    assert r.limits.max_num_seqs == 256
    assert r.limits.max_num_batched_tokens == 4096
    assert not r.limits.enable_chunked_prefill
    assert _kv_reserve(r) == int(0.01 * r.memory.usable_blocks) > 0
    r = _resolved(engine={"max_num_seqs": 64, "max_num_batched_tokens": 6000},
                  kv={"name": "paged", "watermark": 0.0})
    assert (r.limits.max_num_seqs, r.limits.max_num_batched_tokens) == (64, 6000)
    assert _kv_reserve(r) == 0
