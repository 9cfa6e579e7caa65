"""Prefix caching on the fast core (sim/fast/caching.py) gives the general engine's results.

The same comparison as tests/fast/test_equivalence.py (every step column, per-request time,
ITL sample, counter, hook log), with ``engine.enable_prefix_caching`` on: shared system
prompts, a Mooncake replay (hits, evictions), tight pools where recompute-preempted requests
find their own blocks again, prompts that end on a block boundary (the last prompt token
publishes the prompt's last block in a decode-shaped step), and a hypothesis property over
random knobs and random prefix chains.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from sim.config.load import LoadedScenario, load_scenario, validate
from sim.config.resolve import ConfigError
from sim.engine.requests import RequestSpecs
from sim.fast.caching import CachingScheduler
from sim.kv import block_keys
from sim.pipeline import prepare, resolve_loaded
from tests.fast.equivalence import assert_same, prepared, run_both, same_runs, same_scenario
from tests.fast.test_properties import knobs
from tests.shared_data import MOONCAKE

ON = "engine.enable_prefix_caching=true"


def test_shared_system_prompt():
    a, _ = same_scenario("prefix-cache-system-prompt")
    c = a.counters
    assert c["prefix_hits"] > 0.8 * c["prefix_queries"] and a.core == "general"
    assert a.recorder.num_steps > a.recorder.num_plans > 100


def test_prompts_that_share_nothing():
    a, _ = same_scenario(None, ON, "workload.num_requests=300")
    assert a.counters["prefix_queries"] > 0 and a.counters["prefix_hits"] == 0


def test_preempted_requests_find_their_blocks_again():
    a, _ = same_scenario("small-kv-pressure", ON, "workload.num_requests=250")
    c = a.counters
    assert a.num_preemptions.sum() > 0 and c["prefix_preempted_hits"] > 0
    assert c["prefix_evictions"] > 0


def _materializations(monkeypatch) -> list[tuple[int, tuple[int, ...]]]:
    """(running requests, victim) of each fast-core pool leaving its counting mode."""
    calls, real = [], CachingScheduler._materialize

    def spy(self, *also):
        calls.append((len(self.running), also))
        return real(self, *also)

    monkeypatch.setattr(CachingScheduler, "_materialize", spy)
    return calls


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_counted_pool_turns_concrete_at_the_first_preemption(monkeypatch, asynchronous):
    """Nothing shared: the fast core counts blocks until the first preemption gives blocks
    keys, then hands the pool every holder's table; from there on hits of preempted
    requests and evictions are the general engine's (same_scenario compares them all)."""
    calls = _materializations(monkeypatch)
    a, b = same_scenario("small-kv-pressure", ON, "workload.num_requests=250",
                         f"engine.async_scheduling={str(asynchronous).lower()}")
    c = a.counters
    assert b.core == "fast" and a.num_preemptions.sum() > 0
    assert c["prefix_preempted_hits"] > 0 and c["prefix_evictions"] > 0
    # once per fast run (plain and hooked), at a preemption (a victim), mid-run
    assert len(calls) == 2 and all(len(v) == 1 and n > 0 for n, v in calls)


def test_a_pool_is_counted_only_while_nothing_can_be_found(monkeypatch):
    """Without preemptions a share-nothing run counts to its end (made concrete for the
    final checks, no victim); with shared prefixes it never counts."""
    calls = _materializations(monkeypatch)
    a, _ = same_scenario(None, ON, "workload.num_requests=200")
    assert a.num_preemptions.sum() == 0 and calls == [(0, ()), (0, ())]
    calls.clear()
    a, _ = same_scenario(None, ON, "workload.num_requests=200",
                         "workload.shared_prefix={tokens: 512, num_prefixes: 4}")
    assert a.counters["prefix_hits"] > 0 and calls == []


def test_many_prefixes_in_a_tight_pool_evict():
    a, _ = same_scenario("prefix-cache-system-prompt", "workload.num_requests=300",
                         "workload.shared_prefix={tokens: 1000, num_prefixes: 12, "
                         "hash_block_size: 16}", "engine.max_model_len=8192",
                         "engine.num_gpu_blocks_override=700")
    c = a.counters
    assert c["prefix_evictions"] > 0 and c["prefix_hits"] > 0 and a.num_preemptions.sum() > 0


@pytest.mark.parametrize("block", [16, 32])
def test_prompts_ending_on_a_block_boundary(block):
    # every prompt is a whole number of blocks and fully shared: its last token, computed in
    # a decode-shaped step, fills the last block, which later requests hit
    n = 40
    specs = RequestSpecs.from_arrays(
        np.arange(n) * 0.05, [4 * block] * n, [1 + (i % 7) * 9 for i in range(n)],
        prefix_hashes=[np.arange(4, dtype=np.int64)] * n, hash_block_size=block)
    r, _ = prepared(None, ON, f"engine.block_size={block}", "engine.max_num_batched_tokens="
                    f"{4 * block - 1}", "cost={name: linear, base_ms: 2, prefill_token_ms: 0.05,"
                    " decode_seq_ms: 0.1, context_token_ms: 0.001}")
    a, _ = same_runs(r, specs)
    assert a.counters["prefix_hits"] == (n - 1) * 3 * block  # a hit stops a token short


def test_equal_blocks_published_in_one_step():
    # request 1 shares request 0's first 64 tokens and computes its own copy of tokens
    # 64..95, whose last token it computes (a decode-shaped step) in the step where request
    # 0 computes its copy: the copy published first (running order: request 0's) stays in
    # the cache, the other waits in dups; request 2, after request 1 finished, hits request
    # 0's held copy, not request 1's freed one (found by the property below)
    specs = RequestSpecs.from_arrays(
        [0.0, 0.0, 0.05], [128, 96, 145], [150, 1, 20],
        prefix_hashes=[np.array([2, 0, 0, 0]), np.array([2, 0, 0]), np.array([2, 0, 0, 0])],
        hash_block_size=32)
    # (requests 0 and 1 reach the scheduler together: prompts tokenized side by side)
    r, _ = prepared(None, ON, "engine.max_num_batched_tokens=95",
                    "engine.long_prefill_token_threshold=64", "engine.max_model_len=256",
                    "engine.num_gpu_blocks_override=30", "engine.ingress_serial=false")
    a, _ = same_runs(r, specs)
    assert a.cached_tokens.tolist() == [0, 64, 128]


@pytest.mark.skipif(not MOONCAKE.exists(), reason="needs ../shared Mooncake trace")
def test_mooncake_replay():
    data = {"name": "mooncake", "model": "llama-3.1-8b", "gpu": "h100-sxm",
            "tensor_parallel_size": 4, "seed": 1, "cost": {"name": "roofline"},
            "engine": {"max_model_len": 131072, "enable_prefix_caching": True},
            "workload": {"trace": str(MOONCAKE), "window_s": [0, 300]}}
    r, specs, _ = prepare(LoadedScenario(validate(data, "test"), "test", Path(".")))
    a, _ = same_runs(r, specs)
    assert a.counters["prefix_hits"] > 0 and a.counters["prefix_evictions"] > 0


@st.composite
def shared_requests(draw) -> RequestSpecs:
    """Up to 50 requests in bursts whose prompts start with one of a few prefix chains
    (hash blocks of 8-48 tokens, so chains end inside and on KV blocks), some repeated
    whole (a later turn of the same conversation)."""
    n = draw(st.integers(1, 50))
    hbs = draw(st.sampled_from([8, 16, 24, 32, 48]))
    families = draw(st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=12),
                             min_size=1, max_size=4))
    bursts = draw(st.lists(st.floats(0, 1.0, allow_nan=False), min_size=1, max_size=5))
    at = np.sort(np.asarray(draw(st.lists(st.sampled_from(bursts), min_size=n, max_size=n))))
    prompts, outputs, chains = [], [], []
    for _ in range(n):
        fam = draw(st.sampled_from(families))
        used = draw(st.integers(0, len(fam)))
        prompt = max(1, used * hbs - draw(st.sampled_from([0, 0, 1, hbs // 2]))
                     + draw(st.sampled_from([0, 0, 1, 17, 200])))
        prompts.append(min(prompt, 560))
        outputs.append(draw(st.integers(1, 200)))
        keep = -(-prompts[-1] // hbs)
        chains.append(np.asarray(fam[:min(used, keep)], dtype=np.int64) if used else None)
    return RequestSpecs.from_arrays(at, prompts, outputs, prefix_hashes=chains,
                                    hash_block_size=hbs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), shared_requests())
def test_fast_core_equals_general_engine_with_prefix_caching(sets, specs):
    try:
        r = resolve_loaded(load_scenario(None, (*sets, ON)))
    except ConfigError:
        reject()
    a, b = same_runs(r, specs)
    assert (a.core, b.core) == ("general", "fast")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), shared_requests())
def test_private_blocks_past_a_solo_id_change_nothing_but_evictions(sets, specs):
    """Blocks from the first hash id no other chain carries are private (first_solo): every
    step, request and hit is what publishing them as they fill gave; evictions only fewer."""
    try:
        r = resolve_loaded(load_scenario(None, (*sets, ON)))
    except ConfigError:
        reject()
    private, _ = run_both(r, specs)
    real = block_keys.first_solo
    block_keys._SOLO.clear()
    block_keys.first_solo = lambda chains, lens: lens.copy()  # every chain id shareable
    try:
        published, _ = run_both(r, specs)
    finally:
        block_keys.first_solo = real
        block_keys._SOLO.clear()
    assert private.counters["prefix_evictions"] <= published.counters["prefix_evictions"]
    assert_same(*(dataclasses.replace(res, counters={
        k: v for k, v in res.counters.items() if k != "prefix_evictions"})
        for res in (published, private)))
