"""Input builders and comparisons shared by the kernel tests (CPU, Triton interpreter)."""

from __future__ import annotations

import os

import torch

from kernels import layout

# Max |out - ref| / max |ref| against the float64 reference. fp32 dots run in ieee fp32;
# fp16 loses ~2**-11 per rounding (P is rounded to fp16 before P @ V, out to fp16);
# bf16 ~2**-8 (its dots run in fp32 under the interpreter, only storage rounds).
TOLERANCE = {torch.float32: 5e-6, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DTYPE_IDS = ["fp32", "fp16", "bf16"]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def randn(gen, *shape, dtype=torch.float32, scale=1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=gen) * scale).to(dtype)


def paged_cache(gen, lens, block_size, num_kv_heads, head_dim, dtype, spare_blocks=3):
    """(k_cache, v_cache, block_table) holding random K/V for sequences of `lens` tokens.

    Pages are a random permutation of the cache blocks (shuffled, non-contiguous, spare blocks
    left unused). Every cache row that is not part of a context -- tails of last pages and
    unused blocks -- is NaN, and table entries past each sequence's pages are -1, so a kernel
    that reads outside the context produces NaN.
    """
    pages = [cdiv(n, block_size) for n in lens]
    num_blocks = sum(pages) + spare_blocks
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    blocks, used = [], 0
    for n in pages:
        blocks.append(perm[used:used + n])
        used += n
    k_cache, v_cache = layout.make_cache(num_blocks, block_size, num_kv_heads, head_dim,
                                         dtype, "cpu")
    k_cache.fill_(float("nan"))
    v_cache.fill_(float("nan"))
    slots = layout.slot_mapping(blocks, [0] * len(lens), lens, block_size)
    rows = (len(slots), num_kv_heads, head_dim)
    k_cache.view(-1, num_kv_heads, head_dim)[slots] = randn(gen, *rows, dtype=dtype)
    v_cache.view(-1, num_kv_heads, head_dim)[slots] = randn(gen, *rows, dtype=dtype)
    table = layout.block_table(blocks, width=max(pages, default=0) + 1, pad=-1)
    return k_cache, v_cache, table


def int32(values) -> torch.Tensor:
    return torch.tensor(list(values), dtype=torch.int32)


def nan_like(t: torch.Tensor) -> torch.Tensor:
    """Output buffer poisoned with NaN: any element the kernel fails to write stays NaN."""
    return torch.full_like(t, float("nan"))


def assert_matches(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, seed: int,
                   tol: float | None = None) -> float:
    """out is fully written (no NaN left) and within the dtype's relative tolerance of ref."""
    rerun = f"seed {seed}; rerun with KERNEL_TEST_SEED={os.environ.get('KERNEL_TEST_SEED')}"
    assert not torch.isnan(out).any(), f"output not fully written / NaN read ({rerun})"
    err = ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
    tol = TOLERANCE[dtype] if tol is None else tol
    assert err <= tol, f"relative error {err:.3g} > {tol:g} for {dtype} ({rerun})"
    return err
