"""Run one scenario over one trace: wire the components, run the loop, collect results."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from sim.config.memory import GIB
from sim.config.resolve import Resolved
from sim.cost.base import COST_MODELS, CostModel, RunExtras
from sim.engine.engine import Engine, RunStatus
from sim.engine.requests import RequestSpecs
from sim.kv.base import KV_POLICIES, KVManager
from sim.kv.prefix_cache import PrefixCachingKV
from sim.kv.swap import HostPool
from sim.metrics.recorder import Recorder
from sim.sched.admission import ADMISSION_RULES
from sim.sched.base import SCHEDULERS, Scheduler

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
    extras: RunExtras | None = None  # what the executor adds (live mode: measurements)


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
        kv.host = HostPool(int(engine.swap_space * GIB) // block, block)
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
    if not len(arrival):
        return 0.0
    span = float(arrival[-1] - arrival[0])
    return float(arrival[-1]) + max(SAFETY_MIN_S, 4 * span)


def chain_hooks(first, second):
    """One on_plan hook calling ``first`` then ``second`` (either may be None)."""
    if first is None or second is None:
        return first or second

    def both(*args):
        first(*args)
        second(*args)

    return both


def simulate(r: Resolved, specs: RequestSpecs, *, executor=None, on_plan=None,
             progress=None) -> RunResult:
    """Replay ``specs`` through the resolved scenario.

    ``executor``: a plain ``plan -> durations`` callable, or a CostModel (whose run hooks
    are called); default: the scenario's cost model (``cost: {name: live}`` executes)."""
    t0 = time.perf_counter()
    stop = _stop_time(r, specs.arrival_s)
    n_all = len(specs)
    specs = specs.head(int(np.searchsorted(specs.arrival_s, stop, side="left")))
    n = len(specs)
    cost = build_cost(r) if executor is None else executor  # live mode checks memory here
    kv = build_kv(r, specs)
    sched = build_scheduler(r, specs, kv)
    recorder = Recorder(len(specs))
    if isinstance(cost, CostModel):
        executor = cost.step_times
        overridden = type(cost).after_plan is not CostModel.after_plan
        hook = cost.after_plan if overridden else None  # pricing models: no per-plan call
    else:
        cost, hook = None, None
    engine = Engine(specs, sched, executor, recorder, stop_s=stop, num_arrivals=n,
                    on_plan=chain_hooks(hook, on_plan), progress=progress)
    if cost is not None:
        cost.start_run(kv, engine)
    try:
        status = engine.run()
    finally:
        extras = cost.end_run() if cost is not None else None
    kv.check_integrity()
    return RunResult(
        resolved=r, specs=specs, recorder=recorder, status=sched.status.copy(),
        num_preemptions=sched.num_preemptions.copy(), cached_tokens=sched.cached_tokens.copy(),
        generated=sched.generated.copy(), recomputed_tokens=sched.recomputed_tokens,
        counters={"alloc_failures": sched.alloc_failures,
                  "memory_blocked": int(sched.memory_blocked.sum()),
                  "preemption_mode": r.scenario.engine.preemption_mode, **kv.counters()},
        kv_total_blocks=kv.num_blocks, run=status, dropped_after_horizon=n_all - n,
        wall_s=time.perf_counter() - t0, extras=extras,
    )
