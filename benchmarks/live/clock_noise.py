"""Which CPU clock makes live step times robust on a shared machine? (NOTES.md, live mode)

Runs the same live burst (all requests at t = 0, so every run executes the same steps,
whatever their times) under added load: none, two busy-looping processes at nice 19 (how
other engineers run tests here) and, with --nice0, two at nice 0 (someone else measuring;
this disturbs their measurements too, so it is off by default). For each, every step's
wall-clock and thread-CPU time is compared with the same step of the first run:

    python benchmarks/live/clock_noise.py [--requests 60] [--repeats 2] [--nice0]

Run it at normal priority and note `uptime`: the "none" condition is whatever else the
machine is doing.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "live-cpu-small.yaml"


def burn(niceness: int, stop) -> None:
    os.nice(niceness)
    x = 0
    while not stop.is_set():
        x += 1


def live_burst(requests: int, out: Path) -> pd.DataFrame:
    from sim.cli import main

    sets = ["--set", f"workload.num_requests={requests}",
            "--set", "workload.arrival={process: constant, rate: 1000000}"]
    assert main(["run", str(SCENARIO), *sets, "--out", str(out), "-q", "--no-plots"]) == 0
    return pd.read_parquet(out / "live_steps.parquet")


def under_load(niceness: int | None, requests: int, out: Path) -> pd.DataFrame:
    stop = mp.Event()
    procs = [] if niceness is None else [mp.Process(target=burn, args=(niceness, stop))
                                         for _ in range(2)]
    for p in procs:
        p.start()
    try:
        return live_burst(requests, out)
    finally:
        stop.set()
        for p in procs:
            p.join()


def spread(a: pd.Series, b: pd.Series) -> str:
    d = 100 * np.abs(b.to_numpy() / a.to_numpy() - 1)
    return f"{np.median(d):5.1f} {np.percentile(d, 90):6.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--nice0", action="store_true", help="also load with two nice-0 loops")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    conditions = [("none", None)] * args.repeats + [("2 x nice 19", 19)] * args.repeats
    if args.nice0:
        conditions += [("2 x nice 0", 0)] * args.repeats
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for i, (name, nice) in enumerate(conditions):
            t0 = time.perf_counter()
            runs.append((name, under_load(nice, args.requests, Path(tmp) / str(i))))
            print(f"  {name}: {time.perf_counter() - t0:.0f} s", flush=True)
    base = runs[0][1]
    print(f"{len(base)} steps per run; |step / same step of run 1 - 1| in %, median p90")
    print(f"{'condition':14s} {'thread cpu':>13s} {'wall':>13s} {'wall/cpu med':>13s}")
    for name, df in runs[1:]:
        assert len(df) == len(base), "the burst should run the same steps every time"
        ratio = float(np.median(df["wall_s"] / df["cpu_s"]))
        print(f"{name:14s} {spread(base['cpu_s'], df['cpu_s']):>13s} "
              f"{spread(base['wall_s'], df['wall_s']):>13s} {ratio:13.2f}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
