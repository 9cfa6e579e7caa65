"""A fleet's cost against its replicas run alone: issue 25's fleet bar as a ratio.

One process runs the default scenario as a fleet of R replicas (``cluster.replicas``, the
default router) at R times the rate with N requests; another runs R single-replica runs of
N / R requests at the single rate, seeds 0 .. R-1 (what the fleet's replicas each see, up to
the router's split). Each prints the CPU seconds of ``pipeline.run`` (simulate and
summarize; the workload is built before the clock starts), and the ratio is fleet / the
singles' sum (the bar: at most 1.3).

``--concurrency C`` runs closed loops instead of Poisson arrivals: each single run C
clients, the fleet R x C clients behind one gate (``vllm bench serve --max-concurrency``
against the fleet's endpoint). ``--router NAME`` routes the fleet's requests by that router
(default round_robin). A gated fleet, or one whose router reads the replicas
(least_outstanding, prefix_affinity), runs in the event loop (sim/fleet/cluster.py; its
replicas on the fast core, as SimPy processes), and every finish anywhere may send a
request anywhere, so replicas plan more often than alone: the ratio shows what that costs.

    python benchmarks/bench_fleet.py [--replicas 8] [--requests 100000] [--rate 15]
                                     [--concurrency C] [--router NAME] [--rounds 2]
                                     [--set KEY=VALUE ...]

Figures are user CPU time, so a shared machine slows both sides alike; still, measure alone
(NOTES.md, "Measuring time honestly").
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def _run(overrides: tuple[str, ...]) -> float:
    """CPU seconds of one ``pipeline.run`` of the default scenario with ``overrides``."""
    from sim.config.load import load_scenario
    from sim.pipeline import prepare, run

    loaded = load_scenario(None, overrides)
    prepared = prepare(loaded)
    c0 = time.process_time()
    run(loaded, None, plots=False, prepared=prepared)
    return time.process_time() - c0


def _arrival(rate: float, concurrency: int | None, times: int) -> str:
    """The arrival override of a side carrying ``times`` replicas' load."""
    if concurrency:
        return f"workload.arrival={{process: closed, concurrency: {concurrency * times}}}"
    return f"workload.arrival.rate={rate * times}"


def one(kind: str, replicas: int, requests: int, rate: float, sets: tuple[str, ...],
        concurrency: int | None = None, router: str = "round_robin") -> dict:
    """Run one side here: the fleet, or the R singles one after another."""
    if kind == "fleet":
        cluster = f"cluster={{replicas: {replicas}, router: {{name: {router}}}}}"
        cpu = [_run((cluster, f"workload.num_requests={requests}",
                     _arrival(rate, concurrency, replicas), *sets))]
    else:
        cpu = [_run((f"workload.num_requests={requests // replicas}",
                     _arrival(rate, concurrency, 1), f"seed={seed}", *sets))
               for seed in range(replicas)]
    return {"kind": kind, "cpu_s": sum(cpu), "runs": len(cpu),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=8)
    ap.add_argument("--requests", type=int, default=100_000, help="the fleet's requests")
    ap.add_argument("--rate", type=float, default=15.0, help="one replica's rate (req/s)")
    ap.add_argument("--concurrency", type=int, default=None,
                    help="closed loops of this many clients per replica instead of --rate")
    ap.add_argument("--router", default="round_robin", help="the fleet's router")
    ap.add_argument("--rounds", type=int, default=2, help="fleet and singles, alternating")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="scenario override for both sides (repeatable)")
    ap.add_argument("--one", choices=("fleet", "singles"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.replicas, args.requests, args.rate,
                             tuple(args.sets), args.concurrency, args.router)))
        return
    c = args.concurrency
    load = (lambda k: f"{c * k} clients (closed loop)") if c else (
        lambda k: f"{args.rate * k:g} req/s")
    print(f"default scenario, {args.replicas} replicas ({args.router}) at "
          f"{load(args.replicas)} "
          f"and {args.requests:,} requests vs {args.replicas} runs of "
          f"{args.requests // args.replicas:,} at {load(1)}"
          + "".join(f"; --set {s}" for s in args.sets))
    print(f"{'round':>5} {'fleet CPU s':>11} {'singles CPU s':>13} {'ratio':>6} "
          f"{'fleet RSS MiB':>13}")
    for i in range(1, args.rounds + 1):
        got = {}
        for kind in ("fleet", "singles"):
            cmd = [sys.executable, __file__, "--one", kind, "--replicas", str(args.replicas),
                   "--requests", str(args.requests), "--rate", str(args.rate)]
            cmd += ["--concurrency", str(args.concurrency)] if args.concurrency else []
            cmd += ["--router", args.router]
            cmd += [f"--set={s}" for s in args.sets]
            got[kind] = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                                  text=True).stdout.splitlines()[-1])
        f, s = got["fleet"]["cpu_s"], got["singles"]["cpu_s"]
        print(f"{i:>5} {f:>11.2f} {s:>13.2f} {f / s:>6.2f} "
              f"{got['fleet']['peak_rss_mib']:>13,.0f}")


if __name__ == "__main__":
    main()
