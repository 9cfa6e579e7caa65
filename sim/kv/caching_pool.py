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
  dropped (eviction, ``block_pool.py:666-700``). A cache hit on a free block pulls it
  out of the queue (``touch``, ``block_pool.py:752-772``). The free count therefore
  includes evictable cached blocks.

Representation (the same queue as vLLM's linked ``FreeKVCacheBlockQueue``,
``vllm/v1/core/kv_cache_utils.py``, at C speed per block): the queue is the list
``q[h:]`` read from index ``h``, so a take is one slice, a free one ``extend`` (tail)
or one slice assignment (head), with no Python operation per block. Only a block
with a key can be hit, so only keyed blocks are pulled out of the middle: they leave
a 0 (the null block's id, never queued) where they stood, skipped when taken, and
``qpos`` (absolute: ``base`` + index) says where each queued keyed block stands.
A block without a key is never shared (sharing starts with a hit on a key, and a key
is dropped only from a free block), so its count is 1 while a table holds it and 0
once free: ``ref`` is kept for keyed blocks only, and a table with no keyed block is
freed with slices. Block 0 is the null block and never handed out. ``version``
changes on every mutation, so a cache lookup can tell whether it is still current.
"""

from __future__ import annotations

import numpy as np

from sim.kv.block_pool import NULL_BLOCK

#: the table of blocks taken for requests named later (``CachingBlockPool.move``)
PENDING = -1
_HOLE = NULL_BLOCK  # where a hit block left the free queue
_LAZY = frozenset(("q", "qpos", "ref", "key"))  # made on first use (CachingBlockPool)
_COMPACT = 4096  # drop the consumed head of ``q`` once it is this long and half the list


class CachingBlockPool:
    def __init__(self, num_usable_blocks: int):
        n = num_usable_blocks
        self.num_usable = n
        # the per-block lists q, qpos, ref and key are made on first use (``__getattr__``):
        # a pool counted by the fast core until a block can be found, or an idle fleet
        # replica's, never needs them (a million ints for a large KV cache)
        self.h, self.base, self.holes = 0, 0, 0  # holes: 0 entries in q[h:]
        self.num_free = n
        self.keyed_free = 0  # queued blocks with a key (cached free blocks: a take evicts)
        self.cached: dict[int, int] = {}
        self.dups: dict[int, list[int]] = {}
        self.tables: dict[int, list[int]] = {}
        self.refs_total = 0  # sum of reference counts = table entries (blocks)
        self.evictions = 0  # cached blocks whose key was dropped to reuse the block
        self.version = 0

    def __getattr__(self, name: str):
        if name not in _LAZY:
            raise AttributeError(name)
        n = self.num_usable
        self.q = list(range(1, n + 1))  # the free queue is q[h:], head first, holes skipped
        self.qpos = [0] * (n + 1)  # a queued keyed block's position (base + index in q)
        self.ref = [0] * (n + 1)  # tables holding each block (kept for keyed blocks)
        self.key = [0] * (n + 1)  # each block's hash key, 0 = none
        return getattr(self, name)

    # ---- the free queue ------------------------------------------------------------------
    def _append(self, blocks: list[int], skip: int = 0) -> None:
        """Queue ``blocks`` at the tail, in order (the last is evicted last); the first
        ``skip`` have no key (the caller knows)."""
        q, key = self.q, self.key
        start = self.base + len(q)
        q.extend(blocks)
        if self.cached and any(map(key.__getitem__, blocks[skip:] if skip else blocks)):
            qpos = self.qpos
            for i in range(skip, len(blocks)):
                if key[b := blocks[i]]:
                    qpos[b] = start + i
                    self.keyed_free += 1
        self.num_free += len(blocks)

    def _prepend(self, blocks: list[int]) -> None:
        """Queue ``blocks`` (none keyed) at the head, in order (the first is taken first)."""
        m, h = len(blocks), self.h
        if h >= m:
            self.q[h - m:h] = blocks
            self.h = h - m
        else:  # keeps every queued block's absolute position
            self.q = blocks + self.q[h:]
            self.base += h - m
            self.h = 0
        self.num_free += m

    def _unqueue(self, b: int) -> None:
        """Pull keyed block ``b`` out of the free queue (a hit)."""
        self.q[self.qpos[b] - self.base] = _HOLE
        self.holes += 1
        self.num_free -= 1
        self.keyed_free -= 1

    def free_order(self) -> list[int]:
        """The free queue, head (taken next) first."""
        return [b for b in self.q[self.h:] if b]

    # ---- tables ---------------------------------------------------------------------------
    def take(self, req: int, n: int) -> None:
        """Append the first ``n`` blocks of the free queue (caller checked n <= num_free) to
        ``req``'s table, evicting."""
        q, h = self.q, self.h
        popped = q[h:h + n]
        h += n
        if self.holes:
            gone = popped.count(_HOLE)
            while gone:  # holes in the slice: drop them, read on
                self.holes -= gone
                popped = [b for b in popped if b]
                more = q[h:h + n - len(popped)]
                h += len(more)
                gone = more.count(_HOLE)
                popped += more
        self.num_free -= n
        if h >= _COMPACT and 2 * h >= len(q):
            del q[:h]
            self.base += h
            h = 0
        self.h = h
        key = self.key
        if self.keyed_free and any(map(key.__getitem__, popped)):  # none queued: none here
            self._evict([b for b in popped if key[b]])
        self.tables.setdefault(req, []).extend(popped)
        self.refs_total += n
        self.version += 1

    def move(self, src: int, dst: int, n: int) -> None:
        """Move the last ``n`` blocks of table ``src`` to the end of table ``dst`` (their
        references move with them)."""
        self.tables.setdefault(dst, []).extend(self._cut(src, n))
        self.version += 1

    def _cut(self, src: int, n: int) -> list[int]:
        """The last ``n`` blocks of table ``src``, taken out of it."""
        t = self.tables[src]
        cut = len(t) - n
        assert cut >= 0, "moving more blocks than the table holds"
        out = t[cut:]
        del t[cut:]
        if not t:
            del self.tables[src]
        return out

    def _evict(self, blocks: list[int]) -> None:
        self.evictions += len(blocks)
        self.keyed_free -= len(blocks)
        key, cached, dups = self.key, self.cached, self.dups
        for b in blocks:
            k = key[b]
            if k in dups:  # another block holds the same content: drop's bookkeeping
                self.drop(b)
                continue
            key[b] = 0  # drop, when no other block has this key: the cache maps k to b
            del cached[k]
        self.version += 1

    def touch(self, req: int, blocks: list[int]) -> None:
        """Append cache-hit ``blocks`` (keyed) to ``req``'s table, out of the free queue if
        there."""
        ref = self.ref
        for b in blocks:
            if not ref[b]:
                self._unqueue(b)
            ref[b] += 1
        self.tables.setdefault(req, []).extend(blocks)
        self.refs_total += len(blocks)
        self.version += 1

    def release(self, req: int, hashed: int, pending: int = 0, lead: int | None = None) -> None:
        """Drop ``req``'s references; blocks nobody holds join the free queue, tail block
        first: at its tail if they hold reusable content (a key, or among the table's first
        ``hashed`` blocks), else at its head. ``pending``: the last blocks of the PENDING
        table join ``req``'s table first (``move``). ``lead``: the table's keyed blocks are
        exactly its first ``lead`` (the caller knows; None: read each block's key)."""
        table = self.tables.pop(req, None)
        if pending > 0:
            more = self._cut(PENDING, pending)
            table = more if table is None else table + more
        if not table:
            return
        key, k = self.key, lead
        if k is None:
            if not self.cached or not any(map(key.__getitem__, table)):
                k = 0
            else:
                keyed = list(map(key.__getitem__, table))
                k = keyed.index(0) if 0 in keyed else len(table)
                if any(keyed[k:]):  # a keyed block after an unkeyed one
                    k = None
        if k is None:  # block by block
            (last, first), skip = self._split(table, hashed), 0
        elif not k:  # none shared: all free
            last = table[hashed - 1::-1] if hashed > 0 else []  # reversed table[:hashed]
            first = table[:hashed - 1:-1] if hashed > 0 else table[::-1]  # the rest, reversed
            skip = len(last)  # none has a key
        else:  # keyed blocks lead the table (hits and published prompt blocks come first):
            first = table[max(hashed, k):][::-1]  # the unkeyed rest in slices, then the
            last = table[k:hashed][::-1]  # keyed run block by block
            skip = len(last)
            ref = self.ref
            for b in reversed(table[:k]):
                ref[b] -= 1
                if not ref[b]:
                    last.append(b)
        if last:
            self._append(last, skip)
        if first:
            self._prepend(first)
        self.refs_total -= len(table)
        self.version += 1

    def _split(self, table: list[int], hashed: int) -> tuple[list[int], list[int]]:
        """``release``'s split of ``table``, block by block from its tail: (blocks for the
        queue's tail, for its head), dropping each keyed block's reference."""
        key, ref, last, first = self.key, self.ref, [], []
        i = len(table)
        for b in reversed(table):  # a table holds a block at most once
            i -= 1
            if key[b]:
                ref[b] -= 1
                if ref[b]:
                    continue
                last.append(b)
            elif i < hashed:
                last.append(b)
            else:
                first.append(b)
        return last, first

    def register(self, blocks: list[int], keys: list[int]) -> None:
        """Publish each block's content under its key (the blocks hold computed KV)."""
        if not blocks:
            return
        key, ref = self.key, self.ref
        for b, k in zip(blocks, keys):  # held by one table: a block without a key is unshared
            key[b] = k
            ref[b] = 1
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

    def refs(self, blocks: list[int]) -> list[int]:
        """Tables holding each of ``blocks`` (held blocks or hits)."""
        ref, key = self.ref, self.key
        return [ref[b] if key[b] else 1 for b in blocks]

    def peek(self, n: int) -> list[int]:
        """The blocks the next ``n`` takes would pop (evicting their keys), head first."""
        q, h, out = self.q, self.h, []
        while len(out) < min(n, self.num_free):
            chunk = q[h:h + n - len(out)]
            h += len(chunk)
            out += [b for b in chunk if b]
        return out

    def num_cached_free(self) -> int:
        return self.keyed_free

    def check(self, held_total: int) -> None:
        """Conservation, reference counts, queue membership and positions, the key map."""
        counts = np.zeros(self.num_usable + 1, dtype=np.int64)
        for t in self.tables.values():
            np.add.at(counts, np.array(t, dtype=np.int64), 1)
        assert counts.sum() == held_total == self.refs_total, "table entries != accounting"
        keyed = np.array(self.key, dtype=np.uint64) != 0
        ref = np.array(self.ref, dtype=np.int64)
        assert (counts[keyed] == ref[keyed]).all(), "a reference count differs from the tables"
        assert (counts[~keyed] <= 1).all(), "a block without a key in two tables"
        free = np.array(self.free_order(), dtype=np.int64)
        assert len(free) == self.num_free, "free count != queue"
        assert sum(1 for b in free.tolist() if self.key[b]) == self.keyed_free, "keyed free"
        assert self.q[self.h:].count(_HOLE) == self.holes, "holes"
        assert counts[NULL_BLOCK] == 0 and NULL_BLOCK not in free, "null block used"
        assert len(set(free.tolist())) == len(free), "a block twice in the free queue"
        assert int((counts > 0).sum()) + len(free) == self.num_usable, "free+used!=total"
        assert not counts[free].any(), "a held block is in the free queue"
        assert all(self.q[self.qpos[b] - self.base] == b for b in free.tolist()
                   if self.key[b]), "a keyed block's queue position"
        key = self.key
        keyed_ids = np.flatnonzero(keyed).tolist()
        listed = list(self.cached.values()) + [b for v in self.dups.values() for b in v]
        assert sorted(keyed_ids) == sorted(listed), "key map and block keys disagree"
        assert all(key[b] == k for k, b in self.cached.items()), "cached key mismatch"
        assert all(key[b] == k for k, v in self.dups.items() for b in v), "dups"
