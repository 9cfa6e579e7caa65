"""Decode runs stay exact for every KV policy, with prefix caching and in swap mode:
folding steps into runs changes no result (tests/sim/test_decode_runs.py's check)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from tests.kv.helpers import run
from tests.kv.strategies import memory_runs
from tests.sim.helpers import assert_same_results, folded_and_single


@settings(max_examples=120, deadline=None)
@given(memory_runs())
def test_runs_equal_single_steps_for_every_memory_policy(case):
    arrival, prompt, output, knobs = case
    assert_same_results(*folded_and_single(run, arrival, prompt, output, **knobs))


@settings(max_examples=120, deadline=None)
@given(memory_runs(pressure=True))
def test_runs_equal_single_steps_under_kv_pressure(case):
    arrival, prompt, output, knobs = case
    a, b = folded_and_single(run, arrival, prompt, output, **knobs)
    assert_same_results(a, b)
    assert sum(p.swap_out_bytes for p in a.plans) == sum(p.swap_out_bytes for p in b.plans)


def test_caching_runs_fold_and_evict_like_single_steps():
    # two requests share a 64-token prefix; a third, unrelated one, then decodes long enough
    # that its run must evict the cached prefix blocks (free count includes them)
    chains = [np.arange(4), np.arange(4), np.array([9, 10, 11, 12])]
    knobs = dict(usable_blocks=12, block_size=16, prefix_caching=True,
                 prefix_hashes=chains + [None], hash_block_size=16)
    a, b = folded_and_single(run, [0.0, 0.5, 1.0, 1.0], [64, 64, 64, 16], [2, 2, 100, 60],
                             **knobs)
    assert_same_results(a, b)
    assert len(a.plans) < len(b.plans)  # runs did fold steps
    c = a.kv.counters()
    assert c["prefix_hits"] == 48 and c["prefix_evictions"] > 0
