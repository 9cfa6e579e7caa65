"""`servesim trace export`: a scenario's workload as a dataset a real benchmark replays."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sim.cli.run import SetOpt
from sim.config.load import load_scenario
from sim.report.outfile import check_file, free_default, write_text
from traces.errors import InputError
from traces.loaders import vllm_bench
from traces.spec import WorkloadSpec
from traces.stats import trace_stats
from traces.workload import build_workload

FORMATS = ("vllm-bench",)


def export(
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario YAML whose workload to export (default: the embedded default).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Dataset file to write (JSON lines; default: workload.jsonl, or "
        "workload-2.jsonl... when that exists).")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="vllm-bench: `vllm bench serve --dataset-name timed_trace` "
        "JSONL (exact prompt and output lengths, arrival times, prefix chains).")
    ] = "vllm-bench",
    set_: SetOpt = None,
    trace: Annotated[Path | None, typer.Option(
        "--trace", help="Export this trace file instead of the scenario's workload.")] = None,
    model: Annotated[str, typer.Option(
        "--model", help="Model name to put in the printed vllm command.")] = "MODEL",
) -> None:
    """Write the workload as a dataset and print the `vllm bench serve` commands that replay
    it: with its own arrival times, or with vLLM's arrivals at the same rate."""
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: allowed: {', '.join(FORMATS)}")
    out = out if out is not None else free_default("workload.jsonl")
    check_file(out, "--out")
    loaded = load_scenario(scenario, tuple(set_ or ()), str(trace) if trace else None)
    spec = loaded.scenario.workload
    workload = build_workload(spec, seed=loaded.scenario.seed, base_dir=loaded.base_dir)
    lines, block = vllm_bench.dataset_lines(workload)
    write_text(out, "--out", "\n".join(lines) + "\n")
    rate, burstiness = _rate(spec, workload)
    own, generated = vllm_bench.bench_command(out, workload, block, rate=rate,
                                              burstiness=burstiness, model=model,
                                              concurrency=spec.arrival.concurrency)
    s = trace_stats(workload)
    typer.echo(f"wrote {len(workload):,} requests to {out} (prompt mean "
               f"{s['prompt_tokens']['mean']:,.0f} tokens, output mean "
               f"{s['output_tokens']['mean']:,.0f} tokens, {rate:.6g} req/s)")
    typer.echo(f"replay its arrival times:\n  {own}")
    typer.echo(f"or vLLM's own arrivals at the same rate:\n  {generated}")


def _rate(spec: WorkloadSpec, workload) -> tuple[float, float]:
    """The request rate and vLLM burstiness (1/CV^2) of the workload: the arrival spec's when
    it generates times, else measured on the trace."""
    a = spec.arrival
    if spec.mix is None and a.process in ("poisson", "gamma", "constant"):
        burst = {"poisson": 1.0, "constant": float("inf")}.get(a.process)
        return a.rate, burst if burst is not None else 1.0 / a.cv**2
    return vllm_bench.bench_rate(workload)
