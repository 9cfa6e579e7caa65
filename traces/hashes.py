"""Prefix hash chains (Mooncake semantics).

A request's chain is a list of integer ids, one per `hash_block_size`-token block of its prompt:
``len(chain) == ceil(prompt_tokens / hash_block_size)`` (the last block is usually partial).
Equal ids at equal positions mean equal KV, so a prefix cache hits the leading run of blocks
whose ids it has seen before.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

INT64_MAX = np.iinfo(np.int64).max


def blocks_for(prompt_tokens: np.ndarray, block: int) -> np.ndarray:
    """Number of hash blocks of each prompt: ceil(prompt_tokens / block)."""
    return -(-np.asarray(prompt_tokens, dtype=np.int64) // block)


def _blank(cell: object) -> bool:
    if cell is None or (isinstance(cell, str) and cell == ""):
        return True
    return isinstance(cell, (float, np.floating)) and math.isnan(cell)


def _as_list(cell: object) -> list | None:
    if isinstance(cell, list):
        return cell
    if isinstance(cell, (tuple, np.ndarray)):
        return list(cell.tolist() if isinstance(cell, np.ndarray) else cell)
    return None


def _ints_ok(values: list) -> bool:
    """True when every value is an integer in [0, INT64_MAX] (bools are not ids)."""
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError, OverflowError):
        return False
    if arr.size == 0:
        return arr.ndim == 1
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        return False
    return bool(arr.min() >= 0) and bool(arr.max() <= INT64_MAX)


def check_chains(
    cells: Sequence, prompt_tokens: np.ndarray, block: int | None
) -> tuple[list, int, str]:
    """Normalize chain cells to list[int] | None and find the first bad row.

    Returns (chains, bad_row, kind): bad_row is -1 when all rows are fine; kind is "type"
    (not a list of ints >= 0), "length" (wrong number of ids) or "block" (no block size).
    """
    chains: list = [None] * len(cells)
    bad = {"type": len(cells), "length": len(cells), "block": len(cells)}
    present = []
    for i, cell in enumerate(cells):
        if _blank(cell):
            continue
        chain = _as_list(cell)
        if chain is None:
            bad["type"] = min(bad["type"], i)
            break
        chains[i] = chain
        present.append(i)
    if present and block is None:
        bad["block"] = present[0]
    if present:
        flat = list(itertools.chain.from_iterable(chains[i] for i in present))
        if not _ints_ok(flat):
            first = next(i for i in present if not _ints_ok(chains[i]))
            bad["type"] = min(bad["type"], first)
        if block is not None:
            idx = np.asarray(present)
            lens = np.fromiter((len(chains[i]) for i in present), np.int64, len(present))
            wrong = lens != blocks_for(np.asarray(prompt_tokens)[idx], block)
            if wrong.any():
                bad["length"] = int(idx[np.argmax(wrong)])
    kind = min(bad, key=lambda k: (bad[k], ["block", "type", "length"].index(k)))
    return chains, (bad[kind] if bad[kind] < len(cells) else -1), kind


def to_arrays(chains: Sequence) -> list[np.ndarray | None]:
    """Chains as read-only int64 arrays (views into one flat buffer), None kept."""
    present = [c for c in chains if c is not None]
    flat = np.fromiter(itertools.chain.from_iterable(present), np.int64)
    flat.flags.writeable = False
    ends = np.cumsum([len(c) for c in present])
    parts = iter(np.split(flat, ends[:-1]) if present else [])
    return [None if c is None else next(parts) for c in chains]


def cache_hit_ratios(chains: Sequence) -> dict[str, float | int]:
    """Block-level hit ratios of an infinite cache fed the chains in order.

    `hit_ratio`: fraction of block occurrences whose id occurred earlier (any position).
    `prefix_hit_ratio`: counts only each request's leading run of already-seen ids, which is
    what a prefix cache can reuse.
    """
    present = [c for c in chains if c is not None]
    lens = np.array([len(c) for c in present], dtype=np.int64)
    flat = np.fromiter(itertools.chain.from_iterable(present), np.int64, int(lens.sum()))
    if flat.size == 0:
        return {"blocks": 0, "unique_blocks": 0, "hit_ratio": 0.0, "prefix_hit_ratio": 0.0}
    uniq, first = np.unique(flat, return_index=True)
    seen = np.ones(flat.size, dtype=bool)
    seen[first] = False  # the first occurrence of each id is a miss
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    pos = np.arange(flat.size) - np.repeat(starts, lens)
    # index of the first miss within each request (its length when all blocks hit)
    miss_pos = np.where(seen, np.repeat(lens, lens), pos)
    nonempty = lens > 0
    lead = np.minimum.reduceat(miss_pos, starts[nonempty]) if nonempty.any() else np.zeros(0)
    return {
        "blocks": int(flat.size),
        "unique_blocks": int(uniq.size),
        "hit_ratio": float(seen.mean()),
        "prefix_hit_ratio": float(np.sum(lead) / flat.size),
    }
