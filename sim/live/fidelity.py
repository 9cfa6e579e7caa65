"""``servesim fidelity``: how far the fitted simulator is from live execution, measured.

    profile the model's ops on the device -> fit          (or --profile: a profile / model)
    run the scenario with the fitted model   -> OUT/sim/
    run it live, ``repeats`` times           -> OUT/live-1/, OUT/live-2/, ...
        each committed live plan is also priced by the fitted model (same plan, so the
        per-step error is the cost model's error, not a schedule difference)
    report                                   -> OUT/report.{json,md}, OUT/step_times.png

End-to-end metrics compare the fitted run with the live runs as wholes (their schedules
differ wherever their step times do: that difference is the simulator's error too). The
live runs against each other give the noise floor of both comparisons.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd

from sim import pipeline
from sim.config.load import LoadedScenario
from sim.config.scenario import CostChoice
from sim.report.write import ResultWriter
from traces.errors import InputError

# the profile is timed in PROFILE_PASSES passes over every shape, each row's median pass
# kept: a slow minute of a shared machine then moves one pass of a row, not a block of rows
PROFILE_PASSES, PROFILE_WARMUP, PROFILE_REPEATS = 3, 1, 3


def with_cost(loaded: LoadedScenario, name: str, **params) -> LoadedScenario:
    """The scenario with its cost model replaced."""
    sc = loaded.scenario.model_copy(update={"cost": CostChoice(name=name, **params)})
    return dataclasses.replace(loaded, scenario=sc)


def signature(ids: np.ndarray, tokens: np.ndarray, ctx: np.ndarray) -> int:
    """A 63-bit identity of one step's work (requests, tokens, contexts)."""
    h = hashlib.blake2b(digest_size=8)
    for a in (ids, tokens, ctx):
        h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
    return int.from_bytes(h.digest(), "little") >> 1


class StepPricer:
    """An on_plan hook: the cost model's price of every committed step, and its identity."""

    def __init__(self, cost):
        self.cost = cost
        self.predicted: list[float] = []
        self.signatures: list[int] = []

    def __call__(self, plan, starts, durations, outcome) -> None:
        self.predicted.extend(self.cost.step_times(plan).tolist())
        for j in range(plan.num_steps):
            self.signatures.append(signature(plan.req_ids, plan.num_tokens,
                                             plan.context_lens + j))


# ---- the fitted model --------------------------------------------------------------------
def profile_grid(r, device: str):
    """Shapes to time, sized to the scenario: every token count, batch and context its
    steps can reach (the CPU grid is denser at small sizes: chunks of 2..15 tokens)."""
    from calibrate.shapes import GridSpec

    lim = r.limits
    cap = r.kv_capacity_tokens
    if device == "cuda":
        return GridSpec(decode_max_kv_tokens=min(GridSpec().decode_max_kv_tokens, cap))
    p2 = lambda lo, hi: tuple(2 ** i for i in range(lo, 24) if 2 ** i <= hi)  # noqa: E731
    ctx = tuple(c for c in (16, 64, 256, 1024, 4096, 16384) if c < lim.max_model_len)
    return GridSpec(gemm_per_octave=3, prefill_q=p2(1, lim.max_num_batched_tokens),
                    prefill_prefix=(0, 64, 256, 1024, 4096), prefill_batches=(2, 4, 8),
                    decode_batches=p2(0, lim.max_num_seqs),
                    decode_ctx=(*ctx, lim.max_model_len), decode_max_kv_tokens=cap)


def fitted_model(r, device: str, out: Path, profile: Path | None,
                 progress: Callable | None = None) -> tuple[Path, dict | None]:
    """A fitted model file and how its per-step overhead was measured: ``profile`` itself
    (a model YAML, used as it is), or a fit of ``profile`` (a profile parquet) or of a new
    profile of the scenario's shapes on ``device``, whose overhead is then measured on the
    live executor (sim/live/overhead.py)."""
    from calibrate.fit import fit_profile, this_machine
    from calibrate.profile import read_profile
    from calibrate.shapes import derive_shapes
    from sim.cost.profile.model_file import OverheadByRequests, load_model_file, save_model_file
    from sim.live.overhead import measure_overhead

    if profile is not None and profile.suffix in (".yaml", ".yml"):
        load_model_file(profile)  # one-line error if it is not a model file
        return profile, None
    if profile is None:
        lim = r.limits
        dtype = "bfloat16" if device == "cuda" else "float32"
        shapes = derive_shapes(r.model, 1, max_num_batched_tokens=lim.max_num_batched_tokens,
                               max_num_seqs=lim.max_num_seqs, max_model_len=lim.max_model_len,
                               grid=profile_grid(r, device), dtype=dtype)
        profile = out / "profile.parquet"
        profile_in_passes(shapes, profile, device, progress)
    df = read_profile(profile)
    mf = fit_profile(df, profile=str(profile), gpu=device, framework="servesim-live",
                     model=r.model.name, hardware=this_machine(df))
    path = save_model_file(mf, out / "model.yaml")
    over = measure_overhead(r, r.scenario.cost.params, path)
    by_req = OverheadByRequests(**over["by_requests"])
    mf.step_overhead_by_requests = by_req
    mf.step_overhead_ms = round(float(by_req.ms[0]), 6)  # one request; the table rules
    mf.step_overhead_per_request_ms = 0.0
    mf.step_overhead_per_token_ms = round(over["per_token_ms"], 6)
    mf.step_overhead_source = (
        "live executor: (measured - priced without overhead) over synthetic steps (inputs, "
        "embedding, norms, RoPE, KV write, activation, sampling): by request count from "
        "decode batches, plus per token from prefill chunks")
    return save_model_file(mf, path), over


def profile_in_passes(shapes, path: Path, device: str, progress: Callable | None = None,
                      passes: int = PROFILE_PASSES) -> None:
    """Profile ``shapes`` into ``path`` in ``passes`` passes (each all shapes, in order);
    per shape the row of the pass with the median time, its repeats the passes' sum.
    Passes spread each row's timing over the whole profiling time, as a live run's steps
    spread over theirs: on a shared CPU a row's time moves by 15-30 % within minutes (the
    LM head at one and two rows, NOTES.md), and a single pass lets a slow minute bias
    every row timed in it (a run of neighbouring shapes, e.g. the LM head at small
    batches)."""
    import tempfile

    from calibrate.profile import read_profile, run_profile, write_profile

    shapes = list(shapes)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".passes-") as tmp:
        frames = []
        for i in range(passes):
            bar = (lambda j, n, what, i=i: progress(i * n + j, passes * n, what)) \
                if progress else None  # noqa: E731
            part = Path(tmp) / f"pass-{i}.parquet"
            run_profile(shapes, part, device, warmup=PROFILE_WARMUP, repeats=PROFILE_REPEATS,
                        progress=bar)
            frames.append(read_profile(part))
        df = pd.concat(frames, ignore_index=True)
        rank = df.groupby("key")["median_ms"].rank(method="first")
        count = df.groupby("key")["median_ms"].transform("size")
        mid = df[rank == (count + 1) // 2].copy()
        mid["repeats"] = mid["key"].map(df.groupby("key")["repeats"].sum())
        write_profile(mid.sort_index(), path)


# ---- the runs ----------------------------------------------------------------------------
def run_fitted(loaded: LoadedScenario, model: Path, out: Path):
    return pipeline.run(with_cost(loaded, "fitted", profile=str(model)), out, plots=False)


@dataclasses.dataclass(frozen=True)
class LiveRun:
    output: pipeline.RunOutput
    steps: pd.DataFrame  # live_steps.parquet + predicted_s (the fitted model) + signature
    loadavg: tuple[float, float]  # 1-minute load average before and after the run


def run_live(live: LoadedScenario, model: Path, out: Path, bar=None) -> LiveRun:
    """One live run, every committed step also priced by the fitted model."""
    from sim.live.cost import LiveCost
    from sim.runner import build_cost

    prepared = pipeline.prepare(live)
    r = prepared[0]
    pricer = StepPricer(build_cost(pipeline.resolve_loaded(
        with_cost(live, "fitted", profile=str(model)))))
    executor = LiveCost(r.model, r.gpu, r.tp, r.scenario.cost.params, resolved=r,
                        progress=bar)
    load0 = os.getloadavg()[0]
    res = pipeline.run(live, out, plots=False, prepared=prepared, executor=executor,
                       on_plan=pricer)
    steps = pd.read_parquet(res.out_dir / "live_steps.parquet")
    steps["predicted_s"] = pricer.predicted
    steps["signature"] = pricer.signatures
    return LiveRun(res, steps, (load0, os.getloadavg()[0]))


def fidelity(live: LoadedScenario, out: Path, *, profile: Path | None = None,
             repeats: int = 2, bars=None, echo: Callable[[str], None] = print) -> dict:
    """Profile/fit, run fitted and live, write the report into ``out``; its numbers.
    ``live``: the scenario with ``cost: {name: live, ...}`` (its device is profiled).
    ``out`` follows run's policy (a new folder or an earlier servesim result, replaced whole
    and atomically; nothing is left of a failed attempt)."""
    if repeats < 1:
        raise InputError(f"--repeats {repeats}: at least one live run is needed")
    if profile is not None and not profile.exists():
        raise InputError(f"--profile {profile}: file not found")
    r = pipeline.prepare(live)[0]  # fail fast on a bad scenario, before profiling
    writer = ResultWriter(out)  # --out checked as run's; filled while hidden, then swapped in
    try:
        rep = _fill(writer.tmp, live, r, profile, repeats, bars, echo)
        _name_final(writer.tmp, writer.out)
    except BaseException:
        writer.abort()
        raise
    writer.commit()
    return rep


def _name_final(staged: Path, out: Path) -> None:
    """The report, model and configs name files by the folder's final path, not the hidden
    staging folder they were written in."""
    old, new = str(staged), str(out)
    for p in sorted(staged.rglob("*")):
        if p.suffix in (".json", ".md", ".yaml") and p.is_file() and not p.is_symlink():
            text = p.read_text(encoding="utf-8")
            if old in text:
                p.write_text(text.replace(old, new), encoding="utf-8")


def _fill(out: Path, live: LoadedScenario, r, profile: Path | None, repeats: int, bars,
          echo: Callable[[str], None]) -> dict:
    from sim.live.report import write_report

    device = r.scenario.cost.params.device
    t0 = time.perf_counter()
    with bars("profiling") if bars else nullcontext() as bar:
        shapes_bar = (lambda i, n, what: bar(i, i, n)) if bar else None  # noqa: E731
        model, overhead = fitted_model(r, device, out, profile, progress=shapes_bar)
    echo(f"fitted model: {model} ({time.perf_counter() - t0:.0f} s)")
    sim = run_fitted(live, model, out / "sim")
    echo(f"fitted run: {sim.out_dir} ({sim.result.wall_s:.1f} s)")
    lives = []
    for i in range(1, repeats + 1):
        with bars(f"live {i}/{repeats}") if bars else nullcontext() as bar:
            lives.append(run_live(live, model, out / f"live-{i}", bar))
        echo(f"live run {i}: {lives[-1].output.out_dir} "
             f"({lives[-1].output.summary['live']['run_wall_s']:.0f} s)")
    return write_report(out, r, model, sim, lives, device, overhead)

