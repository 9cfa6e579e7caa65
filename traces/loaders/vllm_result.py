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

import json
import math
import warnings
from pathlib import Path

import numpy as np

from traces.errors import TraceError, TraceWarning, clip_repr
from traces.files import read_utf8
from traces.limits import MAX_REQUESTS, MAX_TIME_S, MAX_TOKENS, REQ
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
    """The result object, its per-request lists checked (one entry per request) and its
    measurements checked (``check_measured``)."""
    text = read_utf8(Path(path), "a vllm bench result")
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
    if n == 0:
        raise TraceError(f"{path}: holds no requests (input_lens is empty); nothing to replay")
    if n > MAX_REQUESTS:
        raise TraceError(f"{path}: {n:,} requests; at most {MAX_REQUESTS:,} ({REQ['why']})")
    for key in (*PER_REQUEST, "queue_times", "ttfts", "itls", "latencies", "errors"):
        if key in result and (not isinstance(result[key], list) or len(result[key]) != n):
            raise TraceError(f"{path}: field '{key}' must be a list with one entry per request "
                             f"({n}, as input_lens)")
    check_measured(result, path)
    return result


MEASURED = ("ttfts", "itls", "latencies")  # what a replay compares against (per request)


def check_compared(result: dict, path: Path) -> None:
    """The per-request measurements `replay-bench` compares with are there (their values
    and the duration ``read_result`` checked already)."""
    missing = [k for k in MEASURED if not isinstance(result.get(k), list)]
    if missing:
        raise TraceError(f"{path}: no per-request '{missing[0]}' to compare with; record with "
                         "vllm bench serve --save-result --save-detailed")


def _number(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _bad(values, low: float, high: float, *, integer: bool = False) -> int | None:
    """Index of the first value that is not a finite number in [low, high]."""
    for i, x in enumerate(values):
        if not _number(x) or (integer and not isinstance(x, int)) or not low <= x <= high:
            return i
    return None


def _refuse(path: Path, key: str, i: int, value, allowed: str) -> TraceError:
    return TraceError(f"{path}: {key}[{i}]: {clip_repr(value)}; expected {allowed}")


def check_measured(result: dict, path: Path) -> None:
    """Every measurement a finite, non-negative number within servesim's bounds: token
    counts integers <= MAX_TOKENS, times <= MAX_TIME_S, TTFT <= E2E latency; the traffic
    settings a positive rate ("inf" allowed), burstiness and concurrency."""
    for key, high, integer, unit in (("input_lens", MAX_TOKENS, True, "tokens"),
                                     ("output_lens", MAX_TOKENS, True, "tokens"),
                                     ("ttfts", MAX_TIME_S, False, "s"),
                                     ("latencies", MAX_TIME_S, False, "s"),
                                     ("queue_times", MAX_TIME_S, False, "s")):
        values = result.get(key) or []
        i = _bad(values, 0, high, integer=integer)
        if i is not None:
            kind = "an integer" if integer else "a number"
            top = f"{high:,}" if integer else f"{high:g}"
            raise _refuse(path, key, i, values[i], f"{kind} from 0 to {top} {unit}")
    i = _bad(result["start_times"], -MAX_TIME_S, MAX_TIME_S)
    if i is not None:
        raise _refuse(path, "start_times", i, result["start_times"][i],
                      "a finite number of seconds (the client clock)")
    for i, gaps in enumerate(result.get("itls") or []):
        if not isinstance(gaps, list) or _bad(gaps, 0, MAX_TIME_S) is not None:
            raise _refuse(path, "itls", i, gaps, "a list of inter-token gaps, each a number "
                          f"from 0 to {MAX_TIME_S:g} s")
    ttft, lat = result.get("ttfts"), result.get("latencies")
    if ttft and lat:
        late = [i for i, (a, b) in enumerate(zip(ttft, lat)) if a > b]
        if late:
            raise TraceError(f"{path}: request {late[0]}: ttft {ttft[late[0]]:g} s is after "
                             f"its whole latency {lat[late[0]]:g} s; the times are not in order")
    _check_traffic(result, path)


def _check_traffic(result: dict, path: Path) -> None:
    rate = result.get("request_rate", "inf")
    if rate not in ("inf", None) and not (_number(rate) and 0 < rate and math.isfinite(rate)
                                          or rate == math.inf):
        raise TraceError(f"{path}: request_rate {clip_repr(rate)}: expected \"inf\" or a "
                         "number of requests/s > 0")
    burst = result.get("burstiness", 1.0)
    if burst is not None and not (_number(burst) and burst > 0 and not math.isnan(burst)):
        raise TraceError(f"{path}: burstiness {clip_repr(burst)}: expected a number > 0 (the "
                         "gamma shape of vLLM's arrivals; 1 = Poisson)")
    conc = result.get("max_concurrency")
    if conc is not None and not (isinstance(conc, int) and not isinstance(conc, bool)
                                 and 0 < conc <= MAX_REQUESTS):
        raise TraceError(f"{path}: max_concurrency {clip_repr(conc)}: expected null or an "
                         f"integer from 1 to {MAX_REQUESTS:,}")
    dur = result.get("duration")
    if not (_number(dur) and 0 < dur <= MAX_TIME_S):
        raise TraceError(f"{path}: duration {clip_repr(dur)}: expected a number of seconds "
                         f"> 0 and <= {MAX_TIME_S:g}")


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
    burst = float(result.get("burstiness") or 1.0)
    conc = result.get("max_concurrency")
    return rate, burst, (int(conc) if conc is not None else None)
