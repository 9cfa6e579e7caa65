"""random: a uniformly random replica (from the scenario's seed)."""

from __future__ import annotations

from sim.fleet.routers.base import ROUTERS, Router


@ROUTERS.register("random")
class Random(Router):
    description = "a uniformly random replica (seeded)"
    reads_replicas = False

    def choose(self, req, replicas) -> int:
        return int(self.rng.integers(len(replicas)))
