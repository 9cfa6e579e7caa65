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

Block 0 is the null block and never handed out; it doubles as the free queue's
sentinel. The free queue is vLLM's ``FreeKVCacheBlockQueue``
(``vllm/v1/core/kv_cache_utils.py``): a doubly linked list over block ids (``nxt`` and
``prv``, Python lists: O(1) removal of a hit block from the middle, O(1) per block
popped or freed, no dict operation per block). ``ref`` and ``key`` are Python lists too:
a step moves tens of blocks, where a numpy call costs more than the loop. ``version``
changes on every mutation, so a cache lookup can tell whether it is still current.
"""

from __future__ import annotations

import numpy as np

from sim.kv.block_pool import NULL_BLOCK

#: the table of blocks taken for requests named later (``CachingBlockPool.move``)
PENDING = -1


class CachingBlockPool:
    def __init__(self, num_usable_blocks: int):
        n = num_usable_blocks
        self.num_usable = n
        # free queue 1, 2, ..., n: nxt[0] is its head, prv[0] its tail (0: the sentinel)
        self.nxt = list(range(1, n + 1)) + [0]
        self.prv = [n] + list(range(n))
        self.num_free = n
        self.ref = [0] * (n + 1)  # tables holding each block
        self.key = [0] * (n + 1)  # each block's hash key, 0 = none
        self.cached: dict[int, int] = {}
        self.dups: dict[int, list[int]] = {}
        self.tables: dict[int, list[int]] = {}
        self.refs_total = 0  # sum of reference counts = table entries (blocks)
        self.evictions = 0  # cached blocks whose key was dropped to reuse the block
        self.version = 0

    # ---- the free queue ------------------------------------------------------------------
    def _pop(self, n: int) -> list[int]:
        """Unlink the first ``n`` blocks of the free queue (caller checked n <= num_free)."""
        nxt, ref, b, out = self.nxt, self.ref, 0, []
        for _ in range(n):
            b = nxt[b]
            ref[b] = 1
            out.append(b)
        head = nxt[b]
        nxt[0], self.prv[head] = head, 0
        self.num_free -= n
        return out

    def _append(self, blocks: list[int]) -> None:
        """Link ``blocks`` at the tail, in order (the last is evicted last)."""
        nxt, prv = self.nxt, self.prv
        last = prv[0]
        for b in blocks:
            nxt[last] = b
            prv[b] = last
            last = b
        nxt[last], prv[0] = 0, last
        self.num_free += len(blocks)

    def _prepend(self, blocks: list[int]) -> None:
        """Link ``blocks`` at the head, in order (the first is taken first)."""
        nxt, prv = self.nxt, self.prv
        first, last = nxt[0], 0
        for b in blocks:
            nxt[last] = b
            prv[b] = last
            last = b
        nxt[last], prv[first] = first, last
        self.num_free += len(blocks)

    def _unlink(self, b: int) -> None:
        p, q = self.prv[b], self.nxt[b]
        self.nxt[p], self.prv[q] = q, p
        self.num_free -= 1

    def free_order(self) -> list[int]:
        """The free queue, head (taken next) first."""
        return self.peek(self.num_free)

    # ---- tables ---------------------------------------------------------------------------
    def take(self, req: int, n: int) -> None:
        """Append ``n`` blocks from the free queue's head to ``req``'s table, evicting."""
        popped = self._pop(n)
        key = self.key
        if any(map(key.__getitem__, popped)):
            self._evict([b for b in popped if key[b]])
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

    def _evict(self, blocks: list[int]) -> None:
        self.evictions += len(blocks)
        for b in blocks:
            self.drop(b)

    def touch(self, req: int, blocks: list[int]) -> None:
        """Append cache-hit ``blocks`` to ``req``'s table (out of the free queue if there)."""
        ref = self.ref
        for b in blocks:
            if not ref[b]:
                self._unlink(b)
            ref[b] += 1
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
        ref, key, last, first = self.ref, self.key, [], []
        for i in range(len(table) - 1, -1, -1):  # a table holds a block at most once
            b = table[i]
            ref[b] -= 1
            if not ref[b]:
                (last if i < hashed or key[b] else first).append(b)
        if last:
            self._append(last)
        if first:
            self._prepend(first)
        self.refs_total -= len(table)
        self.version += 1

    def register(self, blocks: list[int], keys: list[int]) -> None:
        """Publish each block's content under its key (the blocks hold computed KV)."""
        if not blocks:
            return
        key = self.key
        for b, k in zip(blocks, keys):
            key[b] = k
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
        k = self.key[block]
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
        nxt, b, out = self.nxt, 0, []
        for _ in range(min(n, self.num_free)):
            b = nxt[b]
            out.append(b)
        return out

    def num_cached_free(self) -> int:
        key = self.key
        return sum(1 for b in self.free_order() if key[b])

    def check(self, held_total: int) -> None:
        """Conservation, reference counts, queue links and membership, and the key map."""
        counts = np.zeros(self.num_usable + 1, dtype=np.int64)
        for t in self.tables.values():
            np.add.at(counts, np.array(t, dtype=np.int64), 1)
        assert counts.sum() == held_total == self.refs_total, "table entries != accounting"
        assert (counts == np.array(self.ref)).all(), "a reference count differs from the tables"
        free = np.array(self.free_order(), dtype=np.int64)
        assert self.prv[0] == (free[-1] if len(free) else 0), "free queue tail link"
        assert all(self.prv[self.nxt[b]] == b for b in [0, *free.tolist()]), "queue links"
        assert counts[NULL_BLOCK] == 0 and NULL_BLOCK not in free, "null block used"
        assert len(set(free.tolist())) == len(free), "a block twice in the free queue"
        assert int((counts > 0).sum()) + len(free) == self.num_usable, "free+used!=total"
        assert not counts[free].any(), "a held block is in the free queue"
        key = self.key
        keyed = [b for b in range(self.num_usable + 1) if key[b]]
        listed = list(self.cached.values()) + [b for v in self.dups.values() for b in v]
        assert sorted(keyed) == sorted(listed), "key map and block keys disagree"
        assert all(key[b] == k for k, b in self.cached.items()), "cached key mismatch"
        assert all(key[b] == k for k, v in self.dups.items() for b in v), "dups"
