"""`servesim replay-bench RESULT.json --scenario S`: a real benchmark run, predicted.

The result of `vllm bench serve --save-result --save-detailed` names its requests (prompt
and output tokens, in order) and its traffic (request rate, burstiness, max concurrency).
servesim replays the same requests through scenario S under the same arrival process and
prints its prediction next to the measurement.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from calibrate import hardware_check
from sim import pipeline
from sim.cli.run import SetOpt, say_hardware
from sim.config.load import load_scenario
from sim.cost import validation
from sim.report.bench import comparison, comparison_table, measured_summary
from traces.errors import InputError
from traces.loaders.vllm_result import check_compared, read_result, traffic

ARRIVALS = ("measured", "process")


def replay_bench(
    result: Annotated[Path, typer.Argument(
        help="vllm bench serve --save-result --save-detailed JSON.")],
    scenario: Annotated[Path, typer.Option(
        "--scenario", help="Scenario of the server that ran the benchmark (its workload is "
        "replaced by the result's requests).")],
    arrivals: Annotated[str, typer.Option(
        help="measured: each request when the benchmark's arrival process released it; "
        "process: a fresh seeded draw of that process (Poisson, or gamma with the result's "
        "burstiness, at its finite request rate). Either way under its --max-concurrency.")
    ] = "measured",
    set_: SetOpt = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Also write the simulated run's results to this folder.")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the comparison as JSON instead of a table.")] = False,
) -> None:
    """Simulate the benchmark's requests under its arrival process; print both side by side."""
    if arrivals not in ARRIVALS:
        raise InputError(f"--arrivals {arrivals!r}: allowed: {', '.join(ARRIVALS)}")
    measured_run = read_result(result)
    check_compared(measured_run, result)  # before anything is simulated or written
    arrival = arrival_spec(measured_run, arrivals)
    overrides = ("workload.format=vllm-result", f"workload.arrival={json.dumps(arrival)}",
                 *(set_ or ()))
    loaded = load_scenario(scenario, overrides, str(result))
    notes = hardware_check.scenario_notes(loaded)  # said after the run: a failure is one line
    res = pipeline.run(loaded, out, plots=False)
    say_hardware(notes)
    rows = comparison(measured_summary(measured_run), res.summary)
    if as_json:
        typer.echo(json.dumps({"arrival": arrival, "rows": rows,
                               "cost_error": res.summary["cost_error"]}, indent=2))
        return
    Console().print(comparison_table(rows, f"{result.name}: {describe(arrival)}"))
    typer.echo(validation.describe(res.summary["cost_error"]))
    if res.out_dir is not None:
        typer.echo(f"results: {res.out_dir}")


def arrival_spec(result: dict, mode: str) -> dict:
    """The workload's `arrival` section that reproduces the benchmark's traffic."""
    rate, burstiness, conc = traffic(result)
    cap = {} if conc is None else {"concurrency": conc}
    if mode == "measured" or math.isinf(rate):
        # at an infinite rate vLLM releases everything at once (or, self-timed, at the
        # dataset's times): the measured release times ARE that process
        return {"process": "replay", **cap}
    if math.isinf(burstiness):
        return {"process": "constant", "rate": rate, **cap}
    if burstiness == 1.0:
        return {"process": "poisson", "rate": rate, **cap}
    # vLLM draws gaps from gamma(shape=burstiness): CV = 1 / sqrt(shape)
    return {"process": "gamma", "rate": rate, "cv": 1.0 / math.sqrt(burstiness), **cap}


def describe(arrival: dict) -> str:
    parts = [f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
             for k, v in arrival.items() if k != "process"]
    return f"arrivals {arrival['process']}" + (f" ({', '.join(parts)})" if parts else "")
