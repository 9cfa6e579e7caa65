"""The pool's release: the sliced split (keyed blocks leading the table) equals the block by
block split, whatever the references and the hashed count."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.kv.caching_pool import CachingBlockPool


@settings(max_examples=150, deadline=None)
@given(size=st.integers(1, 12), keyed=st.integers(0, 12), shared=st.integers(0, 12),
       hashed=st.integers(0, 14), order=st.booleans())
def test_release_splits_as_block_by_block(size, keyed, shared, hashed, order):
    keyed, shared = min(keyed, size), min(shared, keyed, size)
    pool = CachingBlockPool(40)
    pool.take(0, size)
    table = pool.table(0)
    pool.register(table[:keyed], [1000 + i for i in range(keyed)])  # the leading run
    if order and keyed < size:  # a keyed block after unkeyed ones: the slow path
        pool.register([table[-1]], [5000])
    if shared:
        pool.touch(1, table[:shared])  # a second table holds some: they stay held
    slow = copy.deepcopy(pool)
    last, first = slow._split(slow.tables.pop(0), hashed)
    if last:
        slow._append(last)
    if first:
        slow._prepend(first)
    pool.release(0, hashed)
    assert pool.free_order() == slow.free_order()
    assert pool.ref == slow.ref
    head = pool.free_order()
    assert all(b in head for b in table[shared:])  # every block nobody else holds is free
    assert not any(b in head for b in table[:shared])
