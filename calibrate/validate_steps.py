"""Leave-one-run-out validation of fit-steps against recorded engine runs.

For each recorded run: fit the step model on every other run, replay the held-out run's
trace through servesim (its scenario.yaml: the engine knobs it was recorded with, the fit
as the cost model, the fit's ingress/egress) and compare the client-side metrics with the
engine's: TTFT mean and p90, E2EL mean, ITL p50 and p90 (`vllm bench serve` definitions).
Beside them, the share of steps the scheduler reproduces exactly when given the engine's
own arrival times and step durations (what is left is step-time error, not scheduling).

Runs that are repeats of one case (record.py --repeats: the same requests) are held out
together (a fit on one repeat would have seen the held-out trace): the fit of the other
cases replays each repeat, and the error of the replays' mean to the repeats' mean sits
beside the repeats' own spread, judged against it (sim/report/spread.py).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from calibrate.fit_steps import fit_logs
from calibrate.step_replay import same_steps
from calibrate.steplog import read_log
from sim.config.load import load_scenario
from sim.cost.profile.model_file import save_model_file
from sim.pipeline import run as run_scenario
from sim.report.compare import rel_err_pct
from sim.report.result_view import ResultView, load_result, metrics
from sim.report.spread import case_key, spread_table
from sim.report.tables import requests_table, steps_table

CHECKS = ("TTFT mean ms", "TTFT p90 ms", "E2EL mean ms", "ITL median ms", "ITL p90 ms")


def replay(run_dir: Path, model_path: Path) -> ResultView:
    """The recorded run's trace simulated with the step model at ``model_path``."""
    loaded = load_scenario(run_dir / "scenario.yaml",
                           (f"cost.profile={Path(model_path).resolve()}",))
    out = run_scenario(loaded, None, plots=False)
    res = out.result
    return ResultView(Path(f"{run_dir.name}-replay"), "simulated", requests_table(res),
                      steps_table(res), out.summary)


def check_row(engine: ResultView, sim: ResultView) -> dict:
    me, ms = metrics(engine), metrics(sim)
    row = {"run": engine.name}
    for k in CHECKS:
        row[k.replace(" ms", "")] = float(rel_err_pct(me[k], ms[k]))
    row["steps"] = float(rel_err_pct(me["steps"], ms["steps"]))
    return row


def rotation(run_dirs: list[Path], held: Path, *, seed: int = 0) -> dict:
    """Fit on every run but ``held``, replay ``held``: its errors (%) per metric, and the
    share of its steps the scheduler makes exactly as the engine did (step_replay.same_steps)."""
    train = [p for p in run_dirs if Path(p).resolve() != Path(held).resolve()]
    rep = fit_logs(train, seed=seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = save_model_file(rep.model, Path(tmp) / "fit.yaml")
        sim = replay(Path(held), path)
        scenario = load_scenario(Path(held) / "scenario.yaml", (f"cost.profile={path}",))
        same, total = same_steps(Path(held), read_log(held), scenario)
    return check_row(load_result(held), sim) | {"same steps %": 100.0 * same / max(total, 1)}


def leave_one_out(run_dirs: list[Path], *, seed: int = 0) -> pd.DataFrame:
    return pd.DataFrame([rotation(run_dirs, held, seed=seed) for held in run_dirs])


def cases(run_dirs: list[Path]) -> list[list[Path]]:
    """The runs grouped by case (the same requests), in first-seen order."""
    groups: dict[frozenset, list[Path]] = {}
    for p in run_dirs:
        groups.setdefault(case_key(load_result(p)), []).append(Path(p))
    return list(groups.values())


def case_rotation(run_dirs: list[Path], held: list[Path], *, seed: int = 0) -> pd.DataFrame:
    """Fit on every run outside the case ``held`` (its repeats), replay each repeat: per
    metric the replays' mean error to the repeats' mean, the repeats' spread, judgement."""
    out = {Path(p).resolve() for p in held}
    rep = fit_logs([p for p in run_dirs if Path(p).resolve() not in out], seed=seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = save_model_file(rep.model, Path(tmp) / "fit.yaml")
        sims = [metrics(replay(Path(p), path)) for p in held]
    engines = [metrics(load_result(p)) for p in held]
    keys = (*CHECKS, "steps")
    table = spread_table(engines, {k: float(np.mean([m[k] for m in sims])) for k in keys}, keys)
    return table.assign(case=case_name(Path(held[0])), repeats=len(held),
                        span_h=recorded_span_h(held))


def recorded_span_h(runs: list[Path]) -> float:
    """Hours from the first repeat's start to the last's (run.json ``started_unix``; NaN when
    a run does not say): repeats from one half hour show less of a machine's drift than
    repeats from several sessions (NOTES.md, issue 22)."""
    try:
        t = [float(json.loads((Path(p) / "run.json").read_text())["started_unix"])
             for p in runs]
    except (OSError, ValueError, KeyError, TypeError):
        return float("nan")
    return (max(t) - min(t)) / 3600.0


def case_name(run_dir: Path) -> str:
    """The case a recorded run is of (run.json's case name), else the folder's name."""
    try:
        return json.loads((run_dir / "run.json").read_text())["case"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        return run_dir.name


def leave_one_case_out(run_dirs: list[Path], *, seed: int = 0) -> pd.DataFrame:
    """``case_rotation`` of every case: one row per case and metric."""
    return pd.concat([case_rotation(run_dirs, g, seed=seed) for g in cases(run_dirs)],
                     ignore_index=True)


def drift_line(run_dirs: list[Path]) -> str:
    """The recordings' same-shape decode-step drift (calibrate/drift.py), one line."""
    from calibrate.drift import speed, summary_line

    logs = {r.name: read_log(r) for r in run_dirs}
    return summary_line(speed(logs), {r.name: case_name(r) for r in run_dirs})


def render_cases(df: pd.DataFrame):
    """The leave-one-case-out table (rich): error beside the engine's own spread."""
    from rich.table import Table

    t = Table(title="held-out case (all its repeats) replayed with a fit of the other cases: "
              "error of the replays' mean vs the repeats' mean, beside the repeats' spread")
    right = ("repeats", "over h", "error %", "engine spread %")
    for c in ("case", "repeats", "over h", "metric", "error %", "engine spread %", "judgement"):
        t.add_column(c, justify="right" if c in right else "left")
    for r in df.itertuples():
        spread = f"{r.spread_pct:.2f}" if np.isfinite(r.spread_pct) else "-"
        span = f"{r.span_h:.1f}" if np.isfinite(r.span_h) else "-"
        t.add_row(r.case, str(r.repeats), span, r.metric.replace(" ms", ""),
                  f"{r.error_pct:+.2f}", spread, r.judgement)
    return t


def render(df: pd.DataFrame):
    """The leave-one-out table (rich)."""
    from rich.table import Table

    t = Table(title="held-out run replayed with a fit of the others: error vs the engine (%)")
    for c in df.columns:
        t.add_column(c, justify="left" if c == "run" else "right")
    for row in df.itertuples(index=False):
        t.add_row(row[0], *[f"{x:+.2f}" if c != "same steps %" else f"{x:.1f}"
                             for c, x in zip(df.columns[1:], row[1:])])
    return t
