"""Per-lane breakdown of a run (interactive vs batch, or any lane tags the trace has).

Each lane gets the run-level definitions restricted to its requests: counts,
TTFT/TPOT/E2EL distributions, its duration (its first arrival to its last finish, as
`vllm bench serve` would measure the lane alone), request and output throughput and
goodput over that duration (so a batch lane that ran for a minute of an hour is not
diluted by the hour; lanes' throughputs need not add up to the run's), and the SLO
verdict against the scenario's budgets (one set of budgets: a batch lane failing an
interactive TTFT budget is expected and shown, not hidden).
"""

from __future__ import annotations

from sim.metrics.latency import latency_block, request_latencies, run_duration
from sim.metrics.slo import goodput_mask, slo_verdict
from sim.sched.base import Status


def lane_blocks(res, judged=None, lat: dict | None = None) -> dict:
    """Latency, throughput, goodput and SLO verdict per lane, over the requests in
    ``judged`` (all: None; the warm-up left out: ``sim.metrics.warmup``); empty with a
    single lane."""
    s = res.specs
    if len(s.lane_names) < 2:
        return {}
    out = {}
    done = res.status == Status.FINISHED
    lat = request_latencies(res) if lat is None else lat
    good = goodput_mask(res, lat, done)
    for code, name in enumerate(s.lane_names):
        mask = s.lane == code if judged is None else (s.lane == code) & judged
        mine = mask & done
        duration = run_duration(res, done, mask)
        out[name] = {
            "requests": int(mask.sum()),
            "finished": int(mine.sum()),
            "preemptions": int(res.num_preemptions[mask].sum()),
            "duration_s": duration,
            "throughput": {
                "request_per_s": int(mine.sum()) / duration,
                "output_token_per_s": int(res.generated[mine].sum()) / duration,
                "goodput_request_per_s": int((good & mask).sum()) / duration,
            },
            "latency_ms": latency_block(res, mine, itl=False, lat=lat),
            "slo": slo_verdict(res, lat, mask),
        }
    return out
