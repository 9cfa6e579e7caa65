"""round_robin: replicas in turn, whatever their load (vLLM production-stack's default)."""

from __future__ import annotations

from sim.fleet.routers.base import ROUTERS, Router


@ROUTERS.register("round_robin")
class RoundRobin(Router):
    description = "replicas in turn, whatever their load"
    reads_replicas = False

    def __init__(self, *args):
        super().__init__(*args)
        self.next = 0

    def choose(self, req, replicas) -> int:
        i, self.next = self.next, (self.next + 1) % len(replicas)
        return i
