"""The prefix-caching pool, step by step (vLLM v1's KVCacheManager / BlockPool rules)."""

from __future__ import annotations

import numpy as np
import pytest

from sim.engine.requests import RequestSpecs
from sim.kv.paged import PagedParams
from sim.kv.prefix_cache import PrefixCachingKV
from tests.kv.helpers import run


def make_kv(prompts, chains, hbs=16, blocks=10, bs=16):
    specs = RequestSpecs.from_arrays(np.zeros(len(prompts)), prompts, [5] * len(prompts),
                                     prefix_hashes=[None if c is None else np.array(c)
                                                    for c in chains], hash_block_size=hbs)
    return PrefixCachingKV(num_blocks=blocks, block_size=bs, num_requests=len(prompts),
                           max_model_len=4096, prompt_tokens=specs.prompt_tokens,
                           output_tokens=specs.output_tokens, params=PagedParams(),
                           specs=specs)


def admit(kv, req, tokens):
    hit = kv.lookup_prefix(req, int(kv.prompt_tokens[req]))
    assert kv.allocate(req, tokens if tokens else int(kv.prompt_tokens[req]), admitting=True)
    kv.check_integrity()
    return hit


def test_full_blocks_only_and_hit_capped_at_prompt_minus_one():
    # r0 computes 3 full blocks; r1 has the same 48-token prompt: a hit may cover at most 47
    # tokens, so 2 whole blocks; r2 extends the prompt by 1 token: all 3 blocks hit
    kv = make_kv([48, 48, 49], [[1, 2, 3], [1, 2, 3], [1, 2, 3, 4]])
    assert admit(kv, 0, 48) == 0
    assert admit(kv, 1, 48) == 32
    assert admit(kv, 2, 49) == 48
    assert kv.block_table(1)[:2] == kv.block_table(0)[:2] == kv.block_table(2)[:2]
    assert kv.block_table(2)[2] == kv.block_table(0)[2]
    # shared blocks are counted once: 3 (r0) + 1 (r1's own third block) + 1 (r2's fourth)
    assert kv.num_used == 5 and kv.shared_slots == (2 + 3) * 16
    assert kv.pool.ref[kv.block_table(0)[0]] == 3


def test_freed_blocks_join_the_lru_queue_tail_first_and_are_evicted_from_the_head():
    kv = make_kv([48, 48, 64], [[1, 2, 3], [1, 2, 3], None], blocks=7)
    admit(kv, 0, 48)
    a = kv.block_table(0)
    kv.free(0)
    assert kv.pool.free_order()[-3:] == a[::-1]  # tail block first: it is evicted first
    assert kv.num_free == 7 and kv.usage().cached == 3  # cached blocks still count as free
    # r2 (no hashes) needs 4 blocks: the 4 never-used blocks at the head go first
    admit(kv, 2, 64)
    assert kv.usage().cached == 3 and kv.pool.evictions == 0
    assert kv.allocate(2, 64 + 16)  # one more block: evicts r0's tail block
    assert kv.block_table(2)[-1] == a[2] and kv.pool.evictions == 1
    kv.free(2)
    assert admit(kv, 1, 48) == 32  # the shared head survived
    assert kv.block_table(1)[:2] == a[:2]


def test_evictable_hits_count_against_the_free_blocks():
    kv = make_kv([64, 64, 32], [[1, 2, 3, 4], [1, 2, 3, 4], None], blocks=6)
    admit(kv, 0, 64)
    kv.free(0)  # 4 cached free blocks + 2 never used
    admit(kv, 2, 32)  # takes the 2 unused blocks
    assert kv.num_free == 4
    # r1 hits 3 cached blocks (ref 0, in the queue) and needs 1 new block: 3 + 1 = 4 fit
    assert kv.lookup_prefix(1, 64) == 48 and kv.allocate(1, 64, admitting=True)
    assert kv.num_free == 0 and kv.pool.evictions == 1
    kv.check_integrity()


def test_a_hit_that_does_not_fit_changes_nothing():
    kv = make_kv([64, 64, 64], [[1, 2, 3, 4], [1, 2, 3, 4], None], blocks=6)
    admit(kv, 0, 64)
    kv.free(0)
    admit(kv, 2, 32)  # 2 blocks; 4 cached free left
    kv.allocate(2, 48)  # evicts r0's tail block: 3 cached left
    assert kv.lookup_prefix(1, 64) == 48
    assert not kv.allocate(1, 64 + 16, admitting=True)  # 3 evictable hits + 2 new > 3 free
    assert kv.stats["queries"] == 64 + 64 and kv.usage().cached == 3  # no lookup counted
    kv.check_integrity()


def test_mooncake_512_token_hash_blocks_map_to_16_token_kv_blocks():
    # chains of 512-token hash blocks: r1 agrees with r0 on its first two ids (1024 tokens =
    # 64 KV blocks); r2 has r0's whole chain, including the partial last hash block, so it
    # shares every full KV block of it too (1100 // 16 = 68 blocks); r1's 8 is its own, so
    # its blocks from there on are private (first_solo)
    kv = make_kv([1100, 1100, 1100, 900], [[0, 1, 7], [0, 1, 8], [0, 1, 7], None], hbs=512,
                 blocks=400)
    assert kv.keys.n_shared.tolist() == [68, 64, 68, 0]
    admit(kv, 0, 1100)
    assert admit(kv, 1, 1100) == 1024
    assert admit(kv, 2, 1100) == 1088
    assert admit(kv, 3, 900) == 0  # no hash ids: nothing to share


def test_chunked_prefill_publishes_blocks_as_they_fill():
    kv = make_kv([64, 64], [[1, 2, 3, 4], [1, 2, 3, 4]], blocks=10)
    kv.lookup_prefix(0, 64)
    assert kv.allocate(0, 24, admitting=True)  # chunk 1: block 0 full, block 1 half
    assert kv.lookup_prefix(1, 64) == 16
    kv.note_computed(np.array([0]), np.array([40]))  # chunk 2 fills block 1 (no new block)
    kv.allocate(0, 40)
    assert kv.lookup_prefix(1, 64) == 32


def test_preempted_request_finds_its_own_blocks_generated_tokens_included():
    # one request alone: 40-token prompt without hashes, preempted after 30 generated tokens
    kv = make_kv([40], [None], blocks=10)
    admit(kv, 0, 40)
    kv.allocate(0, 70)
    kv.preempt(0, 70)
    kv.check_integrity()
    assert kv.lookup_prefix(0, 71) == 64  # 4 whole blocks of its prompt + generated tokens
    assert kv.allocate(0, 71, admitting=True)
    assert kv.stats["preempted_queries"] == 71 and kv.stats["preempted_hits"] == 64


def test_a_block_no_other_chain_shares_is_published_only_at_preemption():
    # r0 and r1 share two hash blocks; r0's third id (7) is carried by no other chain, so no
    # other request can hit that block: filling it publishes nothing (it has no key to evict
    # when reused); preempting r0 publishes it under r0's own key, and r0 finds it again
    kv = make_kv([48, 48], [[1, 2, 7], [1, 2, 8]], blocks=10)
    assert kv.keys.n_shared.tolist() == [2, 2]
    admit(kv, 0, 48)
    table = kv.block_table(0)
    assert [kv.pool.key[b] != 0 for b in table] == [True, True, False]
    assert admit(kv, 1, 48) == 32
    kv.preempt(0, 48)
    kv.check_integrity()
    assert kv.pool.key[table[2]] != 0
    assert kv.lookup_prefix(0, 49) == 48  # the shared two, then its own third


def test_preemption_keeps_the_hashes_of_a_step_that_never_ran():
    # vLLM hashes a block when a step is scheduled to fill it (cache_blocks in
    # allocate_slots), and a victim already scheduled in its step frees its blocks with
    # those hashes: a later request hits them (the whole 64-token prompt less its last block)
    kv = make_kv([64, 64], [[1, 2, 3, 4], [1, 2, 3, 4]], blocks=10)
    kv.lookup_prefix(0, 64)
    kv.allocate(0, 64, admitting=True)  # scheduled (published) ...
    kv.preempt(0, 16)  # ... but preempted with only 16 tokens computed
    kv.check_integrity()
    assert kv.lookup_prefix(1, 64) == 48


def test_swap_with_caching_keeps_the_pool_consistent():
    sim = run([0, 0, 0], [40, 40, 40], [30, 30, 30], usable_blocks=8, prefix_caching=True,
              prefix_hashes=[np.array([1, 2]), np.array([1, 2]), None], hash_block_size=16,
              swap_blocks=10)
    assert sim.kv.counters()["swap_out_events"] >= 1
    assert (sim.scheduler.generated == 30).all() and sim.scheduler.recomputed_tokens == 0


@pytest.mark.parametrize("bs", [4, 16])
def test_runs_through_the_scheduler_share_the_prefix(bs):
    sim = run([0, 0.5], [100, 100], [3, 3], block_size=bs, prefix_caching=True,
              prefix_hashes=[np.arange(7), np.arange(7)], hash_block_size=16)
    hit = (99 // bs) * bs  # 96 tokens: the 100-token prompt less its last partial block
    assert sim.scheduler.cached_tokens.tolist() == [0, hit]
    assert next(step for _, step, _, _ in sim.steps if 1 in step) == {1: 100 - hit}


def test_the_used_fraction_a_router_reads_is_the_usage_snapshots():
    # the fleet's KV report takes used_fraction (cheap) instead of usage() (counts cached
    # free blocks): the same figure, shared and cached blocks included
    kv = make_kv([48, 48, 64], [[1, 2, 3], [1, 2, 3], None], blocks=7)
    seen = []
    for step in (lambda: admit(kv, 0, 48), lambda: admit(kv, 1, 48), lambda: kv.free(0),
                 lambda: admit(kv, 2, 64), lambda: kv.free(1)):
        step()
        u = kv.usage()
        assert kv.used_fraction() == u.used / u.total
        seen.append(u.used)
    assert seen == [3, 4, 3, 7, 4]  # r1 keeps the 2 shared blocks and its own third
