"""Input validation shared by the kernel launchers.

Every launcher funnels its arguments through these helpers so that a bad call fails with a
ValueError (wrong shape, stride, range, device) or TypeError (wrong dtype, not a tensor) that
names the argument, instead of reading out of bounds on the GPU.

Two levels:
- structural checks (shape, stride, dtype, device) only read tensor metadata: always run;
- value checks (block-table entries, lengths, slots) read the tensors, i.e. a device->host
  sync on CUDA: run when the launcher's `validate=True` (the default). Timed loops and CUDA
  graph capture pass `validate=False` after a validated call.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_HEAD_DIM = 256  # [BLOCK_M or 16, BLOCK_D] fp32 accumulators must fit in registers


class CacheShape(NamedTuple):
    num_blocks: int
    block_size: int  # tokens per page
    num_kv_heads: int
    head_dim: int


def is_interpreting(kernel) -> bool:
    """True when `kernel` was decorated while TRITON_INTERPRET=1 (CPU interpreter)."""
    return not isinstance(kernel, triton.runtime.JITFunction)


def check_tensor(name: str, t, dtypes, shape) -> None:
    """`t` is a tensor of one of `dtypes` with `shape` (None entries match any size)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name} must have dtype in ({names}), got {t.dtype}")
    want = tuple(shape)
    ok = t.dim() == len(want) and all(
        w is None or w == s for w, s in zip(want, t.shape, strict=True))
    if not ok:
        pretty = ", ".join("*" if w is None else str(w) for w in want)
        raise ValueError(f"{name} must have shape [{pretty}], got {list(t.shape)}")


def check_last_dim_contiguous(name: str, t: torch.Tensor) -> None:
    """Kernels address the last dim with unit stride (vectorised loads), so require it."""
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dim, got strides {t.stride()}")


def check_devices(kernel, **tensors: torch.Tensor) -> torch.device:
    """All tensors on one device; CPU tensors only under the interpreter."""
    devices = {t.device for t in tensors.values()}
    if len(devices) != 1:
        where = ", ".join(f"{n}={t.device}" for n, t in tensors.items())
        raise ValueError(f"all tensors must be on one device, got {where}")
    device = devices.pop()
    if device.type == "cpu" and not is_interpreting(kernel):
        raise ValueError("CPU tensors need Triton's interpreter: set TRITON_INTERPRET=1 "
                         "before triton is imported, or pass CUDA tensors")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"unsupported device {device}")
    return device


def check_cache(k_cache, v_cache) -> CacheShape:
    """K/V caches: [num_blocks, block_size, num_kv_heads, head_dim], same shape and dtype."""
    check_tensor("k_cache", k_cache, FLOAT_DTYPES, (None,) * 4)
    check_tensor("v_cache", v_cache, (k_cache.dtype,), k_cache.shape)
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        check_last_dim_contiguous(name, t)
    shape = CacheShape(*k_cache.shape)
    if min(shape) < 1:
        raise ValueError(f"k_cache dims must all be >= 1, got {list(k_cache.shape)}")
    if shape.head_dim > MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be <= {MAX_HEAD_DIM}, got {shape.head_dim}")
    return shape


def check_query(q, k_cache, v_cache) -> tuple[CacheShape, int]:
    """q [tokens, num_heads, head_dim] against the caches; returns (cache shape, group size)."""
    cache = check_cache(k_cache, v_cache)
    check_tensor("q", q, (k_cache.dtype,), (None, None, cache.head_dim))
    check_last_dim_contiguous("q", q)
    return cache, check_gqa(q.shape[1], cache.num_kv_heads)


def check_bound(name: str, bound: int, values: torch.Tensor, what: str) -> None:
    """A caller-supplied size hint `bound` must be >= max(values) (else rows are skipped)."""
    if values.numel() and int(values.max()) > bound:
        raise ValueError(f"{name} {bound} < max({what}) {int(values.max())}")


def check_gqa(num_heads: int, num_kv_heads: int) -> int:
    """Returns the group size G = num_heads // num_kv_heads (query heads per KV head)."""
    if num_heads < 1 or num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads ({num_heads}) must be a positive multiple of "
                         f"num_kv_heads ({num_kv_heads})")
    return num_heads // num_kv_heads


def check_block_table(block_table, num_seqs: int) -> None:
    check_tensor("block_table", block_table, (torch.int32,), (num_seqs, None))
    check_last_dim_contiguous("block_table", block_table)
    if block_table.shape[1] < 1:
        raise ValueError("block_table must have at least one column")


def check_out(out, like: torch.Tensor):
    """`out` (if given) matches `like` in shape, dtype and device; otherwise allocate it."""
    if out is None:
        return torch.empty_like(like)
    check_tensor("out", out, (like.dtype,), like.shape)
    check_last_dim_contiguous("out", out)
    if out.device != like.device:
        raise ValueError(f"out must be on {like.device}, got {out.device}")
    return out


def check_context_values(block_table: torch.Tensor, ctx_lens: torch.Tensor,
                         cache: CacheShape, what: str = "seq_lens") -> None:
    """Each context fits the table and every page it uses is a valid cache block.

    Sequence s uses the first cdiv(ctx_lens[s], block_size) entries of its block-table row;
    entries past those are never read and may hold anything (e.g. -1 padding).
    """
    lens = ctx_lens.to(torch.int64)
    if lens.numel() and int(lens.min()) < 0:
        raise ValueError(f"{what} must be >= 0, got min {int(lens.min())}")
    capacity = block_table.shape[1] * cache.block_size
    if lens.numel() and int(lens.max()) > capacity:
        raise ValueError(f"{what} max {int(lens.max())} exceeds the block table capacity "
                         f"{block_table.shape[1]} blocks x {cache.block_size} = {capacity} tokens")
    used_pages = (lens + cache.block_size - 1) // cache.block_size
    cols = torch.arange(block_table.shape[1], device=block_table.device)
    used = cols[None, :] < used_pages[:, None]
    entries = block_table[used]
    if entries.numel() and (int(entries.min()) < 0 or int(entries.max()) >= cache.num_blocks):
        raise ValueError(f"block_table entries in use must be in [0, {cache.num_blocks}), got "
                         f"range [{int(entries.min())}, {int(entries.max())}]")


def check_scale(scale, head_dim: int) -> float:
    """Softmax scale; default 1/sqrt(head_dim)."""
    if scale is None:
        return head_dim**-0.5
    scale = float(scale)
    if not scale == scale or scale in (float("inf"), float("-inf")):
        raise ValueError(f"scale must be finite, got {scale}")
    return scale
