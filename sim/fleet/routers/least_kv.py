"""least_kv: the replica reporting the lowest KV-cache usage (vLLM's
gpu_cache_usage_perc, as a KV-aware router scrapes it; stale by up to
``cluster.kv_report_interval_ms``); ties go to fewer outstanding requests."""

from __future__ import annotations

from sim.fleet.routers.base import ROUTERS, Router, tie_key


@ROUTERS.register("least_kv")
class LeastKV(Router):
    description = "lowest reported KV-cache usage (stale by kv_report_interval_ms)"
    reads_kv = True

    def choose(self, req, replicas) -> int:
        return min(replicas, key=lambda r: (r.kv_used_fraction, r.outstanding,
                                            *tie_key(r))).index
