"""The run summary, with `vllm bench serve`'s metric definitions.

* TTFT  = first token time - arrival
* TPOT  = (E2E - TTFT) / (output tokens - 1), requests with more than one output token
* ITL   = every gap between consecutive streamed chunks of a request: one per token, one
  per step under speculative decoding (its accepted tokens are one chunk; vLLM's client
  appends one ITL per chunk, vllm/benchmarks/lib/endpoint_request_func.py:262-270)
* E2EL  = finish time - arrival
* duration = last answer - first arrival (a finish, or a refusal as it arrives: vllm bench
  serve times failed requests too; to the end of the run when some request did not
  finish); throughputs divide by it
* goodput = finished requests meeting every SLO budget / duration; the SLO verdict counts
  requests that were rejected or did not finish as failures (``sim.metrics.slo``)
* time-weighted means (waiting, KV used, running) cover the whole run, idle time included
  (``sim.metrics.occupancy``)
* with ``workload.warmup_s``, the request figures (latency, throughput over the measured
  requests' own duration, goodput, SLO, lanes) leave out the requests arriving before it
  (``sim.metrics.warmup``); ``requests`` counts them all and says how many were left out
"""

from __future__ import annotations

import numpy as np

from sim.cost import validation
from sim.metrics.batch_limits import batch_limits
from sim.metrics.lanes import lane_blocks
from sim.metrics.latency import latency_block, request_latencies, run_duration
from sim.metrics.memory import concurrency_fields, prefix_cache_block, swap_fields
from sim.metrics.occupancy import Window, busy_mean, run_window, waiting_area
from sim.metrics.schedule import schedule_block
from sim.metrics.slo import goodput_mask, slo_verdict
from sim.metrics.stability import stability, stability_edges, too_short
from sim.metrics.stats import describe_ms, weighted_percentiles
from sim.metrics.step_stats import StreamedSteps
from sim.metrics.warmup import measured, warmup_fields
from sim.runner import RunResult
from sim.sched.base import Status


def summarize(res: RunResult) -> dict:
    st, specs, rec = res.status, res.specs, res.recorder
    finished, judged = st == Status.FINISHED, measured(res)
    done = finished & judged  # the warm-up's requests left out (sim.metrics.warmup)
    lat = request_latencies(res)
    duration = run_duration(res, finished, judged)
    out_tok, in_tok = int(res.generated[done].sum()), int(specs.prompt_tokens[done].sum())
    good = goodput_mask(res, lat, done)
    if rec.streamed:  # the rows are in a file: read back chunk by chunk
        scan = StreamedSteps(res, stability_edges(res))
        steps, window = None, scan.window
        kv = {**scan.kv_block(), **scan.concurrency_fields()}
        step_blocks = {"waiting": scan.waiting_block(), "steps": scan.steps_block(),
                       "batch_limits": scan.batch_limits(),
                       "schedule": scan.schedule_block()}
    else:
        scan, steps = None, rec.steps()
        window = run_window(res, steps)
        # a fleet's steps from pools of other settings carry each step's own (views.py)
        per = rec.step_settings()
        block = res.resolved.block_size if per is None else per["block_size"]
        kv = {**kv_block(steps, res.kv_total_blocks, block, window),
              **concurrency_fields(steps, window)}
        step_blocks = {"waiting": waiting_block(res, steps, window),
                       "steps": steps_block(steps),
                       "batch_limits": batch_limits(res, steps, per),
                       "schedule": schedule_block(res, steps)}
    return {
        "requests": {
            # total = finished + rejected + unfinished + aborted + never_sent (the workload)
            "total": len(specs) + res.never_sent, "finished": int(finished.sum()),
            "rejected": int((st == Status.REJECTED).sum()),
            "shortened": res.shortened,  # max_tokens cut to max_model_len - prompt, served
            "unfinished": int(np.isin(st, (Status.PENDING, Status.WAITING,
                                           Status.RUNNING)).sum()),
            "aborted": int((st == Status.ABORTED).sum()),
            "never_sent": res.never_sent, **warmup_fields(res, judged),
        },
        "duration_s": duration,
        "throughput": {
            "request_per_s": done.sum() / duration, "output_token_per_s": out_tok / duration,
            "total_token_per_s": (in_tok + out_tok) / duration,
            "goodput_request_per_s": good.sum() / duration,
        },
        "latency_ms": latency_block(res, done, lat=lat),
        "slo": slo_verdict(res, lat, judged),
        "preemption": {
            "count": int(res.num_preemptions.sum()),
            "requests_preempted": int((res.num_preemptions > 0).sum()),
            "recomputed_tokens": res.recomputed_tokens,
            "allocation_failures": res.counters["alloc_failures"],
            "requests_blocked_on_memory": res.counters["memory_blocked"],
            **swap_fields(res.counters),
        },
        "kv_cache": kv,
        "prefix_cache": prefix_cache_block(res.counters),
        "waiting": step_blocks["waiting"],
        "steps": step_blocks["steps"],
        "batch_limits": step_blocks["batch_limits"],
        "schedule": step_blocks["schedule"],
        "speculative": res.speculative or {},
        "cost_error": validation.band(res.resolved),
        "stability": stability(res, scan.areas if scan is not None else None, lat),
        "lanes": lane_blocks(res, judged, lat),
        "sim": {"end_s": float(res.run.end_s), "stopped_at_limit": bool(res.run.stopped_at_limit),
                "stuck_requests": res.run.stuck,
                "stopped": res.counters.get("engine_stopped", ""),
                "ingress_ms": res.ingress_s * 1e3,
                "ingress_per_token_us": res.ingress_per_token_s * 1e6,
                "egress_ms": res.egress_s * 1e3,
                "warnings": run_warnings(res, lat), **client_queue(res)},
    }


def run_warnings(res: RunResult, lat: dict | None = None) -> list[str]:
    """The run's warnings (the cost model's), and one when the run is too short to judge
    (``sim.metrics.stability.too_short``)."""
    short = too_short(res, lat)
    stopped = res.counters.get("engine_stopped", "")
    if stopped:  # vLLM v0 stops its engine (swap space exhausted): say so even under -q
        aborted = int((res.status == Status.ABORTED).sum())
        stopped = (f"the engine stopped ({stopped}); {aborted:,} of {len(res.status):,} "
                   "requests aborted")
    return [*res.warnings, *((f"the run is {short}",) if short else ()),
            *((stopped,) if stopped else ())]


def client_queue(res: RunResult) -> dict:
    """Gated arrivals only: how long requests waited client-side to be sent (ms), vllm bench
    serve's client_queue_time."""
    if res.client_queue_s is None:
        return {}
    return {"client_queue_ms": describe_ms(res.client_queue_s)}


def _time_mean(x: np.ndarray, dur: np.ndarray) -> float:
    return float((x * dur).sum() / max(float(dur.sum()), 1e-12))


def kv_block(steps: dict, total: int, block_size: int, window: Window) -> dict:
    """KV occupancy over time (time-weighted over the whole run; none is used while the
    engine is idle) and its waste.

    Waste = slots held by requests but not holding a token's KV: the partly filled
    last block of each request under paging, the unused reservation of contiguous
    policies (internal fragmentation); averaged over the time blocks are held.
    """
    used, dur, tokens = steps["kv_blocks_used"], steps["duration_s"], steps["kv_tokens"]
    if not len(used):
        return {"total_blocks": total}
    slots = used * block_size
    waste = np.where(slots > 0, 1.0 - tokens / np.maximum(slots, 1), 0.0)
    busy = slots > 0
    return {
        "total_blocks": total,
        "mean_used_fraction": busy_mean(used / max(total, 1), steps, window),
        "peak_used_fraction": float(used.max() / max(total, 1)),
        "peak_used_blocks": int(used.max()),
        "mean_wasted_slot_fraction": _time_mean(waste[busy], dur[busy]) if busy.any() else 0.0,
    }


def waiting_block(res, steps: dict, window: Window) -> dict:
    """Mean number of requests waiting (time-weighted over the whole run, idle time
    included), split by why admission stopped at the plan before."""
    why = steps["blocked"]
    area, before = waiting_area(res, steps, window)
    out = {"mean_waiting": float((area.sum() + before) / window.length_s)}
    for reason in sorted(set(why.tolist()) - {""}):
        out[f"mean_waiting_on_{reason}"] = float(area[why == reason].sum() / window.length_s)
    return out


def steps_block(steps: dict) -> dict:
    n = len(steps["duration_s"])
    if not n:
        return {"count": 0}
    dur, batch = steps["duration_s"], steps["batch_size"]
    p50, p99 = weighted_percentiles(dur, np.ones(n, dtype=np.int64), (50, 99))
    return {
        "count": n, "busy_s": float(dur.sum()), "duration_ms_p50": p50 * 1e3,
        "duration_ms_p99": p99 * 1e3, "mean_batch_size": float(batch.mean()),
        "max_batch_size": int(batch.max()), "max_waiting": int(steps["num_waiting"].max()),
        "prefill_tokens": int(steps["prefill_tokens"].sum()),
    }
