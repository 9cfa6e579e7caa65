"""static: fixed batches, one context step, decode until the longest member finishes.

Golden cost: 10 ms per step + 1 ms per prefill token, decodes free.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim.sched.static import StaticParams
from tests.sim.helpers import ms, run


def static(batch_size: int, max_wait_s: float = 1.0) -> dict:
    return {"scheduler": "static",
            "params": StaticParams(batch_size=batch_size, max_wait_s=max_wait_s)}


def test_a_batch_starts_when_full_and_admits_nobody_until_it_ends():
    # r0 waits for r1 to fill the batch of 2; r2 (0.52 s) waits for the batch to end, then
    # alone for max_wait_s from its arrival
    sim = run([0.0, 0.5, 0.52], [4, 6, 4], [3, 5, 2], **static(2))
    assert sim.steps[0][:2] == (0.5, {0: 4, 1: 6})  # the context phase: one step
    batch_steps = [s for s in sim.steps if 0 in s[1] or 1 in s[1]]
    assert len(batch_steps) == 5  # 1 context step + 4 decodes (r1 needs 5 tokens)
    assert all(2 not in s[1] for s in batch_steps)
    r2 = next(s for s in sim.steps if 2 in s[1])
    assert r2[0] == pytest.approx(1.52)


def test_max_wait_starts_a_partial_batch():
    sim = run([0.0], [4], [2], **static(8, max_wait_s=0.3))
    assert sim.steps[0][0] == pytest.approx(0.3)
    assert sim.recorder.first_token_s[0] == pytest.approx(0.3 + ms(14))


def test_finished_members_hold_their_blocks_until_the_batch_ends():
    # r0 (2 tokens) finishes long before r1 (12): its 2 blocks stay held, nobody joins
    sim = run([0.0, 0.0, 0.0], [8, 8, 4], [2, 12, 2], block_size=4, **static(2),
              usable_blocks=8)
    steps = sim.recorder.steps()
    first_batch = steps["start_s"] < sim.recorder.finish_s[1]
    # r0 reserves 8 + 2 - 1 = 9 slots (3 blocks), r1 8 + 12 - 1 = 19 (5 blocks)
    assert (steps["kv_blocks_used"][first_batch] == 8).all()
    assert sim.recorder.first_scheduled_s[2] >= sim.recorder.finish_s[1]
    assert sim.kv.num_used == 0


def test_a_batch_shrinks_to_what_the_kv_can_reserve():
    # each request reserves 12 + 9 - 1 = 20 slots = 5 blocks; 10 blocks hold 2 of 3
    sim = run([0.0, 0.0, 0.0], [12, 12, 12], [9, 9, 9], usable_blocks=10, block_size=4,
              **static(3))
    assert sim.steps[0][1] == {0: 12, 1: 12}
    assert sim.scheduler.memory_blocked.tolist() == [False, False, True]
    assert sim.recorder.first_scheduled_s[2] > sim.recorder.finish_s[:2].max() - 1e-12


def test_decode_phase_is_folded_into_runs():
    sim = run([0.0, 0.0], [4, 4], [50, 80], **static(2))
    # context step, a run to r0's finish, a run to r1's finish
    assert sim.recorder.plan_steps.tolist() == [1, 49, 30]
    assert np.isnan(sim.recorder.finish_s).sum() == 0
