"""Prefix-affinity routing keeps each prompt prefix on one replica, so the fleet's prefix
caches hold more of them: a higher hit rate than round robin (16 system prompts of 2,000
tokens; each replica's cache holds about 8 of them). The Mooncake figures (NOTES.md) come
from benchmarks/fleet_mooncake.py: minutes of simulation, too slow for a test."""

from __future__ import annotations

from pathlib import Path

from tests.fleet.helpers import fleet

SCENARIO = str(Path(__file__).resolve().parents[2] / "scenarios"
               / "prefix-cache-system-prompt.yaml")
SETS = ("workload.num_requests=300", "workload.arrival.rate=12",
        "workload.shared_prefix.num_prefixes=16", "engine.num_gpu_blocks_override=1100")


def _hit_rate(router: str) -> float:
    _, _, s = fleet(SCENARIO, *SETS, f"cluster={{replicas: 4, router: {{name: {router}}}}}")
    assert s["requests"]["finished"] == 300
    return s["prefix_cache"]["hit_rate"]


def test_prefix_affinity_beats_round_robin_on_shared_prompts():
    rr, pa = _hit_rate("round_robin"), _hit_rate("prefix_affinity")
    assert pa > rr + 0.1
