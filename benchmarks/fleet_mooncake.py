"""Prefix-cache hit rate by router on the Mooncake conversation trace (NOTES.md, fleets).

    python benchmarks/fleet_mooncake.py [--window 600] [--replicas 4]

Llama-3.1-8B on H100 TP4 replicas, roofline cost, prefix caching on; prints one line per
router: hit rate, prefill tokens computed, TTFT p50/p95, routing imbalance, wall time.
Needs ../shared/traces (or $SERVESIM_SHARED_TRACES); minutes per router.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from sim.config.load import LoadedScenario, validate
from sim.fleet.run import fleet_outputs, run_fleet
from sim.pipeline import prepare

TRACES = Path(os.environ.get("SERVESIM_SHARED_TRACES",
                             Path(__file__).resolve().parents[2] / "shared" / "traces"))
MOONCAKE = TRACES / "mooncake_fast25" / "conversation_trace.jsonl"


def scenario(window: float, replicas: int, router: str) -> dict:
    return {"name": "mooncake", "model": "llama-3.1-8b", "gpu": "h100-sxm",
            "tensor_parallel_size": 4, "seed": 1, "cost": {"name": "roofline"},
            "engine": {"max_model_len": 131072, "enable_prefix_caching": True},
            "workload": {"trace": str(MOONCAKE), "window_s": [0, window]},
            "cluster": {"replicas": replicas, "router": {"name": router}}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=float, default=600.0, help="seconds of the trace")
    ap.add_argument("--replicas", type=int, default=4)
    args = ap.parse_args()
    if not MOONCAKE.exists():
        raise SystemExit(f"{MOONCAKE} not found (set SERVESIM_SHARED_TRACES)")
    for router in ("round_robin", "least_outstanding", "prefix_affinity"):
        data = scenario(args.window, args.replicas, router)
        r, specs, _ = prepare(LoadedScenario(validate(data, "mooncake"), "mooncake", Path(".")))
        t0 = time.perf_counter()
        _, s = fleet_outputs(run_fleet(r, specs))
        lat, pc = s["latency_ms"]["ttft"], s["prefix_cache"]
        print(f"{router:18s} hit_rate {pc['hit_rate']:.4f}  prefill_tokens "
              f"{s['steps']['prefill_tokens']:,}  TTFT p50/p95 {lat['median']:.0f}/"
              f"{lat['p95']:.0f} ms  imbalance {s['fleet']['routing_imbalance']:.3f}  "
              f"finished {s['requests']['finished']}  {s['stability']['verdict']}  "
              f"wall {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
