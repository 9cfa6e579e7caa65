"""The scenario resolved per pool: each pool's own ``Resolved`` (model, GPU, TP, engine).

A scenario without ``cluster`` is one pool of one replica; ``cluster`` without pools is
one pool ``default`` of ``cluster.replicas``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from pydantic import ValidationError

from sim.config.errors import describe
from sim.config.resolve import ConfigError, Resolved, resolve
from sim.config.scenario import Scenario
from sim.engine.clock import ns
from sim.fleet.config import ClusterConfig, PoolConfig, RouterChoice
from sim.warning import RunWarning

SERVE, PREFILL, DECODE = "serve", "prefill", "decode"


@dataclass(frozen=True)
class PoolPlan:
    name: str
    resolved: Resolved
    replicas: int
    router: RouterChoice
    lanes: tuple[str, ...]  # empty: every lane no other pool lists
    role: str  # serve | prefill | decode

    @property
    def gpus(self) -> int:
        return self.replicas * self.resolved.gpus


@dataclass(frozen=True)
class Transfer:
    """KV transfer from a prefill replica to a decode replica, once per request: every
    prefill GPU sends its shard of the prompt's KV over its own link, in parallel."""

    bytes_per_token: int  # KV bytes per prompt token on one prefill GPU (bytes)
    bandwidth: float  # bytes/s per GPU link
    latency_s: float  # fixed cost per transfer (s)

    def ns(self, prompt_tokens: int) -> int:
        """Transfer time of a prompt's KV (ns, at least 1: it never lands in the same
        instant the prefill ends)."""
        return max(1, ns(self.latency_s + prompt_tokens * self.bytes_per_token / self.bandwidth))


@dataclass(frozen=True)
class FleetPlan:
    pools: tuple[PoolPlan, ...]
    kv_report_ns: int  # replicas report KV usage this often (ns; 0: always fresh)
    transfer: Transfer | None  # disaggregated prefill/decode

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.pools)

    @property
    def num_replicas(self) -> int:
        return sum(p.replicas for p in self.pools)

    def pool(self, role: str) -> PoolPlan | None:
        return next((p for p in self.pools if p.role == role), None)


def _pool_scenario(sc: Scenario, pool: PoolConfig, where: str) -> Scenario:
    data = sc.model_dump(mode="json", exclude_unset=True)
    data.pop("cluster", None)
    if pool.gpu is not None:
        data["gpu"] = pool.gpu if isinstance(pool.gpu, str) else pool.gpu.model_dump(mode="json")
    if pool.tensor_parallel_size is not None:
        data["tensor_parallel_size"] = pool.tensor_parallel_size
    if pool.engine:
        data["engine"] = {**data.get("engine", {}), **pool.engine}
    for key in ("scheduler", "cost"):
        if getattr(pool, key) is not None:
            data[key] = getattr(pool, key)
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{where}: {describe(e, Scenario)}") from None


def _resolve(sc: Scenario, where: str) -> Resolved:
    try:
        return resolve(sc)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


def _role(c: ClusterConfig, name: str) -> str:
    d = c.disaggregation
    if d is None:
        return SERVE
    return PREFILL if name == d.prefill_pool else DECODE if name == d.decode_pool else SERVE


def _transfer(c: ClusterConfig, pools: tuple[PoolPlan, ...]) -> Transfer | None:
    d = c.disaggregation
    if d is None:
        return None
    r = next(p for p in pools if p.role == PREFILL).resolved
    bw = d.kv_transfer_bandwidth or r.gpu.interconnect_bandwidth
    lat = (d.kv_transfer_latency_ms * 1e-3 if d.kv_transfer_latency_ms is not None
           else r.gpu.allreduce_latency_s)
    return Transfer(r.model.kv_bytes_per_token(r.tp), bw, lat)


def plan_fleet(sc: Scenario, base: Resolved | None = None) -> FleetPlan:
    """Resolve every pool; ConfigError naming ``cluster.pools.<i>`` when one cannot run."""
    c = sc.cluster
    if c is None or not c.pools:
        r = base or resolve(sc)
        replicas = c.replicas if c else 1
        router = c.router if c else RouterChoice(name="round_robin")
        pools = (PoolPlan("default", r, replicas, router, (), SERVE),)
        return FleetPlan(pools, ns((c.kv_report_interval_ms if c else 0) * 1e-3), None)
    out = []
    for i, p in enumerate(c.pools):
        where = f"cluster.pools.{i} ({p.name})"
        r = _resolve(_pool_scenario(sc, p, where), where)
        out.append(PoolPlan(p.name, r, p.replicas, p.router, p.lanes, _role(c, p.name)))
    pools = tuple(out)
    return FleetPlan(pools, ns(c.kv_report_interval_ms * 1e-3), _transfer(c, pools))


def warn_cache_blind(plan: FleetPlan) -> None:
    """prefix_affinity aims requests at the replica that cached their prefix: without a
    prefix cache it only balances (a configuration the planner likely did not mean). Said
    once, where the scenario is prepared (sim.pipeline.prepare). Whether a pool caches is
    ``Scenario.prefix_caching``: engine.enable_prefix_caching unset is vLLM's default (on
    for paged KV with the v1 schedulers), not off."""
    for p in plan.pools:
        if p.router.name == "prefix_affinity" and not p.resolved.scenario.prefix_caching:
            warnings.warn(f"cluster: pool {p.name!r} routes by prefix_affinity but its "
                          "replicas cache no prefix (engine.enable_prefix_caching false, or "
                          "unset with a KV policy, scheduler or preemption mode that has it "
                          "off): its requests are only balanced", RunWarning, stacklevel=2)
