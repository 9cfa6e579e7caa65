"""Helpers to build the paged KV-cache tensors the kernels consume.

Used by calibration and live mode (and the tests) so that nobody hand-rolls the layout:

    k/v_cache     [num_blocks, block_size, num_kv_heads, head_dim]
    block_table   [num_seqs, max_blocks_per_seq] int32, row s = the pages of sequence s
    slot_mapping  [num_tokens] int64, slot = block_id * block_size + offset in page

Pure torch, no Triton: safe to import without a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def make_cache(num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int,
               dtype: torch.dtype = torch.float16, device="cuda"):
    """Zero-filled (k_cache, v_cache), each [num_blocks, block_size, num_kv_heads, head_dim]."""
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    return (torch.zeros(shape, dtype=dtype, device=device),
            torch.zeros(shape, dtype=dtype, device=device))


def block_table(blocks_per_seq: Sequence[Sequence[int]], width: int | None = None,
                pad: int = 0, device="cpu") -> torch.Tensor:
    """[num_seqs, width] int32 table; row s lists sequence s's pages, padded with `pad`.

    width defaults to the longest list (at least 1). Padding entries are never read by the
    kernels (they only read the first cdiv(len, block_size) entries of a row).
    """
    longest = max((len(b) for b in blocks_per_seq), default=0)
    width = max(1, longest) if width is None else width
    if width < longest:
        raise ValueError(f"width {width} < longest block list {longest}")
    table = torch.full((len(blocks_per_seq), width), pad, dtype=torch.int32)
    for s, blocks in enumerate(blocks_per_seq):
        table[s, : len(blocks)] = torch.tensor(list(blocks), dtype=torch.int32)
    return table.to(device)


def slot_mapping(blocks_per_seq: Sequence[Sequence[int]], starts: Sequence[int],
                 counts: Sequence[int], block_size: int, device="cpu") -> torch.Tensor:
    """Slots of positions [starts[s], starts[s] + counts[s]) of each sequence, concatenated.

    E.g. for a prefill chunk: starts = prefix_lens, counts = chunk lengths; for decode:
    starts = seq_lens - 1, counts = 1. Returns [sum(counts)] int64.
    """
    slots: list[int] = []
    for blocks, start, count in zip(blocks_per_seq, starts, counts, strict=True):
        end = start + count
        if start < 0 or end > len(blocks) * block_size:
            raise ValueError(f"positions [{start}, {end}) do not fit {len(blocks)} blocks "
                             f"of {block_size} tokens")
        slots.extend(blocks[p // block_size] * block_size + p % block_size
                     for p in range(start, end))
    return torch.tensor(slots, dtype=torch.int64, device=device)
