"""Block hash keys for prefix caching, derived from the trace's prefix hash chains.

vLLM hashes block k of a request as hash(parent hash, the block's token ids). Our
traces carry no token ids, only a chain of prefix hash ids, one per
``hash_block_size`` tokens of the prompt (Mooncake: 512; synthetic shared
prefixes: ``workload.shared_prefix.hash_block_size``), where equal ids at equal
positions mean equal tokens. So:

* KV block k (tokens ``[k*bs, (k+1)*bs)``) is *shareable* iff it lies entirely
  within the prompt and within hash blocks whose ids are given. Its key is a
  64-bit hash of (the chain's ids up to the hash block holding the block's last
  token, k): two requests share block k iff their chains agree up to there.
  Within a partial last hash block (Mooncake: ``len(hash_ids) = ceil(prompt/512)``,
  so it is usually partial) the full KV blocks are shareable too, but its id
  hashes that partial content, so in practice only a request with the same
  prompt end matches it; a later turn that extends the prompt has a different id
  there and recomputes up to 511 tokens that a token-level cache would reuse.
* Every other block (the prompt's tail past the chain, the partial last KV
  block, all generated tokens) has no id to share: it gets a key private to its
  request, which only that request can hit again (a recompute-preempted request
  re-admitted, as in vLLM, whose generated tokens have ids).
* So does every block from the first hash block whose id no other chain carries
  (``first_solo``): its key covers that id, so no other request can hit it
  either. Such blocks are published only if their request is preempted
  (sim/kv/prefix_cache.py), not each time one fills (synthetic shared prefixes:
  every block past the prefix; ~26 a request in 100,000 of them).

Keys are uint64 values as Python ints; 0 means "no key". Collisions between
distinct 64-bit keys are ignored (about n^2 / 2^65 for n keys: negligible).
"""

from __future__ import annotations

import weakref

import numpy as np

_P = 0x100000001B3  # odd multiplier of the polynomial chain hash (invertible mod 2^64)
_Q = pow(_P, -1, 1 << 64)
_BLOCK_SALT = np.uint64(0x9E3779B97F4A7C15)
_PRIVATE_SALT = np.uint64(0xD6E8FEB86659FD93)


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer (uint64 array in, uint64 array out; wraps mod 2^64)."""
    x = np.asarray(x, dtype=np.uint64).copy()
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _powers(base: int, n: int) -> np.ndarray:
    """base^0 .. base^(n-1) mod 2^64."""
    out = np.ones(n, dtype=np.uint64)
    if n > 1:
        out[1:] = np.cumprod(np.full(n - 1, base, dtype=np.uint64))
    return out


class _Prefixes:
    """The first ``n`` values of an array that depends only on its index (``fill(n)``, all
    ``n`` of them), kept once and grown by doubling: every request's chain reads a prefix of
    the same powers and block salts, so they are computed once per run, not per request."""

    def __init__(self, fill):
        self.fill, self.arr = fill, fill(64)

    def __call__(self, n: int) -> np.ndarray:
        if n > len(self.arr):
            self.arr = self.fill(max(n, 2 * len(self.arr)))
        return self.arr[:n]


_P_POW = _Prefixes(lambda n: _powers(_P, n))
_Q_POW = _Prefixes(lambda n: _powers(_Q, n))
_SALTED = _Prefixes(lambda n: mix(np.arange(n, dtype=np.uint64) + _BLOCK_SALT))  # mix(k + salt)


def chain_hashes(ids: np.ndarray) -> np.ndarray:
    """H_j = hash of ids[0..j] (a polynomial hash mod 2^64, then mixed), vectorized."""
    m = mix(np.asarray(ids, dtype=np.uint64) + np.uint64(1))
    n = len(m)
    # H_j = sum_{i<=j} m_i P^(j-i) = P^j * sum_{i<=j} m_i Q^i   (P Q = 1 mod 2^64)
    return mix(_P_POW(n) * np.cumsum(m * _Q_POW(n), dtype=np.uint64))


def first_solo(chains, lens: np.ndarray) -> np.ndarray:
    """Per request, the index of the first id of its chain that no other chain position
    carries (the chain's length if none; 0 without a chain). An id twice in one chain counts
    as shared (a safe side: its blocks are merely published)."""
    out = lens.copy()
    idx = np.flatnonzero(lens)
    if not len(idx):
        return out
    flat = np.concatenate([np.asarray(chains[i], dtype=np.int64) for i in idx.tolist()])
    if int(flat.max()) < 4 * len(flat) + 4096:  # small ids (Mooncake's, synthetic): a count
        solo = np.flatnonzero((np.bincount(flat) == 1)[flat])
    else:
        _, inverse, per_id = np.unique(flat, return_inverse=True, return_counts=True)
        solo = np.flatnonzero(per_id[inverse] == 1)
    del flat
    ends = np.cumsum(lens[idx])
    owner = np.searchsorted(ends, solo, side="right")  # the chain of each solo id, ascending
    first = np.ones(len(owner), dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    owner, solo = owner[first], solo[first]
    out[idx[owner]] = solo - (ends[owner] - lens[idx[owner]])  # index within its chain
    return out


_SOLO: dict[int, tuple[weakref.ref, np.ndarray]] = {}  # id(specs) -> (specs, first_solo)


def _first_solo_of(specs, lens: np.ndarray) -> np.ndarray:
    """``first_solo`` of a workload's chains, once per workload (a fleet's replicas each
    build a pool over the same requests); a weak reference: nothing is kept alive."""
    hit = _SOLO.get(id(specs))
    if hit is not None and hit[0]() is specs:
        return hit[1]
    out = first_solo(specs.prefix_hashes, lens)
    _SOLO.clear()
    _SOLO[id(specs)] = (weakref.ref(specs), out)
    return out


def _nonzero(keys: np.ndarray) -> list[int]:
    keys[keys == 0] = 1
    return keys.tolist()


#: requests whose shareable keys one vectorised pass computes (``BlockKeys.shared``): a
#: request's keys cost a few numpy calls of ~1 us each whatever its chain's length, so they
#: are computed for the requests that follow it too (admissions come roughly in id order)
CHUNK = 128


class BlockKeys:
    """Per-request block keys; shareable ones computed on demand, for a chunk of requests at
    a time, and kept until ``forget``."""

    def __init__(self, specs, block_size: int, prompt_tokens: np.ndarray):
        n = len(prompt_tokens)
        self.bs = block_size
        chains = specs.prefix_hashes if specs is not None else (None,) * n
        hbs = specs.hash_block_size if specs is not None else None
        self.hbs = hbs or 1
        lens = np.fromiter((0 if c is None else len(c) for c in chains), np.int64, n)
        covered = (np.minimum(prompt_tokens, _first_solo_of(specs, lens) * self.hbs) if hbs
                   else np.zeros(n, np.int64))
        self.n_shared = covered // block_size  # shareable blocks per request
        self.counts = self.n_shared.tolist()  # the same, as Python ints
        self._chains = chains
        self._shared: dict[int, list[int]] = {}
        self._gone = bytearray(n)  # 1: forgotten (finished); a later chunk skips it
        # the hash block holding KV block k's last token, k = 0, 1, ... (the same for all)
        self._last = _Prefixes(lambda m: (np.arange(1, m + 1, dtype=np.int64) * block_size - 1)
                               // self.hbs)

    def shared(self, req: int) -> list[int]:
        """Keys of ``req``'s shareable blocks 0 .. n_shared - 1."""
        keys = self._shared.get(req)
        if keys is None:
            if not self.counts[req]:
                keys = self._shared[req] = []
            else:
                self._compute(req)
                keys = self._shared[req]
        return keys

    def _compute(self, req: int) -> None:
        """The keys of ``req`` and of the next requests (up to CHUNK) that have shareable
        blocks, no keys yet and are not finished, in one pass over their chains (the
        polynomial chain hash of ``chain_hashes`` restarted at each chain)."""
        n, shared, gone = self.counts, self._shared, self._gone
        stop = min(req + CHUNK, len(n))
        todo = [req] + [r for r in range(req + 1, stop) if n[r] and not gone[r] and r not in shared]
        last = self._last(max(n[r] for r in todo))
        # requests whose keys depend on the same ids (a shared prefix and nothing of their
        # own before it) share one key list, computed once
        one: dict[tuple[int, bytes], list[int]] = {}
        for r in todo:
            h = int(last[n[r] - 1]) + 1  # chain ids its keys depend on
            ids = np.asarray(self._chains[r][:h], np.int64).tobytes()
            one.setdefault((n[r], ids), []).append(r)
        reqs = [group[0] for group in one.values()]
        sizes = [n[r] for r in reqs]  # keys per request
        hashed = [int(last[k - 1]) + 1 for k in sizes]
        ids = np.concatenate([self._chains[r][:h] for r, h in zip(reqs, hashed)])
        starts = np.cumsum([0] + hashed[:-1])
        pos = np.arange(len(ids)) - np.repeat(starts, hashed)  # index within its chain
        longest = max(hashed)
        acc = np.cumsum(mix(ids.astype(np.uint64) + np.uint64(1)) * _Q_POW(longest)[pos],
                        dtype=np.uint64)
        before = np.concatenate(([np.uint64(0)], acc[starts[1:] - 1]))  # sums of earlier chains
        h = mix(_P_POW(longest)[pos] * (acc - np.repeat(before, hashed)))
        kpos = np.arange(sum(sizes)) - np.repeat(np.cumsum([0] + sizes[:-1]), sizes)
        keys = _nonzero(mix(h[np.repeat(starts, sizes) + last[kpos]] ^ _SALTED(max(sizes))[kpos]))
        at = 0
        for group, k in zip(one.values(), sizes):
            mine = keys[at:at + k]  # read-only by every caller (they slice it)
            for r in group:
                shared[r] = mine
            at += k

    def private(self, req: int, start: int, stop: int) -> list[int]:
        """Keys of ``req``'s own blocks ``start .. stop - 1`` (only ``req`` can match them)."""
        if stop <= start:
            return []
        salt = mix(np.array([req], dtype=np.uint64) + _PRIVATE_SALT)
        return _nonzero(mix(salt ^ _SALTED(stop)[start:]))

    def forget(self, req: int) -> None:
        """``req`` left the pool (finished, or swapped out): its keys are dropped and no
        other request's chunk computes them again (its own lookup does, if it comes back)."""
        self._shared.pop(req, None)
        self._gone[req] = 1
