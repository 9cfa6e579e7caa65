"""paged_decode vs its float64 reference, on the CPU through Triton's interpreter."""

import importlib

import pytest
import torch

from tests.kernels.kernel_testlib import (
    DTYPE_IDS,
    DTYPES,
    assert_matches,
    int32,
    nan_like,
    paged_cache,
    randn,
)

# The package re-exports the launcher under the module's name, so fetch the module itself.
pd = importlib.import_module("kernels.paged_decode")

# The interpreter itself trips a numpy deprecation on every scalar loop bound.
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")

# 1 token, not multiples of 16 or 32, exact multiples, one >= 3 pages of 32.
LENS = [1, 37, 64, 100, 17]
HEAD_DIM = 32


def run_case(gen, seed, lens, group, block_size, dtype, num_splits, head_dim=HEAD_DIM,
             q_scale=1.0, **kwargs):
    num_kv_heads = 1 if group == 8 else 2
    k_cache, v_cache, table = paged_cache(gen, lens, block_size, num_kv_heads, head_dim, dtype)
    q = randn(gen, len(lens), num_kv_heads * group, head_dim, dtype=dtype, scale=q_scale)
    seq_lens = int32(lens)
    out = pd.paged_decode(q, k_cache, v_cache, table, seq_lens, out=nan_like(q),
                          num_splits=num_splits, **kwargs)
    ref = pd.paged_decode_ref(q, k_cache, v_cache, table, seq_lens, scale=kwargs.get("scale"))
    return assert_matches(out, ref, dtype, seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("block_size,num_splits", [(16, 3), (32, 1)])  # both epilogues
@pytest.mark.parametrize("group", [1, 4, 8])
def test_decode_matches_reference(gen, seed, group, block_size, dtype, num_splits):
    run_case(gen, seed, LENS, group, block_size, dtype, num_splits)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_decode_gpu_tile_config(gen, seed, dtype, monkeypatch):
    """The tile sizes the launcher picks for a GPU (BLOCK_N 64 here) are also correct."""
    real_config = pd.decode_config
    monkeypatch.setattr(pd, "decode_config", lambda *args: real_config(*args[:-1], False))
    run_case(gen, seed, [1, 70, 130], 4, 16, dtype, num_splits=2)


def test_decode_default_splits_and_long_split_plan(gen, seed):
    """num_splits=None (heuristic) and more requested splits than tiles (clamped)."""
    run_case(gen, seed, LENS, 4, 16, torch.float32, num_splits=None)
    run_case(gen, seed, [5, 20], 4, 16, torch.float32, num_splits=64)


@pytest.mark.parametrize("head_dim", [16, 24, 40])
def test_decode_head_dim_padding(gen, seed, head_dim):
    """head_dim that is not a power of two is padded to BLOCK_D and masked."""
    run_case(gen, seed, [3, 33], 4, 16, torch.float16, num_splits=2, head_dim=head_dim)


def test_decode_large_scores_are_stable(gen, seed):
    """Scores ~ +-100: the running max keeps exp2 finite (no overflow to inf/NaN)."""
    run_case(gen, seed, LENS, 4, 16, torch.float32, num_splits=3, q_scale=30.0)


def test_decode_custom_scale_and_max_seq_len(gen, seed):
    run_case(gen, seed, LENS, 1, 32, torch.float16, num_splits=2, scale=0.05, max_seq_len=128)


def test_decode_zero_length_sequence_gives_zeros(gen, seed):
    """seq_len 0 (e.g. a padded batch slot) writes zeros instead of leaving garbage."""
    for splits in (1, 2):
        k_cache, v_cache, table = paged_cache(gen, [0, 40], 16, 2, HEAD_DIM, torch.float32)
        q = randn(gen, 2, 8, HEAD_DIM)
        seq_lens = int32([0, 40])
        out = pd.paged_decode(q, k_cache, v_cache, table, seq_lens, out=nan_like(q),
                              num_splits=splits)
        assert torch.equal(out[0], torch.zeros_like(out[0]))
        ref = pd.paged_decode_ref(q, k_cache, v_cache, table, seq_lens)
        assert_matches(out, ref, torch.float32, seed)


def test_decode_strided_views(gen, seed):
    """q and out may be views with arbitrary strides except a contiguous last dim."""
    k_cache, v_cache, table = paged_cache(gen, LENS, 16, 2, HEAD_DIM, torch.float16)
    q = randn(gen, len(LENS), 16, HEAD_DIM, dtype=torch.float16)[:, ::2]  # 8 heads, stride 2
    out_buf = nan_like(torch.empty(len(LENS), 8, 2 * HEAD_DIM, dtype=torch.float16))
    out = out_buf[:, :, :HEAD_DIM]
    seq_lens = int32(LENS)
    pd.paged_decode(q, k_cache, v_cache, table, seq_lens, out=out, num_splits=2)
    ref = pd.paged_decode_ref(q, k_cache, v_cache, table, seq_lens)
    assert_matches(out, ref, torch.float16, seed)
    assert torch.isnan(out_buf[:, :, HEAD_DIM:]).all(), "wrote outside the out view"


def test_decode_empty_batch():
    k_cache = torch.zeros(4, 16, 2, HEAD_DIM)
    q = torch.zeros(0, 4, HEAD_DIM)
    out = pd.paged_decode(q, k_cache, k_cache.clone(), torch.zeros(0, 2, dtype=torch.int32),
                          int32([]))
    assert out.shape == (0, 4, HEAD_DIM)


@pytest.mark.parametrize("splits,max_len,expect", [(None, 32768, None), (3, 300, 3), (3, 100, 2),
                                                   (64, 20, 1), (1, 10**6, 1)])
def test_plan_splits_covers_context(splits, max_len, expect):
    num, split_len = pd.plan_splits(1, 8, max_len, 64, torch.device("cpu"), splits)
    assert split_len % 64 == 0 and num * split_len >= max_len
    assert (num - 1) * split_len < max_len  # no trailing empty split
    if expect is not None:
        assert num == expect


@pytest.mark.parametrize("num_seqs,max_len,expect", [(1, 32768, 64), (32, 32768, 3),
                                                     (256, 4096, 1), (4, 300, 1)])
def test_plan_splits_gpu_heuristic(monkeypatch, num_seqs, max_len, expect):
    """On a 132-SM H100: ~4 programs per SM, but >= 512 tokens per split."""
    monkeypatch.setattr(pd, "_sm_count", lambda device: 132)
    num, split_len = pd.plan_splits(num_seqs, 8, max_len, 64, torch.device("cuda"), None)
    assert num == expect and num * split_len >= max_len
