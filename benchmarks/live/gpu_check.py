"""Live mode on a GPU, before the timed fidelity runs: do the Triton kernels keep the paged
cache exact at Llama-3-8B shapes, through decode runs, preemption and prefix sharing?

A short live run (cuda, bf16, Triton) of a small burst into a small KV pool; after each
committed plan, up to two running requests' K/V are gathered through their block tables
and compared with a contiguous recomputation of their tokens (sim/live/check.py). Also
reports warm-up/setup time and the median decode and prefill step times.

    python benchmarks/live/gpu_check.py --out OUT      (writes OUT/gpu_check.json)

``--device cpu --set model=tiny-2l ...`` runs the same check on the CPU (a dry run of the
script without a GPU).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "live-h200-llama8b.yaml"
SETS = ("horizon_s=null", "engine.num_gpu_blocks_override=1200",
        "engine.enable_prefix_caching=true", "workload.num_requests=24",
        "workload.arrival={process: poisson, rate: 50}",
        "workload.lengths={dist: fixed, prompt: 700, output: 300}",
        "workload.shared_prefix={tokens: 512, num_prefixes: 2}")
TOL = 5e-2  # bf16 through 32 layers: paged (Triton) vs contiguous (SDPA) accumulate apart


def main() -> None:
    import torch

    from sim import pipeline
    from sim.config.load import load_scenario
    from sim.live.check import kv_error, null_block_untouched
    from sim.runner import build_cost, simulate
    from sim.sched.base import Status

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--set", action="append", default=[], help="more scenario overrides")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    loaded = load_scenario(SCENARIO, (*SETS, f"cost.device={args.device}", *args.set))
    r, specs, _ = pipeline.prepare(loaded)
    t0 = time.perf_counter()
    cost = build_cost(r)
    errs, state = [], {}

    def check(plan, starts, durations, outcome):
        ex = state["ex"] = cost.executor
        sched = ex.engine.scheduler
        running = [q for q in plan.req_ids.tolist() if sched.status[q] == Status.RUNNING]
        for q in running[:2]:
            errs.append(kv_error(ex, q, int(sched.computed[q])))

    res = simulate(r, specs, executor=cost, on_plan=check)
    steps = res.extras.tables["live_steps.parquet"]
    report = {
        "device": res.extras.summary["device_name"], "torch": torch.__version__,
        "live": res.extras.summary, "wall_s": time.perf_counter() - t0,
        "kv_checks": len(errs), "kv_max_rel_error": float(max(errs)), "kv_tolerance": TOL,
        "null_block_untouched": null_block_untouched(state["ex"]),
        "preemptions": int(res.num_preemptions.sum()),
        "prefix_hits": int(res.counters.get("prefix_hits", 0)),
        "finished": int((res.generated == res.specs.output_tokens).sum()),
        "step_ms_median": {k: float(np.median(g["duration_s"]) * 1e3)
                           for k, g in steps.groupby("kind")},
    }
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    ok = report["kv_max_rel_error"] < TOL and report["null_block_untouched"] and \
        report["finished"] == len(res.specs)
    print("gpu check:", "PASS" if ok else "FAIL")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
