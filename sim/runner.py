"""Run one scenario over one trace: wire the components, run the loop, collect results."""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.config.memory import GIB
from sim.config.resolve import Resolved
from sim.cost.base import COST_MODELS, CostModel, RunExtras
from sim.cost.drafter import priced_steps
from sim.engine.arrivals import (
    ArrivalSource,
    Gated,
    OpenLoop,
    api_server_seen_all,
    client_sent,
)
from sim.engine.clock import ns, to_ns
from sim.engine.engine import Engine, RunStatus, admissible
from sim.engine.requests import RequestSpecs
from sim.kv.base import KV_POLICIES, KVManager
from sim.kv.prefix_cache import PrefixCachingKV
from sim.kv.swap import HostPool
from sim.metrics.recorder import Recorder
from sim.sched.admission import ADMISSION_RULES
from sim.sched.base import SCHEDULERS, Scheduler, arrived_as_waiting
from sim.sched.lengths import serve
from sim.warning import RunWarning

SAFETY_MIN_S = 3600.0  # an unbounded run stops this long (or 4 spans) after the last arrival
# Once every request has arrived, the engine may run at most max(DRAIN_MIN_PLANS,
# DRAIN_FACTOR x the plans before) more plans: an overloaded configuration (a one-token
# step budget, say) ends in seconds with its backlog reported unfinished, not in hours.
DRAIN_MIN_PLANS, DRAIN_FACTOR = 50_000, 2


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
    never_sent: int  # requests of the workload arriving at or after the horizon
    wall_s: float
    drain_cut: bool = False  # the drain limit (DRAIN_MIN_PLANS) stopped the run
    shortened: int = 0  # requests served with max_tokens shortened to fit max_model_len
    ingress_s: float = 0.0  # client send -> visible to the scheduler (s)
    ingress_per_token_s: float = 0.0  # plus this per prompt token (s per token)
    egress_s: float = 0.0  # step end -> token at the client (s)
    warnings: tuple[str, ...] = ()  # said once per run (e.g. a fitted model's ranges left)
    client_queue_s: np.ndarray | None = None  # gated arrivals: sent - ready, per request (s)
    extras: RunExtras | None = None  # what the executor adds (live mode: measurements)
    core: str = "general"  # the simulation core that ran (sim.fast: "fast")
    # the cost model's host part of a step (s) from (tokens, requests) arrays, or None:
    # the summary's schedule block (CostModel.host_times)
    host_times: Callable | None = None
    # speculative decoding (engine.speculative_config): acceptance counts and drafter time
    speculative: dict | None = None


def build_kv(r: Resolved, specs: RequestSpecs) -> KVManager:
    """The KV policy; ``engine.enable_prefix_caching`` swaps paged for its caching pool and
    ``engine.preemption_mode: swap`` attaches ``swap_space`` GiB of host blocks."""
    engine = r.scenario.engine
    cls = KV_POLICIES.get(r.scenario.kv.name)
    if r.scenario.prefix_caching:  # the scenario allows it with paged only
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
    sched = cls(specs, r.limits, kv, sc.scheduler.params, admission=admission)
    sched.async_scheduling = sc.engine.async_scheduling
    spec = sc.engine.speculative_config
    if spec is not None:
        sched.enable_spec(spec, sc.seed)
        kv.drop_last_hit = spec.drops_last_hit_block
    return sched


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


def verify_runs(cost: CostModel, drafter) -> bool:
    """Whether the scheduler may fold speculative verify steps into runs: where a drafter
    prices each step of a run as alone (Drafter._run_times; its cost model prices shapes,
    so it watches no plan) and no cost-model hook reads plans."""
    return drafter is not None and cost.prices_shapes and \
        type(cost).after_plan is CostModel.after_plan


class _DrainLimit:
    """Wraps the executor and stops the engine (as a horizon would, after the current step)
    when the drain after the last arrival exceeds its plan budget."""

    def __init__(self, executor):
        self.executor, self.engine = executor, None
        self.plans, self.limit, self.budget, self.cut = 0, None, 0, False

    def __call__(self, plan):
        self.plans += 1
        eng = self.engine
        if eng is not None and eng.source.exhausted():  # every request has arrived
            if self.limit is None:
                self.budget = max(DRAIN_MIN_PLANS, DRAIN_FACTOR * self.plans)
                self.limit = self.plans + self.budget
            elif self.plans > self.limit and not self.cut:
                eng.stop, self.cut = min(eng.stop, eng.clock), True  # same unit (ns)
        return self.executor(plan)


def engine_delays(r: Resolved, cost: CostModel | None) -> tuple[float, float]:
    """(ingress, egress) in seconds: the scenario's ``engine.*_ms``, else the cost model's
    fitted values (a fit-steps profile), else 0."""
    fitted = cost.fitted_delays_s() if cost is not None else None
    e = r.scenario.engine
    ingress = e.ingress_ms * 1e-3 if e.ingress_ms is not None else (fitted or (0.0, 0.0))[0]
    egress = e.egress_ms * 1e-3 if e.egress_ms is not None else (fitted or (0.0, 0.0))[1]
    return ingress, egress


def ingress_per_token(r: Resolved, cost: CostModel | None) -> float:
    """Seconds per prompt token on top of the ingress: ``engine.ingress_per_token_us``, else
    the cost model's value, else 0."""
    e = r.scenario.engine
    if e.ingress_per_token_us is not None:
        return e.ingress_per_token_us * 1e-6
    return cost.fitted_ingress_per_token_s() if cost is not None else 0.0


def engine_arrivals(specs: RequestSpecs, ingress: float, per_token: float,
                    serial: bool = False):
    """(the requests as the engine sees them, per-request delays in s or None): each
    request ``ingress + per_token x prompt`` after it is sent, in the order sent (a
    request behind a longer prompt waits for it; ``serial``: the prompts are tokenized
    one after another, sim.engine.arrivals.api_server_seen); with no per-token part, the
    constant shift (and None)."""
    if not per_token:
        seen = specs if not ingress else dataclasses.replace(
            specs, arrival_s=_frozen(specs.arrival_s + ingress))
        return seen, None
    delays = ingress + per_token * specs.prompt_tokens.astype(np.float64)
    seen = dataclasses.replace(specs, arrival_s=_frozen(
        api_server_seen_all(specs.arrival_s, delays, ingress, serial)))
    return seen, delays


def _client_sent(source, ingress: float, specs: RequestSpecs) -> np.ndarray:
    """A gated run's client send times (s): exact with per-request delays, else the
    engine's arrival less the constant ingress."""
    sent = source.client_times()
    return sent if sent is not None else client_sent(source.arrival_times(), ingress,
                                                     specs.arrival_s)


def chain_hooks(first, second):
    """One on_plan hook calling ``first`` then ``second`` (either may be None)."""
    if first is None or second is None:
        return first or second

    def both(*args):
        first(*args)
        second(*args)

    return both


def simulate(r: Resolved, specs: RequestSpecs, *, executor=None, on_plan=None,
             progress=None, stop_s: float | None = None,
             spill_dir: str | None = None) -> RunResult:
    """Replay ``specs`` through the resolved scenario.

    ``executor``: a plain ``plan -> durations`` callable, or a CostModel (whose run hooks
    are called); default: the scenario's cost model (``cost: {name: live}`` executes).
    The engine sees each request ``ingress`` after the client sends it (its arrival in
    ``specs``); the recorder adds ``egress`` to client-visible times; the result's ``specs``
    keep the client's send times, so latencies are measured as a client measures them.
    ``stop_s``: no step starts at or after it (default: the horizon, or the safety limit
    after the last arrival; a fleet gives each replica the fleet's). ``spill_dir``: where
    a long run on the fast core streams its step rows (sim/metrics/spill.py; default: the
    system's temporary folder)."""
    t0 = time.perf_counter()
    stop = _stop_time(r, specs.arrival_s) if stop_s is None else stop_s
    n_all = len(specs)
    specs = specs.head(int(np.searchsorted(specs.arrival_s, stop, side="left")))
    specs, shortened = serve(specs, r.limits.max_model_len, r.scenario.engine.strict_max_model_len)
    n = len(specs)
    cost = build_cost(r) if executor is None else executor  # live mode checks memory here
    if not isinstance(cost, CostModel):
        cost = None
    ingress, egress = engine_delays(r, cost)
    per_token = ingress_per_token(r, cost)
    serial = r.scenario.engine.ingress_serial
    seen, delays = engine_arrivals(specs, ingress, per_token, serial)
    kv = build_kv(r, seen)
    sched = build_scheduler(r, seen, kv)
    hook = on_plan  # the caller's own (a step log); the cost model's hooks are not
    drafter = None
    if cost is not None:
        executor, drafter = priced_steps(cost, r)  # a drafter's passes lengthen each step
        overridden = type(cost).after_plan is not CostModel.after_plan
        on_plan = chain_hooks(cost.after_plan if overridden else None, on_plan)
        if type(cost).observe is not CostModel.observe:
            on_plan = _observed(cost, on_plan)
        sched.spec_runs = verify_runs(cost, drafter)
        if drafter is not None:  # counts the drafter's time of the steps that ran
            on_plan = chain_hooks(drafter.settle, on_plan)
    source = arrival_source(r, seen, sched, ingress + egress, specs, delays, egress,
                            ingress if serial else None)
    del delays  # a gated source keeps its own (8 bytes a request)
    why = _fast_unsupported(r, sched, kv, cost, source)
    if not why:
        return _simulate_fast(r, specs, seen, sched, kv, cost, source, stop, t0, progress,
                              n_all - n, shortened, ingress, egress, hook, spill_dir)
    recorder = Recorder(len(specs), egress_s=egress)
    drain = _DrainLimit(executor)
    engine = Engine(seen, sched, drain, recorder, stop_s=stop, num_arrivals=n,
                    on_plan=on_plan, progress=progress, source=source)
    drain.engine = engine
    if cost is not None:
        cost.start_run(kv, engine)
    try:
        status = engine.run()
    finally:
        extras = cost.end_run() if cost is not None else None
    kv.check_integrity()
    if drain.cut:
        warnings.warn(f"the backlog left at the last arrival did not drain within "
                      f"{drain.budget:,} engine steps (the drain limit); the run stopped there "
                      "and reports the rest unfinished", RuntimeWarning, stacklevel=2)
    said = tuple(cost.run_warnings()) if cost is not None else ()
    for w in said:
        warnings.warn(w, RunWarning, stacklevel=2)
    res = RunResult(
        resolved=r, specs=specs, recorder=recorder,
        **general_result_fields(sched, kv, r.scenario.engine.preemption_mode, drafter),
        run=status, never_sent=n_all - n,
        wall_s=time.perf_counter() - t0, drain_cut=drain.cut, shortened=shortened,
        ingress_s=ingress, egress_s=egress, warnings=said, extras=extras,
        ingress_per_token_s=per_token,
        host_times=cost.host_times if cost is not None else None,
    )
    return res if isinstance(source, OpenLoop) else _as_sent(
        res, _client_sent(source, ingress, specs))



def general_result_fields(sched: Scheduler, kv: KVManager, preemption_mode: str,
                          drafter) -> dict:
    """The RunResult fields that come from the general scheduler and its KV manager
    (the fast core's: sim.fast.FastRun.result_fields)."""
    return dict(
        status=arrived_as_waiting(sched.status), num_preemptions=sched.num_preemptions.copy(),
        cached_tokens=sched.cached_tokens.copy(), generated=sched.generated.copy(),
        recomputed_tokens=sched.recomputed_tokens,
        counters={"alloc_failures": sched.alloc_failures,
                  "memory_blocked": int(sched.memory_blocked.sum()),
                  "engine_stopped": sched.stopped, "preemption_mode": preemption_mode,
                  **kv.counters()},
        kv_total_blocks=kv.num_blocks, speculative=_spec_summary(sched, drafter))


def _spec_summary(sched: Scheduler, drafter) -> dict | None:
    """The summary's ``speculative`` block: acceptance as vLLM logs it, drafter time."""
    if sched.spec is None:
        return None
    out = sched.spec.summary()
    if drafter is not None:
        out |= drafter.summary()
    return out


def _fast_unsupported(r: Resolved, sched, kv, cost, source) -> str:
    """'' when the fast core runs this scenario (``core: auto`` or ``fast``), else why not;
    ``core: fast`` with a scenario it does not run is an input error."""
    core = r.scenario.core
    if core == "general":
        return "core: general"
    from sim.fast import unsupported

    why = unsupported(r.scenario, sched, kv, cost, source)
    if why and core == "fast":
        from traces.errors import InputError

        raise InputError(f"core: fast does not run this scenario: {why}; use core: auto")
    return why


def _simulate_fast(r, specs, seen, sched, kv, cost, source, stop, t0, progress, never_sent,
                   shortened, ingress, egress, hook, spill_dir=None) -> RunResult:
    from sim import fast

    # a streamed run settles the ITL of the requests its summary measures apart from the
    # warm-up's (sim.metrics.warmup); a gated run's send times are known only as it goes,
    # so with a warm-up it keeps its rows
    warmup = float(r.scenario.workload.warmup_s)
    gated = not isinstance(source, OpenLoop)
    judged = specs.arrival_s >= warmup if warmup and not gated else None
    # the general scheduler's per-request progress goes unused here (16 bytes a request)
    sched.known_tokens = sched.cached_tokens = None
    out = fast.run(seen, sched, kv, cost, source, stop_s=stop, egress_s=egress,
                   drain=(DRAIN_MIN_PLANS, DRAIN_FACTOR), progress=progress, on_plan=hook,
                   stream=not (warmup and gated), spill_dir=spill_dir, judged=judged)
    if out.drain_cut:
        warnings.warn(f"the backlog left at the last arrival did not drain within "
                      f"{out.drain_budget:,} engine steps (the drain limit); the run stopped "
                      "there and reports the rest unfinished", RuntimeWarning, stacklevel=3)
    said = tuple(cost.run_warnings())
    for w in said:
        warnings.warn(w, RunWarning, stacklevel=3)
    if out.recorder.streamed:  # a long run: what it memoised and freed goes back now
        from sim.metrics.spill import release_memory

        cost.forget()
        release_memory()
    res = RunResult(
        resolved=r, specs=specs, **out.result_fields(r.scenario.engine.preemption_mode, kv),
        never_sent=never_sent, wall_s=time.perf_counter() - t0, shortened=shortened,
        ingress_s=ingress, egress_s=egress, warnings=said,
        ingress_per_token_s=ingress_per_token(r, cost), host_times=cost.host_times,
    )
    return res if isinstance(source, OpenLoop) else _as_sent(
        res, _client_sent(source, ingress, specs))


def _observed(cost: CostModel, on_plan):
    """``on_plan`` that also shows every committed plan to the cost model."""
    def both(plan, starts, durations, outcome):
        cost.observe(plan)
        if on_plan is not None:
            on_plan(plan, starts, durations, outcome)
    return both


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.float64)
    a.flags.writeable = False
    return a


def arrival_source(r: Resolved, specs: RequestSpecs, sched: Scheduler,
                   turnaround_s: float = 0.0, client: RequestSpecs | None = None,
                   delays: np.ndarray | None = None, egress_s: float = 0.0,
                   serial_s: float | None = None) -> ArrivalSource:
    """Open loop at the (engine-seen) ``specs``' times, or gated by
    ``workload.arrival.concurrency``. ``turnaround_s`` (egress + ingress) lies between a
    finish the scheduler sees and the client's next request reaching it, on top of the
    think time; with per-request ``delays`` (s, engine_arrivals) the gate sends at the
    ``client``'s times and each request reaches the engine its delay later (``serial_s``:
    the delays' constant part, when one worker tokenizes the prompts in turn)."""
    a = r.scenario.workload.arrival
    ok = admissible(specs, sched)
    if a.concurrency is None:
        return OpenLoop(to_ns(specs.arrival_s), ok)
    if delays is not None:
        return Gated(to_ns(client.arrival_s), ok, a.concurrency, ns(a.think_s + egress_s),
                     delay_ns=to_ns(delays),
                     serial_ns=None if serial_s is None else ns(serial_s))
    return Gated(to_ns(specs.arrival_s), ok, a.concurrency, ns(a.think_s + turnaround_s))


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
        generated=res.generated[cut], never_sent=res.never_sent + len(res.specs) - m,
        client_queue_s=sent[:m] - ready)
