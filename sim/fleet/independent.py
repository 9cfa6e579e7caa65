"""Fleets whose replicas cannot affect each other: each replica run alone.

When every pool's router picks replicas without reading their state (round_robin, random:
``Router.reads_replicas`` False), the clients send at their own times (no concurrency gate)
and no pool hands requests to another (no prefill/decode split), which replica gets which
request, and when, is fixed before anything runs, and nothing one replica does reaches
another. The fleet then routes every request up front (in the order, and with the random
stream, of the event loop in sim/fleet/cluster.py) and runs each replica as a single run of
its own requests (``sim.runner.simulate``: the fast core where it applies), every one
stopping at the fleet's stop time. Each result is what ``replica_view`` makes of the event
loop's: tests/fleet/test_independent.py compares the two paths on every summary field and
every request's times.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from sim.fleet import replica as rp
from sim.fleet.plan import DECODE, PREFILL, FleetPlan, PoolPlan
from sim.fleet.routers import ROUTERS, RouteRequest
from sim.fleet.views import subset_specs


@dataclass(frozen=True)
class Solo:
    """A replica run alone: what the summaries read of a fleet replica."""

    name: str  # "<pool>/<index>"
    pool: PoolPlan
    index: int
    specs: rp.PoolSpecs


def why_not(plan: FleetPlan) -> str:
    """'' when the replicas of ``plan`` can run alone, else why they cannot."""
    if plan.pools[0].resolved.scenario.workload.arrival.concurrency is not None:
        return "the clients' concurrency gate ties the replicas together"
    if any(p.resolved.scenario.engine.speculative_config is not None for p in plan.pools):
        # a request's acceptance draws are keyed by its number in the run (sim/sched/spec.py):
        # a replica run alone numbers its requests 0..m-1
        return "speculative decoding draws by the run's request numbers"
    for p in plan.pools:
        if p.role in (PREFILL, DECODE):
            return "prefill replicas hand requests to decode replicas"
        if ROUTERS.get(p.router.name).reads_replicas:
            return f"router {p.router.name} reads the replicas' state"
    return ""


def route_up_front(pool) -> list[np.ndarray]:
    """Each replica's requests (run numbers, in arrival order) as ``pool.router`` sends
    them; ``pool.states`` count what was routed, as the event loop's do."""
    s = pool.specs.specs
    mine: list[list[int]] = [[] for _ in pool.states]
    for req in pool.arrivals.tolist():
        rq = RouteRequest(req, int(s.prompt_tokens[req]), s.prefix_hashes[req],
                          s.lane_names[s.lane[req]])
        k = pool.router.choose(rq, pool.states)
        pool.router.routed(rq, k)
        pool.states[k].routed += 1
        mine[k].append(req)
    return [np.asarray(m, dtype=np.int64) for m in mine]


def run_alone(fleet) -> dict:
    """Route every request and run each replica of ``fleet`` (a cluster.Fleet built without
    replicas) alone; fills ``fleet``'s pools and per-request routing, returns
    name -> that replica's own RunResult (its requests renumbered 0..m-1)."""
    from sim.runner import simulate

    t0, results = time.perf_counter(), {}
    for pool in fleet.pools:
        for k, reqs in enumerate(route_up_front(pool)):
            name = f"{pool.plan.name}/{k}"
            solo = Solo(name, pool.plan, k, pool.specs)
            pool.replicas.append(solo)
            number = len(fleet.numbers)
            fleet.numbers[name] = number
            fleet.first[reqs] = number
            fleet.last[reqs] = number
            res = simulate(pool.plan.resolved, subset_specs(fleet.specs, reqs),
                           stop_s=fleet.stop)
            results[name] = res
            fleet.received[name] = reqs
    wall = time.perf_counter() - t0
    return {n: dataclasses.replace(r, wall_s=wall) for n, r in results.items()}
