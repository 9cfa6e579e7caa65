"""Reservation KV policies: the whole reservation at the first allocation, never more."""

from __future__ import annotations

import numpy as np
import pytest

from sim.kv.base import KV_POLICIES


def make(name, prompts=(10, 30), outputs=(5, 40), blocks=20, max_len=64, bs=16):
    cls = KV_POLICIES.get(name)
    return cls(num_blocks=blocks, block_size=bs, num_requests=len(prompts), max_model_len=max_len,
               prompt_tokens=np.array(prompts), output_tokens=np.array(outputs),
               params=cls.Params())


@pytest.mark.parametrize("name,reserve", [("contiguous-max", [4, 4]),
                                          ("contiguous-exact", [1, 5])])
def test_first_allocation_takes_the_whole_reservation(name, reserve):
    kv = make(name)
    ids = np.array([0, 1])
    assert kv.blocks_for(ids, np.array([1, 1])).tolist() == reserve
    assert kv.blocks_for(ids, np.array([0, 0])).tolist() == [0, 0]
    assert kv.allocate(0, 1) and kv.allocate(1, 7, admitting=True)
    assert kv.held.tolist() == reserve and kv.num_used == sum(reserve)
    # growth never needs a block: extra, grow, allocate_many and runs are all no-ops
    assert kv.extra_blocks(ids, np.array([15, 69])).tolist() == [0, 0]
    kv.allocate_many(ids, np.array([15, 69]))
    kv.grow(ids, kv.extra_blocks(ids, np.array([64, 64])))
    assert kv.held.tolist() == reserve
    assert kv.decode_run_new_blocks(ids, np.array([10, 30]), 50).tolist() == [0] * 50
    kv.check_integrity()
    kv.free(0)
    assert kv.held[0] == 0 and kv.num_used == reserve[1]


def test_a_reservation_that_does_not_fit_takes_nothing():
    kv = make("contiguous-max", blocks=6)
    assert kv.allocate(0, 1)
    assert not kv.allocate(1, 1) and kv.held[1] == 0 and kv.num_free == 2
    kv.check_integrity()


def test_watermark_applies_to_admissions_only():
    cls = KV_POLICIES.get("contiguous-max")
    kv = cls(num_blocks=8, block_size=16, num_requests=2, max_model_len=64,
             prompt_tokens=np.array([1, 1]), output_tokens=np.array([1, 1]),
             params=cls.Params(watermark=0.25))
    assert kv.admission_reserve == 2
    assert kv.allocate(0, 1, admitting=True)
    assert not kv.allocate(1, 1, admitting=True) and kv.allocate(1, 1)
