"""Scenario in, results out: the library call behind `servesim run`.

    load scenario -> build workload (trace) -> resolve (KV capacity, defaults)
      -> simulate -> summarize -> write results
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim.config.load import LoadedScenario
from sim.config.resolve import ConfigError, Resolved, resolve
from sim.engine.requests import RequestSpecs
from sim.metrics.summary import summarize
from sim.report.steplog import StepLog
from sim.report.write import ResultWriter
from sim.runner import RunResult, chain_hooks, simulate
from traces.spec import build_workload


@dataclass(frozen=True)
class RunOutput:
    result: RunResult
    summary: dict
    config: dict
    out_dir: Path | None


def resolved_config(r: Resolved, trace_source: str) -> dict:
    """The scenario as run: every field (defaults filled) plus the derived values."""
    cfg = r.scenario.model_dump(mode="json")
    cfg["model"] = r.model.model_dump(mode="json")
    cfg["gpu"] = r.gpu.model_dump(mode="json")
    cfg["derived"] = r.derived()
    cfg["workload_source"] = trace_source
    return cfg


def resolve_loaded(loaded: LoadedScenario) -> Resolved:
    """Resolve a loaded scenario; a config error names the scenario file."""
    try:
        return resolve(loaded.scenario)
    except ConfigError as e:
        raise ConfigError(f"{loaded.source}: {e}") from None


def prepare(loaded: LoadedScenario) -> tuple[Resolved, RequestSpecs, str]:
    """Validate everything that can fail before simulating (so failures write nothing)."""
    sc = loaded.scenario
    r = resolve_loaded(loaded)
    trace = build_workload(sc.workload, seed=sc.seed, base_dir=loaded.base_dir)
    return r, RequestSpecs.from_trace(trace), trace.source


def run(loaded: LoadedScenario, out: Path | None = None, *, step_log: bool = False,
        plots: bool = True, progress=None, prepared=None, executor=None,
        on_plan=None) -> RunOutput:
    """Simulate and (if ``out``) write results; ``prepared`` reuses a ``prepare`` result.

    The results folder is checked, locked and staged before simulating, so a bad or busy
    ``out`` fails fast. ``executor`` replaces the scenario's cost model (see ``simulate``);
    what it adds to the run (live mode: a ``live`` summary section and per-step
    measurements) is written too. ``on_plan`` is called after each committed plan, after
    the step log."""
    r, specs, source = prepared or prepare(loaded)
    writer = ResultWriter(out) if out is not None else None
    try:
        fh = open(writer.path("steps.jsonl"), "w") if writer and step_log else None
        try:
            hook = chain_hooks(StepLog(fh, specs.request_id) if fh else None, on_plan)
            res = simulate(r, specs, on_plan=hook, progress=progress, executor=executor)
        finally:
            if fh:
                fh.close()
        summary = summarize(res)
        if res.extras is not None:
            summary[res.extras.section] = res.extras.summary
        config = resolved_config(r, source)
        if writer:
            writer.write(res, summary, config, plot=plots)
            for name, table in (res.extras.tables if res.extras else {}).items():
                table.to_parquet(writer.path(name), index=False)
            return RunOutput(res, summary, config, writer.commit())
        return RunOutput(res, summary, config, None)
    except BaseException:
        if writer:
            writer.abort()
        raise
