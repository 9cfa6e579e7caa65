"""The highest sustainable load of each configuration: bracketing, then bisection.

A load is *sustainable* when, for every seed, the engine keeps up (``sustain``) and every
latency budget holds; the worst seed decides. Per configuration:

    bracket  start at the scenario's own load; double while sustainable, halve while not
             (a rate or rate_scale up to its bounds, 1e-6 and 1e6; a closed loop's clients
             at most MAX_STEPS times each way, down to 1), until lo (sustainable) < hi
             (not) are known
    bisect   probe inside (lo, hi) until hi - lo <= the tolerance

Every probe is a full simulation stored as a point (``store``), so a search resumes and
its probes plot like any sweep. Probes of all configurations and seeds in one round run
together on the executor; with more workers than that, each configuration probes k loads
per round (k-section instead of bisection).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from sim.config.load import LoadedScenario
from sim.plan.binding import cause, judge, verdict  # noqa: F401  (re-exported)
from sim.plan.executors import Executor
from sim.plan.grid import CONC_KEY, Override, Plan, Point, config_label, load_axis
from sim.plan.point import Base
from sim.plan.progress import PointProgress
from sim.plan.slo import Budget
from sim.plan.store import PointStore
from sim.plan.sweep import Runner, check_configs, manifest
from traces.arrival_spec import MAX_RATE, MIN_RATE
from traces.errors import InputError

MAX_STEPS = 10  # doublings (or halvings) of a closed loop's clients before giving up
# a rate (or a replay's rate_scale, bounded alike) is doubled or halved up to its bounds:
# a start of 1e6 req/s against ~15 sustainable used to stop at 976 after 10 halvings and
# answer "none", a start of 0.01 at 10.24 with "the SLOs do not bind"
LOW, HIGH = MIN_RATE, MAX_RATE
MAX_SEARCHES = 10_000  # configurations x seeds: a typo in --seeds must not queue days of work


@dataclass(frozen=True)
class Tolerance:
    """Stop when hi - lo <= value (load units), or value x hi when relative."""

    value: float
    relative: bool

    @staticmethod
    def parse(text: str) -> Tolerance:
        raw = text.strip()
        rel = raw.endswith("%")
        try:
            v = float(raw.rstrip("%"))
        except ValueError:
            v = -1.0
        if not v > 0 or (rel and v >= 100):
            raise InputError(f"--tol {text!r}: a positive load step (0.5) or a percentage "
                             "of the answer below 100 (2%)")
        return Tolerance(v / 100 if rel else v, rel)

    def width(self, hi: float) -> float:
        return self.value * hi if self.relative else self.value

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"


@dataclass(frozen=True)
class Probe:
    """One load of one configuration, every seed."""

    load: float
    records: tuple[dict, ...]  # one per seed
    binding: str | None  # None: sustainable for every seed

    @staticmethod
    def of(load: float, records: list[dict], budgets: tuple[Budget, ...]) -> Probe:
        verdicts = [v for v in (verdict(r["metrics"], budgets) for r in records) if v]
        engine = [why for failed, why in verdicts if failed]
        failed = [why for _, why in verdicts]
        return Probe(load, tuple(records), (engine or failed or [None])[0])

    @property
    def ok(self) -> bool:
        return self.binding is None

    def worst(self, column: str, pick=max) -> float:
        vals = [r["metrics"].get(column) for r in self.records]
        vals = [float(v) for v in vals if v is not None and not math.isnan(float(v))]
        return pick(vals) if vals else math.nan


def _round(x: float) -> float:
    return float(f"{x:.6g}")  # loads people read (24.375, not 24.374999999)


@dataclass
class Search:
    """Bracketing + bisection state of one configuration."""

    config: tuple[Override, ...]
    start: float
    tol: Tolerance
    probes: list[Probe] = field(default_factory=list)
    exhausted: bool = False  # no load left between lo and hi at 6 significant digits
    seeds: tuple[int, ...] = ()  # its own seeds (sim.plan.spread), else the search's
    integer: bool = False  # loads are whole numbers (a closed loop's clients), at least 1

    @property
    def hi(self) -> Probe | None:
        failed = [p for p in self.probes if not p.ok]
        return min(failed, key=lambda p: p.load) if failed else None

    @property
    def lo(self) -> Probe | None:
        cap = self.hi.load if self.hi else math.inf
        ok = [p for p in self.probes if p.ok and p.load < cap]
        return max(ok, key=lambda p: p.load) if ok else None

    @property
    def status(self) -> str:
        lo, hi = self.lo, self.hi
        if lo and hi:
            narrow = hi.load - lo.load <= self.tol.width(hi.load)
            return "found" if narrow or self.exhausted else "searching"
        if self.integer:
            if lo and lo.load >= self.start * 2 ** MAX_STEPS:
                return "above range"
            if hi and hi.load <= max(1.0, self.start / 2 ** MAX_STEPS):
                return "none"
            return "searching"
        if lo and lo.load >= HIGH:
            return "above range"
        if hi and hi.load <= LOW:
            return "none"
        return "searching"

    def next_loads(self, k: int) -> list[float]:
        lo, hi = self.lo, self.hi
        if not self.probes:
            return [self.start]
        r = (lambda x: float(max(1, round(x)))) if self.integer else _round
        if lo and hi:
            xs = [r(lo.load + (hi.load - lo.load) * i / (k + 1)) for i in range(1, k + 1)]
            xs = sorted({x for x in xs if lo.load < x < hi.load})
            self.exhausted = not xs
            return xs
        top, bottom = (math.inf, 1.0) if self.integer else (HIGH, LOW)
        if lo:
            return sorted({min(r(lo.load * 2 ** i), top) for i in range(1, k + 1)} - {lo.load})
        return sorted({max(r(hi.load / 2 ** i), bottom) for i in range(1, k + 1)} - {hi.load},
                      reverse=True)

    def rounds_left(self) -> int:
        """A guess for the progress bar: bisection steps still to go."""
        lo, hi = self.lo, self.hi
        if not (lo and hi):
            return 6
        return max(0, math.ceil(math.log2(max(hi.load - lo.load, 1e-12)
                                          / self.tol.width(hi.load))))


@dataclass(frozen=True)
class ConfigCapacity:
    """The answer for one configuration."""

    config: tuple[Override, ...]
    status: str  # found | above range (never failed) | none (never sustainable)
    lo: Probe | None  # highest sustainable probe: the capacity
    hi: Probe | None  # lowest failing probe: its binding constraint is what limits
    probes: int

    @property
    def label(self) -> str:
        return config_label(self.config)

    @property
    def binding(self) -> str | None:
        return self.hi.binding if self.hi else None


@dataclass(frozen=True)
class CapacityResult:
    load_key: str
    budgets: tuple[Budget, ...]
    tol: Tolerance
    seeds: tuple[int, ...]
    configs: tuple[ConfigCapacity, ...]
    out: Path
    ran: int
    wall_s: float
    reused: int = 0  # probes found in the folder (--resume)


def run_capacity(loaded: LoadedScenario, grid, budgets: tuple[Budget, ...], seeds: tuple[int, ...],
                 tol: Tolerance, out: Path, executor: Executor, *, resume: bool = False,
                 quiet: bool = False, sets: tuple[str, ...] = ()) -> CapacityResult:
    t0 = time.perf_counter()
    base = Base.of(loaded, sets)
    key, start = load_axis(loaded.scenario)
    plan = Plan(tuple((k, tuple(v)) for k, v in grid), key, (), seeds)
    searches = [Search(c, start, tol, integer=key == CONC_KEY) for c in plan.configs()]
    if len(searches) * len(seeds) > MAX_SEARCHES:
        raise InputError(f"{len(searches):,} configuration(s) x {len(seeds):,} seed(s) make "
                         f"{len(searches) * len(seeds):,} searches of ~10 loads each; at most "
                         f"{MAX_SEARCHES:,} (fewer --seeds or --grid values)")
    check_configs(base, [Point(s.config, key, start, seeds[0]) for s in searches])
    store = PointStore(out)
    store.open(manifest("capacity", base, plan, slo=[b.name + f"={b.ms:g}ms" for b in budgets],
                        tolerance=str(tol), start=start), resume=resume)
    try:
        runner = Runner(store, base, executor, store.done())
        run_searches(runner, searches, key, seeds, budgets, quiet)
        runner.consolidate()
    finally:
        store.close()
    results = tuple(ConfigCapacity(s.config, s.status, s.lo, s.hi, len(s.probes))
                    for s in searches)
    return CapacityResult(key, budgets, tol, seeds, results, out, runner.ran,
                          time.perf_counter() - t0, len(runner.order) - runner.ran)


def run_searches(runner: Runner, searches: list[Search], key: str, seeds: tuple[int, ...],
                 budgets: tuple[Budget, ...], quiet: bool) -> None:
    """Probe every searching configuration, a round at a time, until each has an answer
    (each at its own seeds when it has them, else at ``seeds``)."""
    jobs = runner.executor.jobs
    with PointProgress("capacity", 0, quiet=quiet) as bar:
        while active := [s for s in searches if s.status == "searching"]:
            k = max(1, jobs // (len(active) * len(seeds)))
            wanted = [(s, x) for s in active for x in s.next_loads(k)]
            if not wanted:
                break
            points = {(id(s), x): [Point(s.config, key, x, sd) for sd in s.seeds or seeds]
                      for s, x in wanted}
            bar.grow(runner.ran + len(seeds) * sum(max(1, s.rounds_left()) * k
                                                   for s in active))
            runner.run([p for ps in points.values() for p in ps], bar)
            for s, x in wanted:
                recs = [runner.records[p.id] for p in points[(id(s), x)]]
                s.probes.append(Probe.of(x, recs, budgets))
