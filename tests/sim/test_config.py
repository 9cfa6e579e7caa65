"""Scenario resolution: vLLM defaults, KV capacity, impossible configs."""

from __future__ import annotations

import pytest

from sim.config.memory import GIB
from sim.config.resolve import ConfigError, resolve
from sim.config.scenario import Scenario

WL = {"arrival": {"process": "poisson", "rate": 1.0}, "lengths": {"dist": "fixed", "prompt": 10,
      "output": 10}, "num_requests": 5}


def sc(**kw) -> Scenario:
    base = {"model": "llama-3-8b", "gpu": "h100-sxm", "workload": WL}
    base.update(kw)
    return Scenario.model_validate(base)


def test_vllm_defaults_follow_the_gpu():
    big = resolve(sc()).limits
    assert (big.max_num_seqs, big.max_num_batched_tokens) == (1024, 8192)
    a100 = resolve(sc(gpu="a100-80gb")).limits
    assert (a100.max_num_seqs, a100.max_num_batched_tokens) == (256, 2048)
    off = resolve(sc(engine={"enable_chunked_prefill": False})).limits
    assert off.max_num_batched_tokens == 8192  # max(max_model_len 8192, 2048)
    assert big.max_model_len == 8192
    # 160 GiB or more: vLLM 0.32's 16,384 (engine/arg_utils.py:2922-2932; PR 51726)
    for gpu in ("b200", "b300"):
        huge = resolve(sc(gpu=gpu)).limits
        assert (huge.max_num_seqs, huge.max_num_batched_tokens) == (1024, 16384), gpu
    assert resolve(sc(gpu="h200-sxm")).limits.max_num_batched_tokens == 8192  # 139.8 GiB


def test_kv_capacity_is_memory_left_after_weights_and_activations():
    r = resolve(sc())
    m = r.memory
    assert m.weight_bytes == pytest.approx(16.06e9, rel=0.01)
    assert m.block_bytes == 16 * 131072
    assert m.num_gpu_blocks == (m.usable_bytes - m.weight_bytes - m.activation_bytes
                                - m.non_torch_bytes) // m.block_bytes
    assert m.usable_blocks == m.num_gpu_blocks - 1  # the null block
    assert 50 * GIB < m.kv_bytes < 58 * GIB
    assert r.kv_capacity_tokens == m.usable_blocks * 16


def test_blocks_override_keeps_a_null_block():
    r = resolve(sc(engine={"num_gpu_blocks_override": 1000}))
    assert r.memory.usable_blocks == 999


def test_tensor_parallel_halves_weights_and_kv_per_token():
    one, two = resolve(sc()), resolve(sc(tensor_parallel_size=2))
    assert two.memory.weight_bytes == pytest.approx(one.memory.weight_bytes / 2, rel=1e-6)
    assert two.memory.block_bytes == one.memory.block_bytes // 2
    assert two.memory.usable_blocks > 2 * one.memory.usable_blocks


@pytest.mark.parametrize("kw,needle", [
    ({"model": "llama-3-70b"}, "does not fit"),
    ({"tensor_parallel_size": 3}, "must divide"),
    ({"engine": {"max_model_len": 9000}}, "exceeds"),
    ({"engine": {"enable_chunked_prefill": False, "max_num_batched_tokens": 4096}},
     "smaller than max_model_len"),
    ({"engine": {"num_gpu_blocks_override": 100}}, "max_model_len"),
])
def test_impossible_configs(kw, needle):
    with pytest.raises(ConfigError, match=needle):
        resolve(sc(**kw))


def test_70b_fits_with_tp2():
    r = resolve(sc(model="llama-3-70b", tensor_parallel_size=2))
    assert r.memory.usable_blocks > 1000
