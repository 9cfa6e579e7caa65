"""`servesim calibrate ...`: profile, fit, validate, import-aiconfigurator, fit-steps,
fit-overhead.

Bad input raises traces.errors.InputError subclasses (one line naming the file or option);
the main CLI prints it and exits with status 2. Torch is imported only by `profile`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from traces.errors import InputError

app = typer.Typer(help="Calibrate step times: time kernels, fit, validate, import databases.")
_out = Console(width=None if sys.stdout.isatty() else 120)  # tables unclipped in logs
_err = Console(stderr=True)


@app.callback()
def main() -> None:
    """Time kernels and GEMMs, fit the step-time model, report its held-out error."""


def _out_file(out: Path | None, default: str = "model.yaml", flag: str = "--out") -> Path:
    """The model file, checked before any work (sim.report.outfile: a new file or a model
    file servesim wrote); a default never replaces an existing file."""
    from sim.cost.profile.model_file import HEADER
    from sim.report.outfile import check_file, free_default

    out = out if out is not None else free_default(default)
    check_file(out, flag, signature=HEADER.encode())
    return out


def _check_gpu(gpu: str, flag: str = "--gpu") -> str:
    """An empty name (not recorded), cpu, or a catalog GPU (`servesim catalog` lists them)."""
    from sim.catalog import CatalogError, get_gpu

    if gpu and gpu != "cpu":
        try:
            get_gpu(gpu)
        except CatalogError as e:
            raise InputError(f"{flag} {gpu!r}: {e.args[0]}") from None
    return gpu


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
    passes: Annotated[int | None, typer.Option(min=1, help="Sweeps over the shapes; a row "
                                               "keeps its quietest (default: cpu 3, cuda 1)."
                                               )] = None,
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
                          passes=passes or (3 if device == "cpu" else 1),
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
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Model YAML to write "
                                             "(default: model.yaml, or model-2.yaml... when "
                                             "that exists).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the held-out split.")] = 0,
    heldout: Annotated[float, typer.Option(min=0.0, max=0.9, help="Fraction held out.")] = 0.2,
    gpu: Annotated[str, typer.Option(help="GPU name recorded in the file.")] = "",
    framework: Annotated[str, typer.Option(help="Framework recorded in the file.")] = "",
) -> None:
    """Fit one table per operation, holding out a seeded fraction of rows; write OUT."""
    from calibrate.fit import fit_profile, this_machine
    from calibrate.profile import read_profile
    from sim.cost.profile.model_file import save_model_file

    out = _out_file(out)
    _check_gpu(gpu)
    df = read_profile(profile_path)
    mf = fit_profile(df, profile=str(profile_path), seed=seed, heldout=heldout, gpu=gpu,
                     framework=framework, hardware=this_machine(df))
    save_model_file(mf, out)
    _print_errors(mf, df, str(out))
    typer.echo(f"model: {out}")


@app.command()
def validate(
    model_path: Annotated[Path, typer.Argument(metavar="MODEL", help="Model YAML.")],
    profile_path: Annotated[Path, typer.Argument(metavar="PROFILE", help="Profile parquet.")],
    all_rows: Annotated[bool, typer.Option("--all-rows", help="Also show every row, not only "
                                           "the held-out ones.")] = False,
    slices: Annotated[bool, typer.Option("--slices", help="Also refit each table with whole "
                                         "shape slices held out, and beyond the largest "
                                         "batch, context and prompt (calibrate/slices.py; "
                                         "seconds to minutes).")] = False,
    noise_floor: Annotated[bool, typer.Option("--noise-floor", help="Also compare the "
                                              "profile with aiconfigurator's SGLang and "
                                              "TRT-LLM tables of the same GPU (needs the "
                                              "aiconfigurator extra).")] = False,
) -> None:
    """Print the model's error per operation and shape region on PROFILE."""
    from calibrate.profile import read_profile
    from calibrate.validate import error_table, render
    from sim.cost.profile.model_file import load_model_file

    mf = load_model_file(model_path)
    if mf.kind != "ops":
        raise InputError(f"{model_path}: a kind '{mf.kind}' model has no per-operation tables")
    df = read_profile(profile_path)
    _say_other_device(mf, df, model_path, profile_path)
    _print_errors(mf, df, str(model_path))
    if all_rows:
        _out.print(render(error_table(mf, df), f"{model_path}: all rows"))
    if slices:
        from calibrate import slices as sl

        _out.print(sl.render(sl.slice_table(mf, df), f"{model_path}: leave-slice-out "
                             "(tables refitted without the rows held out)"))
    if noise_floor:
        _print_noise_floor(mf, df, model_path)


def _say_other_device(mf, df, model_path: Path, profile_path: Path) -> None:
    """One line when the profile was timed on none of the devices the model was fitted on:
    its errors then compare two machines, not the fit with its own hardware."""
    fitted = set(mf.provenance.device.split(", "))
    timed = sorted(set(df["device"].astype(str)))
    if fitted.isdisjoint(timed):
        typer.echo(f"calibrate validate: {profile_path.name} was timed on {', '.join(timed)}, "
                   f"{model_path.name} fitted on {mf.provenance.device}: the errors below "
                   "compare two devices, not the fit with its own hardware", err=True)


def _print_noise_floor(mf, df, model_path: Path) -> None:
    from calibrate import noise

    where = noise.system_of(mf)
    if where is None:
        raise InputError(f"{model_path}: --noise-floor needs a model imported from "
                         "aiconfigurator (its provenance names the system)")
    table = noise.noise_table(df, where[0])
    _out.print(noise.render(table, f"noise floor: {where[0]} {where[1]} against other "
                            "frameworks' measurements of the same shapes"))


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
    from calibrate.profile import write_profile
    from sim.cost.profile.model_file import MODELS_DIR, save_model_file
    from sim.report.outfile import check_file, free_default, write_file

    t0 = time.perf_counter()
    gpu = SYSTEMS.get(system, system)
    if out is None:
        out = MODELS_DIR / gpu / f"{framework}.yaml" if ship else _out_file(
            None, f"{gpu}-{framework}.yaml")
    elif not ship:
        out = _out_file(out)
    if profile_out is None and not ship:  # the shipped package holds no profiles
        profile_out = free_default(out.with_suffix(".parquet"))
    if profile_out is not None:
        check_file(profile_out, "--profile-out")
    mf, df = import_and_fit(system, framework, seed=seed)
    save_model_file(mf, out)
    if profile_out is not None:
        with write_file(profile_out, "--profile-out") as tmp:
            write_profile(df, tmp)
    _print_errors(mf, df, f"{system} ({framework})")
    typer.echo(f"model: {out}  ({len(df)} rows, {time.perf_counter() - t0:.1f} s)")


@app.command("fit-steps")
def fit_steps_cmd(
    logs: Annotated[list[Path], typer.Argument(
        metavar="LOG...", help="Recorded engine runs (folders) and/or step logs: vLLM step-log "
        "JSONL (.gz ok), vLLM's iteration log, steps.csv.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Model YAML to write "
                                             "(default: model.yaml, or model-2.yaml... when "
                                             "that exists).")] = None,
    scenario: Annotated[Path | None, typer.Option(
        help="Scenario (trace + engine knobs) that produced a log without contexts: they are "
        "derived by replaying servesim's scheduler.")] = None,
    gpu: Annotated[str, typer.Option(help="GPU the log comes from.")] = "",
    model: Annotated[str, typer.Option(help="Model served.")] = "",
    tp: Annotated[int, typer.Option(min=1, help="Tensor-parallel size served.")] = 1,
    dtype: Annotated[str | None, typer.Option(
        help="Dtype the logs were timed in (default: the recorded runs' own, else "
        "bfloat16).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the held-out split.")] = 0,
) -> None:
    """Fit what the engine spends per step (execution + host, knee, context, prefill pairs)
    and its ingress/egress delays; print the fit's error and time-weighted bias."""
    from calibrate.fit_steps import describe, fit_logs
    from sim.cost.profile.model_file import save_model_file

    out = _out_file(out)
    _check_gpu(gpu)
    rep = fit_logs(logs, scenario=scenario, seed=seed, gpu=gpu, model=model, tp=tp,
                   dtype=dtype)
    save_model_file(rep.model, out)
    for line in describe(rep):
        typer.echo(line)
    typer.echo(f"model: {out}")


@app.command("validate-steps")
def validate_steps_cmd(
    runs: Annotated[list[Path], typer.Argument(metavar="RUN...", help="Recorded engine runs "
                                               "(at least two).")],
    seed: Annotated[int, typer.Option(help="Seed of the fits' held-out split.")] = 0,
) -> None:
    """Leave one run out: fit on the others, replay it, print the client-side errors (%).
    Repeats of a case (the same requests, record.py --repeats) are held out together, and
    each error is printed beside the repeats' own spread and judged against it, then how
    far the recordings' identical decode steps drift apart (calibrate/drift.py)."""
    from calibrate.validate_steps import (
        cases,
        drift_line,
        leave_one_case_out,
        leave_one_out,
        render,
        render_cases,
    )
    from sim.report.recorded import is_recorded_run
    from traces.errors import clip_path

    if len(runs) < 2:
        raise InputError("validate-steps: give at least two recorded runs")
    for r in runs:
        if not is_recorded_run(r):
            why = ("its run.json is not the JSON benchmarks/engine writes"
                   if (Path(r) / "run.json").is_file() else
                   "not a recorded engine run (a folder with run.json, as benchmarks/engine "
                   "writes)")
            raise InputError(f"{clip_path(r)}: {why}")
    if len({r.resolve() for r in runs}) < len(runs):
        raise InputError("validate-steps: a run is given twice; give distinct runs")
    groups = cases(runs)
    if len(groups) < 2:
        raise InputError("validate-steps: every run is a repeat of one case; give runs of at "
                         "least two cases (the fit is of the other cases)")
    if all(len(g) == 1 for g in groups):
        _out.print(render(leave_one_out(runs, seed=seed)))
        typer.echo("no repeats: the engine's own spread is not known (record each case "
                   "several times: benchmarks/engine/record.py --repeats 3)")
        return
    _out.print(render_cases(leave_one_case_out(runs, seed=seed)))
    typer.echo(drift_line(runs))


@app.command("fit-overhead")
def fit_overhead_cmd(
    profiles: Annotated[list[str] | None, typer.Option(
        "--profile", help="GPU=MODEL.yaml to fit with (repeatable; default: the shipped "
        "<gpu>/vllm profiles).")] = None,
    ship: Annotated[bool, typer.Option(help="Write the fitted host cost into every shipped "
                                       "<gpu>/vllm profile.")] = False,
) -> None:
    """Fit the per-step host cost (base + per layer + per extra TP rank) to published vLLM
    measurements (calibrate/published.py); print every point, fitted or held out."""
    from calibrate.overhead import fit_overhead, predicted_ms
    from sim.cost.profile.model_file import load_model_file, save_model_file, shipped_profiles

    if profiles:
        chosen = dict(_gpu_path(p) for p in profiles)
    else:
        chosen = {name.split("/")[0]: str(path) for name, path in shipped_profiles().items()
                  if name.endswith("/vllm")}
    h = fit_overhead(chosen)
    for line in _overhead_lines(h, predicted_ms):
        typer.echo(line)
    typer.echo(f"host_ms = {h.base_ms:.4g} + {h.per_layer_ms:.4g} * layers + "
               f"{h.per_tp_ms:.4g} * (tp - 1)")
    if ship:
        for name, path in shipped_profiles().items():
            if name.endswith("/vllm"):
                mf = load_model_file(path)
                old = mf.host_overhead  # the eager launch figures are fitted apart: kept
                mf.host_overhead = h if old is None else h.model_copy(update={
                    f: getattr(old, f) for f in type(old).model_fields
                    if f.startswith("eager_")})
                save_model_file(mf, path)
                typer.echo(f"wrote {path}")


def _gpu_path(spec: str) -> tuple[str, str]:
    """GPU=MODEL.yaml: an ops model file (the kernel tables the host cost is fitted beside)
    timed on that GPU."""
    from sim.cost.profile.model_file import load_model_file

    gpu, sep, path = spec.partition("=")
    if not sep or not Path(path).is_file():
        raise InputError(f"--profile {spec!r}: expected GPU=MODEL.yaml with an existing file")
    gpu = _check_gpu(gpu, "--profile")
    mf = load_model_file(path)  # a malformed file is an InputError naming it
    if mf.kind != "ops":
        raise InputError(f"--profile {spec!r}: a {mf.kind} model (fit-steps); the host cost "
                         "is fitted beside kernel tables: give an ops model (calibrate fit)")
    if mf.gpu != gpu:
        raise InputError(f"--profile {spec!r}: the model was timed on {mf.gpu}, not {gpu}")
    return gpu, path


def _overhead_lines(h, predicted_ms) -> list[str]:
    """One line per published point: measured, kernels alone, servesim, error."""
    head = (f"{'point':44s} {'use':8s} {'measured':>9s} {'kernels':>9s} {'servesim':>9s} "
            f"{'error':>7s}")
    out = ["host overhead: published vLLM measurements (ms; batch latency or TPOT)", head]
    for pt in h.points:
        pred = predicted_ms(h, pt)
        use = "fit" if pt.used else "async" if pt.async_scheduling else "held out"
        out.append(f"{pt.name:44s} {use:8s} "
                   f"{pt.measured_ms:9.2f} {pt.kernels_ms:9.2f} {pred:9.2f} "
                   f"{100 * (pred / pt.measured_ms - 1):+6.1f}%")
    return out
