"""KV-cache manager seam: how requests get and give back KV blocks.

A KV manager owns a pool of ``num_blocks`` usable blocks of ``block_size`` token
slots each and one block table per request. Policies differ in how many blocks a
request must hold to have a given number of token slots (paged: just enough;
contiguous: a reservation made up front). Everything else (the free list, the
tables, the integrity check) is shared.

Units: tokens and blocks throughout. Request ids are indices into the run's
request table.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from sim.registry import Registry


@dataclass(frozen=True)
class KVUsage:
    """A snapshot of the pool (blocks)."""

    used: int  # blocks held by requests
    free: int  # blocks available to allocate (includes evictable cached blocks)
    cached: int  # free blocks that still hold reusable prefix KV
    total: int  # usable blocks (the null block excluded)


class KVManager(ABC):
    """Abstract KV manager: the scheduler's only window onto KV memory."""

    #: one-line description shown by ``servesim policies``
    description = ""

    def __init__(self, *, num_blocks: int, block_size: int, num_requests: int,
                 max_model_len: int, prompt_tokens: np.ndarray, output_tokens: np.ndarray,
                 params=None, specs=None):
        if num_blocks < 1:
            raise ValueError(f"KV pool needs at least one usable block, got {num_blocks}")
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.max_model_len = max_model_len
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.params = params
        self.specs = specs  # the run's RequestSpecs (prefix hashes), when a policy needs them
        self.held = np.zeros(num_requests, dtype=np.int64)  # blocks per request

    # ---- policy ---------------------------------------------------------------
    @abstractmethod
    def blocks_for(self, req_ids: np.ndarray, total_tokens: np.ndarray) -> np.ndarray:
        """Blocks each request must hold to have ``total_tokens`` slots (vectorized)."""

    def decode_run_new_blocks(self, req_ids: np.ndarray, context_lens: np.ndarray,
                              num_steps: int) -> np.ndarray:
        """New blocks the scheduler must allocate at each step of a decode run.

        Step ``j`` computes one token per request at position ``context_lens + j``.
        Returns an int array of length ``num_steps``. The default is exact for any
        policy whose ``blocks_for`` is monotone; subclasses override with closed forms.
        """
        out = np.zeros(num_steps, dtype=np.int64)
        prev = self.held[req_ids]
        for j in range(num_steps):
            need = np.maximum(prev, self.blocks_for(req_ids, context_lens + j + 1))
            out[j] = int((need - prev).sum())
            prev = need
        return out

    # ---- allocation -------------------------------------------------------------
    def extra_blocks(self, req_ids: np.ndarray, total_tokens: np.ndarray) -> np.ndarray:
        """Blocks each request still lacks to hold ``total_tokens`` slots (>= 0)."""
        return np.maximum(0, self.blocks_for(req_ids, total_tokens) - self.held[req_ids])

    @property
    @abstractmethod
    def num_free(self) -> int:
        """Blocks that an allocation may take now."""

    def can_allocate(self, num_blocks: int) -> bool:
        """Whether ``num_blocks`` more blocks can be allocated now."""
        return num_blocks <= self.num_free

    #: blocks that admissions of new requests must leave free (a watermark)
    admission_reserve: int = 0
    #: the first allocation takes the request's whole reservation (contiguous policies), so
    #: decode never grows a table and never preempts
    reserves_up_front = False

    @abstractmethod
    def allocate(self, req: int, total_tokens: int, admitting: bool = False,
                 cached: int | None = None) -> bool:
        """Grow ``req``'s table to ``total_tokens`` slots; False (and no change) if short.

        ``admitting``: the request is being admitted from the waiting queue, so the
        policy's ``admission_reserve`` must stay free as well. ``cached``: the tokens
        whose KV is final after the step (default ``total_tokens``; fewer when slots hold
        speculative drafts or the drafter's lookahead, which a prefix cache must not hash).
        """

    def fits(self, req: int, total_tokens: int, admitting: bool = False) -> bool:
        """Whether ``allocate(req, total_tokens, admitting)`` would succeed now (changes
        nothing): the admission gate of vLLM's ``scheduler_reserve_full_isl``."""
        need = int(self.blocks_for(np.array([req]), np.array([total_tokens]))[0])
        need -= int(self.held[req])
        if need <= 0:
            return True
        return need + (self.admission_reserve if admitting else 0) <= self.num_free

    @abstractmethod
    def free(self, req: int) -> None:
        """Return every block ``req`` holds to the pool."""

    def free_many(self, reqs: list[int]) -> None:
        """``free`` each request of ``reqs`` in order (finished requests)."""
        for req in reqs:
            self.free(req)

    def allocate_many(self, req_ids: np.ndarray, total_tokens: np.ndarray) -> None:
        """Allocate for several requests that are known to fit (decode runs)."""
        self.grow(req_ids, self.extra_blocks(req_ids, total_tokens))

    def grow(self, req_ids: np.ndarray, extra: np.ndarray) -> None:
        """Give each request ``extra`` more blocks; the caller checked they fit."""
        for i in np.flatnonzero(extra).tolist():
            req = int(req_ids[i])
            ok = self.allocate(req, int((self.held[req] + extra[i]) * self.block_size))
            assert ok, "grow called with an allocation that does not fit"

    def preempt(self, req: int, computed_tokens: int, cached: int | None = None) -> None:
        """Free a recompute-preempted request; a prefix cache keeps its computed KV findable
        (``cached``: at most its first that many tokens, the rest freed unhashed)."""
        self.free(req)

    # ---- prefix caching hooks (no-ops unless the policy caches) ----------------
    #: whether the scheduler must report scheduled tokens through :meth:`note_computed`
    tracks_computed = False

    def lookup_prefix(self, req: int, num_tokens: int | None = None) -> int:
        """Tokens of ``req`` already in the cache (0 without prefix caching).

        ``num_tokens``: the request's known tokens (prompt + generated); a hit stops
        at least one token short of them (vLLM recomputes the last one for its logits).
        """
        return 0

    def block_refs(self, blocks: np.ndarray) -> np.ndarray:
        """How many request tables hold each of ``blocks`` (block ids from tables or
        cache hits); without prefix caching a held block is in exactly one table."""
        return np.ones(len(blocks), dtype=np.int64)

    def pending_hits(self, req: int) -> list[int]:
        """Cached blocks the last ``lookup_prefix`` found for ``req``: what an admitting
        ``allocate`` would add to its table besides new blocks (none without caching)."""
        return []

    def note_computed(self, req_ids: np.ndarray, upto: np.ndarray) -> None:  # noqa: B027
        """Tokens ``[0, upto)`` of each request will hold KV after this step (caching pools
        publish the blocks that became full). Called only when ``tracks_computed``."""

    @property
    def shared_slots(self) -> int:
        """Token slots that more than one request's table counts (prefix sharing)."""
        return 0

    # ---- swap preemption (vLLM v0): only when a host pool is attached ------------
    #: host (CPU) swap space, a ``sim.kv.swap.HostPool``; None = recompute only
    host = None

    def swap_out(self, req: int) -> int:
        """Move ``req``'s blocks to the host pool and free them here; bytes moved (0: no
        host pool or no room there, so the caller recomputes instead)."""
        blocks = int(self.held[req])
        if self.host is None or not blocks or not self.host.room_for(blocks):
            return 0
        moved = self.host.take(req, blocks)
        self.free(req)
        return moved

    def swap_in(self, req: int) -> int:
        """Release ``req``'s host copy after its blocks were allocated again; bytes moved."""
        return self.host.give_back(req) if self.host is not None else 0

    def is_swapped(self, req: int) -> bool:
        return self.host is not None and self.host.holds(req)

    # ---- observation ------------------------------------------------------------
    def counters(self) -> dict:
        """Policy-specific totals for the run summary (prefix hits, swap bytes, ...)."""
        return self.host.counters() if self.host is not None else {}

    @abstractmethod
    def usage(self) -> KVUsage:
        """Current pool occupancy."""

    def used_fraction(self) -> float:
        """``usage().used / usage().total``: what a replica reports to a router (a policy
        whose full snapshot is costly answers this cheaply)."""
        u = self.usage()
        return u.used / max(u.total, 1)

    @property
    def num_used(self) -> int:
        """Blocks not available to allocate (held by requests)."""
        return self.num_blocks - self.num_free

    @abstractmethod
    def block_table(self, req: int) -> list[int]:
        """Physical block ids of ``req``, in logical order (a copy: read-only)."""

    def next_free_blocks(self, n: int) -> list[int]:
        """The physical blocks the next ``n`` block allocations will take, as a set listed
        in take order (read-only). Live mode writes a decode run's KV into them before the
        scheduler commits the run's allocations."""
        raise NotImplementedError(f"{type(self).__name__} does not expose its free list")

    @abstractmethod
    def check_integrity(self) -> None:
        """Raise AssertionError unless free + used == total and tables are disjoint."""


KV_POLICIES: Registry[type[KVManager]] = Registry("KV policy")
