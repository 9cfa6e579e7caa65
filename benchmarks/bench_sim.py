"""Simulator speed: the Azure LLM 2023 conversation trace through the default scenario.

Replays the trace at 1x and 8x arrival rate (``rate_scale``) and prints wall
seconds, simulated requests and engine steps per wall second, and how many
plans (scheduler invocations) the decode runs folded the steps into.

    python benchmarks/bench_sim.py [--trace PATH] [--scales 1 8] [--repeat 1]

The trace lives outside the repository (../shared/traces); without it the
benchmark says so and exits 0.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from sim.config.load import load_scenario
from sim.metrics.summary import summarize
from sim.pipeline import prepare
from sim.runner import simulate

DEFAULT_TRACE = (Path(__file__).resolve().parents[2] / "shared" / "traces" / "azure_llm_2023"
                 / "AzureLLMInferenceTrace_conv.csv")


def bench(trace: Path, scale: float, repeat: int) -> dict:
    overrides = (f"workload.rate_scale={scale}",) if scale != 1 else ()
    loaded = load_scenario(None, overrides, str(trace))
    r, specs, _ = prepare(loaded)
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = simulate(r, specs)
        wall = time.perf_counter() - t0
        best = wall if best is None else min(best, wall)
    s = summarize(res)
    plans = res.recorder.num_plans
    return {"scale": scale, "wall_s": best, "cost": r.scenario.cost.name, "requests": len(specs),
            "steps": res.recorder.num_steps, "plans": plans,
            "req_per_wall_s": len(specs) / best, "steps_per_wall_s": res.recorder.num_steps / best,
            "sim_s": s["duration_s"], "verdict": s["stability"]["verdict"],
            "ttft_p95_ms": s["latency_ms"]["ttft"].get("p95", float("nan"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--scales", type=float, nargs="+", default=[1.0, 8.0])
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    if not args.trace.exists():
        print(f"trace not found: {args.trace} (benchmark needs ../shared/traces); skipping")
        return
    print(f"trace: {args.trace.name}; default scenario (Llama-3-8B, H100-SXM, vllm scheduler)")
    print(f"{'rate':>5} {'wall s':>8} {'requests':>9} {'req/wall s':>11} {'steps':>9} "
          f"{'steps/wall s':>13} {'plans':>8} {'steps/plan':>10} {'sim s':>8} "
          f"{'TTFT p95 ms':>11}  verdict   cost")
    for scale in args.scales:
        b = bench(args.trace, scale, args.repeat)
        print(f"{b['scale']:>4g}x {b['wall_s']:>8.2f} {b['requests']:>9,} "
              f"{b['req_per_wall_s']:>11,.0f} {b['steps']:>9,} {b['steps_per_wall_s']:>13,.0f} "
              f"{b['plans']:>8,} {b['steps'] / b['plans']:>10.1f} {b['sim_s']:>8.0f} "
              f"{b['ttft_p95_ms']:>11.1f}  {b['verdict']:<9} {b['cost']}")


if __name__ == "__main__":
    main()
