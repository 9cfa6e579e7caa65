"""Block keys from prefix hash chains: equal keys iff the chains agree up to that block."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine.requests import RequestSpecs
from sim.kv.block_keys import _BLOCK_SALT, CHUNK, BlockKeys, chain_hashes, mix


def test_chain_hashes_depend_on_the_whole_prefix():
    a, b = chain_hashes(np.array([0, 5, 7, 9])), chain_hashes(np.array([0, 5, 8, 9]))
    assert (a == b).tolist() == [True, True, False, False]
    assert chain_hashes(np.array([5]))[0] != chain_hashes(np.array([0, 5]))[1]  # position


def test_keys_agree_exactly_up_to_the_first_differing_hash_block():
    chains = [np.array([0, 1, 2]), np.array([0, 1, 3]), np.array([0, 1, 2]), None]
    specs = RequestSpecs.from_arrays(np.zeros(4), [96, 96, 90, 96], [1] * 4,
                                     prefix_hashes=chains, hash_block_size=32)
    keys = BlockKeys(specs, 16, specs.prompt_tokens)
    # full 16-token blocks inside the chain, up to an id no other chain carries (r1's 3)
    assert keys.n_shared.tolist() == [6, 4, 5, 0]
    k0, k1, k2 = keys.shared(0), keys.shared(1), keys.shared(2)
    assert k1 == k0[:4]
    assert k2 == k0[:5] and len(set(k0)) == 6 and 0 not in k0
    own0, own1 = keys.private(0, 6, 9), keys.private(1, 6, 9)
    assert not set(own0) & set(own1) and not set(own0) & set(k0)
    assert keys.shared(3) == [] and keys.private(3, 0, 2) == keys.private(3, 0, 2)


def test_first_solo_is_the_first_id_no_other_chain_carries():
    from sim.kv.block_keys import first_solo

    for big in (0, 1 << 40):  # small ids counted with bincount, large ones with unique
        chains = [np.array([0, 1, 2]) + big, np.array([0, 1, 3]) + big, None,
                  np.array([0, 5, 5, 1]) + big, np.array([9]) + big]
        lens = np.array([3, 3, 0, 4, 1])
        # r3: 5 twice in its own chain counts as shared (merely published); r0's 2 is
        # carried by no other chain; r4's only id is its own
        assert first_solo(chains, lens).tolist() == [2, 2, 0, 4, 0]
    assert first_solo([None, None], np.zeros(2, np.int64)).tolist() == [0, 0]


def _one_by_one(keys: BlockKeys, req: int) -> list[int]:
    """Request ``req``'s shareable keys from its own chain alone (chain_hashes)."""
    n = int(keys.n_shared[req])
    if not n:
        return []
    h = chain_hashes(keys._chains[req])
    last = (np.arange(1, n + 1) * keys.bs - 1) // keys.hbs
    salted = mix(np.arange(n, dtype=np.uint64) + _BLOCK_SALT)
    out = mix(h[last] ^ salted)
    out[out == 0] = 1
    return out.tolist()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_keys_computed_a_chunk_at_a_time_equal_each_chain_hashed_alone(data):
    n = data.draw(st.integers(1, 3 * CHUNK), label="requests")
    bs = data.draw(st.sampled_from([1, 4, 16]), label="block_size")
    hbs = data.draw(st.sampled_from([1, 16, 64]), label="hash_block_size")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    lens = rng.integers(0, 6, n)
    chains = [None if k == 0 and rng.random() < 0.5 else rng.integers(0, 4, k) for k in lens]
    prompt = rng.integers(1, 8 * hbs, n)
    specs = RequestSpecs.from_arrays(np.zeros(n), prompt, [1] * n, prefix_hashes=chains,
                                     hash_block_size=hbs)
    keys = BlockKeys(specs, bs, specs.prompt_tokens)
    order = rng.permutation(n).tolist()  # lookups out of order, some finished between
    for r in order:
        assert keys.shared(r) == _one_by_one(keys, r), r
        if rng.random() < 0.3:
            keys.forget(r)
