"""One view of any result directory: a simulated run (`servesim run`), a recorded engine run
(benchmarks/engine) or anything else writing the same requests/steps tables.

The summary metrics are recomputed from the tables with one code path for every kind, with
`vllm bench serve`'s definitions: TTFT, TPOT, E2EL over finished requests, ITL pooled over
every gap of every request (from the per-token times; a simulated run too large to keep
them falls back to its summary.json).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sim.metrics.stats import describe_ms
from sim.report import recorded
from traces.errors import InputError


@dataclass(frozen=True)
class ResultView:
    path: Path
    kind: str  # "simulated" or "vLLM engine"
    requests: pd.DataFrame  # requests.parquet columns
    steps: pd.DataFrame  # steps.parquet columns (at least step, start_s, duration_s)
    summary: dict  # summary.json of a simulated run ({} for others)

    @property
    def name(self) -> str:
        return self.path.name or str(self.path)


def load_result(path: str | Path) -> ResultView:
    """Read a result directory of either kind (a one-line InputError otherwise)."""
    p = Path(path)
    if not p.is_dir():
        raise InputError(f"{p}: no such result folder")
    if recorded.is_recorded_run(p):
        run = recorded.read_run(p)
        return ResultView(p, "vLLM engine", recorded.requests_table(run),
                          recorded.steps_table(run), {})
    need = [f for f in ("requests.parquet", "steps.parquet") if not (p / f).is_file()]
    if need:
        raise InputError(f"{p}: not a result folder (no {need[0]}; expected a `servesim run` "
                         "output or a recorded engine run)")
    summary = json.loads((p / "summary.json").read_text()) if (p / "summary.json").is_file() \
        else {}
    return ResultView(p, "simulated", pd.read_parquet(p / "requests.parquet"),
                      pd.read_parquet(p / "steps.parquet"), summary)


def finished(v: ResultView) -> pd.DataFrame:
    r = v.requests
    return r[r["status"] == "finished"] if "status" in r else r


def pooled_itl_ms(v: ResultView) -> dict:
    """ITL over every gap of every finished request (ms statistics)."""
    r = finished(v)
    times = r["token_times_s"] if "token_times_s" in r else None
    if times is None or any(t is None for t in times):
        return v.summary.get("latency_ms", {}).get("itl", {"count": 0})
    gaps = [np.diff(np.asarray(t, dtype=np.float64)) for t in times]
    return describe_ms(np.concatenate(gaps) if gaps else np.zeros(0))


def metrics(v: ResultView) -> dict:
    """Summary metrics recomputed from the tables (flat keys, ms / s / per s)."""
    r, s = finished(v), v.steps
    out = {"requests finished": float(len(r))}
    dur = float(r["finish_s"].max() - v.requests["arrival_s"].min()) if len(r) else np.nan
    out["duration s"] = dur
    out["requests/s"] = len(r) / dur if dur else np.nan
    out["output tokens/s"] = float(r["generated_tokens"].sum()) / dur if dur else np.nan
    blocks = {"TTFT": describe_ms(r["ttft_s"].to_numpy(np.float64)),
              "TPOT": describe_ms(r["tpot_s"].to_numpy(np.float64)),
              "ITL": pooled_itl_ms(v),
              "E2EL": describe_ms(r["e2el_s"].to_numpy(np.float64))}
    for name, d in blocks.items():
        for stat in ("mean", "median", "p90", "p99"):
            out[f"{name} {stat} ms"] = d.get(stat, np.nan)
    dur_ms = s["duration_s"].to_numpy(np.float64) * 1e3
    out["steps"] = float(len(s))
    out["step p50 ms"] = float(np.median(dur_ms)) if len(s) else np.nan
    out["step p99 ms"] = float(np.percentile(dur_ms, 99)) if len(s) else np.nan
    out["busy s"] = float(dur_ms.sum() / 1e3)
    out["mean batch"] = float(s["batch_size"].mean()) if len(s) else np.nan
    out["max batch"] = float(s["batch_size"].max()) if len(s) else np.nan
    out["preemptions"] = float(s["num_preempted"].sum()) if "num_preempted" in s else np.nan
    return out
