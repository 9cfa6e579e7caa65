"""The physical block pool of the policies without prefix caching.

Like vLLM's ``BlockPool``: ``num_gpu_blocks`` blocks, of which block 0 is the
*null block* (a placeholder that is never handed out), so ``num_gpu_blocks - 1``
blocks are usable. Without prefix caching a free block's identity carries no
meaning, so the free list is a stack (slices, C speed): allocation takes the
most recently freed blocks. The prefix-caching pool, where reuse order decides
what gets evicted, keeps vLLM's LRU queue instead.
"""

from __future__ import annotations

NULL_BLOCK = 0


class BlockPool:
    """Free list + per-request block tables. Knows nothing about tokens."""

    def __init__(self, num_usable_blocks: int):
        self.num_usable = num_usable_blocks
        # block ids 1..num_usable; 0 is the null block. The top of the stack is the end.
        self._free: list[int] = list(range(num_usable_blocks, 0, -1))
        self._tables: dict[int, list[int]] = {}

    @property
    def num_free(self) -> int:
        return len(self._free)

    def take(self, req: int, n: int) -> None:
        """Append ``n`` free blocks to ``req``'s table. Caller checked ``0 < n <= num_free``."""
        table = self._tables.get(req)
        if table is None:
            table = self._tables[req] = []
        free = self._free
        table.extend(free[-n:])
        del free[-n:]

    def take_many(self, reqs: list[int], counts: list[int]) -> None:
        """``take(r, n)`` for each pair in order, in one pass (the same blocks each)."""
        free, tables = self._free, self._tables
        end = sum(counts)
        if end <= 0:
            return
        chunk = free[-end:]
        del free[-end:]
        for req, n in zip(reqs, counts):
            table = tables.get(req)
            if table is None:
                table = tables[req] = []
            table.extend(chunk[end - n:end])  # what take(req, n) would take from the top
            end -= n

    def release(self, req: int) -> int:
        """Give all of ``req``'s blocks back; returns how many."""
        table = self._tables.pop(req, None)
        if not table:
            return 0
        self._free.extend(table)
        return len(table)

    def table(self, req: int) -> list[int]:
        return list(self._tables.get(req, ()))

    def peek(self, n: int) -> list[int]:
        """The blocks the next ``n`` single-block takes would return, top of the stack first
        (takes of several blocks at once take the same set)."""
        return self._free[max(0, len(self._free) - n):][::-1]

    def check(self, held_total: int) -> None:
        """Assert conservation: every usable block is free or in exactly one table."""
        in_tables = [b for t in self._tables.values() for b in t]
        assert len(in_tables) == held_total, (
            f"tables hold {len(in_tables)} blocks, accounting says {held_total}")
        assert len(in_tables) + len(self._free) == self.num_usable, (
            f"used {len(in_tables)} + free {len(self._free)} != total {self.num_usable}")
        every = set(in_tables) | set(self._free)
        assert len(every) == self.num_usable, "a block is both free and used, or listed twice"
        assert NULL_BLOCK not in every, "the null block was handed out"
