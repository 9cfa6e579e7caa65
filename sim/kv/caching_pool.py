"""The block pool of prefix caching, as vLLM v1's ``BlockPool``.

* Every usable block has a reference count: the number of request tables that
  hold it. Requests sharing a cached prefix hold the same physical blocks.
* Blocks with count 0 sit in the *free queue*; allocation pops its head. As
  vLLM's ``BlockPool.free_blocks`` (``vllm/v1/core/block_pool.py:774-803``), a
  freed request's blocks are split: those holding reusable content (hashed in
  vLLM: every full block computed or scheduled) are appended at the tail, the
  request's tail block first, so the least recently freed content is evicted
  first and a request's tail before the prefix it shares; the others (a partly
  filled last block) are put at the head, to be reused first.
* A block may carry a hash key (its content is reusable). ``cached`` maps a key
  to a block; later blocks with the same key (two requests computed it
  concurrently) wait in ``dups`` and take over when the first is evicted.
* Allocation pops blocks from the head of the free queue; a popped block's key is
  dropped (eviction). A cache hit on a free block pulls it out of the queue.
  The free count therefore includes evictable cached blocks.

Block 0 is the null block and never handed out. ``version`` changes on every
mutation, so a cache lookup can tell whether it is still current. Bulk operations
run at C speed (numpy on the per-block arrays, ``map`` over the dict methods):
a Mooncake replay moves millions of blocks through the queue.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from itertools import islice

import numpy as np

from sim.kv.block_pool import NULL_BLOCK

#: the table of blocks taken for requests named later (``CachingBlockPool.move``)
PENDING = -1


def _each(fn, items) -> None:
    """Call ``fn`` on every item, at C speed."""
    deque(map(fn, items), maxlen=0)


class CachingBlockPool:
    def __init__(self, num_usable_blocks: int):
        self.num_usable = num_usable_blocks
        self.free_q: OrderedDict[int, None] = OrderedDict.fromkeys(
            range(1, num_usable_blocks + 1))
        self.ref = np.zeros(num_usable_blocks + 1, dtype=np.int64)
        self.key = np.zeros(num_usable_blocks + 1, dtype=np.uint64)  # 0 = no key
        self.cached: dict[int, int] = {}
        self.dups: dict[int, list[int]] = {}
        self.tables: dict[int, list[int]] = {}
        self.refs_total = 0  # sum of reference counts = table entries (blocks)
        self.evictions = 0  # cached blocks whose key was dropped to reuse the block
        self.version = 0

    @property
    def num_free(self) -> int:
        return len(self.free_q)

    def take(self, req: int, n: int) -> None:
        """Append ``n`` blocks from the free queue's head to ``req``'s table, evicting."""
        q = self.free_q
        popped = list(islice(q, n))
        _each(q.__delitem__, popped)
        idx = np.array(popped, dtype=np.int64)
        keys = self.key[idx]
        keyed = keys != 0
        if keyed.any():
            self._evict(idx[keyed], keys[keyed].tolist())
        self.ref[idx] = 1
        self.tables.setdefault(req, []).extend(popped)
        self.refs_total += n
        self.version += 1

    def move(self, src: int, dst: int, n: int) -> None:
        """Move the last ``n`` blocks of table ``src`` to the end of table ``dst`` (their
        references move with them)."""
        t = self.tables[src]
        cut = len(t) - n
        assert cut >= 0, "moving more blocks than the table holds"
        self.tables.setdefault(dst, []).extend(t[cut:])
        del t[cut:]
        if not t:
            del self.tables[src]
        self.version += 1

    def _evict(self, blocks: np.ndarray, keys: list[int]) -> None:
        self.evictions += len(keys)
        if self.dups and not self.dups.keys().isdisjoint(keys):
            for b in blocks.tolist():
                self.drop(b)
            return
        self.key[blocks] = 0
        _each(self.cached.__delitem__, keys)

    def touch(self, req: int, blocks: list[int]) -> None:
        """Append cache-hit ``blocks`` to ``req``'s table (out of the free queue if there)."""
        idx = np.array(blocks, dtype=np.int64)
        idle = idx[self.ref[idx] == 0]
        _each(self.free_q.__delitem__, idle.tolist())
        self.ref[idx] += 1
        self.tables.setdefault(req, []).extend(blocks)
        self.refs_total += len(blocks)
        self.version += 1

    def release(self, req: int, hashed: int) -> None:
        """Drop ``req``'s references; blocks nobody holds join the free queue, tail block
        first: at its tail if they hold reusable content (a key, or among the table's first
        ``hashed`` blocks), else at its head."""
        table = self.tables.pop(req, None)
        if not table:
            return
        idx = np.array(table[::-1], dtype=np.int64)  # a table holds a block at most once
        self.ref[idx] -= 1
        idle = self.ref[idx] == 0
        reusable = (np.arange(len(table))[::-1] < hashed) | (self.key[idx] != 0)
        self.free_q.update(dict.fromkeys(idx[idle & reusable].tolist()))
        q = self.free_q
        for b in reversed(idx[idle & ~reusable].tolist()):  # the tail block ends up first
            q[b] = None
            q.move_to_end(b, last=False)
        self.refs_total -= len(table)
        self.version += 1

    def register(self, blocks: list[int], keys: list[int]) -> None:
        """Publish each block's content under its key (the blocks hold computed KV)."""
        if not blocks:
            return
        self.key[np.array(blocks, dtype=np.int64)] = np.array(keys, dtype=np.uint64)
        cached = self.cached
        if cached.keys().isdisjoint(keys) and len(set(keys)) == len(keys):
            cached.update(zip(keys, blocks))
        else:
            for b, k in zip(blocks, keys):
                if k in cached:
                    self.dups.setdefault(k, []).append(b)
                else:
                    cached[k] = b
        self.version += 1

    def drop(self, block: int) -> None:
        """Forget ``block``'s key (eviction, or its content was never computed)."""
        k = int(self.key[block])
        self.key[block] = 0
        rest = self.dups.get(k)
        if self.cached[k] == block:
            if rest:
                self.cached[k] = rest.pop(0)
            else:
                del self.cached[k]
        else:
            rest.remove(block)
        if rest is not None and not rest:
            del self.dups[k]
        self.version += 1

    def table(self, req: int) -> list[int]:
        return list(self.tables.get(req, ()))

    def peek(self, n: int) -> list[int]:
        """The blocks the next ``n`` takes would pop (evicting their keys), head first."""
        return list(islice(self.free_q, n))

    def num_cached_free(self) -> int:
        free = np.fromiter(self.free_q, dtype=np.int64, count=len(self.free_q))
        return int((self.key[free] != 0).sum())

    def check(self, held_total: int) -> None:
        """Conservation, reference counts, queue membership and the key map."""
        counts = np.zeros(self.num_usable + 1, dtype=np.int64)
        for t in self.tables.values():
            np.add.at(counts, np.array(t, dtype=np.int64), 1)
        assert counts.sum() == held_total == self.refs_total, "table entries != accounting"
        assert (counts == self.ref).all(), "a reference count differs from the tables"
        assert counts[NULL_BLOCK] == 0 and NULL_BLOCK not in self.free_q, "null block used"
        assert int((counts > 0).sum()) + len(self.free_q) == self.num_usable, "free+used!=total"
        free = np.fromiter(self.free_q, dtype=np.int64, count=len(self.free_q))
        assert not counts[free].any(), "a held block is in the free queue"
        keyed = np.flatnonzero(self.key).tolist()
        listed = list(self.cached.values()) + [b for v in self.dups.values() for b in v]
        assert sorted(keyed) == sorted(listed), "key map and block keys disagree"
        assert all(int(self.key[b]) == k for k, b in self.cached.items()), "cached key mismatch"
        assert all(int(self.key[b]) == k for k, v in self.dups.items() for b in v), "dups"
