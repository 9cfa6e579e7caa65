"""The highest sustainable load of each configuration: bracketing, then bisection.

A load is *sustainable* when, for every seed, the engine keeps up (``sustain``) and every
latency budget holds; the worst seed decides. Per configuration:

    bracket  start at the scenario's own load; double while sustainable, halve while not
             (at most MAX_STEPS times each way), until lo (sustainable) < hi (not) are known
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
from sim.plan.executors import Executor
from sim.plan.grid import Override, Plan, Point, config_label, load_axis
from sim.plan.point import Base
from sim.plan.progress import PointProgress
from sim.plan.slo import Budget
from sim.plan.store import PointStore
from sim.plan.sweep import Runner, check_configs, manifest
from traces.errors import InputError

MAX_STEPS = 10  # doublings (or halvings) from the starting load before giving up
KV_WAIT_SHARE = 0.5  # queue mostly waiting on KV memory: the KV cache is what binds


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


def kv_bound(m: dict) -> bool:
    waiting = m.get("waiting.mean_waiting") or 0.0
    on_kv = m.get("waiting.mean_waiting_on_kv_memory") or 0.0
    preempted = (m.get("preemption.count") or 0) > 0
    return preempted or (waiting > 0 and on_kv >= KV_WAIT_SHARE * waiting)


def seqs_bound(m: dict) -> bool:
    """The queue mostly waited because max_num_seqs requests were already running."""
    waiting = m.get("waiting.mean_waiting") or 0.0
    on_seqs = m.get("waiting.mean_waiting_on_max_num_seqs") or 0.0
    return waiting > 0 and on_seqs >= KV_WAIT_SHARE * waiting


def _share(m: dict, limit: str) -> float:
    v = m.get(f"batch_limits.{limit}")
    return 0.0 if v is None or math.isnan(float(v)) else float(v)


def _busy(m: dict, limit: str) -> str:
    """' in 16% of busy time' from the step records (sim.metrics.batch_limits)."""
    return f" in {_share(m, limit):.0%} of busy time" if f"batch_limits.{limit}" in m else ""


def _capped(m: dict) -> str | None:
    """The limit the running batch sat at for most of the busy time, when one did."""
    name, share = max((("kv_cache_full", _share(m, "kv_cache_full")),
                       ("at_max_num_seqs", _share(m, "at_max_num_seqs")),
                       ("token_budget_full", _share(m, "token_budget_full"))),
                      key=lambda x: x[1])
    if share < KV_WAIT_SHARE:
        return None
    if name == "kv_cache_full":
        return f"KV cache (full{_busy(m, name)})"
    if name == "at_max_num_seqs":
        return f"max_num_seqs (batch at {_limit(m, 'max_num_seqs')}{_busy(m, name)})"
    return (f"token budget (max_num_batched_tokens {_limit(m, 'max_num_batched_tokens')} "
            f"full{_busy(m, name)})")


def _limit(m: dict, key: str) -> str:
    v = m.get(f"batch_limits.{key}")
    return "the cap" if v is None else f"{int(v):,}"


def cause(m: dict) -> str | None:
    """What held the requests back at a failing point, when one thing did: the KV cache
    (waiting on memory, or preempting), else the max_num_seqs cap (waiting for a seat),
    else the limit the running batch sat at for most of the busy time (the step records:
    max_num_seqs, KV full or the token budget full). The step share is said beside it
    (``max_num_seqs (32 running at the cap in 16% of busy time)``)."""
    if kv_bound(m):
        return "KV cache" + (f" (full{_busy(m, 'kv_cache_full')})" if _busy(
            m, "kv_cache_full") else "")
    if seqs_bound(m):
        peak = m.get("kv_cache.peak_concurrent_seqs")
        at = f"{int(peak)} running" if peak is not None and not math.isnan(float(peak)) \
            else "running"
        return f"max_num_seqs ({at} at the cap{_busy(m, 'at_max_num_seqs')})"
    return _capped(m)


def verdict(m: dict, budgets: tuple[Budget, ...]) -> tuple[bool, str] | None:
    """None when the point is sustainable, else (the engine failed, what binds): the
    engine's failure (``KV cache``, ``max_num_seqs (N running at the cap)`` or
    ``saturation``), else the budget furthest over its limit, after its cause when one
    held the queue back (``max_num_seqs (32 running at the cap; TTFT p95 over)``).
    Budgets count rejected and unfinished requests as failures, as the run's SLO verdict
    does; ``rejected`` when the finished requests were within a budget and the rejected
    ones broke it."""
    why = cause(m)
    if not m["engine_sustains"]:
        return True, why or "saturation"
    rejected = (m.get("slo.rejected_as_failures") or 0) > 0
    over = [(b.judged(m) / b.ms, "rejected" if rejected and b.lost_to_failures(m) else b.label)
            for b in budgets if not b.holds(m)]
    if not over:
        return None
    label = max(over)[1]
    if label == "rejected" or why is None:
        return False, label
    return False, (f"{why[:-1]}; {label} over)" if why.endswith(")")
                   else f"{why} ({label} over)")


def judge(m: dict, budgets: tuple[Budget, ...]) -> str | None:
    """None when the point is sustainable, else what binds (``verdict``)."""
    v = verdict(m, budgets)
    return v[1] if v else None


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
        if lo and lo.load >= self.start * 2 ** MAX_STEPS:
            return "above range"
        if hi and hi.load <= self.start / 2 ** MAX_STEPS:
            return "none"
        return "searching"

    def next_loads(self, k: int) -> list[float]:
        lo, hi = self.lo, self.hi
        if not self.probes:
            return [self.start]
        if lo and hi:
            xs = [_round(lo.load + (hi.load - lo.load) * i / (k + 1)) for i in range(1, k + 1)]
            xs = sorted({x for x in xs if lo.load < x < hi.load})
            self.exhausted = not xs
            return xs
        if lo:
            return [_round(lo.load * 2 ** i) for i in range(1, k + 1)]
        return [_round(hi.load / 2 ** i) for i in range(1, k + 1)]

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


def run_capacity(loaded: LoadedScenario, grid, budgets: tuple[Budget, ...], seeds: tuple[int, ...],
                 tol: Tolerance, out: Path, executor: Executor, *, resume: bool = False,
                 quiet: bool = False, sets: tuple[str, ...] = ()) -> CapacityResult:
    t0 = time.perf_counter()
    base = Base.of(loaded, sets)
    key, start = load_axis(loaded.scenario)
    plan = Plan(tuple((k, tuple(v)) for k, v in grid), key, (), seeds)
    searches = [Search(c, start, tol) for c in plan.configs()]
    check_configs(base, [Point(s.config, key, start, seeds[0]) for s in searches])
    store = PointStore(out)
    store.open(manifest("capacity", base, plan, slo=[b.name + f"={b.ms:g}ms" for b in budgets],
                        tolerance=str(tol), start=start), resume=resume)
    try:
        runner = Runner(store, base, executor, store.done())
        _search(runner, searches, key, seeds, budgets, quiet)
        runner.consolidate()
    finally:
        store.close()
    results = tuple(ConfigCapacity(s.config, s.status, s.lo, s.hi, len(s.probes))
                    for s in searches)
    return CapacityResult(key, budgets, tol, seeds, results, out, runner.ran,
                          time.perf_counter() - t0)


def _search(runner: Runner, searches: list[Search], key: str, seeds: tuple[int, ...],
            budgets: tuple[Budget, ...], quiet: bool) -> None:
    """Probe every searching configuration, a round at a time, until each has an answer."""
    jobs = runner.executor.jobs
    with PointProgress("capacity", 0, quiet=quiet) as bar:
        while active := [s for s in searches if s.status == "searching"]:
            k = max(1, jobs // (len(active) * len(seeds)))
            wanted = [(s, x) for s in active for x in s.next_loads(k)]
            if not wanted:
                break
            points = {(id(s), x): [Point(s.config, key, x, sd) for sd in seeds]
                      for s, x in wanted}
            bar.grow(runner.ran + len(seeds) * sum(max(1, s.rounds_left()) * k
                                                   for s in active))
            runner.run([p for ps in points.values() for p in ps], bar)
            for s, x in wanted:
                recs = [runner.records[p.id] for p in points[(id(s), x)]]
                s.probes.append(Probe.of(x, recs, budgets))
