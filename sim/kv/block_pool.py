"""The physical block pool shared by every KV policy.

Like vLLM's ``BlockPool``: ``num_gpu_blocks`` blocks, of which block 0 is the
*null block* (a placeholder that is never handed out), so ``num_gpu_blocks - 1``
blocks are usable. Free blocks sit in a FIFO queue: allocation takes from the
head, freeing appends to the tail (a request's blocks are appended tail-first, so
its last block is the first to be reused — vLLM's eviction order).
"""

from __future__ import annotations

from collections import deque

NULL_BLOCK = 0


class BlockPool:
    """Free queue + per-request block tables. Knows nothing about tokens."""

    def __init__(self, num_usable_blocks: int):
        self.num_usable = num_usable_blocks
        # block ids 1..num_usable; 0 is the null block
        self._free: deque[int] = deque(range(1, num_usable_blocks + 1))
        self._tables: dict[int, list[int]] = {}

    @property
    def num_free(self) -> int:
        return len(self._free)

    def take(self, req: int, n: int) -> None:
        """Append ``n`` free blocks to ``req``'s table. Caller checked ``n <= num_free``."""
        table = self._tables.setdefault(req, [])
        free = self._free
        table.extend(free.popleft() for _ in range(n))

    def release(self, req: int) -> int:
        """Give all of ``req``'s blocks back (tail first); returns how many."""
        table = self._tables.pop(req, None)
        if not table:
            return 0
        self._free.extend(reversed(table))
        return len(table)

    def table(self, req: int) -> list[int]:
        return list(self._tables.get(req, ()))

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
