"""Run one point: the base scenario + the point's overrides -> one flat result record.

``run_point`` is the only function an executor calls; it takes plain picklable values
and returns a plain dict, so a point runs the same in this process, in a process pool
or as a Ray task. The record holds the point's parameters and every summary metric,
flattened to dotted column names (``latency_ms.ttft.p95``), plus a few derived columns a
planner compares configurations by (per GPU, per user, offered rates).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from sim.config.load import LoadedScenario, apply_override, validate
from sim.metrics.summary import summarize
from sim.pipeline import prepare
from sim.plan.grid import Point
from sim.plan.peaks import offered_rates
from sim.plan.sustain import engine_sustains
from sim.runner import simulate


@dataclass(frozen=True)
class Base:
    """The scenario every point starts from, as values any process can rebuild it from."""

    data: str  # the scenario as given (unset fields left out), --set applied, as JSON
    source: str  # file name for messages
    base_dir: str  # relative trace paths resolve against this folder
    sets: tuple[str, ...] = ()  # the command line's --set (already in data): for titles

    @staticmethod
    def of(loaded: LoadedScenario, sets: tuple[str, ...] = ()) -> Base:
        data = loaded.scenario.model_dump(mode="json", exclude_unset=True)
        # absolute: a resume naming the scenario by another relative path is the same sweep
        return Base(json.dumps(data, sort_keys=True), loaded.source,
                    os.path.abspath(loaded.base_dir), tuple(sets))

    @staticmethod
    def of_manifest(manifest: dict) -> Base:
        """The base a sweep folder's manifest.json records."""
        return Base(json.dumps(manifest["scenario"], sort_keys=True), manifest["source"],
                    manifest["base_dir"], tuple(manifest.get("sets", ())))

    def scenario_data(self) -> dict:
        return json.loads(self.data)

    def load(self, overrides=()) -> LoadedScenario:
        """The base with ``overrides`` applied exactly as ``--set`` applies them."""
        data = self.scenario_data()
        for key, value in overrides:
            apply_override(data, f"{key}={yaml.safe_dump(value)}")
        return LoadedScenario(validate(data, self.source), self.source, Path(self.base_dir),
                              self.sets)


def flatten(tree: dict, prefix: str = "") -> dict:
    """Nested dict -> {dotted.key: scalar}; lists become JSON text."""
    out: dict = {}
    for k, v in tree.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, name + "."))
        elif isinstance(v, (list, tuple)):
            out[name] = json.dumps(v)
        else:
            out[name] = v.item() if hasattr(v, "item") else v
    return out


def derived(summary: dict, gpus: int, arrival_s) -> dict:
    """Columns computed from the summary: per GPU, per user, offered load, the stability test."""
    mean, peak = offered_rates(arrival_s)
    tpot = summary["latency_ms"]["tpot"].get("median")
    th = summary["throughput"]
    return {
        "gpus": gpus,
        "offered_rate_mean": mean,  # requests/s over the arrivals' span
        "offered_rate_peak_minute": peak,  # requests/s in the busiest 60 s window
        "request_per_s_per_gpu": th["request_per_s"] / gpus,
        "output_token_per_s_per_gpu": th["output_token_per_s"] / gpus,
        "total_token_per_s_per_gpu": th["total_token_per_s"] / gpus,
        # what one user sees while decoding: 1 / TPOT (tokens/s), aiconfigurator's tokens/s/user
        "user_output_token_per_s": 1e3 / tpot if tpot and not math.isnan(tpot) else math.nan,
        "engine_sustains": engine_sustains(summary),
    }


def too_short_said(said: str | None) -> str:
    """The "too short to judge" warning among a point's ``sim.warnings`` (its run's
    warnings as a JSON list), else that phrase alone."""
    return next((w for w in json.loads(said or "[]") if "too short" in w),
                "the run is too short to judge")


def record(point: Point, summary: dict, gpus: int, arrival_s, wall_s: float) -> dict:
    return {
        "id": point.id, "config_id": point.config_id, "config": point.label,
        "params": dict(point.overrides), "load": point.load,
        "metrics": {**flatten(summary), **derived(summary, gpus, arrival_s)},
        "wall_s": wall_s,  # kept in the point file only: points.parquet is deterministic
    }


def run_point(base: Base, point: Point) -> dict:
    """Simulate one point and return its record (see ``record``)."""
    t0 = time.perf_counter()
    r, specs, _ = prepare(base.load(point.overrides))
    if r.scenario.cluster is not None:  # a fleet: its GPUs, its clients' view
        from sim.fleet.plan import plan_fleet
        from sim.fleet.run import fleet_outputs, run_fleet

        res, summary = fleet_outputs(run_fleet(r, specs))
        gpus = plan_fleet(r.scenario, r).gpus
    else:
        res = simulate(r, specs)
        summary, gpus = summarize(res), r.tp
    # a closed loop's offered load is what its clients sent (its ready times are all 0)
    closed = getattr(r.scenario.workload.arrival, "process", None) == "closed"
    arrival = np.sort(res.specs.arrival_s) if closed else specs.arrival_s
    return record(point, summary, gpus, arrival, time.perf_counter() - t0)
