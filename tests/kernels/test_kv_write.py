"""kv_write vs its reference (exact: it only moves data), on the CPU interpreter."""

import pytest
import torch

from kernels import kv_write, kv_write_ref, layout
from tests.kernels.kernel_testlib import DTYPE_IDS, DTYPES, randn

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("slot_dtype", [torch.int32, torch.int64], ids=["i32", "i64"])
@pytest.mark.parametrize("num_kv_heads,head_dim", [(2, 32), (3, 24)])
def test_kv_write_matches_reference(gen, seed, dtype, block_size, slot_dtype, num_kv_heads,
                                    head_dim):
    num_blocks, num_tokens = 6, 23
    k_cache, v_cache = layout.make_cache(num_blocks, block_size, num_kv_heads, head_dim,
                                         dtype, "cpu")
    k_cache.copy_(randn(gen, *k_cache.shape, dtype=dtype))  # untouched slots must survive
    v_cache.copy_(randn(gen, *v_cache.shape, dtype=dtype))
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:num_tokens]
    slots[torch.randperm(num_tokens, generator=gen)[:4]] = -1  # padding tokens: skipped
    slots = slots.to(slot_dtype)
    k = randn(gen, num_tokens, num_kv_heads, head_dim, dtype=dtype)
    v = randn(gen, num_tokens, num_kv_heads, head_dim, dtype=dtype)
    ref_k, ref_v = kv_write_ref(k, v, k_cache, v_cache, slots)
    kv_write(k, v, k_cache, v_cache, slots)
    assert torch.equal(k_cache.double(), ref_k), f"seed {seed}"
    assert torch.equal(v_cache.double(), ref_v), f"seed {seed}"


def test_kv_write_strided_inputs(gen, seed):
    """k and v may be views into a fused QKV projection output."""
    qkv = randn(gen, 9, 4 + 2 + 2, 32, dtype=torch.float16)
    k, v = qkv[:, 4:6], qkv[:, 6:8]
    k_cache, v_cache = layout.make_cache(3, 16, 2, 32, torch.float16, "cpu")
    slots = torch.tensor([0, 17, 33, 47, -1, 5, 6, 20, 40])
    ref_k, ref_v = kv_write_ref(k, v, k_cache, v_cache, slots)
    kv_write(k, v, k_cache, v_cache, slots)
    assert torch.equal(k_cache.double(), ref_k) and torch.equal(v_cache.double(), ref_v)


def test_kv_write_no_tokens():
    k_cache, v_cache = layout.make_cache(2, 16, 2, 32, torch.float16, "cpu")
    empty = torch.zeros(0, 2, 32, dtype=torch.float16)
    kv_write(empty, empty, k_cache, v_cache, torch.zeros(0, dtype=torch.int64))
    assert not k_cache.any()
