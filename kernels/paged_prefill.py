"""Chunked prefill over a paged prefix (vLLM chunked prefill with prefix caching).

Layout (see kernels/paged_decode.py for the cache/page diagram):

    q, out          [total_q, num_heads, head_dim]    the chunks of all sequences, concatenated
    k/v_cache       [num_blocks, block_size, num_kv_heads, head_dim]
    block_table     [num_seqs, max_blocks_per_seq] int32
    prefix_lens     [num_seqs] int32        tokens cached before this chunk
    query_start_loc [num_seqs + 1] int32    chunk of seq s = q[query_start_loc[s]:[s + 1]]

Convention: the chunk's own K/V were ALREADY written to the cache (kv_write), so sequence s
has context prefix_len + chunk_len tokens, all in pages. Query i of the chunk sits at
position prefix_len + i and attends causally to keys at positions <= prefix_len + i:

    positions  0 ........ prefix_len-1 | prefix_len ........ prefix_len+chunk_len-1
               cached prefix (pages)    | this chunk (already in pages too)
    query i sees ---------------------------------> up to and including prefix_len + i

Grid (num_heads, cdiv(max_query_len, BLOCK_M), num_seqs): program (h, t, s) computes rows
[t*BLOCK_M, (t+1)*BLOCK_M) of seq s's chunk for query head h (heads of one KV group are
adjacent in launch order, so they share K/V through L2). Tiles past the chunk exit at once.
Keys are visited in BLOCK_N tiles, in two loops:
  1. [0, full_end): every key visible to every row of the tile, no causal mask;
     full_end = (prefix_len + t*BLOCK_M) rounded down to BLOCK_N;
  2. [full_end, kv_end): causal mask, kv_end = last row's position + 1.
Tiles at or past kv_end are fully masked and never visited.
"""

from __future__ import annotations

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
from kernels.paged_decode import gather_context


@triton.jit
def _prefill_kernel(
    q_ptr, k_ptr, v_ptr, bt_ptr, prefix_ptr, qsl_ptr, out_ptr,
    stride_qt, stride_qh, stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh,
    stride_bts, stride_ot, stride_oh,
    qk_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    head = tl.program_id(0)
    row0 = tl.program_id(1) * BLOCK_M
    seq = tl.program_id(2).to(tl.int64)
    q_start = tl.load(qsl_ptr + seq)
    chunk_len = tl.load(qsl_ptr + seq + 1) - q_start
    if row0 >= chunk_len:
        return
    prefix_len = tl.load(prefix_ptr + seq)
    kv_head = head // GROUP

    rows = row0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = rows < chunk_len
    q_pos = prefix_len + rows  # absolute position of each query; it sees keys <= q_pos
    io_mask = row_ok[:, None] & (offs_d < HEAD_DIM)[None, :]
    tok = (q_start + rows).to(tl.int64)
    q_offs = tok[:, None] * stride_qt + head * stride_qh + offs_d[None, :]
    q = tl.load(q_ptr + q_offs, mask=io_mask, other=0.0).to(DOT_DTYPE)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    bt_row = bt_ptr + seq * stride_bts
    kv_end = prefix_len + tl.minimum(row0 + BLOCK_M, chunk_len)
    full_end = (prefix_len + row0) // BLOCK_N * BLOCK_N
    # Loop 1: keys < full_end <= q_pos of every row: no causal mask needed.
    for n0 in range(0, full_end, BLOCK_N):
        pos = n0 + tl.arange(0, BLOCK_N)
        valid = pos < full_end  # always true; keeps loads provably in bounds
        k, v = load_kv(k_ptr, v_ptr, bt_row, pos, valid, kv_head, offs_d, stride_kb, stride_kt,
                        stride_kh, stride_vb, stride_vt, stride_vh, BLOCK_SIZE, HEAD_DIM, DOT_DTYPE)
        s = qk_scores(q, k, qk_scale, DOT_PRECISION)
        acc, m_i, l_i = softmax_step(acc, m_i, l_i, s, v, DOT_DTYPE, DOT_PRECISION)
    # Loop 2: the diagonal band. Key full_end <= q_pos of every row, so each row sees >= 1 key.
    for n0 in range(full_end, kv_end, BLOCK_N):
        pos = n0 + tl.arange(0, BLOCK_N)
        valid = pos < kv_end
        k, v = load_kv(k_ptr, v_ptr, bt_row, pos, valid, kv_head, offs_d, stride_kb, stride_kt,
                        stride_kh, stride_vb, stride_vt, stride_vh, BLOCK_SIZE, HEAD_DIM, DOT_DTYPE)
        s = qk_scores(q, k, qk_scale, DOT_PRECISION)
        visible = valid[None, :] & (pos[None, :] <= q_pos[:, None])
        s = tl.where(visible, s, float("-inf"))
        acc, m_i, l_i = softmax_step(acc, m_i, l_i, s, v, DOT_DTYPE, DOT_PRECISION)

    o = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    o_offs = tok[:, None] * stride_ot + head * stride_oh + offs_d[None, :]
    tl.store(out_ptr + o_offs, o.to(out_ptr.dtype.element_ty), mask=io_mask)


def prefill_config(head_dim: int, block_size: int, group: int, dtype: torch.dtype,
                   interpreting: bool) -> tuple[dict, dict]:
    """(constexprs, launch options) for _prefill_kernel.

    GPU, 16-bit, head_dim <= 128: 128 x 64 tiles, 8 warps, 3 stages (FlashAttention-2 shape
    for Hopper wgmma: Q 32 KiB + 3 stages of K and V tiles, ~96 KiB shared memory).
    head_dim 256: 64 x 32 tiles. fp32 (FMA dots, 4-byte elements): 32 x 16 tiles, 8 warps,
    the largest tried whose SASS has no register spills at head_dim 128. Interpreter:
    16 x 16 tiles so small test chunks span several tiles and both key loops.
    """
    block_d = pow2_at_least_16(head_dim)
    if interpreting:
        block_m, block_n, opts = 16, 16, {"num_warps": 4, "num_stages": 1}
    elif dtype == torch.float32:
        block_m, block_n, opts = 32, 16, {"num_warps": 8, "num_stages": 2}
    elif block_d > 128:
        block_m, block_n, opts = 64, 32, {"num_warps": 8, "num_stages": 2}
    else:
        block_m, block_n, opts = 128, 64, {"num_warps": 8, "num_stages": 3}
    constexprs = {
        "GROUP": group, "HEAD_DIM": head_dim, "BLOCK_D": block_d, "BLOCK_SIZE": block_size,
        "BLOCK_M": block_m, "BLOCK_N": block_n, **dot_types(dtype, interpreting),
    }
    return constexprs, opts


def _check_query_values(prefix_lens, query_start_loc, total_q: int) -> torch.Tensor:
    """query_start_loc starts at 0, never decreases, ends at total_q; returns chunk lengths."""
    qsl = query_start_loc.to(torch.int64)
    chunk_lens = qsl[1:] - qsl[:-1]
    if int(qsl[0]) != 0 or int(qsl[-1]) != total_q:
        raise ValueError(f"query_start_loc must start at 0 and end at total_q={total_q}, "
                         f"got {int(qsl[0])} .. {int(qsl[-1])}")
    if chunk_lens.numel() and int(chunk_lens.min()) < 0:
        raise ValueError("query_start_loc must be non-decreasing")
    return chunk_lens


def paged_prefill(q, k_cache, v_cache, block_table, prefix_lens, query_start_loc, out=None,
                  scale=None, max_query_len=None, validate=True):
    """Causal attention of each chunk over its paged prefix + itself -> out [total_q, H, D].

    Convention in the module docstring. `max_query_len` (>= the longest chunk) sizes the
    grid; if None it is read from query_start_loc (a device sync). `validate` also reads
    block_table/lengths values (sync); pass False in timed loops after one validated call.
    """
    cache, group = chk.check_query(q, k_cache, v_cache)
    total_q, num_heads, _ = q.shape
    chk.check_tensor("prefix_lens", prefix_lens, (torch.int32,), (None,))
    num_seqs = prefix_lens.shape[0]
    chk.check_tensor("query_start_loc", query_start_loc, (torch.int32,), (num_seqs + 1,))
    chk.check_block_table(block_table, num_seqs)
    chk.check_devices(_prefill_kernel, q=q, k_cache=k_cache, v_cache=v_cache,
                      block_table=block_table, prefix_lens=prefix_lens,
                      query_start_loc=query_start_loc)
    out = chk.check_out(out, q)
    scale = chk.check_scale(scale, cache.head_dim)
    if validate:
        chunk_lens = _check_query_values(prefix_lens, query_start_loc, total_q)
        ctx = prefix_lens.to(torch.int64) + chunk_lens
        chk.check_context_values(block_table, ctx, cache, what="prefix_lens + chunk lengths")
        if max_query_len is not None:
            chk.check_bound("max_query_len", max_query_len, chunk_lens, "chunk lengths")
    if num_seqs == 0 or total_q == 0:
        return out
    if num_seqs > 65535:  # grid axis 2 limit on CUDA
        raise ValueError(f"paged_prefill supports at most 65535 sequences, got {num_seqs}")
    if max_query_len is None:
        max_query_len = int((query_start_loc[1:] - query_start_loc[:-1]).max())

    interp = chk.is_interpreting(_prefill_kernel)
    consts, opts = prefill_config(cache.head_dim, cache.block_size, group, q.dtype, interp)
    grid = (num_heads, triton.cdiv(max(max_query_len, 1), consts["BLOCK_M"]), num_seqs)
    _prefill_kernel[grid](
        q, k_cache, v_cache, block_table, prefix_lens, query_start_loc, out,
        q.stride(0), q.stride(1), *k_cache.stride()[:3], *v_cache.stride()[:3],
        block_table.stride(0), out.stride(0), out.stride(1),
        scale * LOG2E, **consts, **opts,
    )
    return out


def paged_prefill_ref(q, k_cache, v_cache, block_table, prefix_lens, query_start_loc,
                      scale=None):
    """float64 reference for paged_prefill; returns [total_q, H, D] float64."""
    _, num_heads, head_dim = q.shape
    group = num_heads // k_cache.shape[2]
    scale = head_dim**-0.5 if scale is None else scale
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    for s in range(prefix_lens.shape[0]):
        lo, hi = int(query_start_loc[s]), int(query_start_loc[s + 1])
        prefix, chunk = int(prefix_lens[s]), hi - lo
        if chunk == 0:
            continue
        k = gather_context(k_cache, block_table[s], prefix + chunk).repeat_interleave(group, 1)
        v = gather_context(v_cache, block_table[s], prefix + chunk).repeat_interleave(group, 1)
        scores = torch.einsum("qhd,khd->hqk", q[lo:hi].double(), k) * scale
        key_pos = torch.arange(prefix + chunk, device=q.device)
        query_pos = prefix + torch.arange(chunk, device=q.device)
        visible = key_pos[None, :] <= query_pos[:, None]  # [chunk, context]
        scores = scores.masked_fill(~visible, float("-inf"))
        out[lo:hi] = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)
    return out
