"""Host (CPU) swap space for swap preemption, as vLLM v0's ``swap_space``.

A victim's KV blocks are copied to host memory (``swap_space`` GiB per GPU, so
``swap_space / block_bytes`` blocks) and its GPU blocks freed; it keeps its
computed tokens. Resuming copies them back into freshly allocated GPU blocks.
Transfers are counted in bytes: the scheduler puts them in the step's plan and
the cost model charges ``bytes / host_bandwidth`` to that step.

A victim that does not fit (``on_full``, the scenario's ``engine.swap_space_full``):

* ``stop_engine``: as vLLM v0, whose scheduler raises "Aborted due to the lack of CPU
  swap space" (``core/scheduler.py`` ``_swap_out``) and so stops the engine: every
  request not finished fails;
* ``abort_request``: only the victim fails (what the FIXME beside that line asks for);
* ``recompute``: the victim is recomputed instead (not what vLLM does).
"""

from __future__ import annotations

STOP_ENGINE, ABORT_REQUEST, RECOMPUTE = "stop_engine", "abort_request", "recompute"
ON_FULL = (STOP_ENGINE, ABORT_REQUEST, RECOMPUTE)
LACK_OF_SWAP = ("Aborted due to the lack of CPU swap space. Please increase the swap space "
                "to avoid this error.")  # vLLM v0's RuntimeError


class HostPool:
    """Block accounting of the host swap space (bytes per block: one GPU's KV block)."""

    def __init__(self, num_blocks: int, block_bytes: int, on_full: str = STOP_ENGINE):
        if on_full not in ON_FULL:
            raise ValueError(f"on_full must be one of {ON_FULL}, not {on_full!r}")
        self.num_blocks = num_blocks
        self.block_bytes = block_bytes
        self.on_full = on_full  # what a victim that does not fit does (module docstring)
        self.used = 0
        self._held: dict[int, int] = {}  # request -> blocks on the host
        self.out_events = self.in_events = 0
        self.out_bytes = self.in_bytes = 0
        self.refused = 0  # victims that did not fit

    def room_for(self, blocks: int) -> bool:
        """Whether ``blocks`` more fit; a refusal is counted."""
        ok = self.used + blocks <= self.num_blocks
        self.refused += not ok
        return ok

    def take(self, req: int, blocks: int) -> int:
        """Hold ``blocks`` of ``req``; bytes copied GPU -> host."""
        self._held[req] = blocks
        self.used += blocks
        self.out_events += 1
        self.out_bytes += blocks * self.block_bytes
        return blocks * self.block_bytes

    def give_back(self, req: int) -> int:
        """Release ``req``'s copy (it is back on the GPU); bytes copied host -> GPU."""
        blocks = self._held.pop(req, 0)
        if not blocks:
            return 0
        self.used -= blocks
        self.in_events += 1
        self.in_bytes += blocks * self.block_bytes
        return blocks * self.block_bytes

    def drop(self, req: int) -> None:
        """Forget ``req``'s copy without moving it back (the request failed)."""
        self.used -= self._held.pop(req, 0)

    def holds(self, req: int) -> bool:
        return req in self._held

    def check(self) -> None:
        assert self.used == sum(self._held.values()) <= self.num_blocks, "host pool accounting"

    def counters(self) -> dict:
        return {"swap_out_events": self.out_events, "swap_in_events": self.in_events,
                "swap_out_bytes": self.out_bytes, "swap_in_bytes": self.in_bytes,
                "swap_space_exhausted": self.refused,
                "swap_fallbacks": self.refused if self.on_full == RECOMPUTE else 0,
                "swap_space_blocks": self.num_blocks}
