"""The fast core: the general engine's results for the common scenario, at a fraction of
the work per step.

    sim/fast/state.py    request progress with implicit decode progress, emission runs
    sim/fast/sched.py    vLLM v1's schedule() on that state (a fast path and the exact loop)
    sim/fast/blocks.py   paged KV as a block count (the scheduler's block seams)
    sim/fast/caching.py  the same seams on vLLM's prefix-caching pool
    sim/fast/priority.py vllm-priority: the heap queue, the least urgent victim
    sim/fast/lanes.py    lanes: the step lane by lane, the batch lane's KV room
    sim/fast/lane_counts.py  the two lane queues, the interactive lane's aggregates
    sim/fast/admission.py  the reserve admission rule on that state
    sim/fast/upfront.py  KV reserved up front (contiguous-max, contiguous-exact; orca)
    sim/fast/swap.py     swap preemption (vLLM v0): the host pool, the swapped queue
    sim/fast/static.py   static batches (a batch's blocks taken at its start, a deadline)
    sim/fast/v0.py       vLLM v0's block manager and service order (prefill-first, sarathi)
    sim/fast/prefill_first.py  vLLM v0's prefill-first steps
    sim/fast/sarathi.py  Sarathi-Serve's stall-free steps
    sim/fast/arrivals.py open loops, gated sources (closed loops, concurrency caps) and a
                         fleet replica's pushed source
    sim/fast/engine.py   the event loop: the general engine's plans, priced from aggregates
                         (alone, or a SimPy process in a fleet: sim/fleet/replica.py)
    sim/fast/record.py   recording, turned into the general Recorder at the end
    sim/fast/hooks.py    StepPlan / StepOutcome for per-plan hooks

It runs a scenario when the general engine would run it with the ``vllm`` scheduler (FCFS),
``vllm-priority`` (sim/fast/priority.py), ``lanes`` (sim/fast/lanes.py), ``orca``,
``prefill-first`` and ``sarathi`` (sim/fast/v0.py: paged KV without prefix caching,
optimistic admission) or ``static`` (sim/fast/static.py: the same), optimistic
or ``reserve`` admission (sim/fast/admission.py), paged KV with or without prefix caching
(sim/fast/caching.py) or reserved up front (sim/fast/upfront.py; not with lanes or
``reserve`` admission), recompute or swap preemption (sim/fast/swap.py: vllm,
vllm-priority or prefill-first, paged KV), open-loop or gated arrivals (closed loops,
concurrency caps: sim/fast/arrivals.py), any cost model (one that prices step shapes,
``fitted`` ops profiles, ``roofline`` or ``linear``, from the aggregates; one that prices
whole plans, a ``fitted`` steps file, from each plan built as the general engine's,
sim/fast/engine.py ``whole``), with or without async scheduling, and no executor hooks
(live mode). A caller's per-plan hook (the step log, the conformance comparer) gets the
general engine's StepPlan and StepOutcome (sim/fast/hooks.py).
``core: auto`` (the default) uses it then, the general engine otherwise; ``core:
general`` always uses the general engine. Its results equal the general engine's
(tests/fast compares them column by column; the conformance references replay through
both), ITL summaries included (sim/metrics/stats.py sums the sample exactly, however it
is split into values and weights).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cost.base import CostModel
from sim.engine.arrivals import ArrivalSource, Gated, OpenLoop
from sim.engine.clock import MAX_NS, ns
from sim.engine.engine import RunStatus, admissible
from sim.engine.requests import COMPACT_ROWS
from sim.fast.admission import ReserveAdmission
from sim.fast.caching import CachingScheduler
from sim.fast.engine import FastEngine
from sim.fast.lanes import CachingLanes, FastLanes
from sim.fast.prefill_first import FastPrefillFirst
from sim.fast.priority import CachingPriorityScheduler, PriorityScheduler
from sim.fast.record import FastRecord
from sim.fast.sarathi import FastSarathi
from sim.fast.sched import CACHING, FEATURES, FLEET, RESERVE, UPFRONT, FastScheduler
from sim.fast.static import FastStatic
from sim.fast.swap import SwapPreemption
from sim.fast.upfront import UpFront
from sim.kv.paged import PagedKV
from sim.kv.prefix_cache import PrefixCachingKV
from sim.kv.reservation import ReservationKV
from sim.metrics.recorder import Recorder
from sim.sched.admission import Optimistic
from sim.sched.admission_reserve import Reserve
from sim.sched.base import arrived_as_waiting
from sim.sched.lanes import LaneQueue, LanesScheduler
from sim.sched.orca import OrcaScheduler
from sim.sched.prefill_first import PrefillFirstScheduler
from sim.sched.priority import VllmPriorityScheduler
from sim.sched.queues import FCFSQueue, PriorityQueue
from sim.sched.sarathi import SarathiScheduler
from sim.sched.static import StaticScheduler
from sim.sched.vllm import ADMISSION, BUDGET, EMPTY, MEMORY, POLICY, SEQS, VllmScheduler

CORES = ("auto", "general", "fast")


def unsupported(sc, sched, kv, cost, source) -> str:
    """Why the fast core cannot run this configuration ('' = it can), in the scenario's
    words (``sc``: the resolved Scenario; ``source`` None: a fleet's replica, whose source
    the fleet fills)."""
    if sc.engine.speculative_config is not None:
        return "speculative decoding (engine.speculative_config)"
    policy = _POLICIES.get(type(sched))
    if policy is None:
        return (f"scheduler {sc.scheduler.name} (the fast core runs vllm, vllm-priority, "
                "lanes, orca, prefill-first, sarathi and static)")
    if type(sched.admission) not in (Optimistic, Reserve) or type(sched.waiting) is not policy[0]:
        return f"admission rule {sc.admission.name} (the fast core runs optimistic and reserve)"
    needs = [f for f, asked in ((CACHING, type(kv) is PrefixCachingKV),
                                (UPFRONT, isinstance(kv, ReservationKV)),
                                (RESERVE, type(sched.admission) is Reserve),
                                (FLEET, source is None)) if asked]
    if any(not _runs(policy, f) for f in needs):
        lacks = [f for f in FEATURES if not _runs(policy, f)]
        lacks = ", ".join(lacks[:-1]) + " or " + lacks[-1] if len(lacks) > 1 else lacks[0]
        return (f"scheduler {sc.scheduler.name} with {lacks} (the fast core runs it "
                "without them)")
    if UPFRONT in needs and RESERVE in needs:
        return (f"KV policy {sc.kv.name} with {sc.scheduler.name} and admission "
                f"{sc.admission.name} (the fast core reserves up front with optimistic "
                "admission)")
    if not isinstance(kv, ReservationKV) and type(kv) not in (PagedKV, PrefixCachingKV):
        return (f"KV policy {sc.kv.name} (the fast core runs paged KV and reservations "
                "made up front)")
    if kv.host is not None and (type(sched) not in (VllmScheduler, VllmPriorityScheduler,
                                                    PrefillFirstScheduler)
                                or type(kv) is not PagedKV):
        return (f"swap preemption (engine.preemption_mode: swap) with {sc.scheduler.name}, "
                f"KV policy {sc.kv.name}"
                f"{' and prefix caching' if type(kv) is PrefixCachingKV else ''} (the fast "
                "core swaps with vllm, vllm-priority or prefill-first and paged KV without "
                "prefix caching)")
    if not isinstance(cost, CostModel):
        return "an executor that is not a cost model"
    base = CostModel
    if any(getattr(type(cost), m) is not getattr(base, m)
           for m in ("after_plan", "start_run", "end_run")):
        return "an executor with run hooks (live mode)"
    if source is not None and type(source) not in (OpenLoop, Gated):
        return f"arrival source {type(source).__name__} (the fast core runs open and gated)"
    return ""


def _runs(policy: tuple, feature: str) -> bool:
    """Whether the fast core runs ``policy`` (a ``_POLICIES`` entry) with ``feature``: prefix
    caching where it has a caching twin, the others as its fast scheduler declares
    (FastScheduler.runs)."""
    return policy[2] is not None if feature == CACHING else feature in policy[1].runs


# the general schedulers the fast core runs: their queue, and the fast scheduler of each
# (paged KV counted, and with vLLM's prefix cache; None: not with prefix caching)
_POLICIES = {
    VllmScheduler: (FCFSQueue, FastScheduler, CachingScheduler),
    VllmPriorityScheduler: (PriorityQueue, PriorityScheduler, CachingPriorityScheduler),
    LanesScheduler: (LaneQueue, FastLanes, CachingLanes),
    OrcaScheduler: (FCFSQueue, FastScheduler, None),  # reservation KV: no prefix caching
    StaticScheduler: (FCFSQueue, FastStatic, None),
    PrefillFirstScheduler: (FCFSQueue, FastPrefillFirst, None),
    SarathiScheduler: (FCFSQueue, FastSarathi, None),
}


_MIXED: dict[tuple[type, type], type] = {}


def _mixed(mixin: type, cls: type) -> type:
    """``cls`` with ``mixin`` before it: the ``reserve`` admission rule
    (sim/fast/admission.py), KV reserved up front (sim/fast/upfront.py)."""
    if (mixin, cls) not in _MIXED:
        _MIXED[mixin, cls] = type(f"{mixin.__name__}{cls.__name__}", (mixin, cls), {})
    return _MIXED[mixin, cls]


@dataclass(frozen=True)
class FastRun:
    """What the fast core hands back to sim.runner.simulate."""

    run: RunStatus
    recorder: Recorder
    status: np.ndarray
    num_preemptions: np.ndarray
    cached_tokens: np.ndarray
    generated: np.ndarray
    recomputed_tokens: int
    alloc_failures: int
    memory_blocked: int
    drain_cut: bool
    drain_budget: int
    stopped: str  # why the modelled server stopped ('' = it did not)

    def result_fields(self, preemption_mode: str, kv) -> dict:
        """The RunResult fields (sim.runner.RunResult) that come from the run itself."""
        return dict(
            recorder=self.recorder, status=arrived_as_waiting(self.status),
            num_preemptions=self.num_preemptions, cached_tokens=self.cached_tokens,
            generated=self.generated, recomputed_tokens=self.recomputed_tokens,
            counters={"alloc_failures": self.alloc_failures,
                      "memory_blocked": self.memory_blocked, "engine_stopped": self.stopped,
                      "preemption_mode": preemption_mode, **kv.counters()},
            kv_total_blocks=kv.num_blocks, run=self.run, drain_cut=self.drain_cut,
            core="fast")


def run(specs, sched: VllmScheduler, kv: PagedKV | PrefixCachingKV, cost: CostModel,
        source: ArrivalSource, *, stop_s: float, egress_s: float, drain: tuple[int, int],
        progress=None, on_plan=None, stream: bool = True, spill_dir=None,
        judged: np.ndarray | None = None) -> FastRun:
    """Simulate ``specs`` (as the engine sees them) with the general components' settings.
    A long run streams its step rows into ``spill_dir`` (sim/fast/record.py) unless
    ``stream`` is False; ``judged``: the requests a summary measures (None: all)."""
    engine = build(specs, sched, kv, cost, source, stop_s=stop_s, egress_s=egress_s,
                   drain=drain, progress=progress, on_plan=on_plan, stream=stream,
                   spill_dir=spill_dir, judged=judged)
    return result(engine, specs, engine.run())


def build(specs, sched: VllmScheduler, kv: PagedKV | PrefixCachingKV, cost: CostModel,
          source: ArrivalSource, *, stop_s: float, egress_s: float, drain: tuple[int, int],
          progress=None, on_plan=None, stream: bool = True, spill_dir=None,
          judged: np.ndarray | None = None, env=None, priced=None) -> FastEngine:
    """The fast engine of ``run``, not yet run; ``env``: a fleet's SimPy environment (its
    ``start()`` is then the replica's process); ``priced``: FastEngine's."""
    persists = {r: sched.blocked_persists(r)
                for r in (EMPTY, SEQS, BUDGET, MEMORY, ADMISSION, POLICY)}
    args = (specs.prompt_tokens, specs.output_tokens, sched.limits, kv.block_size,
            kv.num_blocks, kv.admission_reserve, persists)
    _, plain, cached = _POLICIES[type(sched)]
    caching = type(kv) is PrefixCachingKV
    cls = cached if caching else plain
    if type(sched.admission) is Reserve:
        cls = _mixed(ReserveAdmission, cls)
    if isinstance(kv, ReservationKV):
        cls = _mixed(UpFront, cls)
    if kv.host is not None:
        cls = _mixed(SwapPreemption, cls)
    kw = cls.policy_args(sched, specs) | ({"kv": kv} if caching else {})
    fs = cls(*args, **kw)
    fs.async_frees = sched.async_scheduling
    fs.holds_finished = sched.holds_finished  # the policy's rule (sim/sched/base.py)
    rec = FastRecord(len(specs), egress_s, kv_total_blocks=kv.num_blocks, stream=stream,
                     spill_dir=spill_dir, judged=judged)
    engine = FastEngine(fs, cost, source, admissible(specs, sched), rec,
                        stop_ns=min(ns(stop_s), MAX_NS), drain=drain, progress=progress,
                        hook=on_plan, env=env, priced=priced)
    return engine


def result(engine: FastEngine, specs, status: RunStatus) -> FastRun:
    """What a finished fast engine hands back; its per-request state is dropped."""
    fs = engine.s
    recorder = engine.rec.recorder(fs)
    n = len(specs)
    generated = np.frombuffer(fs.known, dtype=np.int32).astype(np.int64) if n else np.zeros(
        0, np.int64)
    for r in fs.running:  # decoding requests keep theirs implicitly
        generated[r] = fs.known_of(r)
    generated -= specs.prompt_tokens
    # each per-request array of the run goes as soon as its result is made; a large run's
    # counts in 4 bytes (sim.engine.requests.COMPACT_ROWS; tables write them as int64)
    wide = np.int64 if n < COMPACT_ROWS else np.int32
    generated = generated.astype(wide, copy=False)
    fs.known = fs.comp = fs.prompt = fs.out = None
    status_codes = np.frombuffer(fs.status, dtype=np.int8).copy()
    fs.status = None
    num_preemptions = np.array(fs.npre, dtype=wide)
    fs.npre = None
    cached_tokens = np.array(fs.cached, dtype=wide)
    fs.cached = None
    return FastRun(
        run=status, recorder=recorder, status=status_codes, num_preemptions=num_preemptions,
        cached_tokens=cached_tokens, generated=generated, recomputed_tokens=fs.recomputed,
        alloc_failures=fs.alloc_failures, memory_blocked=int(sum(fs.memory_blocked)),
        drain_cut=engine.drain_cut, drain_budget=engine.drain_budget, stopped=fs.stopped)
