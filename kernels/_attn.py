"""Triton building blocks shared by paged_decode and paged_prefill.

Scores live in log2 units: s = (q . k) * scale * log2(e), so softmax uses exp2 (one MUFU op on
the GPU). Accumulators (acc, running max m_i, running sum l_i) are fp32 whatever the storage dtype.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

LOG2E = math.log2(math.e)

_TL_DTYPES = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}


def dot_types(dtype: torch.dtype, interpreting: bool) -> dict:
    """Operand dtype and precision for tl.dot, as kernel constexprs.

    - fp16/bf16: tensor-core dot in the storage dtype, fp32 accumulate. The interpreter
      computes dots with numpy on bf16 *bit patterns* (uint16), so there bf16 operands are
      upcast to fp32 first; the GPU keeps bf16 (covered by the Hopper compile test instead).
    - fp32: "ieee" so fp32 caches give fp32-accurate results rather than tf32 (10-bit mantissa).
    """
    dot_dtype = _TL_DTYPES[dtype]
    if interpreting and dtype == torch.bfloat16:
        dot_dtype = tl.float32
    precision = "ieee" if dot_dtype == tl.float32 else "tf32"  # "tf32" is ignored for 16-bit
    return {"DOT_DTYPE": dot_dtype, "DOT_PRECISION": precision}


def pow2_at_least_16(n: int) -> int:
    """Tile dim for tl.dot operands: the GPU compiler rejects a reduction dim K < 16 (the
    interpreter does not), MMA rows come in 16s, and tl.arange needs powers of two."""
    return max(16, triton.next_power_of_2(n))


@triton.jit
def load_kv(k_ptr, v_ptr, bt_row_ptr, pos, valid, kv_head, offs_d,
            stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh,
            BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """K and V rows [N, BLOCK_D] of `kv_head` for token positions `pos` [N] of one sequence.

    Token p sits in page bt_row[p // BLOCK_SIZE], row p % BLOCK_SIZE, so a tile may span
    several pages. Table entries are only read where `valid` (entries past the context may be
    garbage); masked lanes (invalid token, or d >= HEAD_DIM) read 0 and touch no memory.
    Offsets are int64: num_blocks * stride_kb can exceed 2**31 elements.
    """
    page = tl.load(bt_row_ptr + pos // BLOCK_SIZE, mask=valid, other=0).to(tl.int64)
    row = pos % BLOCK_SIZE
    mask = valid[:, None] & (offs_d < HEAD_DIM)[None, :]
    k_rows = page * stride_kb + row * stride_kt + kv_head * stride_kh
    v_rows = page * stride_vb + row * stride_vt + kv_head * stride_vh
    k = tl.load(k_ptr + k_rows[:, None] + offs_d[None, :], mask=mask, other=0.0)
    v = tl.load(v_ptr + v_rows[:, None] + offs_d[None, :], mask=mask, other=0.0)
    return k.to(DOT_DTYPE), v.to(DOT_DTYPE)


@triton.jit
def softmax_step(acc, m_i, l_i, s, v, DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """One online-softmax update with scores s [M, N] (log2 units, -inf = masked).

    Invariant after the call: acc = sum_j exp2(s_j - m_i) v_j, l_i = sum_j exp2(s_j - m_i) over all
    keys seen so far. A row that has only seen masked keys keeps m_i = -inf, l_i = 0, acc = 0:
    m_safe avoids exp2(-inf - -inf) = NaN for it.
    """
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    pv = tl.dot(p.to(DOT_DTYPE), v, input_precision=DOT_PRECISION)
    return acc * alpha[:, None] + pv, m_new, l_i


@triton.jit
def qk_scores(q, k, qk_scale, DOT_PRECISION: tl.constexpr):
    """q [M, D] . k [N, D]^T -> [M, N] fp32 scores in log2 units."""
    return tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
