"""Block keys from prefix hash chains: equal keys iff the chains agree up to that block."""

from __future__ import annotations

import numpy as np

from sim.engine.requests import RequestSpecs
from sim.kv.block_keys import BlockKeys, chain_hashes


def test_chain_hashes_depend_on_the_whole_prefix():
    a, b = chain_hashes(np.array([0, 5, 7, 9])), chain_hashes(np.array([0, 5, 8, 9]))
    assert (a == b).tolist() == [True, True, False, False]
    assert chain_hashes(np.array([5]))[0] != chain_hashes(np.array([0, 5]))[1]  # position


def test_keys_agree_exactly_up_to_the_first_differing_hash_block():
    chains = [np.array([0, 1, 2]), np.array([0, 1, 3]), np.array([0, 1, 2]), None]
    specs = RequestSpecs.from_arrays(np.zeros(4), [96, 96, 90, 96], [1] * 4,
                                     prefix_hashes=chains, hash_block_size=32)
    keys = BlockKeys(specs, 16, specs.prompt_tokens)
    assert keys.n_shared.tolist() == [6, 6, 5, 0]  # full 16-token blocks inside the chain
    k0, k1, k2 = keys.shared(0), keys.shared(1), keys.shared(2)
    assert [x == y for x, y in zip(k0, k1)] == [True] * 4 + [False] * 2
    assert k2 == k0[:5] and len(set(k0)) == 6 and 0 not in k0
    own0, own1 = keys.private(0, 6, 9), keys.private(1, 6, 9)
    assert not set(own0) & set(own1) and not set(own0) & set(k0)
    assert keys.shared(3) == [] and keys.private(3, 0, 2) == keys.private(3, 0, 2)
