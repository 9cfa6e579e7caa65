"""least_outstanding: the replica with the fewest requests sent and not yet finished
(join-the-shortest-queue, as least-request load balancers do)."""

from __future__ import annotations

from sim.fleet.routers.base import ROUTERS, Router, tie_key


@ROUTERS.register("least_outstanding")
class LeastOutstanding(Router):
    description = "fewest requests sent and not finished (join the shortest queue)"

    def choose(self, req, replicas) -> int:
        return min(replicas, key=lambda r: (r.outstanding, *tie_key(r))).index
