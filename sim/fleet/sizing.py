"""The fewest replicas that hold the SLOs at a target rate: ``capacity --target-rate``.

Every probe simulates the whole fleet (router, one clock) at the target rate, so load
imbalance and routing are in the answer, not "rate / one replica's capacity". A probe
holds when, for every seed, every replica keeps up and every budget holds (the capacity
search's rule, ``sim.plan.capacity.judge``). Search over ``cluster.replicas``:

    double  1, 2, 4, ... until a count holds (at most ``max_replicas``)
    bisect  between the largest failing and the smallest holding count

(assuming more replicas never hurt, true of the routers here up to rounding noise).
A replayed trace reaches the target as its mean rate: every probe replays it at
``rate_scale`` = target / the trace's mean rate (its shape, bursts included, kept).
Probes are stored as points like any sweep (``DIR/points.parquet``); resumable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from sim.config.load import LoadedScenario
from sim.pipeline import prepare
from sim.plan.capacity import Probe
from sim.plan.executors import Executor
from sim.plan.grid import CONC_KEY, RATE_KEY, Plan, Point, load_axis
from sim.plan.peaks import offered_rates
from sim.plan.point import Base
from sim.plan.progress import PointProgress
from sim.plan.slo import Budget
from sim.plan.store import PointStore
from sim.plan.sweep import Runner, check_configs, manifest
from traces.errors import InputError

KEY = "cluster.replicas"


@dataclass(frozen=True)
class Sizing:
    rate: float  # target (requests/s; a trace's mean rate)
    replicas: int | None  # fewest that hold; None: none up to max_replicas
    gpus_per_replica: int
    probes: dict  # replicas -> Probe
    out: Path
    ran: int
    wall_s: float
    rate_scale: float | None = None  # a replayed trace: the speed-up giving the target rate

    @property
    def gpus(self) -> int | None:
        return None if self.replicas is None else self.replicas * self.gpus_per_replica


def _check(loaded: LoadedScenario) -> None:
    sc = loaded.scenario
    if sc.cluster is not None and sc.cluster.pools:
        raise InputError("--target-rate sizes cluster.replicas of one pool; for pools, "
                         "search each pool's count with --grid cluster.pools.N.replicas=...")
    if load_axis(sc)[0] == CONC_KEY:  # one arrival process (a mix has none to scale)
        raise InputError("--target-rate: a closed loop has no arrival rate to size for (its "
                         "load is its clients); give the workload a rate "
                         "(workload.arrival={process: poisson, rate: R, concurrency: C}) or "
                         "search its clients with capacity and --set cluster.replicas=N")


def target_load(loaded: LoadedScenario, rate: float) -> tuple[str, float]:
    """The load axis and the value on it that offers ``rate`` requests/s: the arrival rate,
    or for a replayed trace the rate_scale giving that mean rate."""
    key, scale = load_axis(loaded.scenario)
    if key == RATE_KEY:
        return key, rate
    mean, _ = offered_rates(prepare(loaded)[1].arrival_s)
    if not mean > 0:
        raise InputError("--target-rate: the trace has no arrival rate (fewer than two "
                         "distinct arrival times)")
    return key, float(f"{scale * rate / mean:.6g}")


def size_fleet(loaded: LoadedScenario, rate: float, budgets: tuple[Budget, ...],
               seeds: tuple[int, ...], out: Path, executor: Executor, *,
               max_replicas: int = 256, resume: bool = False, quiet: bool = False,
               sets: tuple[str, ...] = ()) -> Sizing:
    t0 = time.perf_counter()
    _check(loaded)
    key, load = target_load(loaded, rate)
    base = Base.of(loaded, sets)
    plan = Plan(((KEY, ()),), key, (load,), seeds)
    check_configs(base, [Point(((KEY, 1),), key, load, seeds[0])])
    store = PointStore(out)
    store.open(manifest("sizing", base, plan, slo=[f"{b.name}={b.ms:g}ms" for b in budgets],
                        target_rate=rate, max_replicas=max_replicas), resume=resume)
    try:  # the folder's lock is released when the search ends, however it ends
        runner = Runner(store, base, executor, store.done())
        probes: dict[int, Probe] = {}

        def probe(n: int) -> bool:
            points = [Point(((KEY, n),), key, load, s) for s in seeds]
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
    finally:
        store.close()
    tp = loaded.scenario.tensor_parallel_size
    return Sizing(rate, hi, tp, dict(sorted(probes.items())), out, runner.ran,
                  time.perf_counter() - t0, None if key == RATE_KEY else load)


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
    at = f"{s.rate:g} req/s" + ("" if s.rate_scale is None else
                                f" (the trace's mean, at rate_scale {s.rate_scale:g})")
    if s.replicas is None:
        most = max(s.probes) if s.probes else 0
        return (f"no fleet of up to {int(most)} replicas holds the SLOs at {at} "
                f"(limited by {s.probes[most].binding if s.probes else '?'})")
    cost = f", {s.gpus * price:,.2f} per hour at {price:g} per GPU-hour" if price else ""
    return (f"fewest replicas holding the SLOs at {at}: {s.replicas} x "
            f"{s.gpus_per_replica} GPU = {s.gpus} GPUs behind {router}{cost} "
            f"({s.rate / s.gpus:.2f} req/s per GPU)")
