"""Scenario in, results out: the library call behind `servesim run`.

    load scenario -> build workload (trace) -> resolve (KV capacity, defaults)
      -> simulate -> summarize -> write results

Each phase's wall time goes to summary.json under ``sim.wall_s`` (sim.timing).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from sim.config.load import LoadedScenario
from sim.config.resolve import ConfigError, Resolved, resolve
from sim.config.runnable import scenario_as_run
from sim.engine.requests import RequestSpecs
from sim.fleet.plan import plan_fleet, warn_cache_blind
from sim.fleet.run import fleet_outputs, run_fleet
from sim.metrics.summary import summarize
from sim.report.steplog import StepLog
from sim.report.write import ResultWriter, dump_json
from sim.runner import RunResult, RunWarning, chain_hooks, simulate
from sim.timing import PhaseTimer
from traces.workload import build_workload


@dataclass(frozen=True)
class RunOutput:
    result: RunResult
    summary: dict
    config: dict
    out_dir: Path | None


def resolved_config(r: Resolved, trace_source: str, base_dir: Path | str = ".",
                    dest: Path | str | None = None) -> dict:
    """The scenario as run (``sim.config.runnable``: `servesim run` takes it back, trace
    paths resolving from ``dest``) plus the derived values."""
    cfg = scenario_as_run(r, base_dir, dest)
    cfg["derived"] = r.derived()
    cfg["workload_source"] = trace_source
    return cfg


def resolve_loaded(loaded: LoadedScenario) -> Resolved:
    """Resolve a loaded scenario; a config error names the --set at fault, else the file."""
    try:
        return resolve(loaded.scenario)
    except ConfigError as e:
        raise ConfigError(f"{loaded.origin(str(e))}: {e}") from None


def prepare(loaded: LoadedScenario) -> tuple[Resolved, RequestSpecs, str]:
    """Validate everything that can fail before simulating (so failures write nothing)."""
    sc = loaded.scenario
    r = resolve_loaded(loaded)
    if sc.cluster is not None:  # every pool must resolve too
        try:
            warn_cache_blind(plan_fleet(sc, r))
        except ConfigError as e:
            raise ConfigError(f"{loaded.origin(str(e))}: {e}") from None
    trace = build_workload(sc.workload, seed=sc.seed, base_dir=loaded.base_dir)
    specs, source = RequestSpecs.from_trace(trace), trace.source
    del trace
    _release_arrow_memory()  # the trace's text columns (a large workload: hundreds of MB)
    return r, specs, source


def _release_arrow_memory() -> None:
    """Hand Arrow's freed memory back to the system (its pool keeps it otherwise)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def run(loaded: LoadedScenario, out: Path | None = None, *, step_log: bool = False,
        plots: bool = True, progress=None, prepared=None, executor=None, on_plan=None,
        timer: PhaseTimer | None = None, files: dict[str, str] | None = None) -> RunOutput:
    """Simulate and (if ``out``) write results; ``prepared`` reuses a ``prepare`` result.
    ``files``: more text files (name -> content) of the result, written with it (a sweep's
    chosen point says which point it is), so its marker lists them as servesim's.

    The results folder is checked, locked and staged before simulating, so a bad or busy
    ``out`` fails fast. ``executor`` replaces the scenario's cost model (see ``simulate``);
    what it adds to the run (live mode: a ``live`` summary section and per-step
    measurements) is written too. ``on_plan`` is called after each committed plan, after
    the step log. ``timer`` carries phases timed by the caller (the CLI times loading the
    scenario); the run adds its own and records them all in ``summary["sim"]["wall_s"]``.
    """
    timer = timer or PhaseTimer()
    if prepared is None:
        with timer.phase("load"):
            prepared = prepare(loaded)
    r, specs, source = prepared
    writer = ResultWriter(out) if out is not None else None
    try:
        with timer.phase("simulate"):
            if r.scenario.cluster is not None:  # a fleet (sim.fleet)
                fleet = _simulate_fleet(r, specs, writer if step_log else None)
            else:
                res = _simulate(r, specs, writer if step_log else None, progress, executor,
                                on_plan, writer.tmp if writer else None)
        with timer.phase("summarize"):
            if r.scenario.cluster is not None:
                res, summary = fleet_outputs(fleet)
            else:
                summary = summarize(res)
                if res.recorder.streamed:  # the steps read back: Arrow's pool lets go
                    _release_arrow_memory()
            if res.extras is not None:
                summary[res.extras.section] = res.extras.summary
            _say(summary["sim"]["warnings"], res.warnings)
            config = resolved_config(r, source, loaded.base_dir, out)
        if writer:
            with timer.phase("write"):
                writer.write(res, summary, config, plot=plots)
                for name, table in (res.extras.tables if res.extras else {}).items():
                    table.to_parquet(writer.path(name), index=False)
        summary["sim"]["wall_s"] = {**timer.block(), "core": getattr(res, "core", "general")}
        if writer:  # again, now with the write phase's time
            dump_json(summary, writer.path("summary.json"))
            for name, text in (files or {}).items():
                writer.path(name).write_text(text)
            return RunOutput(res, summary, config, writer.commit())
        return RunOutput(res, summary, config, None)
    except BaseException:
        if writer:
            writer.abort()
        raise


def _say(warned: list[str], said: tuple[str, ...]) -> None:
    """Warn the summary's warnings the simulation did not already (a run too short)."""
    for w in warned:
        if w not in said:
            warnings.warn(w, RunWarning, stacklevel=3)


def _simulate_fleet(r: Resolved, specs: RequestSpecs, writer: ResultWriter | None):
    """Simulate a fleet, writing steps.jsonl (steps and routing) into ``writer``'s folder."""
    if writer is None:
        return run_fleet(r, specs)
    with open(writer.path("steps.jsonl"), "w") as fh:
        return run_fleet(r, specs, fh)


def _simulate(r: Resolved, specs: RequestSpecs, writer: ResultWriter | None,
              progress, executor=None, on_plan=None, spill_dir=None) -> RunResult:
    """Simulate, writing steps.jsonl into ``writer``'s folder when given; a long run streams
    its step rows into ``spill_dir`` (the staging folder: sim/metrics/spill.py)."""
    if writer is None:
        return simulate(r, specs, on_plan=on_plan, progress=progress, executor=executor,
                        spill_dir=spill_dir)
    with open(writer.path("steps.jsonl"), "w") as fh:
        hook = chain_hooks(StepLog(fh, specs.request_id), on_plan)
        return simulate(r, specs, on_plan=hook, progress=progress, executor=executor,
                        spill_dir=spill_dir)
