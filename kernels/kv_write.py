"""Scatter new tokens' K and V into the paged cache (vLLM's reshape_and_cache).

Layout:

    k, v          [num_tokens, num_kv_heads, head_dim]                   head_dim contiguous
    k/v_cache     [num_blocks, block_size, num_kv_heads, head_dim]       head_dim contiguous
    slot_mapping  [num_tokens] int32 or int64

Token t goes to slot = slot_mapping[t] = block_id * block_size + offset, i.e. row `offset` of
page `block_id`; slot -1 means "skip" (padding tokens, e.g. in a CUDA-graph batch):

    block_size 4, slot_mapping = [9, 10, -1, 3]
    page 2: rows 1, 2 <- tokens 0, 1     token 2 dropped     page 0: row 3 <- token 3

Slots must be distinct among written tokens (otherwise which write wins is unspecified).
Grid (num_tokens,): one program copies one token's [num_kv_heads, head_dim] K and V rows.
Pure data movement, so no arithmetic on bf16 (fine under the interpreter too).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels import _checks as chk


@triton.jit
def _kv_write_kernel(
    k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_ptr,
    stride_kt, stride_kh, stride_vt, stride_vh,
    stride_kcb, stride_kct, stride_kch, stride_vcb, stride_vct, stride_vch,
    NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_SIZE: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + tok).to(tl.int64)  # int64: num_blocks * block_size may be big
    if slot < 0:
        return
    page = slot // BLOCK_SIZE
    row = slot % BLOCK_SIZE
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_h < NUM_KV_HEADS)[:, None] & (offs_d < HEAD_DIM)[None, :]
    h = offs_h[:, None]
    d = offs_d[None, :]

    k = tl.load(k_ptr + tok * stride_kt + h * stride_kh + d, mask=mask)
    kc = k_cache_ptr + page * stride_kcb + row * stride_kct + h * stride_kch + d
    tl.store(kc, k, mask=mask)
    v = tl.load(v_ptr + tok * stride_vt + h * stride_vh + d, mask=mask)
    vc = v_cache_ptr + page * stride_vcb + row * stride_vct + h * stride_vch + d
    tl.store(vc, v, mask=mask)


def kv_write_config(num_kv_heads: int, head_dim: int, block_size: int) -> tuple[dict, dict]:
    """(constexprs, launch options): the whole [Hkv, D] token row in one tile."""
    block_h = triton.next_power_of_2(num_kv_heads)
    block_d = triton.next_power_of_2(head_dim)
    constexprs = {"NUM_KV_HEADS": num_kv_heads, "HEAD_DIM": head_dim, "BLOCK_H": block_h,
                  "BLOCK_D": block_d, "BLOCK_SIZE": block_size}
    return constexprs, {"num_warps": 4 if block_h * block_d >= 1024 else 1}


def kv_write(k, v, k_cache, v_cache, slot_mapping, validate=True):
    """Write k, v [T, Hkv, D] into k_cache/v_cache at slot_mapping [T] (-1 = skip), in place.

    `validate` reads slot_mapping (a device sync) to check -1 <= slot < num_blocks*block_size.
    """
    cache = chk.check_cache(k_cache, v_cache)
    row_shape = (None, cache.num_kv_heads, cache.head_dim)
    chk.check_tensor("k", k, (k_cache.dtype,), row_shape)
    chk.check_tensor("v", v, (k_cache.dtype,), k.shape)
    chk.check_tensor("slot_mapping", slot_mapping, (torch.int32, torch.int64), (k.shape[0],))
    for name, t in (("k", k), ("v", v)):
        chk.check_last_dim_contiguous(name, t)
    chk.check_devices(_kv_write_kernel, k=k, v=v, k_cache=k_cache, v_cache=v_cache,
                      slot_mapping=slot_mapping)
    num_slots = cache.num_blocks * cache.block_size
    if validate and slot_mapping.numel():
        lo, hi = int(slot_mapping.min()), int(slot_mapping.max())
        if lo < -1 or hi >= num_slots:
            raise ValueError(f"slot_mapping entries must be -1 or in [0, {num_slots}), "
                             f"got range [{lo}, {hi}]")
    if k.shape[0] == 0:
        return
    consts, opts = kv_write_config(cache.num_kv_heads, cache.head_dim, cache.block_size)
    _kv_write_kernel[(k.shape[0],)](
        k, v, k_cache, v_cache, slot_mapping,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        *k_cache.stride()[:3], *v_cache.stride()[:3],
        **consts, **opts,
    )


def kv_write_ref(k, v, k_cache, v_cache, slot_mapping):
    """float64 reference: returns (k_cache, v_cache) copies with the writes applied."""
    dense = torch.contiguous_format
    k_out = k_cache.double().clone(memory_format=dense)
    v_out = v_cache.double().clone(memory_format=dense)
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].long()
    k_out.view(-1, *k_cache.shape[2:])[slots] = k[keep].double()
    v_out.view(-1, *v_cache.shape[2:])[slots] = v[keep].double()
    return k_out, v_out
