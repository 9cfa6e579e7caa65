"""Paged attention and KV write for the live model: the Triton kernels or their torch paths.

Both backends take the kernels' layout (kernels/paged_decode.py). ``triton`` calls
``kv_write``, ``paged_prefill`` and ``paged_decode`` with ``validate=False`` (the inputs
are built from checked block tables, and validation would sync the device every call);
``torch`` calls kernels/torch_paged.py, what the CPU runs. ``warmup`` compiles or touches
every variant a run can launch without writing the cache: slots are -1 and block tables
point at the null block, which is only read.
"""

from __future__ import annotations

import torch

from kernels import torch_paged


class TorchAttention:
    name = "torch"

    def write(self, k, v, k_cache, v_cache, slots) -> None:
        torch_paged.kv_write_torch(k, v, k_cache, v_cache, slots)

    def prefill(self, q, k_cache, v_cache, table, prefix, qsl, out, max_q) -> None:
        torch_paged.paged_prefill_torch(q, k_cache, v_cache, table, prefix, qsl, out=out)

    def decode(self, q, k_cache, v_cache, table, lens, out, max_len) -> None:
        torch_paged.paged_decode_torch(q, k_cache, v_cache, table, lens, out=out)


class TritonAttention:
    name = "triton"

    def __init__(self):
        from kernels import kv_write, paged_decode, paged_prefill

        self._write, self._prefill, self._decode = kv_write, paged_prefill, paged_decode

    def write(self, k, v, k_cache, v_cache, slots) -> None:
        self._write(k, v, k_cache, v_cache, slots, validate=False)

    def prefill(self, q, k_cache, v_cache, table, prefix, qsl, out, max_q) -> None:
        self._prefill(q, k_cache, v_cache, table, prefix, qsl, out=out, max_query_len=max_q,
                      validate=False)

    def decode(self, q, k_cache, v_cache, table, lens, out, max_len) -> None:
        self._decode(q, k_cache, v_cache, table, lens, out=out, max_seq_len=max_len,
                     validate=False)


def make_attention(choice: str, device: str):
    """The backend for ``attention`` (auto: triton on cuda, torch on cpu)."""
    if choice == "auto":
        choice = "triton" if device == "cuda" else "torch"
    return TritonAttention() if choice == "triton" else TorchAttention()


def warmup(attn, k_cache, v_cache, num_heads: int, max_len: int) -> None:
    """Run every kernel variant once on the null block: a prefill chunk, and decodes whose
    split plans cover 1 .. 128 splits (each split count compiles its own reduction)."""
    dev, dt = k_cache.device, k_cache.dtype
    bs, hkv, d = k_cache.shape[1:]
    pages = max(1, -(-max_len // bs))
    table = torch.zeros((1, pages), dtype=torch.int32, device=dev)  # the null block only
    q = torch.zeros((16, num_heads, d), dtype=dt, device=dev)
    kv = torch.zeros((16, hkv, d), dtype=dt, device=dev)
    attn.write(kv, kv, k_cache, v_cache, torch.full((16,), -1, dtype=torch.int64, device=dev))
    qsl = torch.tensor([0, 16], dtype=torch.int32, device=dev)
    prefix = torch.tensor([max(0, min(max_len, pages * bs) - 16)], dtype=torch.int32,
                          device=dev)
    attn.prefill(q, k_cache, v_cache, table, prefix, qsl, torch.empty_like(q), 16)
    lens = torch.tensor([pages * bs], dtype=torch.int32, device=dev)
    if isinstance(attn, TritonAttention) and k_cache.is_cuda:  # the interpreter has no JIT
        for splits in (1, 2, 3, 4, 8, 16, 32, 48, 64, 128):
            attn._decode(q[:1], k_cache, v_cache, table, lens, out=torch.empty_like(q[:1]),
                         max_seq_len=pages * bs, num_splits=splits, validate=False)
    else:
        attn.decode(q[:1], k_cache, v_cache, table, lens, torch.empty_like(q[:1]), pages * bs)
