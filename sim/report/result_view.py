"""One view of any result directory: a simulated run (`servesim run`), a recorded engine run
(benchmarks/engine) or anything else writing the same requests/steps tables.

The summary metrics are recomputed from the tables with one code path for every kind, with
`vllm bench serve`'s definitions: TTFT, TPOT, E2EL over finished requests, ITL pooled over
every gap of every request (from the per-token times; a simulated run too large to keep
them falls back to its summary.json).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sim.metrics.stats import describe_ms
from sim.report import recorded
from traces.errors import InputError, clip, clip_path
from traces.files import read_parquet, read_utf8
from traces.limits import MAX_TIME_S


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


REQUEST_COLUMNS = ("request_id", "arrival_s", "finish_s", "prompt_tokens", "output_tokens",
                   "generated_tokens", "ttft_s", "tpot_s", "e2el_s")
STEP_COLUMNS = ("step", "start_s", "duration_s", "batch_size")
TIMES = ("arrival_s", "finish_s", "ttft_s", "e2el_s")  # finished requests: finite, >= 0
SUMMARY_MAX_BYTES = 64 << 20


def load_result(path: str | Path) -> ResultView:
    """Read a result directory of either kind (a one-line InputError otherwise); its tables
    checked (``check_tables``)."""
    p = Path(path)
    if not p.is_dir():
        what = "is not a folder, so not a result folder" if os.path.lexists(p) else \
            "no such result folder"
        raise InputError(f"{clip_path(p)}: {what}")
    if recorded.is_recorded_run(p):
        try:
            run = recorded.read_run(p)
            v = ResultView(p, "vLLM engine", recorded.requests_table(run),
                           recorded.steps_table(run), {})
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            if isinstance(e, InputError):
                raise
            raise InputError(f"{clip_path(p)}: not a readable recorded engine run "
                             f"({type(e).__name__}: {clip(str(e))})") from None
        return check_tables(v)
    need = [f for f in ("requests.parquet", "steps.parquet") if not (p / f).is_file()]
    if need:
        raise InputError(f"{clip_path(p)}: not a result folder (no {need[0]}; expected a "
                         "`servesim run` output or a recorded engine run)")
    summary = _summary(p / "summary.json") if (p / "summary.json").is_file() else {}
    return check_tables(ResultView(p, "simulated", read_parquet(p / "requests.parquet"),
                                   read_parquet(p / "steps.parquet"), summary))


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _summary(path: Path) -> dict:
    text = read_utf8(path, "summary.json", SUMMARY_MAX_BYTES)
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise InputError(f"{clip_path(path)}: not strict JSON ({clip(str(e))})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{clip_path(path)}: expected a JSON object (a run's summary)")
    return doc


def check_tables(v: ResultView) -> ResultView:
    """The columns compare reads exist and hold numbers; each finished request's times are
    finite, >= 0 and in order (TTFT <= E2E, arrival <= finish); step times finite, >= 0."""
    where = clip_path(v.path)
    for table, cols, name in ((v.requests, REQUEST_COLUMNS, "requests"),
                              (v.steps, STEP_COLUMNS, "steps")):
        missing = [c for c in cols if c not in table]
        if missing:
            raise InputError(f"{where}: {name} table has no column {missing[0]!r}")
        for c in cols[1:]:
            if not pd.api.types.is_numeric_dtype(table[c]):
                raise InputError(f"{where}: {name} column {c!r} holds {table[c].dtype} values; "
                                 "expected numbers")
    r = finished(v)
    for c in TIMES:
        _finite(where, "requests", c, r[c].to_numpy(np.float64), r.index)
    for c in ("start_s", "duration_s"):
        _finite(where, "steps", c, v.steps[c].to_numpy(np.float64), v.steps.index)
    for a, b in (("ttft_s", "e2el_s"), ("arrival_s", "finish_s")):
        late = np.flatnonzero(r[a].to_numpy(np.float64) > r[b].to_numpy(np.float64) + 1e-9)
        if len(late):
            raise InputError(f"{where}: requests row {r.index[late[0]]}: {a} is after {b}; "
                             "the times are not in order")
    return v


def _finite(where: str, name: str, col: str, x: np.ndarray, index) -> None:
    bad = np.flatnonzero(~np.isfinite(x) | (x < 0) | (x > MAX_TIME_S))
    if len(bad):
        raise InputError(f"{where}: {name} row {index[bad[0]]}: {col} = {float(x[bad[0]])!r}; "
                         f"expected a finite number of seconds from 0 to {MAX_TIME_S:g}")


def finished(v: ResultView) -> pd.DataFrame:
    r = v.requests
    return r[r["status"] == "finished"] if "status" in r else r


def pooled_itl_ms(v: ResultView) -> dict:
    """ITL over every gap of every finished request (ms statistics)."""
    r = finished(v)
    times = r["token_times_s"] if "token_times_s" in r else None
    if times is None or any(t is None for t in times):
        lat = v.summary.get("latency_ms") if v.summary else None
        itl = lat.get("itl") if isinstance(lat, dict) else None
        return itl if isinstance(itl, dict) else {"count": 0}  # an edited summary: none
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
    st = v.requests["status"] if "status" in v.requests else None
    out["requests rejected"] = float((st == "rejected").sum()) if st is not None else np.nan
    kv = s["kv_used_fraction"].to_numpy(np.float64) * 100 if "kv_used_fraction" in s else None
    out["KV used mean %"] = float(kv.mean()) if kv is not None and len(kv) else np.nan
    out["KV used peak %"] = float(kv.max()) if kv is not None and len(kv) else np.nan
    slo = v.summary.get("slo") if v.summary else None
    met = slo.get("met") if isinstance(slo, dict) else None  # an edited summary: no verdict
    out["SLO met (1 = yes)"] = float(met) if isinstance(met, bool) else np.nan
    return out
