"""paged_prefill vs its float64 reference, on the CPU through Triton's interpreter."""

import importlib

import pytest
import torch

from tests.kernels.kernel_testlib import (
    DTYPE_IDS,
    DTYPES,
    TOLERANCE,
    assert_matches,
    int32,
    nan_like,
    paged_cache,
    randn,
)

# The package re-exports the launcher under the module's name, so fetch the module itself.
pp = importlib.import_module("kernels.paged_prefill")

# The interpreter itself trips a numpy deprecation on every scalar loop bound.
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

# (prefix_len, chunk_len): no prefix; single-token chunk; prefix and chunk not multiples of
# the page or tile size; prefix an exact page multiple; empty chunk; chunk spanning 3 tiles.
BATCH = [(0, 1), (37, 20), (64, 1), (5, 0), (19, 45)]
HEAD_DIM = 32


def run_case(gen, seed, batch, group, block_size, dtype, head_dim=HEAD_DIM, q_scale=1.0,
             tol=None, **kwargs):
    num_kv_heads = 2 if group == 1 else 1  # few heads: interpreter time ~ programs
    prefix = [p for p, _ in batch]
    chunks = [c for _, c in batch]
    ctx = [p + c for p, c in batch]
    k_cache, v_cache, table = paged_cache(gen, ctx, block_size, num_kv_heads, head_dim, dtype)
    q = randn(gen, sum(chunks), num_kv_heads * group, head_dim, dtype=dtype, scale=q_scale)
    prefix_lens = int32(prefix)
    qsl = int32([sum(chunks[:i]) for i in range(len(chunks) + 1)])
    out = pp.paged_prefill(q, k_cache, v_cache, table, prefix_lens, qsl, out=nan_like(q),
                           **kwargs)
    ref = pp.paged_prefill_ref(q, k_cache, v_cache, table, prefix_lens, qsl,
                               scale=kwargs.get("scale"))
    return assert_matches(out, ref, dtype, seed, tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("group", [1, 4, 8])
def test_prefill_matches_reference(gen, seed, group, block_size, dtype):
    run_case(gen, seed, BATCH, group, block_size, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_prefill_gpu_tile_config(gen, seed, dtype, monkeypatch):
    """The GPU tile sizes (128 x 64 for fp16, 32 x 16 for fp32) are also correct."""
    real_config = pp.prefill_config
    monkeypatch.setattr(pp, "prefill_config", lambda *args: real_config(*args[:-1], False))
    run_case(gen, seed, [(70, 130), (3, 1)], 4, 16, dtype)


def test_prefill_single_token_chunks_equal_decode(gen, seed):
    """Chunks of one token are decode steps: both kernels must agree."""
    decode = importlib.import_module("kernels.paged_decode")
    lens = [1, 40, 77]
    k_cache, v_cache, table = paged_cache(gen, lens, 16, 2, HEAD_DIM, torch.float32)
    q = randn(gen, 3, 8, HEAD_DIM)
    prefill_out = pp.paged_prefill(q, k_cache, v_cache, table, int32([n - 1 for n in lens]),
                                   int32([0, 1, 2, 3]), out=nan_like(q))
    decode_out = decode.paged_decode(q, k_cache, v_cache, table, int32(lens), num_splits=2)
    assert_matches(prefill_out, decode_out.double(), torch.float32, seed)


@pytest.mark.parametrize("head_dim", [16, 24])
def test_prefill_head_dim_padding(gen, seed, head_dim):
    run_case(gen, seed, [(10, 18), (0, 5)], 4, 16, torch.float16, head_dim=head_dim)


def test_prefill_large_scores_are_stable(gen, seed):
    # scores 30x the usual: exp's argument carries 30x the absolute fp32 rounding, so the
    # bound is 4x the fp32 one (150 seeds: error median 2.5e-6, p99 5.6e-6, max 7.4e-6; 7
    # of them over the plain 5e-6, which made this test fail one run in twenty)
    run_case(gen, seed, [(21, 30), (0, 17)], 4, 16, torch.float32, q_scale=30.0,
             tol=4 * TOLERANCE[torch.float32])


def test_prefill_custom_scale_and_max_query_len(gen, seed):
    run_case(gen, seed, BATCH, 1, 32, torch.float16, scale=0.3, max_query_len=64)


def test_prefill_strided_views(gen, seed):
    """q/out views with a contiguous last dim (e.g. q sliced out of a fused QKV buffer)."""
    k_cache, v_cache, table = paged_cache(gen, [30, 21], 16, 2, HEAD_DIM, torch.float16)
    qkv = randn(gen, 23, 8 + 2 * 2, HEAD_DIM, dtype=torch.float16)
    q = qkv[:, :8]  # token stride (8 + 4) * head_dim, not 8 * head_dim
    out_buf = nan_like(torch.empty(23, 8, 2 * HEAD_DIM, dtype=torch.float16))
    out = out_buf[:, :, HEAD_DIM:]
    prefix_lens, qsl = int32([20, 8]), int32([0, 10, 23])
    pp.paged_prefill(q, k_cache, v_cache, table, prefix_lens, qsl, out=out)
    ref = pp.paged_prefill_ref(q, k_cache, v_cache, table, prefix_lens, qsl)
    assert_matches(out, ref, torch.float16, seed)
    assert torch.isnan(out_buf[:, :, :HEAD_DIM]).all(), "wrote outside the out view"


def test_prefill_all_chunks_empty():
    k_cache = torch.zeros(4, 16, 2, HEAD_DIM)
    q = torch.zeros(0, 4, HEAD_DIM)
    out = pp.paged_prefill(q, k_cache, k_cache.clone(), torch.zeros(2, 1, dtype=torch.int32),
                           int32([3, 0]), int32([0, 0, 0]))
    assert out.shape == (0, 4, HEAD_DIM)
