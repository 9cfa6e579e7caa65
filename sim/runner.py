"""Run one scenario over one trace: wire the components, run the loop, collect results."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from sim.config.memory import GIB
from sim.config.resolve import Resolved
from sim.cost.base import COST_MODELS, CostModel
from sim.engine.arrivals import ArrivalSource, Gated, OpenLoop
from sim.engine.clock import ns, to_ns
from sim.engine.engine import Engine, RunStatus, admissible
from sim.engine.requests import RequestSpecs
from sim.kv.base import KV_POLICIES, KVManager
from sim.kv.prefix_cache import PrefixCachingKV
from sim.kv.swap import HostPool
from sim.metrics.recorder import Recorder
from sim.sched.admission import ADMISSION_RULES
from sim.sched.base import SCHEDULERS, Scheduler
from sim.sched.lengths import serve

SAFETY_MIN_S = 3600.0  # an unbounded run stops this long (or 4 spans) after the last arrival


@dataclass(frozen=True)
class RunResult:
    resolved: Resolved
    specs: RequestSpecs  # only the requests that arrive within the horizon
    recorder: Recorder
    status: np.ndarray  # final sim.sched.Status per request
    num_preemptions: np.ndarray
    cached_tokens: np.ndarray  # prefix-cache hit at first admission (tokens; -1 never ran)
    generated: np.ndarray  # output tokens emitted per request
    recomputed_tokens: int  # tokens thrown away by preemption (tokens)
    counters: dict  # scheduler and KV counters (allocation failures, ...)
    kv_total_blocks: int
    run: RunStatus
    dropped_after_horizon: int  # requests of the trace arriving after the horizon
    wall_s: float
    shortened: int = 0  # requests served with max_tokens shortened to fit max_model_len
    client_queue_s: np.ndarray | None = None  # gated arrivals: sent - ready, per request (s)


def build_kv(r: Resolved, specs: RequestSpecs) -> KVManager:
    """The KV policy; ``engine.enable_prefix_caching`` swaps paged for its caching pool and
    ``engine.preemption_mode: swap`` attaches ``swap_space`` GiB of host blocks."""
    engine = r.scenario.engine
    cls = KV_POLICIES.get(r.scenario.kv.name)
    if engine.enable_prefix_caching:  # the scenario allows it with paged only
        cls = PrefixCachingKV
    kv = cls(num_blocks=r.memory.usable_blocks, block_size=r.block_size,
             num_requests=len(specs), max_model_len=r.limits.max_model_len,
             prompt_tokens=specs.prompt_tokens, output_tokens=specs.output_tokens,
             params=r.scenario.kv.params, specs=specs)
    if engine.preemption_mode == "swap":
        block = r.memory.block_bytes  # one KV block on one GPU (bytes)
        kv.host = HostPool(int(engine.swap_space * GIB) // block, block,
                           on_full=engine.swap_space_full)
    return kv


def build_scheduler(r: Resolved, specs: RequestSpecs, kv: KVManager) -> Scheduler:
    sc = r.scenario
    admission = ADMISSION_RULES.get(sc.admission.name)(specs, r.limits, kv, sc.admission.params)
    cls = SCHEDULERS.get(sc.scheduler.name)
    return cls(specs, r.limits, kv, sc.scheduler.params, admission=admission)


def build_cost(r: Resolved) -> CostModel:
    cls = COST_MODELS.get(r.scenario.cost.name)
    return cls(r.model, r.gpu, r.tp, r.scenario.cost.params, resolved=r)


def _stop_time(r: Resolved, arrival: np.ndarray) -> float:
    if r.scenario.horizon_s is not None:
        return r.scenario.horizon_s
    if r.scenario.workload.arrival.concurrency is not None:
        # gated: at most `concurrency` requests in the system, each send waits for a finish,
        # so the run ends when the work does (no backlog can grow without bound)
        return float("inf")
    if not len(arrival):
        return 0.0
    span = float(arrival[-1] - arrival[0])
    return float(arrival[-1]) + max(SAFETY_MIN_S, 4 * span)


def simulate(r: Resolved, specs: RequestSpecs, *, executor=None, on_plan=None,
             progress=None) -> RunResult:
    """Replay ``specs`` through the resolved scenario. ``executor`` defaults to the cost model."""
    t0 = time.perf_counter()
    stop = _stop_time(r, specs.arrival_s)
    n_all = len(specs)
    specs = specs.head(int(np.searchsorted(specs.arrival_s, stop, side="left")))
    specs, shortened = serve(specs, r.limits.max_model_len, r.scenario.engine.strict_max_model_len)
    n = len(specs)
    kv = build_kv(r, specs)
    sched = build_scheduler(r, specs, kv)
    recorder = Recorder(len(specs))
    if executor is None:
        executor = build_cost(r).step_times
    source = arrival_source(r, specs, sched)
    engine = Engine(specs, sched, executor, recorder, stop_s=stop, num_arrivals=n,
                    on_plan=on_plan, progress=progress, source=source)
    status = engine.run()
    kv.check_integrity()
    res = RunResult(
        resolved=r, specs=specs, recorder=recorder, status=sched.status.copy(),
        num_preemptions=sched.num_preemptions.copy(), cached_tokens=sched.cached_tokens.copy(),
        generated=sched.generated.copy(), recomputed_tokens=sched.recomputed_tokens,
        counters={"alloc_failures": sched.alloc_failures,
                  "memory_blocked": int(sched.memory_blocked.sum()),
                  "engine_stopped": sched.stopped,
                  "preemption_mode": r.scenario.engine.preemption_mode, **kv.counters()},
        kv_total_blocks=kv.num_blocks, run=status, dropped_after_horizon=n_all - n,
        wall_s=time.perf_counter() - t0, shortened=shortened,
    )
    return res if isinstance(source, OpenLoop) else _as_sent(res, source.arrival_times())


def arrival_source(r: Resolved, specs: RequestSpecs, sched: Scheduler) -> ArrivalSource:
    """Open loop at the trace's times, or gated by ``workload.arrival.concurrency``."""
    a = r.scenario.workload.arrival
    ok = admissible(specs, sched)
    if a.concurrency is None:
        return OpenLoop(to_ns(specs.arrival_s), ok)
    return Gated(to_ns(specs.arrival_s), ok, a.concurrency, ns(a.think_s))


def _as_sent(res: RunResult, sent: np.ndarray) -> RunResult:
    """A gated run seen from the server: requests arrive when sent (vllm bench serve's
    latencies start there); requests never sent (the run hit its horizon) are dropped.
    Requests are sent in index order, so the sent ones are a prefix."""
    m = int(np.count_nonzero(~np.isnan(sent)))
    ready, specs = res.specs.arrival_s[:m], res.specs.head(m)
    specs = dataclasses.replace(specs, arrival_s=np.ascontiguousarray(sent[:m]))
    specs.arrival_s.flags.writeable = False
    cut = slice(0, m)
    return dataclasses.replace(
        res, specs=specs, recorder=res.recorder.head(m), status=res.status[cut],
        num_preemptions=res.num_preemptions[cut], cached_tokens=res.cached_tokens[cut],
        generated=res.generated[cut], dropped_after_horizon=res.dropped_after_horizon
        + len(res.specs) - m, client_queue_s=sent[:m] - ready)
