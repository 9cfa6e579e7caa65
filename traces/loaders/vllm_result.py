"""A `vllm bench serve --save-result --save-detailed` result JSON as a request trace.

vLLM 0.32 (vllm/benchmarks/serve.py) writes one JSON object (read gzipped too): the traffic
settings (`request_rate`: req/s or "inf", `burstiness`: the gamma shape, 1 = Poisson,
`max_concurrency`: the client-side semaphore or null), summary metrics (`duration` s,
`completed`, `failed`, `mean_ttft_ms`, ...) and, with --save-detailed, one entry per request
in dataset order: `input_lens` (prompt tokens the server counted), `output_lens` (tokens
generated; 0 when the request failed), `start_times` (client `time.perf_counter()` when the
request was sent, s), `queue_times` (`client_queue_time`: send minus the time the arrival
process released it, s), `ttfts` (s), `itls` (list of s), `latencies` (E2E, s), `errors`
("" when it succeeded). `--append-result` puts one such object per line.

The trace: the successful requests, arrival_s = the time the arrival process released each
one (start - queue, the offered load; with --max-concurrency the send itself waited for a
slot), counted from the first; prompt_tokens = input_lens, output_tokens = output_lens.
request_id = the request's index in the result, as text. Failed requests are left out
with a TraceWarning.
"""

from __future__ import annotations

import gzip
import json
import math
import warnings
from pathlib import Path

import numpy as np

from traces.errors import TraceError, TraceWarning
from traces.loaders.common import one_line
from traces.rng import Streams
from traces.schema import Trace, make_trace

NAME = "vllm-result"
TIMED = True
OPTIONS: tuple[str, ...] = ()
PER_REQUEST = ("input_lens", "output_lens", "start_times")


def sniff(suffix: str, line: str) -> bool:
    return (suffix in (".json", ".jsonl", ".txt", "") and line.startswith("{")
            and '"burstiness"' in line and '"request_rate"' in line)


def read_result(path: Path) -> dict:
    """The result object, its per-request lists checked (one entry per request)."""
    try:  # gzipped results (.gz) are read as they are
        with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except (gzip.BadGzipFile, EOFError) as e:
        raise TraceError(f"{path}: not a readable gzip file ({one_line(e)})") from None
    objects = [ln for ln in text.splitlines() if ln.strip()]
    if len(objects) != 1:
        raise TraceError(f"{path}: holds {len(objects)} results (vllm bench serve "
                         "--append-result); keep the one to replay")
    try:
        result = json.loads(objects[0])
    except (ValueError, RecursionError) as e:
        raise TraceError(f"{path}: malformed JSON ({one_line(e)})") from None
    if not isinstance(result, dict):
        raise TraceError(f"{path}: expected a JSON object (a vllm bench serve result)")
    missing = [k for k in PER_REQUEST if not isinstance(result.get(k), list)]
    if missing:
        raise TraceError(f"{path}: no per-request '{missing[0]}'; record with vllm bench serve "
                         "--save-result --save-detailed")
    n = len(result["input_lens"])
    for key in (*PER_REQUEST, "queue_times", "ttfts", "itls", "latencies", "errors"):
        if key in result and (not isinstance(result[key], list) or len(result[key]) != n):
            raise TraceError(f"{path}: field '{key}' must be a list with one entry per request "
                             f"({n}, as input_lens)")
    return result


def succeeded(result: dict) -> np.ndarray:
    """Requests that completed: no error and at least one output token."""
    errors = result.get("errors") or [""] * len(result["input_lens"])
    out = np.array([isinstance(x, (int, float)) and x > 0 for x in result["output_lens"]])
    return out & np.array([not e for e in errors])


def ready_times(result: dict, path: Path) -> np.ndarray:
    """When the arrival process released each request (s, client clock): start - queue."""
    start = np.array(result["start_times"], dtype=object)
    queue = np.array(result.get("queue_times") or [0.0] * len(start), dtype=object)
    try:
        t = start.astype(np.float64) - queue.astype(np.float64)
    except (TypeError, ValueError):
        raise TraceError(f"{path}: start_times and queue_times must be numbers (s)") from None
    return t


def read(path: Path, *, streams: Streams) -> Trace:
    result = read_result(path)
    ok = succeeded(result)
    if not ok.any():
        raise TraceError(f"{path}: no request succeeded; nothing to replay")
    if not ok.all():
        warnings.warn(TraceWarning(f"{path}: {int((~ok).sum())} failed request(s) left out"),
                      stacklevel=2)
    t = ready_times(result, path)[ok]
    if not np.isfinite(t).all():
        raise TraceError(f"{path}: start_times / queue_times must be finite numbers (s)")
    idx = np.flatnonzero(ok)
    df = {
        "request_id": idx.astype(str).astype(object),
        "arrival_s": t - t.min(),
        "prompt_tokens": np.array(result["input_lens"], dtype=object)[ok],
        "output_tokens": np.array(result["output_lens"], dtype=object)[ok],
    }
    return make_trace(df, source=str(path))


def traffic(result: dict) -> tuple[float, float, int | None]:
    """(request rate req/s (inf = all at once), burstiness, max concurrency or None)."""
    rate = result.get("request_rate", "inf")
    rate = math.inf if rate in ("inf", None) else float(rate)
    burst = float(result.get("burstiness", 1.0))
    conc = result.get("max_concurrency")
    return rate, burst, (int(conc) if conc is not None else None)
