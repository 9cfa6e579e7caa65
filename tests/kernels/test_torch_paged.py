"""The paged kernels' torch paths (what the CPU runs) against the float64 references."""

import pytest
import torch

from kernels import kv_write_ref, paged_decode_ref, paged_prefill_ref
from kernels.torch_paged import kv_write_torch, paged_decode_torch, paged_prefill_torch
from tests.kernels.kernel_testlib import assert_matches, int32, nan_like, paged_cache, randn

HEAD_DIM = 32
# fp32 runs scaled_dot_product_attention in fp32 over the gathered pages
TOL = {torch.float32: 2e-6, torch.bfloat16: 1.5e-2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("group", [1, 4])
def test_decode_torch_matches_reference(gen, seed, group, dtype):
    lens = [1, 16, 37, 100, 0]
    k_cache, v_cache, table = paged_cache(gen, lens, 16, 2, HEAD_DIM, dtype)
    q = randn(gen, len(lens), 2 * group, HEAD_DIM, dtype=dtype)
    out = paged_decode_torch(q, k_cache, v_cache, table, int32(lens), out=nan_like(q))
    ref = paged_decode_ref(q, k_cache, v_cache, table, int32(lens))
    assert_matches(out, ref, dtype, seed, TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("group", [1, 4])
def test_prefill_torch_matches_reference(gen, seed, group, dtype):
    batch = [(0, 1), (37, 20), (64, 1), (5, 0), (0, 45), (19, 45)]  # (prefix, chunk)
    ctx = [p + c for p, c in batch]
    k_cache, v_cache, table = paged_cache(gen, ctx, 16, 2, HEAD_DIM, dtype)
    chunks = [c for _, c in batch]
    q = randn(gen, sum(chunks), 2 * group, HEAD_DIM, dtype=dtype)
    prefix, qsl = int32([p for p, _ in batch]), int32([sum(chunks[:i]) for i in range(7)])
    out = paged_prefill_torch(q, k_cache, v_cache, table, prefix, qsl, out=nan_like(q))
    ref = paged_prefill_ref(q, k_cache, v_cache, table, prefix, qsl)
    assert_matches(out, ref, dtype, seed, TOL[dtype])


def test_kv_write_torch_matches_reference(gen):
    k_cache, v_cache, _ = paged_cache(gen, [5], 4, 2, HEAD_DIM, torch.float32, spare_blocks=4)
    k_cache.zero_()
    v_cache.zero_()
    k, v = randn(gen, 4, 2, HEAD_DIM), randn(gen, 4, 2, HEAD_DIM)
    slots = torch.tensor([9, 10, -1, 3])  # -1: skipped
    want_k, want_v = kv_write_ref(k, v, k_cache, v_cache, slots)
    kv_write_torch(k, v, k_cache, v_cache, slots)
    assert torch.equal(k_cache.double(), want_k) and torch.equal(v_cache.double(), want_v)
