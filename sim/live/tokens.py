"""Token ids of every request: prompt ids made up deterministically, then sampled outputs.

Traces carry lengths and prefix hash chains, not token ids, so prompt ids are derived:

* a KV block the prefix cache may share (``BlockKeys.shared``: covered by the trace's hash
  chain) takes its ids from its block key, so two requests whose chains agree there hold
  the same ids at the same positions, and a cache hit on the block holds exactly the K/V
  the hitting request would have computed;
* every other prompt position takes ids from (seed, request, position).

Outputs are appended as the executor samples them. The ids of a request stay for its
whole life (a recompute-preempted request computes the same ids again), and are dropped
when it finishes; the number of outputs sampled per request is kept.
"""

from __future__ import annotations

import numpy as np

from sim.kv.block_keys import BlockKeys, mix

_SHARED_SALT = np.uint64(0x2545F4914F6CDD1D)
_PRIVATE_SALT = np.uint64(0x94D049BB133111EB)


class TokenBook:
    def __init__(self, specs, block_size: int, vocab_size: int, seed: int):
        self.specs = specs
        self.bs = block_size
        self.vocab = np.uint64(vocab_size)
        self.seed = np.uint64(seed)
        self.keys = BlockKeys(specs, block_size, specs.prompt_tokens)
        self.sampled = np.zeros(len(specs), dtype=np.int64)  # outputs sampled per request
        self._ids: dict[int, np.ndarray] = {}  # request -> ids, prompt + outputs so far

    def prompt_ids(self, req: int) -> np.ndarray:
        """The prompt's token ids (int64), deterministic in (seed, request, block keys)."""
        n = int(self.specs.prompt_tokens[req])
        pos = np.arange(n, dtype=np.uint64)
        salt = mix(np.array([req], dtype=np.uint64) ^ self.seed) ^ _PRIVATE_SALT
        ids = mix(salt ^ mix(pos))
        shared = self.keys.shared(req)
        if shared:
            covered = len(shared) * self.bs
            keys = np.repeat(np.array(shared, dtype=np.uint64), self.bs)
            offset = pos[:covered] % np.uint64(self.bs)
            ids[:covered] = mix(keys ^ self.seed ^ _SHARED_SALT ^ mix(offset))
        return (ids % self.vocab).astype(np.int64)

    def ids(self, req: int) -> np.ndarray:
        """Known ids of ``req`` (prompt + outputs sampled so far), a view."""
        buf = self._ids.get(req)
        if buf is None:
            return self._start(req)
        return buf[: int(self.specs.prompt_tokens[req]) + int(self.sampled[req])]

    def known(self, req: int) -> int:
        """Tokens whose ids exist (prompt + outputs sampled)."""
        return int(self.specs.prompt_tokens[req]) + int(self.sampled[req])

    def append(self, req: int, token: int) -> None:
        """Add one sampled output id."""
        buf = self._ids.get(req)
        if buf is None:
            self._start(req)
            buf = self._ids[req]
        n = self.known(req)
        if n == len(buf):  # more outputs than the trace asked for: grow (never in a run)
            buf = self._ids[req] = np.concatenate((buf, np.zeros(len(buf), np.int64)))
        buf[n] = token
        self.sampled[req] += 1

    def drop(self, req: int) -> None:
        """Forget a finished request's ids (its count of sampled outputs stays)."""
        self._ids.pop(req, None)

    def _start(self, req: int) -> np.ndarray:
        prompt = self.prompt_ids(req)
        buf = np.zeros(len(prompt) + max(1, int(self.specs.output_tokens[req])), np.int64)
        buf[: len(prompt)] = prompt
        self._ids[req] = buf
        return buf[: len(prompt) + int(self.sampled[req])]
