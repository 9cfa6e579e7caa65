"""Per-request and per-step tables (pandas) for parquet output and notebooks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.metrics.latency import request_latencies
from sim.metrics.token_times import ITL_PERCENTILES, gap_percentiles, split
from sim.runner import RunResult
from sim.sched.base import Status

STATUS_NAMES = {s.value: s.name.lower() for s in Status}


def requests_table(res: RunResult) -> pd.DataFrame:
    """One row per request: times (s), token counts, preemptions, lane, status."""
    s, rec = res.specs, res.recorder
    lat = request_latencies(res)
    return pd.DataFrame({
        "request_id": s.request_id.astype(str),
        "lane": np.asarray(s.lane_names, dtype=object)[s.lane] if len(s) else [],
        "priority": s.priority,
        "arrival_s": s.arrival_s,
        "first_scheduled_s": rec.first_scheduled_s,
        "first_token_s": rec.first_token_s,
        "finish_s": rec.finish_s,
        "prompt_tokens": s.prompt_tokens,
        "output_tokens": s.output_tokens,
        "generated_tokens": res.generated,
        "cached_tokens": np.maximum(res.cached_tokens, 0),
        "preemptions": res.num_preemptions,
        "ttft_s": lat["ttft"],
        "tpot_s": lat["tpot"],
        "e2el_s": lat["e2el"],
        "max_itl_s": np.where(res.generated > 1, rec.max_itl_s, np.nan),
        "queue_s": rec.first_scheduled_s - s.arrival_s,
        "status": [STATUS_NAMES[int(x)] for x in res.status],
        **token_columns(res),
    })


def token_columns(res: RunResult) -> dict:
    """Per-request ITL percentiles and every token's time (client clock, s), when the run
    kept its token times (sim/metrics/token_times.py); missing values otherwise."""
    n = len(res.specs)
    csr = res.recorder.tokens.csr()
    if csr is None:
        cols = {f"itl_p{p}_s": np.full(n, np.nan) for p in ITL_PERCENTILES}
        return {**cols, "token_times_s": [None] * n}
    offsets, times = csr[0][:n + 1], csr[1]  # a gated run's head: later requests never ran
    csr = offsets, times[:offsets[-1]]
    pct = gap_percentiles(*csr)
    cols = {f"itl_p{p}_s": pct[:, j] for j, p in enumerate(ITL_PERCENTILES)}
    return {**cols, "token_times_s": split(*csr)}


def steps_table(res: RunResult) -> pd.DataFrame:
    """One row per engine step (decode runs expanded)."""
    df = pd.DataFrame(res.recorder.steps())
    df.insert(0, "step", np.arange(len(df), dtype=np.int64))
    df["kv_blocks_total"] = res.kv_total_blocks
    df["kv_used_fraction"] = df["kv_blocks_used"] / max(res.kv_total_blocks, 1)
    # the waiting queue while admission was stopped for lack of KV blocks (the summary's
    # waiting.mean_waiting_on_kv_memory, step by step)
    df["num_waiting_on_kv_memory"] = df["num_waiting"].where(df["blocked"] == "kv_memory", 0)
    return df
