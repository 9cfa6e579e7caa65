"""Run a plan's points through an executor into a point store (the seed's tuning loop, step 3).

    plan = make_plan(loaded.scenario, ["engine.max_num_seqs=64,256"], "4:40:4", None, seeds=1)
    result = run_sweep(loaded, plan, Path("results/sweep"), executor)
    result.table            # one row per point: parameters + every summary metric

Every configuration is validated (and sized against the GPU) before the first point
runs, so a bad grid value fails with one line and writes nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sim.config.load import LoadedScenario
from sim.pipeline import prepare, resolve_loaded
from sim.plan.executors import Executor
from sim.plan.grid import SCALE_KEY, Plan, Point
from sim.plan.point import Base
from sim.plan.progress import PointProgress
from sim.plan.store import PointStore
from traces.errors import InputError

CONSOLIDATE_S = 5.0  # rewrite points.parquet at most this often while points finish


@dataclass(frozen=True)
class SweepResult:
    out: Path
    table: pd.DataFrame  # points.parquet
    ran: int  # points simulated by this call
    reused: int  # points already in the folder (--resume)
    wall_s: float


def manifest(kind: str, base: Base, plan: Plan, **extra) -> dict:
    """What --resume must find unchanged (JSON-normalised: tuples become lists)."""
    doc = {"kind": kind, "scenario": json.loads(base.data), "source": base.source,
           "base_dir": base.base_dir, "sets": list(base.sets), **plan.to_json(), **extra}
    return json.loads(json.dumps(doc))


def check_configs(base: Base, points: Sequence[Point]) -> None:
    """Validate and size every configuration, and build the workload once, before running."""
    seen: set[str] = set()
    first = True
    for p in points:
        if p.config_id in seen:
            continue
        seen.add(p.config_id)
        try:
            loaded = base.load(p.overrides)
            if first:
                _, specs, source = prepare(loaded)  # the workload builds (trace readable,
                if p.load_key == SCALE_KEY:  # lengths valid)
                    _scalable(specs, source)
                first = False
            else:
                resolve_loaded(loaded)
        except InputError as e:  # the scenario itself loaded: the grid's values are at fault
            if not p.config:
                raise
            given = ", ".join(f"{k}={json.dumps(v) if isinstance(v, bool) else v}"
                              for k, v in p.config)  # true as given, not Python's True
            why = str(e).removeprefix(f"{base.source}: ")  # the grid's value, not the file
            raise InputError(f"--grid {given}: {why}") from None


def _scalable(specs, source: str) -> None:
    """A rate_scale axis needs arrivals spread over time: scaling a burst (every request at
    one instant) changes nothing, and its rate is no number."""
    t = specs.arrival_s
    if len(t) < 2 or float(t[-1] - t[0]) <= 0:
        raise InputError(f"{source}: all {len(t):,} request(s) arrive at {float(t[0]):g} s: "
                         "no rate for workload.rate_scale to scale (give them arrival times, "
                         "or set workload.arrival={process: poisson, rate: R} and search --rate)")


class Runner:
    """Runs points not yet in the store; writes each as it completes."""

    def __init__(self, store: PointStore, base: Base, executor: Executor, records: dict):
        self.store, self.base, self.executor = store, base, executor
        self.records = records  # id -> record, every finished point in the folder
        self.order: dict[str, None] = {}  # point ids in plan order, for points.parquet
        self.ran = 0
        self._last = time.monotonic()

    def run(self, points: Sequence[Point], bar: PointProgress | None = None) -> None:
        self.order.update((p.id, None) for p in points)
        todo = [p for p in points if p.id not in self.records]
        for rec in self.executor.run(self.base, todo):
            self.store.put(rec)
            self.records[rec["id"]] = rec
            self.ran += 1
            if bar:
                bar.advance(f"{rec['config']} @ {rec['load']:g}" if rec["load"] else rec["config"])
            if time.monotonic() - self._last > CONSOLIDATE_S:
                self.consolidate()

    def consolidate(self) -> Path:
        self._last = time.monotonic()
        return self.store.consolidate(self.order, self.records)


def run_sweep(loaded: LoadedScenario, plan: Plan, out: Path, executor: Executor, *,
              resume: bool = False, quiet: bool = False, sets: tuple[str, ...] = ()
              ) -> SweepResult:
    """Run every point of ``plan`` not yet in ``out``; ``sets`` (the --set lines) label plots."""
    t0 = time.perf_counter()
    base = Base.of(loaded, sets)
    points = plan.points()
    check_configs(base, points)
    store = PointStore(out)
    store.open(manifest("sweep", base, plan), resume=resume)
    try:
        runner = Runner(store, base, executor, store.done())
        reused = sum(p.id in runner.records for p in points)
        with PointProgress("sweep", len(points), done=reused, quiet=quiet) as bar:
            runner.run(points, bar)
        path = runner.consolidate()
    finally:
        store.close()
    return SweepResult(out, pd.read_parquet(path), runner.ran, reused, time.perf_counter() - t0)
