"""Per-request and per-step tables (pandas) for parquet output and notebooks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.engine.requests import ids_text
from sim.metrics.latency import request_latencies
from sim.metrics.spill import steps_frame
from sim.metrics.token_times import ITL_PERCENTILES, gap_percentiles, split
from sim.runner import RunResult
from sim.sched.base import Status

STATUS_NAMES = {s.value: s.name.lower() for s in Status}


ROW_GROUP = 1 << 20  # requests.parquet of more rows is written in pieces of CHUNK_ROWS
CHUNK_ROWS = 1 << 18


def requests_table(res: RunResult, rows: slice = slice(None), tokens: dict | None = None
                   ) -> pd.DataFrame:
    """One row per request: times (s), token counts, preemptions, lane, status (of the
    requests in ``rows``; ``tokens``: their ``token_columns`` when already made)."""
    s, rec = res.specs, res.recorder
    i = rows
    arrival, first, finish = s.arrival_s[i], rec.first_token_s[i], rec.finish_s[i]
    generated = res.generated[i].astype(np.int64, copy=False)  # a large run's are int32
    lat = request_latencies(res) if rows == slice(None) else _latencies(arrival, first,
                                                                         finish, generated)
    if tokens is None:  # else the token columns of these rows
        tokens = token_columns(res)
        tokens = tokens if rows == slice(None) else {k: v[rows] for k, v in tokens.items()}
    return pd.DataFrame({
        "request_id": ids_text(s.request_id[i]),
        "lane": np.asarray(s.lane_names, dtype=object)[s.lane[i]] if len(arrival) else [],
        "priority": s.priority[i],
        "arrival_s": arrival,
        "first_scheduled_s": rec.first_scheduled_s[i],
        "first_token_s": first,
        "finish_s": finish,
        "prompt_tokens": s.prompt_tokens[i],
        "output_tokens": s.output_tokens[i],
        "generated_tokens": generated,
        "cached_tokens": np.maximum(res.cached_tokens[i], 0).astype(np.int64, copy=False),
        "preemptions": res.num_preemptions[i].astype(np.int64, copy=False),
        "ttft_s": lat["ttft"],
        "tpot_s": lat["tpot"],
        "e2el_s": lat["e2el"],
        "max_itl_s": np.where(generated > 1, rec.max_itl_s[i], np.nan),
        "queue_s": _queue(rec.first_scheduled_s[i], arrival),
        "status": [STATUS_NAMES[int(x)] for x in res.status[i]],
        **tokens,
    })


def _queue(first_scheduled, arrival) -> np.ndarray:
    """Arrival to first scheduled (s). The engine's clock counts integer nanoseconds and a
    fleet's table keeps each request's arrival as the trace gave it, so a request scheduled
    at its own arrival can read up to half a nanosecond early (-4.3e-10 s): that residue is
    0, anything earlier is left to show."""
    q = np.asarray(first_scheduled, dtype=np.float64) - arrival
    return np.where((q < 0) & (q > -5e-10), 0.0, q)


def _latencies(arrival, first, finish, generated) -> dict[str, np.ndarray]:
    """sim.metrics.latency.request_latencies of some requests (the same operations)."""
    ttft, e2el = first - arrival, finish - arrival
    out = generated.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (e2el - ttft) / (out - 1), np.nan)
    return {"ttft": ttft, "tpot": tpot, "e2el": e2el}


def write_requests(res: RunResult, path) -> None:
    """requests.parquet: past ``ROW_GROUP`` requests, ``CHUNK_ROWS`` rows (one row group)
    in memory at a time."""
    n = len(res.specs)
    if n <= ROW_GROUP:
        requests_table(res).to_parquet(path, index=False)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    kept = res.recorder.tokens.csr() is not None
    tokens = token_columns(res) if kept else None  # a run's token times are few, or none
    writer = schema = None
    try:
        for lo in range(0, n, CHUNK_ROWS):
            rows = slice(lo, min(lo + CHUNK_ROWS, n))
            m = rows.stop - rows.start
            here = {k: v[rows] for k, v in tokens.items()} if kept else {
                **{f"itl_p{p}_s": np.full(m, np.nan) for p in ITL_PERCENTILES},
                "token_times_s": [None] * m}
            df = requests_table(res, rows, here)
            if writer is None:
                table = pa.Table.from_pandas(df, preserve_index=False)
                schema = table.schema
                writer = pq.ParquetWriter(path, schema)
            else:
                table = pa.Table.from_pandas(df, schema=schema, preserve_index=False)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


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
    if res.recorder.streamed:
        return res.recorder.spill.frame()
    return steps_frame(res.recorder.steps(), res.kv_total_blocks)
