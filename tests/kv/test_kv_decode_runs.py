"""Decode runs stay exact for every KV policy, with prefix caching and in swap mode:
folding steps into runs changes no result (tests/sim/test_decode_runs.py's check)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

import sim.sched.vllm as vllm_mod
from tests.kv.helpers import run
from tests.kv.strategies import memory_runs


def both(arrival, prompt, output, knobs):
    saved = vllm_mod.MAX_RUN_STEPS
    try:
        folded = run(arrival, prompt, output, **knobs)
        vllm_mod.MAX_RUN_STEPS = 1  # every plan a single step
        single = run(arrival, prompt, output, **knobs)
    finally:
        vllm_mod.MAX_RUN_STEPS = saved
    return folded, single


def assert_same(a, b):
    for col in ("first_scheduled_s", "first_token_s", "finish_s", "max_itl_s"):
        np.testing.assert_allclose(getattr(a.recorder, col), getattr(b.recorder, col),
                                   rtol=1e-9, atol=1e-12, err_msg=col)
    sa, sb = a.recorder.steps(), b.recorder.steps()
    assert len(sa["start_s"]) == len(sb["start_s"])
    for col, va in sa.items():
        if va.dtype == object:
            assert (va == sb[col]).all(), col
        else:
            np.testing.assert_allclose(va, sb[col], rtol=1e-9, atol=1e-12, err_msg=col)
    assert (a.scheduler.num_preemptions == b.scheduler.num_preemptions).all()
    assert (a.scheduler.cached_tokens == b.scheduler.cached_tokens).all()
    assert a.scheduler.recomputed_tokens == b.scheduler.recomputed_tokens
    assert a.kv.counters() == b.kv.counters()  # prefix hits, evictions, swap traffic


@settings(max_examples=120, deadline=None)
@given(memory_runs())
def test_runs_equal_single_steps_for_every_memory_policy(case):
    assert_same(*both(*case))


@settings(max_examples=120, deadline=None)
@given(memory_runs(pressure=True))
def test_runs_equal_single_steps_under_kv_pressure(case):
    a, b = both(*case)
    assert_same(a, b)
    assert sum(p.swap_out_bytes for p in a.plans) == sum(p.swap_out_bytes for p in b.plans)


def test_caching_runs_fold_and_evict_like_single_steps():
    # two requests share a 64-token prefix; a third, unrelated one, then decodes long enough
    # that its run must evict the cached prefix blocks (free count includes them)
    chains = [np.arange(4), np.arange(4), np.array([9, 10, 11, 12])]
    knobs = dict(usable_blocks=12, block_size=16, prefix_caching=True,
                 prefix_hashes=chains + [None], hash_block_size=16)
    a, b = both([0.0, 0.5, 1.0, 1.0], [64, 64, 64, 16], [2, 2, 100, 60], knobs)
    assert_same(a, b)
    assert len(a.plans) < len(b.plans)  # runs did fold steps
    c = a.kv.counters()
    assert c["prefix_hits"] == 48 and c["prefix_evictions"] > 0
