"""Host (CPU) swap space for swap preemption, as vLLM v0's ``swap_space``.

A victim's KV blocks are copied to host memory (``swap_space`` GiB per GPU, so
``swap_space / block_bytes`` blocks) and its GPU blocks freed; it keeps its
computed tokens. Resuming copies them back into freshly allocated GPU blocks.
Transfers are counted in bytes: the scheduler puts them in the step's plan and
the cost model charges ``bytes / host_bandwidth`` to that step.
"""

from __future__ import annotations


class HostPool:
    """Block accounting of the host swap space (bytes per block: one GPU's KV block)."""

    def __init__(self, num_blocks: int, block_bytes: int):
        self.num_blocks = num_blocks
        self.block_bytes = block_bytes
        self.used = 0
        self._held: dict[int, int] = {}  # request -> blocks on the host
        self.out_events = self.in_events = 0
        self.out_bytes = self.in_bytes = 0
        self.fallbacks = 0  # victims recomputed because the host pool was full

    def room_for(self, blocks: int) -> bool:
        """Whether ``blocks`` more fit; a refusal is counted (the victim is recomputed)."""
        ok = self.used + blocks <= self.num_blocks
        self.fallbacks += not ok
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

    def holds(self, req: int) -> bool:
        return req in self._held

    def check(self) -> None:
        assert self.used == sum(self._held.values()) <= self.num_blocks, "host pool accounting"

    def counters(self) -> dict:
        return {"swap_out_events": self.out_events, "swap_in_events": self.in_events,
                "swap_out_bytes": self.out_bytes, "swap_in_bytes": self.in_bytes,
                "swap_fallbacks": self.fallbacks, "swap_space_blocks": self.num_blocks}
