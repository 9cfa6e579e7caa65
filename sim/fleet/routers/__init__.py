"""Routing policies (one file each); importing the package registers them."""

from sim.fleet.routers import (  # noqa: F401
    least_kv,
    least_outstanding,
    prefix_affinity,
    random_pick,
    round_robin,
)
from sim.fleet.routers.base import ROUTERS, ReplicaState, Router, RouteRequest  # noqa: F401
