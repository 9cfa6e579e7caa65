"""How sure a capacity is: the best configuration searched again on K disjoint windows of
a replayed trace, or on K seeds one at a time (generated arrivals), and the spread of the
answers (min / median / max requests/s).

A window's answer is the rate_scale it holds, said as the whole trace's mean rate at that
scale (the headline's unit): a window's own mean rate would make every part look faster
than the whole, whose busiest stretch is what limits it. A window judged alone is judged
on its own percentiles, so its hardest stretch weighs more than in the whole trace: the
headline usually lies inside the range, which says how much the answer depends on the
stretch of traffic measured.

One trace replayed once gives one number: another quarter of the same traffic, or another
draw of the same arrival process, gives another, and a "best" configuration that wins by
less than that spread is not known to be better. Each part is a full capacity search
(bracketing from the best's capacity, then bisection to the same tolerance) stored like
any other (DIR/spread/points.parquet), so it resumes. With the same seeds, the headline
capacity (every seed at each load, the worst deciding) is about the seeds' minimum.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.config.load import LoadedScenario
from sim.plan.capacity import Search, Tolerance, run_searches
from sim.plan.executors import Executor
from sim.plan.grid import CONC_KEY, SCALE_KEY, Override, Plan, Point, load_axis
from sim.plan.point import Base
from sim.plan.slo import Budget
from sim.plan.store import PointStore
from sim.plan.sweep import Runner, check_configs, manifest
from traces.workload import build_workload

WINDOW_KEY = "workload.window_s"


@dataclass(frozen=True)
class Spread:
    """The capacity of each part (mean requests/s; 0 when no load held)."""

    over: str  # "windows" of the trace | "seeds"
    labels: tuple[str, ...]
    rates: tuple[float, ...]  # req/s: the load found (a window's rate_scale x the trace's rate)
    loads: tuple[float, ...] = ()  # the load axis value each part holds

    @property
    def low(self) -> float:
        return min(self.rates)

    @property
    def median(self) -> float:
        return statistics.median(self.rates)

    @property
    def high(self) -> float:
        return max(self.rates)

    def as_dict(self) -> dict:
        return {"over": self.over, "min_req_s": self.low, "median_req_s": self.median,
                "max_req_s": self.high,
                "parts": [{"part": lab, "max_load": x, "rate_mean_req_s": r}
                          for lab, r, x in zip(self.labels, self.rates, self.loads)]}

    def line(self) -> str:
        what = (f"{len(self.rates)} disjoint windows of the trace ({self.labels[0]}, ...; "
                "each as the whole trace's mean rate at the rate_scale it holds)"
                if self.over == "windows" else f"{len(self.rates)} seeds")
        width = (self.high - self.low) / self.median if self.median else float("nan")
        return (f"uncertainty: capacity over {what}, one search each: {self.low:.2f} / "
                f"{self.median:.2f} / {self.high:.2f} req/s (min / median / max; the range "
                f"is {width:.0%} of the median)")


def windows(loaded: LoadedScenario, k: int) -> list[list[float]]:
    """K equal, disjoint [start, end) windows covering the replay (its window_s, else the
    trace as recorded), in the trace's own seconds."""
    w = loaded.scenario.workload
    if w.window_s is not None:
        a, b = w.window_s
    else:
        spec = w.model_copy(update={"rate_scale": 1.0})
        t = build_workload(spec, seed=loaded.scenario.seed, base_dir=loaded.base_dir).arrival_s
        a, b = float(t[0]), float(np.nextafter(t[-1], np.inf))
    edges = [float(f"{x:.6g}") for x in np.linspace(a, b, k + 1)]
    edges[-1] = b
    return [[edges[i], edges[i + 1]] for i in range(k)]


def _searches(loaded: LoadedScenario, config: tuple[Override, ...], start: float, k: int,
              tol: Tolerance) -> tuple[str, list[Search], list[str]]:
    key, _ = load_axis(loaded.scenario)
    if key == SCALE_KEY:
        cuts = windows(loaded, k)
        return "windows", [Search((*config, (WINDOW_KEY, c)), start, tol) for c in cuts], \
            [f"[{a:g}, {b:g}) s" for a, b in cuts]
    seeds = [loaded.scenario.seed + i for i in range(k)]
    return "seeds", [Search(config, start, tol, seeds=(s,), integer=key == CONC_KEY)
                     for s in seeds], \
        [f"seed {s}" for s in seeds]


def run_spread(loaded: LoadedScenario, config: tuple[Override, ...], start: float,
               budgets: tuple[Budget, ...], tol: Tolerance, k: int, out: Path,
               executor: Executor, *, rate_per_load: float = 1.0, sets: tuple[str, ...] = (),
               resume: bool = False, quiet: bool = False) -> Spread:
    """The capacity of ``config`` on each of ``k`` parts (see the module docstring);
    ``rate_per_load``: requests/s per unit of the load axis (a replay: the whole trace's
    mean rate at rate_scale 1; generated arrivals: 1)."""
    base = Base.of(loaded, sets)
    key, _ = load_axis(loaded.scenario)
    over, searches, labels = _searches(loaded, config, start, k, tol)
    seeds = tuple(sorted({sd for s in searches for sd in s.seeds})) or (loaded.scenario.seed,)
    check_configs(base, [Point(s.config, key, start, (s.seeds or seeds)[0]) for s in searches])
    store = PointStore(out)
    plan = Plan((), key, (), seeds)
    store.open(manifest("spread", base, plan, config=[list(o) for o in config], parts=k,
                        slo=[b.name + f"={b.ms:g}ms" for b in budgets], tolerance=str(tol),
                        start=start), resume=resume)
    try:
        runner = Runner(store, base, executor, store.done())
        run_searches(runner, searches, key, seeds[:1], budgets, quiet)
        runner.consolidate()
    finally:
        store.close()
    loads = tuple(s.lo.load if s.lo else 0.0 for s in searches)
    return Spread(over, tuple(labels), tuple(x * rate_per_load for x in loads), loads)
