"""The run summary, with `vllm bench serve`'s metric definitions.

* TTFT  = first token time - arrival
* TPOT  = (E2E - TTFT) / (output tokens - 1), requests with more than one output token
* ITL   = every gap between consecutive output tokens of a request
* E2EL  = finish time - arrival
* duration = last finish (or the end of the run) - first arrival; throughputs divide by it
* goodput = finished requests meeting every SLO budget / duration
"""

from __future__ import annotations

import numpy as np

from sim.metrics.lanes import lane_blocks
from sim.metrics.latency import latency_block, request_latencies
from sim.metrics.memory import concurrency_fields, prefix_cache_block, swap_fields
from sim.metrics.stability import stability
from sim.metrics.stats import weighted_percentiles
from sim.runner import RunResult
from sim.sched.base import Status


def _goodput_mask(res: RunResult, lat: dict, done: np.ndarray) -> np.ndarray:
    slo, ok = res.resolved.scenario.slo, done.copy()
    for key, budget in (("ttft", slo.ttft_ms), ("tpot", slo.tpot_ms), ("e2el", slo.e2el_ms)):
        if budget is not None:
            v = lat[key]
            ok &= np.isnan(v) | (v * 1e3 <= budget)
    return ok


def _slo_verdict(res: RunResult, lat: dict, done: np.ndarray) -> dict:
    slo = res.resolved.scenario.slo
    out = {"percentile": slo.percentile}
    met = True
    for key, budget in (("ttft", slo.ttft_ms), ("tpot", slo.tpot_ms), ("e2el", slo.e2el_ms)):
        if budget is None:
            continue
        v = lat[key][done]
        v = v[~np.isnan(v)]
        value = float(np.percentile(v, slo.percentile)) * 1e3 if len(v) else float("nan")
        out[f"{key}_ms"] = {"budget": budget, "value": value, "met": bool(value <= budget)}
        met &= bool(value <= budget)
    out["met"] = met
    return out


def summarize(res: RunResult) -> dict:
    st, specs, rec = res.status, res.specs, res.recorder
    done = st == Status.FINISHED
    lat = request_latencies(res)
    first = float(specs.arrival_s[0]) if len(specs) else 0.0
    end = float(np.nanmax(rec.finish_s)) if done.any() else res.run.end_s
    duration = max(end - first, 1e-12)
    out_tok, in_tok = int(res.generated[done].sum()), int(specs.prompt_tokens[done].sum())
    good = _goodput_mask(res, lat, done)
    steps = rec.steps()
    return {
        "requests": {
            "total": len(specs), "finished": int(done.sum()),
            "rejected": int((st == Status.REJECTED).sum()),
            "unfinished": int(((st == Status.WAITING) | (st == Status.RUNNING)).sum()),
            "dropped_after_horizon": res.dropped_after_horizon,
        },
        "duration_s": duration,
        "throughput": {
            "request_per_s": done.sum() / duration, "output_token_per_s": out_tok / duration,
            "total_token_per_s": (in_tok + out_tok) / duration,
            "goodput_request_per_s": good.sum() / duration,
        },
        "latency_ms": latency_block(res, done),
        "slo": _slo_verdict(res, lat, done),
        "preemption": {
            "count": int(res.num_preemptions.sum()),
            "requests_preempted": int((res.num_preemptions > 0).sum()),
            "recomputed_tokens": res.recomputed_tokens,
            "allocation_failures": res.counters["alloc_failures"],
            "requests_blocked_on_memory": res.counters["memory_blocked"],
            **swap_fields(res.counters),
        },
        "kv_cache": {**kv_block(steps, res.kv_total_blocks, res.resolved.block_size),
                     **concurrency_fields(steps)},
        "prefix_cache": prefix_cache_block(res.counters),
        "waiting": waiting_block(steps),
        "steps": steps_block(steps),
        "stability": stability(res),
        "lanes": lane_blocks(res),
        "sim": {"end_s": float(res.run.end_s), "stopped_at_limit": bool(res.run.stopped_at_limit),
                "stuck_requests": res.run.stuck},
    }


def _time_mean(x: np.ndarray, dur: np.ndarray) -> float:
    return float((x * dur).sum() / max(float(dur.sum()), 1e-12))


def kv_block(steps: dict, total: int, block_size: int) -> dict:
    """KV occupancy over time (time-weighted by step duration) and its waste.

    Waste = slots held by requests but not holding a token's KV: the partly filled
    last block of each request under paging, the unused reservation of contiguous
    policies (internal fragmentation).
    """
    used, dur, tokens = steps["kv_blocks_used"], steps["duration_s"], steps["kv_tokens"]
    if not len(used):
        return {"total_blocks": total}
    slots = used * block_size
    waste = np.where(slots > 0, 1.0 - tokens / np.maximum(slots, 1), 0.0)
    busy = slots > 0
    return {
        "total_blocks": total,
        "mean_used_fraction": _time_mean(used / max(total, 1), dur),
        "peak_used_fraction": float(used.max() / max(total, 1)),
        "peak_used_blocks": int(used.max()),
        "mean_wasted_slot_fraction": _time_mean(waste[busy], dur[busy]) if busy.any() else 0.0,
    }


def waiting_block(steps: dict) -> dict:
    """Mean number of requests waiting (time-weighted), split by why admission stopped."""
    dur, waiting, why = steps["duration_s"], steps["num_waiting"], steps["blocked"]
    total = max(float(dur.sum()), 1e-12)
    out = {"mean_waiting": float((waiting * dur).sum() / total)}
    for reason in sorted(set(why.tolist()) - {""}):
        m = why == reason
        out[f"mean_waiting_on_{reason}"] = float((waiting[m] * dur[m]).sum() / total)
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
