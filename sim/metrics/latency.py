"""Per-request latencies and their distributions (`vllm bench serve` definitions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim.metrics.stats import describe_ms
from sim.sched.base import Status

if TYPE_CHECKING:
    from sim.runner import RunResult


def request_latencies(res: RunResult) -> dict[str, np.ndarray]:
    """Per-request TTFT, TPOT, E2EL (seconds; NaN where undefined)."""
    rec, arr = res.recorder, res.specs.arrival_s
    ttft = rec.first_token_s - arr
    e2el = rec.finish_s - arr
    out = res.generated.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (e2el - ttft) / (out - 1), np.nan)
    return {"ttft": ttft, "tpot": tpot, "e2el": e2el}


def latency_block(res: RunResult, mask: np.ndarray, *, itl: bool = True,
                  lat: dict | None = None) -> dict:
    """TTFT/TPOT/E2EL distributions (ms) over the requests in ``mask`` (the finished ones,
    as `vllm bench serve`), plus the ITL gaps of those requests pooled (``lat``: the
    run's ``request_latencies`` when already made)."""
    lat = request_latencies(res) if lat is None else lat
    block = {k: describe_ms(v[mask]) for k, v in lat.items()}
    if itl:
        block["itl"] = describe_ms(*res.recorder.itl_samples(mask))
    return block


def run_duration(res: RunResult, done: np.ndarray, mask: np.ndarray | None = None) -> float:
    """First arrival to the last answer, seconds: a finish, or a refusal (a prompt over
    max_model_len, answered as it arrives: ``vllm bench serve`` times the benchmark to its
    last response, failed ones included); to the end of the run when some request did not
    finish (cut by the horizon or the safety limit, or aborted by a stopped engine). With
    ``mask``, of those requests only (a lane's own duration, as a benchmark of that lane
    alone would measure it)."""
    mask = np.ones(len(res.specs), dtype=bool) if mask is None else mask
    done = done & mask
    first = float(res.specs.arrival_s[mask].min()) if mask.any() else 0.0
    end = float(res.run.end_s)
    refused = (res.status == Status.REJECTED) & mask
    if done.any() or refused.any():
        last = float(np.nanmax(np.concatenate((res.recorder.finish_s[done],
                                               res.specs.arrival_s[refused]))))
        end = max(end, last) if (unresolved(res) & mask).any() else last
    return max(end - first, 1e-12)


def unresolved(res: RunResult) -> np.ndarray:
    """Requests that arrived in the run and neither finished nor were rejected: never
    started, waiting, running or aborted (bool per request)."""
    return ~np.isin(res.status, (Status.FINISHED, Status.REJECTED))
