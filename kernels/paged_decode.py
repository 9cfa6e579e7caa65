"""Paged decode attention, flash-decoding style: one query token per sequence.

Memory layout (shared by every kernel in kernels/):

    q, out       [num_seqs, num_heads, head_dim]                       head_dim contiguous
    k/v_cache    [num_blocks, block_size, num_kv_heads, head_dim]       head_dim contiguous
    block_table  [num_seqs, max_blocks_per_seq] int32                   physical page ids
    seq_lens     [num_seqs] int32   cached tokens per sequence, including the current one

Token t of sequence s is row t % block_size of page block_table[s, t // block_size]:

    block_size 4, seq_len 10, block_table[s] = [7, 2, 5, x]     (x: never read)
    token   0 1 2 3 | 4 5 6 7 | 8 9 - -
    page    7       | 2       | 5         rows 2..3 of page 5 are masked out

Query head h reads KV head h // G, G = num_heads // num_kv_heads (GQA).

Work split (grid = num_seqs x num_kv_heads x num_splits): program (s, g, i) covers tokens
[i * split_len, (i + 1) * split_len) of sequence s, clipped to seq_len, for all G query heads
of KV head g at once (rows of one [GROUP_PAD >= 16, D] tile), so each K/V byte is read once.
With one split it writes `out` directly; otherwise it writes unnormalised partials
(acc, max m_i, sum l_i) and _reduce_kernel merges the splits. seq_len 0 gives a zero output.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from kernels import _checks as chk
from kernels._attn import (
    LOG2E,
    dot_types,
    load_kv,
    pow2_at_least_16,
    qk_scores,
    softmax_step,
)

MAX_SPLITS = 128
MIN_SPLIT_TOKENS = 512


@triton.jit
def _decode_split_kernel(
    q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, out_ptr, part_acc_ptr, part_m_ptr, part_l_ptr,
    stride_qs, stride_qh, stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh,
    stride_bts, stride_os, stride_oh,
    qk_scale, split_len, num_splits,
    GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr,
    SINGLE_SPLIT: tl.constexpr, DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    seq = tl.program_id(0).to(tl.int64)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = tl.load(lens_ptr + seq)
    start = split * split_len
    end = tl.minimum(start + split_len, seq_len)  # empty split: loop skipped, l_i stays 0

    offs_g = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, BLOCK_D)
    heads = kv_head * GROUP + offs_g  # rows >= GROUP are padding: q = 0, never stored
    row_mask = (offs_g < GROUP)[:, None] & (offs_d < HEAD_DIM)[None, :]
    q_offs = seq * stride_qs + heads[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(q_ptr + q_offs, mask=row_mask, other=0.0).to(DOT_DTYPE)

    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, BLOCK_D], tl.float32)
    bt_row = bt_ptr + seq * stride_bts
    for n0 in range(start, end, BLOCK_N):
        pos = n0 + tl.arange(0, BLOCK_N)
        valid = pos < end
        k, v = load_kv(k_ptr, v_ptr, bt_row, pos, valid, kv_head, offs_d, stride_kb, stride_kt,
                        stride_kh, stride_vb, stride_vt, stride_vh, BLOCK_SIZE, HEAD_DIM, DOT_DTYPE)
        s = qk_scores(q, k, qk_scale, DOT_PRECISION)
        s = tl.where(valid[None, :], s, float("-inf"))
        acc, m_i, l_i = softmax_step(acc, m_i, l_i, s, v, DOT_DTYPE, DOT_PRECISION)

    if SINGLE_SPLIT:
        o = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]  # l_i = 0 only if seq_len = 0: acc = 0
        o_offs = seq * stride_os + heads[:, None] * stride_oh + offs_d[None, :]
        tl.store(out_ptr + o_offs, o.to(out_ptr.dtype.element_ty), mask=row_mask)
    else:
        # partials: acc [S, H, num_splits, BLOCK_D], m_i and l_i [S, H, num_splits], fp32, dense
        num_heads = tl.num_programs(1) * GROUP
        idx = (seq * num_heads + heads) * num_splits + split  # [GROUP_PAD]
        g_mask = offs_g < GROUP
        tl.store(part_m_ptr + idx, m_i, mask=g_mask)
        tl.store(part_l_ptr + idx, l_i, mask=g_mask)
        tl.store(part_acc_ptr + idx[:, None] * BLOCK_D + offs_d[None, :], acc,
                 mask=g_mask[:, None])


@triton.jit
def _reduce_kernel(
    out_ptr, part_acc_ptr, part_m_ptr, part_l_ptr,
    stride_os, stride_oh,
    num_splits,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, SPLITS_PAD: tl.constexpr,
):
    """out[s, h] = sum_i w_i acc_i / sum_i w_i l_i with w_i = exp2(m_i - max_i m_i)."""
    seq = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    offs_i = tl.arange(0, SPLITS_PAD)
    offs_d = tl.arange(0, BLOCK_D)
    idx = (seq * tl.num_programs(1) + head) * num_splits + offs_i
    i_mask = offs_i < num_splits
    m_i = tl.load(part_m_ptr + idx, mask=i_mask, other=float("-inf"))
    l_i = tl.load(part_l_ptr + idx, mask=i_mask, other=0.0)
    acc = tl.load(part_acc_ptr + idx[:, None] * BLOCK_D + offs_d[None, :],
                  mask=i_mask[:, None], other=0.0)
    m_max = tl.max(m_i, 0)
    w = tl.exp2(m_i - tl.where(m_max == float("-inf"), 0.0, m_max))  # empty splits: w = 0
    den = tl.sum(l_i * w, 0)
    o = tl.sum(acc * w[:, None], 0) / tl.where(den > 0, den, 1.0)  # seq_len 0 -> zeros
    o_offs = seq * stride_os + head * stride_oh + offs_d
    tl.store(out_ptr + o_offs, o.to(out_ptr.dtype.element_ty), mask=offs_d < HEAD_DIM)


def decode_config(head_dim: int, block_size: int, group: int, dtype: torch.dtype,
                  interpreting: bool) -> tuple[dict, dict]:
    """(constexprs, launch options) for _decode_split_kernel.

    GPU: BLOCK_N keys per iteration sized so one K tile is <= 16 KiB (3 stages of K and V
    stay < 100 KiB of shared memory). Interpreter: 16-key tiles so small test contexts
    still take several iterations and cross page boundaries.
    """
    block_d = pow2_at_least_16(head_dim)
    elt = torch.empty((), dtype=dtype).element_size()
    block_n = 16 if interpreting else max(16, min(64, 16384 // (block_d * elt)))
    constexprs = {
        "GROUP": group, "GROUP_PAD": pow2_at_least_16(group), "HEAD_DIM": head_dim,
        "BLOCK_D": block_d, "BLOCK_SIZE": block_size, "BLOCK_N": block_n,
        **dot_types(dtype, interpreting),
    }
    return constexprs, {"num_warps": 4, "num_stages": 3}


@functools.lru_cache(maxsize=8)
def _sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def plan_splits(num_seqs: int, num_kv_heads: int, max_seq_len: int, block_n: int,
                device: torch.device, num_splits: int | None) -> tuple[int, int]:
    """(num_splits, split_len in tokens, a multiple of block_n) covering max_seq_len.

    Default on CUDA: enough splits for ~4 programs per SM, so that batch 1 at 32k context
    still fills the GPU, but >= MIN_SPLIT_TOKENS tokens per split (each split pays a q load,
    an epilogue and a share of the reduction). Interpreter: ~4 programs. Never more splits
    than BLOCK_N tiles or MAX_SPLITS; an explicit num_splits is an upper bound.
    """
    tiles = max(1, triton.cdiv(max_seq_len, block_n))
    if num_splits is None:
        programs = max(1, num_seqs * num_kv_heads)
        if device.type == "cuda":
            num_splits = min(triton.cdiv(4 * _sm_count(device), programs),
                             triton.cdiv(max_seq_len, MIN_SPLIT_TOKENS))
        else:
            num_splits = triton.cdiv(4, programs)
        num_splits = max(1, num_splits)
    if num_splits < 1:
        raise ValueError(f"num_splits must be >= 1, got {num_splits}")
    num_splits = min(num_splits, tiles, MAX_SPLITS)
    split_len = triton.cdiv(tiles, num_splits) * block_n
    return triton.cdiv(tiles * block_n, split_len), split_len


def paged_decode(q, k_cache, v_cache, block_table, seq_lens, out=None, scale=None,
                 num_splits=None, max_seq_len=None, validate=True):
    """Decode attention of q [S, H, D] over each sequence's paged context -> out [S, H, D].

    Layout and GQA rules in the module docstring. `max_seq_len` (>= max(seq_lens)) sizes the
    split plan; if None it is read from seq_lens (a device sync). `validate` also reads
    block_table/seq_lens values (sync); pass False in timed loops after one validated call.
    """
    cache, group = chk.check_query(q, k_cache, v_cache)
    num_seqs, num_heads, _ = q.shape
    chk.check_block_table(block_table, num_seqs)
    chk.check_tensor("seq_lens", seq_lens, (torch.int32,), (num_seqs,))
    device = chk.check_devices(_decode_split_kernel, q=q, k_cache=k_cache, v_cache=v_cache,
                               block_table=block_table, seq_lens=seq_lens)
    out = chk.check_out(out, q)
    scale = chk.check_scale(scale, cache.head_dim)
    if validate:
        chk.check_context_values(block_table, seq_lens, cache)
    if num_seqs == 0:
        return out
    if max_seq_len is None:
        max_seq_len = int(seq_lens.max())
    elif validate:
        chk.check_bound("max_seq_len", max_seq_len, seq_lens, "seq_lens")

    interp = chk.is_interpreting(_decode_split_kernel)
    consts, opts = decode_config(cache.head_dim, cache.block_size, group, q.dtype, interp)
    splits, split_len = plan_splits(num_seqs, cache.num_kv_heads, max_seq_len,
                                    consts["BLOCK_N"], device, num_splits)
    part_acc = torch.empty((num_seqs, num_heads, splits, consts["BLOCK_D"]),
                           dtype=torch.float32, device=device)
    part_m = torch.empty((num_seqs, num_heads, splits), dtype=torch.float32, device=device)
    part_l = torch.empty_like(part_m)
    _decode_split_kernel[(num_seqs, cache.num_kv_heads, splits)](
        q, k_cache, v_cache, block_table, seq_lens, out, part_acc, part_m, part_l,
        q.stride(0), q.stride(1), *k_cache.stride()[:3], *v_cache.stride()[:3],
        block_table.stride(0), out.stride(0), out.stride(1),
        scale * LOG2E, split_len, splits,
        SINGLE_SPLIT=splits == 1, **consts, **opts,
    )
    if splits > 1:
        _reduce_kernel[(num_seqs, num_heads)](
            out, part_acc, part_m, part_l, out.stride(0), out.stride(1), splits,
            HEAD_DIM=cache.head_dim, BLOCK_D=consts["BLOCK_D"],
            SPLITS_PAD=triton.next_power_of_2(splits), num_warps=4,
        )
    return out


def gather_context(cache: torch.Tensor, table_row: torch.Tensor, length: int) -> torch.Tensor:
    """First `length` tokens of one sequence from a paged cache -> [length, Hkv, D] float64."""
    block_size = cache.shape[1]
    pages = table_row[: triton.cdiv(length, block_size)].long()
    return cache[pages].reshape(-1, *cache.shape[2:])[:length].double()


def paged_decode_ref(q, k_cache, v_cache, block_table, seq_lens, scale=None):
    """float64 reference for paged_decode; returns [S, H, D] float64 (zeros for seq_len 0)."""
    num_seqs, num_heads, head_dim = q.shape
    group = num_heads // k_cache.shape[2]
    scale = head_dim**-0.5 if scale is None else scale
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    for s in range(num_seqs):
        length = int(seq_lens[s])
        if length == 0:
            continue
        k = gather_context(k_cache, block_table[s], length).repeat_interleave(group, dim=1)
        v = gather_context(v_cache, block_table[s], length).repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,thd->ht", q[s].double(), k) * scale
        out[s] = torch.einsum("ht,thd->hd", torch.softmax(scores, dim=-1), v)
    return out
