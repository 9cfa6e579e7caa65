"""The prefix cache's pool makes its per-block lists on first use (an idle fleet replica or
a pool the fast core only counts never needs them)."""

from __future__ import annotations

import pytest

from sim.kv.caching_pool import CachingBlockPool


def test_the_per_block_lists_are_made_on_first_use():
    pool = CachingBlockPool(6)
    assert not {"q", "qpos", "ref", "key"} & set(vars(pool)) and pool.num_free == 6
    pool.take(7, 2)  # the first use makes them, as __init__ used to
    assert pool.tables[7] == [1, 2] and pool.free_order() == [3, 4, 5, 6]
    assert pool.key == [0] * 7 and len(pool.qpos) == 7 and pool.num_free == 4
    pool.check(2)
    with pytest.raises(AttributeError):
        pool.not_a_field  # noqa: B018 (anything else is still an AttributeError)
