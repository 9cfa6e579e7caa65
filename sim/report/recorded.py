"""A recorded real-engine run directory (benchmarks/engine/README.md) read as a result.

    run.json               kind "vllm-engine-run", engine knobs, versions, machine load
    trace.jsonl.gz         the trace as sent (arrival_s = the client's send time)
    requests.jsonl.gz      per request: send, engine-core receipt (seen), vLLM's own
                           queued/scheduled/first/last token stamps, client token delays (us)
    engine_steps.jsonl.gz  per step: start, end, tokens and context per request, ...

Times are seconds from the recording's zero. ``requests_table`` and ``steps_table`` give
the columns servesim's requests.parquet and steps.parquet have (latencies as the client
saw them, `vllm bench serve` definitions), so a recorded run compares like a simulated one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sim.metrics.token_times import ITL_PERCENTILES, gap_percentiles
from traces.errors import InputError
from traces.files import read_utf8
from traces.loaders.common import read_jsonl_text

KIND = "vllm-engine-run"
FILES = ("run.json", "trace.jsonl.gz", "requests.jsonl.gz", "engine_steps.jsonl.gz")


@dataclass(frozen=True)
class RecordedRun:
    path: Path
    meta: dict
    trace: pd.DataFrame  # request_id, arrival_s, prompt_len, max_tokens
    requests: list[dict]  # requests.jsonl rows, in trace order
    steps: list[dict]  # engine_steps.jsonl rows


RUN_JSON_MAX_BYTES = 16 << 20


def is_recorded_run(path: str | Path) -> bool:
    p = Path(path) / "run.json"
    try:
        doc = json.loads(read_utf8(p, "run.json", RUN_JSON_MAX_BYTES)) if p.is_file() else None
    except (OSError, ValueError, RecursionError):  # InputError is a ValueError
        return False
    return isinstance(doc, dict) and doc.get("kind") == KIND


def _jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(x) for x in read_jsonl_text(path).split("\n") if x.strip()]
    except ValueError as e:
        raise InputError(f"{path}: not JSON lines ({e})") from None


def read_run(path: str | Path) -> RecordedRun:
    p = Path(path)
    missing = [f for f in FILES if not (p / f).is_file()]
    if missing:
        raise InputError(f"{p}: not a recorded engine run (no {missing[0]})")
    trace = pd.DataFrame(_jsonl(p / "trace.jsonl.gz"))
    trace["request_id"] = trace["request_id"].astype(str)
    reqs = {r["request_id"]: r for r in _jsonl(p / "requests.jsonl.gz")}
    order = [reqs[i] for i in trace["request_id"] if i in reqs]
    return RecordedRun(p, json.loads((p / "run.json").read_text()), trace, order,
                       _jsonl(p / "engine_steps.jsonl.gz"))


def token_times(run: RecordedRun) -> list[np.ndarray]:
    """Each request's token arrival times at the client (s from the run's zero)."""
    return [r["send_s"] + np.cumsum(np.asarray(r["token_delays_us"], dtype=np.float64)) * 1e-6
            for r in run.requests]


def requests_table(run: RecordedRun) -> pd.DataFrame:
    """requests.parquet's columns for a recorded run (client-side latencies)."""
    t, rq = run.trace, run.requests
    times = token_times(run)
    n_out = np.array([len(x) for x in times])
    first = np.array([x[0] if len(x) else np.nan for x in times])
    last = np.array([x[-1] if len(x) else np.nan for x in times])
    send = np.array([r["send_s"] for r in rq])
    ttft, e2el = first - send, last - send
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(n_out > 1, (e2el - ttft) / (n_out - 1), np.nan)
    offsets = np.concatenate(([0], np.cumsum(n_out)))
    flat = np.concatenate(times) if len(times) else np.zeros(0)
    pct = gap_percentiles(offsets, flat)
    gaps = [np.diff(x) for x in times]
    sched = np.array([r.get("engine_scheduled_s") or np.nan for r in rq], dtype=np.float64)
    return pd.DataFrame({
        "request_id": t["request_id"].to_numpy(dtype=object), "arrival_s": send,
        "first_scheduled_s": sched, "first_token_s": first, "finish_s": last,
        "prompt_tokens": t["prompt_len"].to_numpy(np.int64),
        "output_tokens": t["max_tokens"].to_numpy(np.int64), "generated_tokens": n_out,
        "ttft_s": ttft, "tpot_s": tpot, "e2el_s": e2el,
        "max_itl_s": [g.max() if len(g) else np.nan for g in gaps],
        "queue_s": sched - send,
        "status": np.where(n_out >= t["max_tokens"].to_numpy(), "finished", "unfinished"),
        **{f"itl_p{p}_s": pct[:, j] for j, p in enumerate(ITL_PERCENTILES)},
        "token_times_s": times,
    })


def step_intervals(steps: list[dict]) -> np.ndarray:
    """Each step's start to the next start while the engine stayed busy; for a step after
    which it idled, its own length plus the typical gap between busy steps (s)."""
    start = np.array([s["start_s"] for s in steps], dtype=np.float64)
    end = np.array([s["end_s"] for s in steps], dtype=np.float64)
    idle = np.array([bool(s.get("idle_after", False)) for s in steps])
    nxt = np.append(start[1:], np.nan)
    busy = ~idle & ~np.isnan(nxt)
    gap = float(np.median((nxt - end)[busy])) if busy.any() else 0.0
    return np.where(busy, nxt - start, end - start + gap)


def steps_table(run: RecordedRun) -> pd.DataFrame:
    """steps.parquet's columns (those a step log gives) for a recorded run."""
    st = run.steps
    q = [np.fromiter(s["tokens"].values(), dtype=np.int64) for s in st]
    blocks = run.meta.get("engine", {}).get("num_blocks", 0)
    return pd.DataFrame({
        "step": np.arange(len(st), dtype=np.int64),
        "start_s": np.array([s["start_s"] for s in st], dtype=np.float64),
        "duration_s": step_intervals(st) if st else np.zeros(0),
        "prefill_tokens": np.array([int(x[x > 1].sum()) for x in q], dtype=np.int64),
        "decode_seqs": np.array([int((x == 1).sum()) for x in q], dtype=np.int64),
        "batch_size": np.array([len(x) for x in q], dtype=np.int64),
        "num_running": np.array([s["num_running"] for s in st], dtype=np.int64),
        "num_waiting": np.array([s["num_waiting"] for s in st], dtype=np.int64),
        "num_preempted": np.array([len(s["preempted"]) for s in st], dtype=np.int64),
        "kv_blocks_total": blocks,
        "kv_used_fraction": np.array([s["kv_usage"] for s in st], dtype=np.float64),
    })
