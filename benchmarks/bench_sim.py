"""Simulator speed and memory: trace replays and synthetic Poisson runs, one process each.

Cases (``--cases``, default all):

    azure1x, azure8x   the Azure LLM 2023 conversation trace at 1x and 8x arrival rate
    poisson100k        100,000 requests of the default scenario's length mix, Poisson at
    poisson1m          1,000,000    ``--rate`` req/s (15: about 80 % of the default
                                    scenario's capacity of ~18.5 req/s, NOTES.md)
    prefix100k         poisson100k whose prompts start with one of 16 shared 1,024-token
                       prefixes (a Mooncake-style trace: prefix caching hits and evictions)
    spec20k            20,000 requests of poisson100k's mix with EAGLE-3 drafting K = 3
                       (scenarios/speculative-eagle3.yaml's measured acceptance; the
                       general engine, verify steps folded into runs)

Each case runs in its own process (so peak RSS is its own) through the default scenario
(Llama-3-8B, H100-SXM, vllm scheduler, fitted cost) and prints: wall seconds of the
simulation and in total (workload build + simulate + summarize), user CPU seconds of the
same (the figure to compare on a shared machine), simulated requests and engine steps per
wall second of simulation (every step, folded ones included), plans (scheduler
invocations) and peak RSS.

    python benchmarks/bench_sim.py [--cases azure1x poisson100k] [--rate 15]
                                   [--profile DIR]   # cProfile of each simulation
                                   [--core general]  # the general engine (sim/fast)
                                   [--set engine.enable_prefix_caching=false ...]

The trace lives outside the repository (../shared/traces); without it the trace cases
say so and are skipped.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_TRACE = (Path(__file__).resolve().parents[2] / "shared" / "traces" / "azure_llm_2023"
                 / "AzureLLMInferenceTrace_conv.csv")
CASES = {"azure1x": ("trace", 1.0), "azure8x": ("trace", 8.0),
         "poisson100k": ("poisson", 100_000), "poisson1m": ("poisson", 1_000_000),
         "prefix100k": ("prefix", 100_000), "spec20k": ("spec", 20_000)}
SHARED = "workload.shared_prefix={tokens: 1024, num_prefixes: 16}"
EAGLE3 = ("engine.speculative_config={method: eagle3, num_speculative_tokens: 3, "
          "acceptance_histogram: [0.3231, 0.2154, 0.1714, 0.2901]}")


def _overrides(case: str, rate: float, core: str,
               sets: tuple[str, ...] = ()) -> tuple[tuple[str, ...], str | None]:
    kind, x = CASES[case]
    core_set = ((f"core={core}",) if core != "auto" else ()) + tuple(sets)
    if kind == "trace":
        return ((f"workload.rate_scale={x}",) if x != 1 else ()) + core_set, "trace"
    shared = {"prefix": (SHARED,), "spec": (EAGLE3,)}.get(kind, ())
    return (f"workload.num_requests={int(x)}", f"workload.arrival.rate={rate}", *shared,
            *core_set), None


def one(case: str, trace: Path, rate: float, profile: Path | None, core: str = "auto",
        sets: tuple[str, ...] = ()) -> dict:
    """Run one case in this process; returns its figures."""
    t0, c0 = time.perf_counter(), time.process_time()
    from sim.config.load import load_scenario
    from sim.metrics.summary import summarize
    from sim.pipeline import prepare
    from sim.runner import simulate

    overrides, tr = _overrides(case, rate, core, sets)
    r, specs, _ = prepare(load_scenario(None, overrides, str(trace) if tr else None))
    t1, c1 = time.perf_counter(), time.process_time()
    prof = None
    if profile is not None:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    res = simulate(r, specs)
    if prof is not None:
        prof.disable()
        prof.dump_stats(str(profile / f"{case}.prof"))
    t2, c2 = time.perf_counter(), time.process_time()
    s = summarize(res)
    t3, c3 = time.perf_counter(), time.process_time()
    rec = res.recorder
    return {"case": case, "requests": len(specs), "steps": rec.num_steps, "plans": rec.num_plans,
            "sim_wall_s": t2 - t1, "total_wall_s": t3 - t0, "sim_cpu_s": c2 - c1,
            "total_cpu_s": c3 - c0, "req_per_s": len(specs) / (t2 - t1),
            "steps_per_s": rec.num_steps / (t2 - t1),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "verdict": s["stability"]["verdict"], "core": res.core,
            "ttft_p95_ms": s["latency_ms"]["ttft"].get("p95", float("nan"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--rate", type=float, default=15.0, help="Poisson rate (req/s)")
    ap.add_argument("--profile", type=Path, default=None, help="write <case>.prof here")
    ap.add_argument("--core", choices=("auto", "general", "fast"), default="auto",
                    help="simulation core (sim/fast); auto: the fast one where it runs")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="scenario override for every case (repeatable)")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # run one case here, print JSON
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.trace, args.rate, args.profile, args.core,
                             tuple(args.sets))))
        return
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    print(f"default scenario (Llama-3-8B, H100-SXM, vllm scheduler); Poisson at {args.rate:g} "
          f"req/s; trace: {args.trace.name}" + "".join(f"; --set {s}" for s in args.sets))
    print(f"{'case':<12} {'requests':>9} {'steps':>10} {'plans':>9} {'sim wall s':>10} "
          f"{'total wall s':>12} {'sim CPU s':>9} {'total CPU s':>11} {'req/s':>9} "
          f"{'steps/s':>9} {'peak RSS MiB':>12}  verdict  core")
    for case in args.cases:
        if CASES[case][0] == "trace" and not args.trace.exists():
            print(f"{case:<12} trace not found: {args.trace} (needs ../shared/traces); skipped")
            continue
        cmd = [sys.executable, __file__, "--one", case, "--trace", str(args.trace),
               "--rate", str(args.rate), "--core", args.core]
        cmd += [f"--set={s}" for s in args.sets]
        if args.profile is not None:
            cmd += ["--profile", str(args.profile)]
        b = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                      text=True).stdout.splitlines()[-1])
        print(f"{case:<12} {b['requests']:>9,} {b['steps']:>10,} {b['plans']:>9,} "
              f"{b['sim_wall_s']:>10.2f} {b['total_wall_s']:>12.2f} {b['sim_cpu_s']:>9.2f} "
              f"{b['total_cpu_s']:>11.2f} {b['req_per_s']:>9,.0f} {b['steps_per_s']:>9,.0f} "
              f"{b['peak_rss_mib']:>12,.0f}  {b['verdict']:<8} {b['core']}")


if __name__ == "__main__":
    main()
