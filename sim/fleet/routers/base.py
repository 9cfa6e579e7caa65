"""The router: picks a replica for each request, seeing only what a real router sees.

    router ──choose(request, replicas)──> replica index

What a router may look at (``ReplicaState``): the requests it sent to each replica that
have not finished yet (it counts them itself, as an HTTP proxy counts open responses), the
KV-cache usage each replica reports (refreshed every ``cluster.kv_report_interval_ms``, so
possibly stale, as a router scraping vLLM's /metrics sees it), and what it has sent to each
replica before (``routed``; prefix-aware routers remember prompt prefix hashes). It never
reads a replica's scheduler or KV manager directly.

Ties are broken the same way by every router: fewest requests routed so far, then the
lowest replica index (``tie_key``), so an idle fleet spreads requests evenly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict

from sim.registry import Registry
from traces.validated import Validated


@dataclass
class ReplicaState:
    """The router's view of one replica (mutable: the fleet updates it as things happen)."""

    index: int  # position in its pool (0-based)
    outstanding: int = 0  # requests sent and not finished (requests)
    routed: int = 0  # requests sent so far (requests)
    kv_used_fraction: float = 0.0  # last KV usage the replica reported (used / total blocks)
    kv_reported_ns: int = -1  # when that report was taken (ns; -1 never)


@dataclass(frozen=True)
class RouteRequest:
    """What the router knows about an incoming request."""

    index: int  # request index in the run
    prompt_tokens: int  # tokens
    prefix_hashes: np.ndarray | None  # the prompt's prefix block hashes, if the trace has them
    lane: str


def tie_key(r: ReplicaState) -> tuple[int, int]:
    """The shared tie-break: fewest requests routed so far, then the lowest index."""
    return (r.routed, r.index)


class NoParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Router(ABC):
    """One routing policy for one pool; ``choose`` is its whole decision."""

    Params: type[BaseModel] = NoParams
    description: str = ""  # one line for `servesim policies`
    # True: choose() may read the replicas' live state (outstanding, KV usage). False: it
    # reads only what it sent itself, so a fleet can route every request before anything
    # runs (sim/fleet/independent.py)
    reads_replicas: bool = True
    # True: choose() reads the replicas' reported KV usage (the fleet then asks every
    # replica's KV manager at each decision, and runs its replicas on the general engine)
    reads_kv: bool = False

    def __init__(self, num_replicas: int, params: BaseModel, rng: np.random.Generator):
        self.num_replicas, self.params, self.rng = num_replicas, params, rng

    @abstractmethod
    def choose(self, req: RouteRequest, replicas: Sequence[ReplicaState]) -> int:
        """The replica (index into ``replicas``) that gets ``req``."""

    def routed(self, req: RouteRequest, replica: int) -> None:  # noqa: B027
        """``req`` went to ``replica`` (routers with memory, e.g. prefix affinity, note it)."""

    def explain(self) -> dict:
        """What decided the last choice, for the step log (e.g. a prefix match length)."""
        return {}


ROUTERS: Registry[type[Router]] = Registry("router")
