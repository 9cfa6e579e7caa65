"""The fewest replicas that hold the SLOs at a target rate: ``capacity --target-rate``.

Every probe simulates the whole fleet (router, one clock) at the target rate, so load
imbalance and routing are in the answer, not "rate / one replica's capacity". A probe
holds when, for every seed, every replica keeps up and every budget holds (the capacity
search's rule, ``sim.plan.capacity.judge``). Search over ``cluster.replicas``:

    double  1, 2, 4, ... until a count holds (at most ``max_replicas``)
    bisect  between the largest failing and the smallest holding count

(assuming more replicas never hurt, true of the routers here up to rounding noise).
Probes are stored as points like any sweep (``DIR/points.parquet``); resumable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from sim.config.load import LoadedScenario
from sim.plan.capacity import Probe
from sim.plan.executors import Executor
from sim.plan.grid import RATE_KEY, Plan, Point, load_axis
from sim.plan.point import Base
from sim.plan.progress import PointProgress
from sim.plan.slo import Budget
from sim.plan.store import PointStore
from sim.plan.sweep import Runner, check_configs, manifest
from traces.errors import InputError

KEY = "cluster.replicas"


@dataclass(frozen=True)
class Sizing:
    rate: float  # target (requests/s)
    replicas: int | None  # fewest that hold; None: none up to max_replicas
    gpus_per_replica: int
    probes: dict  # replicas -> Probe
    out: Path
    ran: int
    wall_s: float

    @property
    def gpus(self) -> int | None:
        return None if self.replicas is None else self.replicas * self.gpus_per_replica


def _check(loaded: LoadedScenario) -> None:
    sc = loaded.scenario
    if sc.cluster is not None and sc.cluster.pools:
        raise InputError("--target-rate sizes cluster.replicas of one pool; for pools, "
                         "search each pool's count with --grid cluster.pools.N.replicas=...")
    key, _ = load_axis(sc)
    if key != RATE_KEY:
        raise InputError("--target-rate: the workload must have an arrival rate "
                         "(workload.arrival.rate); a replayed trace has none: use "
                         "--grid cluster.replicas=... with rate_scale instead")


def size_fleet(loaded: LoadedScenario, rate: float, budgets: tuple[Budget, ...],
               seeds: tuple[int, ...], out: Path, executor: Executor, *,
               max_replicas: int = 256, resume: bool = False, quiet: bool = False,
               sets: tuple[str, ...] = ()) -> Sizing:
    t0 = time.perf_counter()
    _check(loaded)
    base = Base.of(loaded, sets)
    plan = Plan(((KEY, ()),), RATE_KEY, (rate,), seeds)
    check_configs(base, [Point(((KEY, 1),), RATE_KEY, rate, seeds[0])])
    store = PointStore(out)
    store.open(manifest("sizing", base, plan, slo=[f"{b.name}={b.ms:g}ms" for b in budgets],
                        target_rate=rate, max_replicas=max_replicas), resume=resume)
    runner = Runner(store, base, executor, store.done())
    probes: dict[int, Probe] = {}

    def probe(n: int) -> bool:
        points = [Point(((KEY, n),), RATE_KEY, rate, s) for s in seeds]
        runner.run(points, bar)
        probes[n] = Probe.of(float(n), [runner.records[p.id] for p in points], budgets)
        return probes[n].ok

    with PointProgress("sizing", 0, quiet=quiet) as bar:
        bar.grow(len(seeds) * 12)
        lo, hi, n = 0, None, 1
        while n <= max_replicas:
            if probe(n):
                hi = n
                break
            lo, n = n, n * 2
        if hi is None and lo < max_replicas and probe(max_replicas):
            hi = max_replicas
        while hi is not None and hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if probe(mid) else (mid, hi)
    runner.consolidate()
    tp = loaded.scenario.tensor_parallel_size
    return Sizing(rate, hi, tp, dict(sorted(probes.items())), out, runner.ran,
                  time.perf_counter() - t0)


def sizing_rows(s: Sizing, price: float | None) -> list[dict]:
    """One row per replica count probed: verdict, the worst seed's latencies, GPUs, cost."""
    rows = []
    for n, p in s.probes.items():
        gpus = int(n) * s.gpus_per_replica
        row = {"replicas": int(n), "gpus": gpus, "holds": p.ok, "binding": p.binding or "",
               "ttft_p95_ms": p.worst("latency_ms.ttft.p95"),
               "tpot_p95_ms": p.worst("latency_ms.tpot.p95"),
               "routing_imbalance": p.worst("fleet.routing_imbalance")}
        if price:
            row["cost_per_hour"] = gpus * price
        rows.append(row)
    return rows


def answer_line(s: Sizing, price: float | None, router: str) -> str:
    if s.replicas is None:
        most = max(s.probes) if s.probes else 0
        return (f"no fleet of up to {int(most)} replicas holds the SLOs at {s.rate:g} req/s "
                f"(limited by {s.probes[most].binding if s.probes else '?'})")
    cost = f", {s.gpus * price:,.2f} per hour at {price:g} per GPU-hour" if price else ""
    return (f"fewest replicas holding the SLOs at {s.rate:g} req/s: {s.replicas} x "
            f"{s.gpus_per_replica} GPU = {s.gpus} GPUs behind {router}{cost} "
            f"({s.rate / s.gpus:.2f} req/s per GPU)")
