"""`servesim fidelity`: profile and fit, run the scenario fitted and live, report the error."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from calibrate import hardware_check
from sim.cli.live import DEVICES, live_bar, live_sets
from sim.cli.run import SetOpt, say_hardware
from sim.config.load import format_sets, load_scenario
from traces.errors import InputError


def fidelity(
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario YAML (default: the embedded scenarios/default.yaml).")] = None,
    trace: Annotated[Path | None, typer.Option(
        "--trace", help="Replay this trace file: it replaces the workload's file, "
        "keeping its rate_scale, window_s and tags (see README).")] = None,
    fmt: Annotated[str | None, typer.Option(
        "--format", help="Trace format for --trace: auto, azure, mooncake, lengths, native.")
    ] = None,
    set_: SetOpt = None,
    device: Annotated[str, typer.Option(
        help="cpu (torch paths, float32) or cuda (Triton kernels, bf16).")] = "cpu",
    profile: Annotated[Path | None, typer.Option(
        "--profile", help="A fitted model YAML to use as is, or a profile parquet to fit "
        "(default: profile the scenario's shapes on the device).")] = None,
    repeats: Annotated[int, typer.Option(
        min=1, help="Live runs (count); two or more show the noise floor.")] = 2,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Report folder (default: results/<scenario name>-fidelity).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Fit the step-time model on this device, run SCENARIO with it and live, compare.

    Writes OUT/report.md and report.json (per-step error by step class; TTFT, TPOT, ITL,
    E2E side by side with relative errors; the live runs' own spread), step_times.png,
    step_errors.parquet, and the result folders sim/, live-1/, live-2/, ...
    """
    from sim.live.fidelity import fidelity as run_fidelity

    if device not in DEVICES:
        raise InputError(f"--device {device!r}: expected cpu or cuda")
    if device == "cuda":  # before any profiling or folder: the live runner's own check
        import torch

        if not torch.cuda.is_available():
            raise InputError("--device cuda: no CUDA device is visible (torch "
                             f"{torch.__version__}); use --device cpu")
    sets = tuple(set_ or ()) + format_sets(fmt)
    loaded = load_scenario(scenario, live_sets(scenario, True, device) + sets,
                           str(trace) if trace else None)  # the live variant
    notes = hardware_check.machine_notes(str(profile)) if profile is not None and \
        profile.suffix in (".yaml", ".yml") else []  # said after the report
    out = out or Path("results") / f"{loaded.scenario.name}-fidelity"
    console = Console(stderr=True)
    rep = run_fidelity(loaded, out, profile=profile, repeats=repeats,
                       bars=lambda label: live_bar(console, quiet, label,
                                                   "shapes" if label == "profiling" else "tokens"),
                       echo=lambda s: None if quiet else console.print(s))
    if not quiet:
        typer.echo((out / "report.md").read_text())
    errs = rep["step_error"]["live-1"]["all"]
    typer.echo(f"per-step median error {errs['median_ape']:.1f}% (p90 {errs['p90_ape']:.1f}%) "
               f"over {errs['steps']} live steps")
    typer.echo(f"report: {out / 'report.md'}")
    say_hardware(notes)
