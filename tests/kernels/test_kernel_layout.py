"""Layout helpers, and the kernels chained as live mode would: write, prefill, decode."""

import pytest
import torch

from kernels import kv_write, layout, paged_decode, paged_prefill
from tests.kernels.kernel_testlib import assert_matches, int32, randn

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")


def test_block_table_pads_rows():
    table = layout.block_table([[3, 1], [], [4]], width=3, pad=-1)
    assert table.dtype == torch.int32
    assert table.tolist() == [[3, 1, -1], [-1, -1, -1], [4, -1, -1]]
    assert layout.block_table([]).shape == (0, 1)
    with pytest.raises(ValueError, match="width"):
        layout.block_table([[1, 2, 3]], width=2)


def test_slot_mapping_positions():
    slots = layout.slot_mapping([[5, 2], [7]], starts=[14, 0], counts=[3, 2], block_size=16)
    assert slots.dtype == torch.int64
    assert slots.tolist() == [5 * 16 + 14, 5 * 16 + 15, 2 * 16 + 0, 7 * 16, 7 * 16 + 1]
    with pytest.raises(ValueError, match="do not fit"):
        layout.slot_mapping([[5]], starts=[10], counts=[7], block_size=16)


def test_make_cache_shapes():
    k, v = layout.make_cache(4, 32, 2, 64, torch.bfloat16, "cpu")
    assert k.shape == v.shape == (4, 32, 2, 64) and k.dtype == torch.bfloat16
    assert k.data_ptr() != v.data_ptr()


def dense_causal(q, k, v, first_pos):
    """float64 causal attention of q [n, H, D] at positions first_pos.. over k/v [ctx, Hkv, D]."""
    group = q.shape[1] // k.shape[1]
    k = k.double().repeat_interleave(group, 1)
    v = v.double().repeat_interleave(group, 1)
    scores = torch.einsum("qhd,khd->hqk", q.double(), k) / q.shape[-1] ** 0.5
    visible = torch.arange(k.shape[0])[None, :] <= first_pos + torch.arange(q.shape[0])[:, None]
    probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    return torch.einsum("hqk,khd->qhd", probs, v)


def test_write_prefill_decode_chain(gen, seed):
    """Two sequences: two prefill chunks each, then one decode step, against dense attention."""
    block_size, hkv, heads, dim, dtype = 16, 2, 8, 32, torch.float16
    chunks = [[20, 13], [7, 30]]  # per sequence: chunk 1 and chunk 2 lengths
    total = [sum(c) + 1 for c in chunks]  # + the decode token
    pages = [-(-n // block_size) for n in total]
    perm = torch.randperm(sum(pages) + 2, generator=gen).tolist()
    blocks = [perm[: pages[0]], perm[pages[0]: pages[0] + pages[1]]]
    k_cache, v_cache = layout.make_cache(len(perm), block_size, hkv, dim, dtype, "cpu")
    table = layout.block_table(blocks)
    ks = [randn(gen, n, hkv, dim, dtype=dtype) for n in total]
    vs = [randn(gen, n, hkv, dim, dtype=dtype) for n in total]
    qs = [randn(gen, n, heads, dim, dtype=dtype) for n in total]

    done = [0, 0]
    for step in range(3):  # chunk 1, chunk 2, decode token
        counts = [c[step] if step < 2 else 1 for c in chunks]
        rows = [slice(done[s], done[s] + counts[s]) for s in range(2)]
        slots = layout.slot_mapping(blocks, done, counts, block_size)
        kv_write(torch.cat([ks[s][rows[s]] for s in range(2)]),
                 torch.cat([vs[s][rows[s]] for s in range(2)]), k_cache, v_cache, slots)
        q = torch.cat([qs[s][rows[s]] for s in range(2)])
        ref = torch.cat([dense_causal(qs[s][rows[s]], ks[s][: done[s] + counts[s]],
                                      vs[s][: done[s] + counts[s]], done[s]) for s in range(2)])
        if step < 2:
            qsl = int32([0, counts[0], counts[0] + counts[1]])
            out = paged_prefill(q, k_cache, v_cache, table, int32(done), qsl)
        else:
            out = paged_decode(q, k_cache, v_cache, table, int32(total), num_splits=2)
        assert_matches(out, ref, dtype, seed)
        done = [done[s] + counts[s] for s in range(2)]
