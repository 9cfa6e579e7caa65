"""One replica of a fleet: the single-run parts (KV, scheduler, cost, recorder, engine)
wired to a shared environment and a ``Pushed`` source, and its result afterwards.

The engine is the fast core's (sim/fast/engine.py, a SimPy process in the fleet's
environment) where a single run would take it (the fleet reads nothing more of a replica
than its source, ``busy_until``, ``kv_used_fraction`` and, for a step log, each plan at
its end); else the general ``Engine``. Both give the same results. A decode pool's
transferred prompts are priced by the same object either way (sim/fleet/disagg.py)."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

import numpy as np
import simpy

from sim.cost.base import COST_MODELS, CostModel
from sim.cost.drafter import priced_steps
from sim.cost.fitted import FittedCost
from sim.engine.engine import Engine, RunStatus, admissible
from sim.engine.requests import RequestSpecs
from sim.fast.engine import FastEngine
from sim.fleet.plan import DECODE, PoolPlan
from sim.fleet.source import Pushed
from sim.metrics.recorder import Recorder
from sim.runner import (
    DRAIN_FACTOR,
    DRAIN_MIN_PLANS,
    RunResult,
    RunWarning,
    _DrainLimit,
    _fast_unsupported,
    _observed,
    build_cost,
    build_kv,
    build_scheduler,
    chain_hooks,
    engine_arrivals,
    engine_delays,
    general_result_fields,
    ingress_per_token,
    verify_runs,
)


@dataclass(frozen=True)
class PoolSpecs:
    """A pool's view of the requests: lengths as its server serves them, and when they
    reach its schedulers relative to the client's send (``ingress_s``)."""

    specs: RequestSpecs  # run numbering; output cut to max_model_len; prefill: max_tokens 1
    client: RequestSpecs  # the same with the client's send times (latencies count from them)
    shortened: np.ndarray  # bool per request: max_tokens was cut to fit max_model_len
    ingress_s: float
    egress_s: float
    # per request: client send -> its pool's schedulers (s), the ingress plus the API
    # server's per-token part (sim.runner.engine_arrivals); None: the constant ingress_s
    delays: np.ndarray | None = None
    ingress_per_token_s: float = 0.0
    serial: bool = False  # engine.ingress_serial: one worker tokenizes the prompts in turn

    @property
    def serial_s(self) -> float | None:
        """api_server_seen's ``serial_const`` (s): the constant ingress, or None."""
        return self.ingress_s if self.serial else None


@dataclass
class Replica:
    name: str  # "<pool>/<index>"
    pool: PoolPlan
    index: int  # within its pool
    specs: PoolSpecs
    engine: Engine | FastEngine
    cost: CostModel
    kv: object
    sched: object
    recorder: Recorder | None  # the fast engine's is made at the end (result)
    drain: _DrainLimit | None  # the general engine's (the fast engine counts its own)
    source: Pushed
    drafter: object | None = None  # the general engine's speculative drafter, if priced
    done: bool = False  # its process has ended
    status: RunStatus | None = None  # how its event loop ended

    @property
    def fast(self) -> bool:
        return isinstance(self.engine, FastEngine)

    def kv_used_fraction(self) -> float:
        """The fraction of KV blocks in use, as the replica reports it to a router."""
        if self.fast:
            return self.engine.kv_used_fraction()
        f = self.engine.kv_used_fraction()
        return self.kv.used_fraction() if f is None else f

    @property
    def stopped(self) -> str:
        """Why its engine stopped ('' = it did not; vLLM v0: swap space full)."""
        return self.engine.s.stopped if self.fast else self.sched.stopped

    def failed(self) -> list[int]:
        """The admissible requests routed to it that it did not finish (after a stop: every
        one it held or had yet to see failed)."""
        status = self.engine.s.status if self.fast else self.sched.status
        ok = self.source.admissible
        return [r for r in self.source.received if ok[r] and status[r] != 3]  # FINISHED

    @property
    def busy_until(self) -> int:
        """End of the plan being executed, after the engine cut it (ns; -1 while idle): no
        request of this replica finishes before then."""
        return self.engine.busy_until


def shared_cost(r) -> CostModel | None:
    """A cost model every replica of a pool may price with (None: each builds its own). A
    fitted ops profile keeps nothing of a run, only memos of pure functions of a step's
    shape, so one serves them all (its set-up, restricting every table to the model, is
    most of what an idle replica costs); a steps fit counts a run's steps outside its
    ranges, and live mode runs kernels: those stay one per replica."""
    if COST_MODELS.get(r.scenario.cost.name) is not FittedCost:  # built per replica
        return None
    cost = build_cost(r)
    return cost if cost.file.kind == "ops" else None


def build(env: simpy.Environment, pool: PoolPlan, index: int, ps: PoolSpecs, stop_s: float,
          lookahead, on_finish, on_plan=None, wrap=None, ended=None,
          cost: CostModel | None = None) -> Replica:
    """A replica ready to start; ``wrap(executor)`` may change how its steps are priced
    (the decode pool prices transferred prompts as already in KV); ``on_plan``: each plan,
    reported at its end (a step log); ``cost``: the pool's shared model (``shared_cost``)."""
    r, specs = pool.resolved, ps.specs
    cost = build_cost(r) if cost is None else cost
    kv = build_kv(r, specs)
    sched = build_scheduler(r, specs, kv)
    name = f"{pool.name}/{index}"
    source = Pushed(admissible(specs, sched), lookahead,
                    lambda reqs, now: on_finish(rep, reqs, now), ended)
    # the decode pool's transferred prompts are priced from step shapes (disagg.py)
    if not _fast_unsupported(r, sched, kv, cost, None) and (wrap is None or
                                                             cost.prices_shapes):
        from sim import fast

        priced = None if wrap is None else wrap(None)  # prices the fast engine's steps too
        engine = fast.build(specs, sched, kv, cost, source, stop_s=stop_s,
                            egress_s=ps.egress_s, drain=(DRAIN_MIN_PLANS, DRAIN_FACTOR),
                            on_plan=on_plan, stream=False, env=env, priced=priced)
        rep = Replica(name, pool, index, ps, engine, cost, kv, sched, None, None, source)
        return rep
    recorder = Recorder(len(specs), egress_s=ps.egress_s)
    executor, drafter = priced_steps(cost, r)  # a drafter's passes lengthen steps, as a run
    executor = executor if wrap is None else wrap(executor)
    sched.spec_runs = wrap is None and verify_runs(cost, drafter)
    hooks = cost.after_plan if type(cost).after_plan is not CostModel.after_plan else None
    if type(cost).observe is not CostModel.observe:
        hooks = _observed(cost, hooks)
    if drafter is not None:  # counts the drafter's time of the steps that ran
        hooks = chain_hooks(drafter.settle, hooks)
    drain = _DrainLimit(executor)
    engine = Engine(specs, sched, drain, recorder, stop_s=stop_s, num_arrivals=len(specs),
                    on_plan=chain_hooks(hooks, on_plan), source=source, env=env)
    drain.engine = engine
    rep = Replica(name, pool, index, ps, engine, cost, kv, sched, recorder, drain, source,
                  drafter=drafter)
    cost.start_run(kv, engine)
    return rep


def start(rep: Replica):
    proc = rep.engine.start()

    def ended(event):
        rep.done, rep.status = True, event.value
    proc.callbacks.append(ended)
    return proc


def result(rep: Replica, never_sent: int, wall_s: float) -> RunResult:
    """The replica's result in run numbering (rows of requests it never saw stay PENDING)."""
    cost = rep.cost
    cost.end_run()
    if rep.fast:
        from sim import fast

        out = fast.result(rep.engine, rep.specs.specs, rep.status)
        rep.recorder = out.recorder
        cut, budget = out.drain_cut, out.drain_budget
    else:
        rep.kv.check_integrity()
        cut, budget = rep.drain.cut, rep.drain.budget
    if cut:
        warnings.warn(f"replica {rep.name}: the backlog left at the last arrival did not "
                      f"drain within {budget:,} engine steps (the drain limit); the "
                      "run stopped there and reports the rest unfinished", RuntimeWarning,
                      stacklevel=2)
    said = tuple(cost.run_warnings())
    for w in said:
        warnings.warn(w, RunWarning, stacklevel=2)
    r = rep.pool.resolved
    if rep.fast:
        return RunResult(
            resolved=r, specs=rep.specs.client,
            **out.result_fields(r.scenario.engine.preemption_mode, rep.kv),
            never_sent=never_sent, wall_s=wall_s, ingress_s=rep.specs.ingress_s,
            egress_s=rep.specs.egress_s, warnings=said,
            ingress_per_token_s=rep.specs.ingress_per_token_s, host_times=cost.host_times)
    return RunResult(
        resolved=r, specs=rep.specs.client, recorder=rep.recorder,
        **general_result_fields(rep.sched, rep.kv, r.scenario.engine.preemption_mode,
                                rep.drafter),
        run=rep.status, never_sent=never_sent, wall_s=wall_s, drain_cut=cut, shortened=0,
        ingress_s=rep.specs.ingress_s, egress_s=rep.specs.egress_s, warnings=said,
        ingress_per_token_s=rep.specs.ingress_per_token_s, host_times=cost.host_times)


def pool_specs(pool: PoolPlan, specs: RequestSpecs, prefill: bool) -> PoolSpecs:
    """The requests as ``pool``'s servers see them (see PoolSpecs)."""
    from sim.sched.lengths import serve

    r = pool.resolved
    served, _ = serve(specs, r.limits.max_model_len, r.scenario.engine.strict_max_model_len)
    shortened = served.output_tokens < specs.output_tokens
    if prefill:  # the prefill server runs each request with max_tokens 1
        served = dataclasses.replace(served, output_tokens=_ro(np.ones(len(specs), np.int64)))
    cost = build_cost(r)
    ingress, egress = engine_delays(r, cost)
    # the API server's per-token part is paid where the client's request enters (a decode
    # pool's ingress is the hop from its prefill pool)
    per_token = ingress_per_token(r, cost) if pool.role != DECODE else 0.0
    serial = r.scenario.engine.ingress_serial
    seen, delays = engine_arrivals(served, ingress, per_token, serial)
    return PoolSpecs(seen, served, shortened, ingress, egress, delays, per_token, serial)


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a
