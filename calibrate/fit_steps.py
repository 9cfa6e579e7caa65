"""`servesim calibrate fit-steps LOG...`: step logs and recorded runs in, a steps model out.

Each LOG is a recorded engine run directory or a step log (calibrate/steplog.py). A run's
contexts come from its own log when it has them, else from a replay of its scenario.yaml
(calibrate/step_replay.py); a plain log lacking them is replayed with ``--scenario``. The
ingress and egress delays are fitted from the recorded runs among the LOGs (none: left
unset, so a scenario's engine.ingress_ms / egress_ms default to 0).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from calibrate import fingerprint, steps
from calibrate.engine_delays import fit_delays
from calibrate.steplog import StepsError, read_log
from sim.cost.profile.model_file import Hardware, ModelFile, hardware_of
from sim.report.recorded import is_recorded_run, read_run
from traces.errors import InputError


@dataclass
class FitReport:
    model: ModelFile
    replays: list[tuple[str, int, int]] = field(default_factory=list)  # (log, paired, steps)


def _needs_contexts(df: pd.DataFrame) -> bool:
    return df["context_tokens"].isna().all()


def _replayed(df: pd.DataFrame, scenario: Path, ingress_s: float, report: FitReport):
    from calibrate.step_replay import derive_contexts
    from sim.config.load import load_scenario

    rep = derive_contexts(df, load_scenario(scenario), ingress_s)
    report.replays.append((str(df["log"].iloc[0]), rep.paired, rep.steps))
    return rep.frame


def load_logs(paths: list[Path], scenario: Path | None = None):
    """(one frame of every step, recorded runs, replay report rows)."""
    runs, frames, report = [], [], FitReport(model=None)  # type: ignore[arg-type]
    if scenario is not None and len(paths) > 1:
        raise InputError("--scenario replays one log; give one LOG with it")
    for p in paths:
        df = read_log(p)
        run = read_run(p) if Path(p).is_dir() and is_recorded_run(p) else None
        if run is not None:
            runs.append(run)
        if _needs_contexts(df):
            scen = scenario or (Path(p) / "scenario.yaml" if run is not None else None)
            if scen is not None:
                ingress = fit_delays([run])[0] if run is not None else 0.0
                df = _replayed(df, scen, ingress, report)
        frames.append(df)
    return pd.concat(frames, ignore_index=True), runs, report


def fit_logs(paths: list[Path], *, scenario: Path | None = None, seed: int = 0,
             heldout: float = 0.2, gpu: str = "", model: str = "", tp: int = 1,
             dtype: str | None = None) -> FitReport:
    if not paths:
        raise StepsError("fit-steps: give at least one step log or recorded run")
    df, runs, report = load_logs(paths, scenario)
    delays = fit_delays(runs) if runs else None
    _check_varied(df)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            fit, notes = steps.fit(df, seed=seed, heldout=heldout, delays=delays)
    except (ValueError, np.linalg.LinAlgError) as e:
        raise StepsError(f"fit-steps: {e}") from None
    bad = _not_finite(fit.model_dump(mode="python"))
    if bad:
        raise StepsError(f"fit-steps: cannot fit the steps ({bad} came out NaN or infinite); "
                         "the logs need steps of varied batch and prefill sizes")
    hw, dtype = fitted_hardware(runs, dtype)
    if hw is None and runs:
        notes.append(f"{fingerprint.NOT_RECORDED}: the runs' run.json have no fingerprint "
                     "(recorded before issue 22)")
    report.model = steps.model_file(fit, notes, rows=len(df), seed=seed, heldout=heldout,
                                    gpu=gpu, model=model, tp=tp, dtype=dtype, hardware=hw)
    return report


def run_dtype(run) -> str | None:
    """The dtype a recorded run was timed in (its engine knobs, else its fingerprint)."""
    hw = run.meta.get("hardware") or {}
    return (run.meta.get("engine") or {}).get("dtype") or hw.get("dtype")


def fitted_hardware(runs: list, dtype: str | None) -> tuple[Hardware | None, str]:
    """(hardware, dtype) a fit of recorded ``runs`` (and of plain step logs) was fitted on:
    the runs' own fingerprint (run.json ``hardware``); plain logs alone record none, so
    this machine's (they are fitted where they were logged, as make fit-bench does). Runs
    of different hardware or dtypes make a model of neither: refused."""
    dtypes = sorted({d for d in map(run_dtype, runs) if d})
    if len(dtypes) > 1:
        raise StepsError(f"fit-steps: the runs were recorded in different dtypes "
                         f"({', '.join(dtypes)}); fit each dtype's runs on their own")
    dtype = dtype or (dtypes[0] if dtypes else "bfloat16")
    prints = [(r.path, r.meta["hardware"]) for r in runs if isinstance(
        r.meta.get("hardware"), dict)]
    for path, hw in prints[1:]:
        diff = fingerprint.differences(prints[0][1], hw)
        if diff:
            raise StepsError(f"fit-steps: {prints[0][0]} and {path} were recorded on different "
                             f"hardware ({'; '.join(diff)}); fit each machine's runs on their "
                             "own")
    if prints:
        return hardware_of(prints[0][1], "recorded runs (run.json)"), dtype
    if runs:
        return None, dtype
    return hardware_of(fingerprint.capture(dtype), "this machine (the step logs record "
                       "none)"), dtype


def _check_varied(df: pd.DataFrame) -> None:
    """A fit needs steps that differ: identical steps leave every term undetermined."""
    cols = [c for c in ("requests", "prefill_tokens", "decode_seqs") if c in df]
    if len(df[cols].drop_duplicates()) < 2:
        raise StepsError(f"fit-steps: all {len(df)} steps have the same shape (requests, "
                         "prefill tokens, decodes): nothing to fit a cost per token or per "
                         "request from; log a run with varied load")


def _not_finite(doc, where: str = "") -> str | None:
    """The dotted name of the first NaN or infinite number in ``doc``."""
    if isinstance(doc, float):
        return None if math.isfinite(doc) else where
    items = doc.items() if isinstance(doc, dict) else (
        enumerate(doc) if isinstance(doc, list | tuple) else ())
    for k, v in items:
        bad = _not_finite(v, f"{where}.{k}" if where else str(k))
        if bad:
            return bad
    return None


def describe(rep: FitReport) -> list[str]:
    """The fit in words: formula, errors next to the time-weighted bias, delays, ranges."""
    f = rep.model.steps
    e = f.execution
    lines = [f"execution_ms = {e.base_ms:.4g} + {e.request_ms:.4g} * requests + "
             f"{e.prefill_token_ms:.4g} * prefill_tokens + {e.prefill_pair_ms:.4g} * "
             f"prefill_pairs + {e.decode_seq_ms:.4g} * max(0, decode_seqs - {e.decode_knee}) "
             f"+ {e.context_token_ms:.4g} * context_tokens"
             + (f" + first_of_count * ({e.new_shape_ms:.4g} + {e.new_shape_token_ms:.4g} * "
                "prefill_tokens)" if e.new_shape_ms or e.new_shape_token_ms else "")]
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
