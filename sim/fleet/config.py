"""The ``cluster`` section: replicas behind a router, named pools, prefill/decode split.

    cluster:
      replicas: 2                      # one pool of identical replicas ...
      router: {name: least_outstanding}
      kv_report_interval_ms: 0
      pools:                           # ... or named pools, each its own deployment
        - {name: interactive, lanes: [interactive], replicas: 1}
        - {name: batch, lanes: [batch], replicas: 1, engine: {max_num_seqs: 64}}
      disaggregation: {prefill_pool: p, decode_pool: d}   # optional

A pool inherits the scenario's model, GPU, tensor_parallel_size, engine, scheduler, kv,
admission and cost, and replaces those it sets. Requests go to the pool listing their
lane; a pool without ``lanes`` takes every lane no other pool lists. Autoscaling is out of
scope: replica counts are fixed for the run.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, PositiveInt, model_validator

from sim.config.choice import RegistryChoice
from sim.config.hardware import GpuSpec
from sim.config.limits import MAX_GPUS, why
from sim.fleet.routers import ROUTERS
from traces.validated import Validated

_STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
MAX_REPLICAS = 4096  # replicas per pool: beyond any single deployment we model


class RouterChoice(RegistryChoice):
    registry = ROUTERS
    name: str = Field("round_robin", description="Routing policy (see `servesim policies`).")


class PoolConfig(Validated):
    """One named pool: its replicas, its router and what it changes from the scenario."""

    model_config = _STRICT

    name: str = Field(min_length=1, max_length=64, description="Pool name shown in reports.")
    replicas: PositiveInt = Field(1, le=MAX_REPLICAS, description="Replicas in the pool "
                                  "(count; each is one vLLM server of tensor_parallel_size GPUs).")
    router: RouterChoice = Field(default_factory=lambda: RouterChoice(name="round_robin"),
                                 description="How the pool spreads its requests.")
    lanes: tuple[str, ...] = Field((), description="Trace lanes routed to this pool; empty: "
                                   "every lane no other pool lists.")
    gpu: str | GpuSpec | None = Field(
        None, description="Catalog GPU name or an explicit GPU; unset: the scenario's.")
    tensor_parallel_size: PositiveInt | None = Field(
        None, le=MAX_GPUS, description="GPUs per replica (count); unset: the scenario's.")
    engine: dict | None = Field(None, description="engine fields this pool changes (vLLM's "
                                "names, merged over the scenario's engine).")
    scheduler: dict | None = Field(None, description="Scheduling policy of this pool; unset: "
                                   "the scenario's.")
    cost: dict | None = Field(None, description="Step-time model of this pool; unset: the "
                              "scenario's.")


class DisaggConfig(Validated):
    """Prefill/decode disaggregation: prompts run in one pool, their KV cache moves to another
    pool that generates the output (as vLLM's disaggregated prefill with a KV connector)."""

    model_config = _STRICT

    prefill_pool: str = Field(description="Pool that computes prompts (its requests run with "
                              "max_tokens 1).")
    decode_pool: str = Field(description="Pool that receives the KV cache and generates every "
                             "output token; it must list no lanes.")
    kv_transfer_bandwidth: float | None = Field(
        None, ge=1e6, le=1e15, json_schema_extra=why(
            "1 MB/s to 1 PB/s, as the catalog's interconnect_bandwidth: slower turns one "
            "prompt's transfer into days", "bytes/s"),
        description="Bytes per second one prefill GPU sends its KV shard at (bytes/s); "
        "unset: the prefill GPU's interconnect_bandwidth from the catalog.")
    kv_transfer_latency_ms: float | None = Field(
        None, ge=0, le=60_000, description="Fixed cost of one request's transfer (ms); unset: "
        "the prefill GPU's allreduce_latency_s from the catalog.")


class ClusterConfig(Validated):
    """Replicas of the scenario's server behind a router, or named pools of them."""

    model_config = _STRICT

    replicas: PositiveInt = Field(1, le=MAX_REPLICAS, description="Replicas when no pools "
                                  "are given (count).")
    router: RouterChoice = Field(default_factory=lambda: RouterChoice(name="round_robin"),
                                 description="Routing policy when no pools are given.")
    kv_report_interval_ms: float = Field(
        0.0, ge=0, le=3_600_000, description="How often replicas report KV usage to the "
        "router (ms); 0: the router sees it as of each routing decision. A router scraping "
        "vLLM's /metrics sees it that late.")
    pools: tuple[PoolConfig, ...] = Field((), description="Named pools; empty: one pool "
                                          "'default' of `replicas` behind `router`.")
    disaggregation: DisaggConfig | None = Field(None, description="Split prefill and decode "
                                                "into two of the pools.")

    @model_validator(mode="after")
    def _pools_agree(self):
        if self.pools and (self.replicas != 1 or self.router.name != "round_robin"):
            raise ValueError("replicas and router apply when no pools are given; with pools, "
                             "set each pool's (cluster.pools.N.replicas, .router)")
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"pools: names must differ (got {names})")
        lanes = [ln for p in self.pools for ln in p.lanes]
        if len(set(lanes)) != len(lanes):
            raise ValueError("pools: a lane may be listed by one pool only")
        d = self.disaggregation
        if d is not None:
            for key in ("prefill_pool", "decode_pool"):
                if getattr(d, key) not in names:
                    raise ValueError(f"disaggregation.{key}: {getattr(d, key)!r} is not one "
                                     f"of the pools {names}")
            if d.prefill_pool == d.decode_pool:
                raise ValueError("disaggregation: prefill_pool and decode_pool must differ")
            if self.pool(d.decode_pool).lanes:
                raise ValueError("disaggregation: the decode pool gets its requests from the "
                                 "prefill pool; it must list no lanes")
        catch_all = [p.name for p in self.pools if not p.lanes
                     and not (d and p.name == d.decode_pool)]
        if len(catch_all) > 1:
            raise ValueError(f"pools {catch_all} list no lanes: at most one pool may take "
                             "the lanes no other pool lists")
        return self

    def pool(self, name: str) -> PoolConfig:
        return next(p for p in self.pools if p.name == name)

    @property
    def num_replicas(self) -> int:
        """Replicas in the whole fleet (count)."""
        return sum(p.replicas for p in self.pools) if self.pools else self.replicas
