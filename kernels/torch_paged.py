"""The paged kernels as plain torch: what the CPU runs where a GPU runs the Triton kernels.

Same arguments, layout and conventions as ``kv_write``, ``paged_prefill`` and
``paged_decode`` (see their modules); the computation runs in the cache dtype. The float64
``*_ref`` functions next to the Triton kernels check numbers; these run models: live mode
on the CPU and the CPU calibration profile both call them, so the fitted model is timed on
exactly what live mode executes.

Per sequence, a call gathers the sequence's pages into a contiguous [context, Hkv, D]
tensor (the CPU has no gather-in-the-loop kernel) and runs ``scaled_dot_product_attention``
on it, as a varlen kernel would visit each sequence. Cost is therefore the sum over
sequences of (gather + attention) at each sequence's own context: no padding to the
longest, so a batch costs what its mean context costs (the fitted model prices decode at
the batch's mean context).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def kv_write_torch(k, v, k_cache, v_cache, slot_mapping) -> None:
    """Write k, v [T, Hkv, D] into the caches at slot_mapping [T] (-1 = skip), in place."""
    slots = slot_mapping.to(torch.int64)
    if slots.numel() and int(slots.min()) < 0:
        keep = slots >= 0
        k, v, slots = k[keep], v[keep], slots[keep]
    rows = k_cache.shape[2:]
    k_cache.view(-1, *rows).index_copy_(0, slots, k)
    v_cache.view(-1, *rows).index_copy_(0, slots, v)


def _context(cache: torch.Tensor, pages: list[int], length: int) -> torch.Tensor:
    """First ``length`` tokens of a sequence's pages -> [Hkv, length, D] (a strided view)."""
    idx = torch.tensor(pages, dtype=torch.int64, device=cache.device)
    return cache.index_select(0, idx).flatten(0, 1)[:length].transpose(0, 1)


def _rows(block_table: torch.Tensor, lens: list[int], block_size: int) -> list[list[int]]:
    """Each sequence's used pages as Python ints (one host read of the whole table)."""
    table = block_table.tolist()
    return [row[: -(-n // block_size)] for row, n in zip(table, lens)]


def paged_decode_torch(q, k_cache, v_cache, block_table, seq_lens, out=None, scale=None,
                       **_ignored) -> torch.Tensor:
    """Decode attention of q [S, H, D] over each sequence's paged context -> out [S, H, D]."""
    out = torch.empty_like(q) if out is None else out
    lens = seq_lens.tolist()
    block_size = k_cache.shape[1]
    for s, (pages, n) in enumerate(zip(_rows(block_table, lens, block_size), lens)):
        if n == 0:
            out[s].zero_()
            continue
        k, v = _context(k_cache, pages, n), _context(v_cache, pages, n)
        o = F.scaled_dot_product_attention(q[s, :, None, :][None], k[None], v[None],
                                           scale=scale, enable_gqa=True)
        out[s] = o[0, :, 0, :]
    return out


def paged_prefill_torch(q, k_cache, v_cache, block_table, prefix_lens, query_start_loc,
                        out=None, scale=None, **_ignored) -> torch.Tensor:
    """Causal attention of each chunk over its paged prefix and itself -> out [total_q, H, D].

    As ``paged_prefill``: the chunk's own K/V are already in the cache; query i of a chunk
    sits at position prefix + i and sees keys 0 .. prefix + i (causal, bottom-right).
    """
    out = torch.empty_like(q) if out is None else out
    prefix, starts = prefix_lens.tolist(), query_start_loc.tolist()
    ctx = [p + hi - lo for p, lo, hi in zip(prefix, starts, starts[1:])]
    block_size = k_cache.shape[1]
    for s, pages in enumerate(_rows(block_table, ctx, block_size)):
        lo, hi, p = starts[s], starts[s + 1], prefix[s]
        if hi == lo:
            continue
        k, v = _context(k_cache, pages, ctx[s]), _context(v_cache, pages, ctx[s])
        query = q[lo:hi].transpose(0, 1)[None]  # [1, H, chunk, D]
        if p == 0:
            o = F.scaled_dot_product_attention(query, k[None], v[None], is_causal=True,
                                               scale=scale, enable_gqa=True)
        else:
            mask = torch.ones(hi - lo, ctx[s], dtype=torch.bool, device=q.device).tril(p)
            o = F.scaled_dot_product_attention(query, k[None], v[None], attn_mask=mask,
                                               scale=scale, enable_gqa=True)
        out[lo:hi] = o[0].transpose(0, 1)
    return out
