"""`servesim calibrate ...`: profile, fit, validate, import-aiconfigurator, fit-steps.

Bad input raises traces.errors.InputError subclasses (one line naming the file or option);
the main CLI prints it and exits with status 2. Torch is imported only by `profile`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from traces.errors import InputError

app = typer.Typer(help="Calibrate step times: time kernels, fit, validate, import databases.")
_out = Console()
_err = Console(stderr=True)


@app.callback()
def main() -> None:
    """Time kernels and GEMMs, fit the step-time model, report its held-out error."""


def _model_spec(name: str):
    from sim.catalog import CatalogError, get_model

    try:
        return get_model(name)
    except CatalogError as e:
        raise InputError(f"--model: {e}") from None


def _check_device(device: str) -> None:
    if device not in ("cuda", "cpu"):
        raise InputError(f"--device {device!r}: expected cuda or cpu")
    try:
        import torch
    except ImportError:
        raise InputError("profile needs torch: pip install 'servesim[kernels]'") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device visible; use --device cpu")


@app.command()
def profile(
    model: Annotated[str, typer.Option("--model", "-m", help="Catalog model name.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Profile parquet (resumed if it "
                                      "exists).")] = Path("profile.parquet"),
    tp: Annotated[int, typer.Option("--tp", min=1, help="Tensor-parallel size.")] = 1,
    device: Annotated[str, typer.Option(help="cuda (Triton kernels, torch GEMMs) or cpu "
                                        "(torch reference ops).")] = "cuda",
    grid: Annotated[str, typer.Option(help="Grid density: default or quick.")] = "default",
    max_num_batched_tokens: Annotated[int, typer.Option(min=1)] = 8192,
    max_num_seqs: Annotated[int, typer.Option(min=1)] = 256,
    max_model_len: Annotated[int | None, typer.Option(min=16)] = None,
    warmup: Annotated[int, typer.Option(min=0, help="Untimed calls per shape.")] = 3,
    repeats: Annotated[int, typer.Option(min=1, help="Timed calls per shape.")] = 10,
    max_rows: Annotated[int | None, typer.Option(min=1, help="Stop after this many new "
                                                 "rows (rerun to resume).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Time the model's GEMMs, prefill/decode attention and empty step; append to OUT."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from calibrate.profile import run_profile
    from calibrate.shapes import PRESETS, derive_shapes

    spec = _model_spec(model)
    if grid not in PRESETS:
        raise InputError(f"--grid {grid!r}: expected one of {', '.join(PRESETS)}")
    _check_device(device)
    g = PRESETS[grid]
    if tp > 1 and not _distributed():
        _err.print("calibrate: all-reduce is timed only under torchrun (world size = --tp); "
                   "the fitted model will use the GPU's roofline interconnect figures")
        g = type(g)(**{**g.__dict__, "allreduce": False})
    # cuda times the serving dtype; the cpu path runs float32 (calibrate/ops.py) and says so
    dtype = "bfloat16" if device == "cuda" else "float32"
    shapes = derive_shapes(spec, tp, max_num_batched_tokens=max_num_batched_tokens,
                           max_num_seqs=max_num_seqs, max_model_len=max_model_len, grid=g,
                           dtype=dtype)
    t0 = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=_err, transient=True, disable=quiet) as bar:
        task = bar.add_task("profiling", total=len(shapes))

        def progress(i: int, n: int, what: str) -> None:
            bar.update(task, total=n, completed=i, description=what)

        run = run_profile(shapes, out, device, warmup=warmup, repeats=repeats,
                          max_rows=max_rows, progress=progress)
    for f in run.failed:
        _err.print(f"calibrate: skipped {f}")
    tail = f"; {run.remaining} left, rerun to resume" if run.remaining else ""
    typer.echo(f"profile: {out} ({run.measured} measured, {run.skipped} already there{tail}; "
               f"{time.perf_counter() - t0:.1f} s)")


def _distributed() -> bool:
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and dist.is_initialized()


def _print_errors(mf, df, title: str) -> None:
    from calibrate.validate import error_table, render, split_of

    held, same = split_of(mf, df)
    label = "held-out rows" if same else "all rows (not the fitted profile: all unseen)"
    _out.print(render(error_table(mf, df, held), f"{title}: {label}"))


@app.command()
def fit(
    profile_path: Annotated[Path, typer.Argument(metavar="PROFILE", help="Profile parquet.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Model YAML to write.")] = Path(
        "model.yaml"),
    seed: Annotated[int, typer.Option(help="Seed of the held-out split.")] = 0,
    heldout: Annotated[float, typer.Option(min=0.0, max=0.9, help="Fraction held out.")] = 0.2,
    gpu: Annotated[str, typer.Option(help="GPU name recorded in the file.")] = "",
    framework: Annotated[str, typer.Option(help="Framework recorded in the file.")] = "",
) -> None:
    """Fit one table per operation, holding out a seeded fraction of rows; write OUT."""
    from calibrate.fit import fit_profile
    from calibrate.model_file import save_model_file
    from calibrate.profile import read_profile

    df = read_profile(profile_path)
    mf = fit_profile(df, profile=str(profile_path), seed=seed, heldout=heldout, gpu=gpu,
                     framework=framework)
    save_model_file(mf, out)
    _print_errors(mf, df, str(out))
    typer.echo(f"model: {out}")


@app.command()
def validate(
    model_path: Annotated[Path, typer.Argument(metavar="MODEL", help="Model YAML.")],
    profile_path: Annotated[Path, typer.Argument(metavar="PROFILE", help="Profile parquet.")],
    all_rows: Annotated[bool, typer.Option("--all-rows", help="Also show every row, not only "
                                           "the held-out ones.")] = False,
) -> None:
    """Print the model's error per operation and shape region on PROFILE."""
    from calibrate.model_file import load_model_file
    from calibrate.profile import read_profile
    from calibrate.validate import error_table, render

    mf = load_model_file(model_path)
    if mf.kind != "ops":
        raise InputError(f"{model_path}: a kind '{mf.kind}' model has no per-operation tables")
    df = read_profile(profile_path)
    _print_errors(mf, df, str(model_path))
    if all_rows:
        _out.print(render(error_table(mf, df), f"{model_path}: all rows"))


@app.command("import-aiconfigurator")
def import_aiconfigurator(
    system: Annotated[str, typer.Option(help="aiconfigurator system, e.g. h200_sxm.")],
    framework: Annotated[str, typer.Option(help="Framework whose kernels to import.")] = "vllm",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Model YAML (default: "
                                             "<gpu>-<framework>.yaml).")] = None,
    profile_out: Annotated[Path | None, typer.Option(help="Also write the converted profile "
                                                     "(default: next to the model).")] = None,
    ship: Annotated[bool, typer.Option(help="Write into calibrate/models/<gpu>/<framework>"
                                       ".yaml (the shipped profiles).")] = False,
    seed: Annotated[int, typer.Option(help="Seed of the held-out split.")] = 0,
) -> None:
    """Convert NVIDIA aiconfigurator-core's measured kernel tables, fit and validate."""
    from calibrate.aiconfigurator import SYSTEMS, import_and_fit
    from calibrate.model_file import MODELS_DIR, save_model_file
    from calibrate.profile import write_profile

    t0 = time.perf_counter()
    mf, df = import_and_fit(system, framework, seed=seed)
    gpu = SYSTEMS.get(system, system)
    if out is None:
        out = MODELS_DIR / gpu / f"{framework}.yaml" if ship else Path(f"{gpu}-{framework}.yaml")
    save_model_file(mf, out)
    if profile_out is None and not ship:  # the shipped package holds no profiles
        profile_out = out.with_suffix(".parquet")
    if profile_out is not None:
        write_profile(df, profile_out)
    _print_errors(mf, df, f"{system} ({framework})")
    typer.echo(f"model: {out}  ({len(df)} rows, {time.perf_counter() - t0:.1f} s)")


@app.command("fit-steps")
def fit_steps_cmd(
    logs: Annotated[list[Path], typer.Argument(
        metavar="LOG...", help="Recorded engine runs (folders) and/or step logs: vLLM step-log "
        "JSONL (.gz ok), vLLM's iteration log, steps.csv.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Model YAML to write.")] = Path(
        "model.yaml"),
    scenario: Annotated[Path | None, typer.Option(
        help="Scenario (trace + engine knobs) that produced a log without contexts: they are "
        "derived by replaying servesim's scheduler.")] = None,
    gpu: Annotated[str, typer.Option(help="GPU the log comes from.")] = "",
    model: Annotated[str, typer.Option(help="Model served.")] = "",
    tp: Annotated[int, typer.Option(min=1, help="Tensor-parallel size served.")] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the held-out split.")] = 0,
) -> None:
    """Fit what the engine spends per step (execution + host, knee, context, prefill pairs)
    and its ingress/egress delays; print the fit's error and time-weighted bias."""
    from calibrate.fit_steps import fit_logs
    from calibrate.model_file import save_model_file

    rep = fit_logs(logs, scenario=scenario, seed=seed, gpu=gpu, model=model, tp=tp)
    save_model_file(rep.model, out)
    for line in describe_steps_fit(rep):
        typer.echo(line)
    typer.echo(f"model: {out}")


def describe_steps_fit(rep) -> list[str]:
    """The fit in words: formula, errors next to the time-weighted bias, delays, ranges."""
    f = rep.model.steps
    e = f.execution
    lines = [f"execution_ms = {e.base_ms:.4g} + {e.request_ms:.4g} * requests + "
             f"{e.prefill_token_ms:.4g} * prefill_tokens + {e.prefill_pair_ms:.4g} * "
             f"prefill_pairs + {e.decode_seq_ms:.4g} * max(0, decode_seqs - {e.decode_knee}) "
             f"+ {e.context_token_ms:.4g} * context_tokens"]
    if f.host is not None:
        lines.append(f"host_ms = {f.host.base_ms:.4g} + {f.host.request_ms:.4g} * requests")
    lines.append(f"prices: the step {f.target}; fitted by {f.weighting}")
    for name, err in (("train", f.train), ("held-out", f.heldout)):
        if err is not None and err.rows:
            lines.append(f"{name} steps: {err.rows}, median APE {err.median_ape:.2f}%, p90 "
                         f"{err.p90_ape:.2f}%, time-weighted bias {err.time_bias_pct:+.2f}%")
    if f.ingress_ms is not None:
        lines.append(f"engine delays: ingress {f.ingress_ms:.3f} ms, egress "
                     f"{f.egress_ms:.3f} ms (engine.ingress_ms / egress_ms default to them)")
    r = f.ranges
    if r is not None:
        lines.append(f"ranges: batch <= {r.requests}, decode batch <= {r.decode_seqs}, "
                     f"prefill tokens <= {r.prefill_tokens}, context <= {r.context_tokens}, "
                     f"prompt <= {r.prompt_tokens}")
    for log, paired, n in rep.replays:
        lines.append(f"{log}: contexts from a replay, {paired} of {n} steps paired")
    lines += [f"note: {n}" for n in rep.model.provenance.notes]
    return lines


@app.command("validate-steps")
def validate_steps_cmd(
    runs: Annotated[list[Path], typer.Argument(metavar="RUN...", help="Recorded engine runs "
                                               "(at least two).")],
    seed: Annotated[int, typer.Option(help="Seed of the fits' held-out split.")] = 0,
) -> None:
    """Leave one run out: fit on the others, replay it, print the client-side errors (%)."""
    from calibrate.validate_steps import leave_one_out

    if len(runs) < 2:
        raise InputError("validate-steps: give at least two recorded runs")
    df = leave_one_out(runs, seed=seed)
    from rich.table import Table

    t = Table(title="held-out run replayed with a fit of the others: error vs the engine (%)")
    for c in df.columns:
        t.add_column(c, justify="left" if c == "run" else "right")
    for row in df.itertuples(index=False):
        t.add_row(row[0], *[f"{x:+.2f}" for x in row[1:]])
    _out.print(t)
