"""Run a fleet: arrivals -> a router per pool -> replicas (-> KV transfer -> decode pool).

    client ──arrival──> router(pool by lane) ──push──> replica (Engine, unchanged)
    prefill replica ──finished──> decode router ──push, due after the transfer──> decode replica

All replicas share one SimPy environment (one integer-nanosecond clock). Same-time rule
(documented order, enforced by event priorities): at time t the routers first route every
request arriving at t, in request order (they run at SimPy's NORMAL priority), then the
replicas whose steps end at t commit them, in replica order (LATE plus a fraction), then
every replica planning at t plans (LATER). So a router at t sees replica state from before
the steps ending at t, and a step starting at t sees every request routed at t, as in a
single run, and every request the instant's finishes let go.

A replica cuts a decode run where a request reaches it: it is told of each push (``Pushed``
wakes it) and executes the run at its end, cut at the first push due before that end, so
requests routed elsewhere never cut it (``Fleet._stage``); a router reading its KV usage
meanwhile reads the blocks of the run's step in progress. (Before, each replica cut its
runs at a lookahead, the earliest any request could reach it, planned at its steps' ends
in the order their events were scheduled, and showed a plan's first step's blocks until
the plan's end; ``Fleet(optimistic=False)`` still runs that way.)

A transfer's push is due when the transfer ends. Each replica is a server of its own: a
per-token ingress (engine.ingress_per_token_us, the API server's work on each
prompt) is paid at the replica a request is routed to, behind that replica's earlier
requests only (PoolRun.replica_due); the router sees a request the constant ingress after
it was sent.

Gated arrivals (``workload.arrival.concurrency``: ``vllm bench serve --max-concurrency C``
against the fleet's endpoint) are one gate for all the clients (sim.engine.arrivals.Gated, in
the clients' time): a request is sent when a slot frees (its client's previous request ended
at the client: the finish plus the egress and the think time), reaches its pool's router
the pool's ingress later, and is routed then. A finish releases (and, with no turnaround,
routes) the next requests at once, before the finishing replica plans again, as a single
run hands them to its next step. While every slot is taken, a replica's lookahead (where
one is used) is the earliest any replica with requests in flight could end its step, plus
the turnaround.

One seed: the scenario's seed feeds the random router of each pool (a stream per pool).
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from dataclasses import dataclass

import numpy as np
import simpy

from sim.config.resolve import ConfigError
from sim.engine.arrivals import Gated, api_server_seen, api_server_seen_all, client_sent
from sim.engine.clock import MAX_NS, NS_PER_S, ns, to_ns, to_s
from sim.engine.engine import LATE
from sim.engine.requests import RequestSpecs
from sim.fleet import replica as rp
from sim.fleet.disagg import TransferredPrompts
from sim.fleet.plan import DECODE, PREFILL, FleetPlan, PoolPlan
from sim.fleet.routers import ROUTERS, ReplicaState, RouteRequest
from sim.runner import _stop_time


@dataclass
class PoolRun:
    """A pool during the run: its replicas, router and the router's view of them."""

    plan: PoolPlan
    specs: rp.PoolSpecs
    replicas: list
    states: list[ReplicaState]
    router: object
    arrivals: np.ndarray  # requests routed to this pool from the clients, in order
    due_ns: np.ndarray  # when each reaches the pool's router (ns)
    next: int = 0  # arrivals[:next] have been routed
    # with a per-token ingress: when the last request routed to each replica reaches its
    # scheduler (s for open loops, ns for gated clients; each replica's own API server)
    seen_s: list = dataclasses.field(default_factory=list)
    seen_ns: list = dataclasses.field(default_factory=list)
    # the earliest client + delay (s) of arrivals[i:], and of the delays (ns) of requests
    # i.. in the order sent (gated): the lookahead's lower bounds
    min_seen_after: np.ndarray | None = None
    min_delay_ns_after: np.ndarray | None = None
    delay_ns: list | None = None  # gated: each request's delay (ns), made at the first route
    serial_ns: int | None = None

    def __post_init__(self):
        # the constant ingress and egress (ns), read at every route and lookahead
        self.ingress_ns, self.egress_ns = ns(self.specs.ingress_s), ns(self.specs.egress_s)

    def route_ns(self, sent: int) -> int:
        """When a request sent at ``sent`` (ns) reaches this pool's router: the constant
        ingress after."""
        return sent + self.ingress_ns

    def replica_due(self, k: int, req: int, route: int, sent: int | None) -> int:
        """When request ``req``, routed to replica ``k`` at ``route`` (ns), reaches that
        replica's scheduler: at once with a constant ingress; with a per-token one, after
        its own delay and behind the requests sent to that replica before it (each
        replica's API server takes its requests in the order sent: a single run's
        sim.runner.engine_arrivals, in seconds for open loops and ns for gated clients,
        as a single run computes it). ``sent``: the gated client's send time (ns)."""
        if self.specs.delays is None:
            return route
        if sent is None:
            self.seen_s[k] = self._seen_open(k, req)
            return ns(self.seen_s[k])
        self.seen_ns[k] = self.peek_due(k, req, route, sent)
        return self.seen_ns[k]

    def peek_due(self, k: int, req: int, route: int, sent: int | None) -> int:
        """``replica_due`` without routing the request."""
        d = self.specs.delays
        if d is None:
            return route
        if sent is None:
            return ns(self._seen_open(k, req))
        if self.delay_ns is None:  # each request's delay and the serial constant (ns), once
            c = self.specs.serial_s
            self.delay_ns, self.serial_ns = to_ns(d).tolist(), None if c is None else ns(c)
        return api_server_seen(sent, self.delay_ns[req], self.seen_ns[k], self.serial_ns)

    def _seen_open(self, k: int, req: int) -> float:
        """An open loop's request ``req`` reaches replica ``k`` (s), as engine_arrivals."""
        return api_server_seen(float(self.specs.client.arrival_s[req]),
                               float(self.specs.delays[req]), self.seen_s[k],
                               self.specs.serial_s)

    def earliest_due(self, k: int, req: int, route: int, sent: int | None) -> int:
        """The earliest any request from ``req`` on (routed at ``route`` or later, sent at
        ``sent`` or later) can reach replica ``k`` (ns): ``req``'s own due with one replica
        (every request comes to it, in order); else a later request with a shorter prompt
        may overtake ``req`` on its way to another replica."""
        if self.specs.delays is None or len(self.replicas) == 1:
            return self.peek_due(k, req, route, sent)
        if sent is None:
            return ns(max(float(self.min_seen_after[self.next]), self.seen_s[k]))
        return max(sent + int(self.min_delay_ns_after[req]), self.seen_ns[k])


@dataclass(frozen=True)
class FleetResult:
    plan: FleetPlan
    specs: RequestSpecs  # the clients' requests (arriving within the horizon)
    pools: tuple  # PoolRun per pool
    results: dict  # replica name -> RunResult (run numbering)
    first: np.ndarray  # per request: global replica number that took it first (-1 none)
    last: np.ndarray  # per request: replica that served it to the end (decode if split)
    received_s: dict  # replica name -> {request: time it reached that replica (s)}
    transfer_s: np.ndarray  # per request: KV transfer time (s; NaN: none)
    transfers: np.ndarray  # per request: how many transfers were charged
    never_sent: int
    wall_s: float
    client_queue_s: np.ndarray | None = None  # gated: per request, sent - ready (s; NaN unsent)
    # replicas run alone (sim/fleet/independent.py): name -> its requests (run numbers, in
    # arrival order); ``results`` then hold each replica's own result (renumbered 0..m-1)
    own_requests: dict | None = None

    @property
    def replicas(self) -> list:
        return [r for p in self.pools for r in p.replicas]


class Fleet:
    def __init__(self, plan: FleetPlan, specs: RequestSpecs, *, seed: int = 0, log=None,
                 alone: bool = False, optimistic: bool | None = None):
        """``alone``: the replicas will run alone (sim/fleet/independent.py); none is built
        here. ``optimistic`` False: the replicas cut decode runs at the lookahead (before
        this scheme, kept for comparison) instead of at pushes (``_stage``)."""
        self.plan, self.log, self.env, self.alone = plan, log, simpy.Environment(), alone
        self.optimistic = optimistic
        r0 = plan.pools[0].resolved
        self.stop = _stop_time(r0, specs.arrival_s)
        n_all = len(specs)
        self.specs = specs.head(int(np.searchsorted(specs.arrival_s, self.stop, side="left")))
        self.never_sent = n_all - len(self.specs)
        n = len(self.specs)
        self.first, self.last = np.full(n, -1), np.full(n, -1)
        self.transfer_s, self.transfers = np.full(n, np.nan), np.zeros(n, dtype=np.int64)
        self.pools = [self._pool(p, i, seed) for i, p in enumerate(plan.pools)]
        self._assign_lanes()
        self.decode = next((p for p in self.pools if p.plan.role == DECODE), None)
        self.prefill = next((p for p in self.pools if p.plan.role == PREFILL), None)
        self.numbers = {rep.name: k for k, rep in enumerate(r for p in self.pools
                                                            for r in p.replicas)}
        self.received: dict = {}  # alone: replica name -> its requests
        self.gate = None if alone else self._gate(r0)
        self.routes: list[tuple[int, int]] = []  # gated: heap of (due at its pool ns, request)
        self.wake = None  # gated: the clients' process waits on this for the next finish

    def _gate(self, r0) -> Gated | None:
        a = r0.scenario.workload.arrival
        if a.concurrency is None:
            return None
        self.entry_of = np.zeros(len(self.specs), dtype=np.int64)  # request -> pool number
        ok = np.zeros(len(self.specs), dtype=bool)
        for i, p in enumerate(self.pools):
            if p.plan.role != DECODE:
                self.entry_of[p.arrivals] = i
                ok[p.arrivals] = p.replicas[0].source.admissible[p.arrivals]
        self.think_ns = ns(a.think_s)
        # every request holds its client's slot until answered: a rejected one when its
        # replica's API server has seen it and its error is back (``_route``), as a single
        # run's gate frees it (not at the send)
        self.rejected = ~ok
        return Gated(to_ns(self.specs.arrival_s), np.ones(len(ok), dtype=bool),
                     a.concurrency, self.think_ns)

    # ---- building ---------------------------------------------------------------------
    def _pool(self, plan: PoolPlan, i: int, seed: int) -> PoolRun:
        ps = rp.pool_specs(plan, self.specs, prefill=plan.role == PREFILL)
        rng = np.random.default_rng([seed, 0x524F555445, i])  # "ROUTE", pool i
        router = ROUTERS.get(plan.router.name)(plan.replicas, plan.router.params, rng)
        pool = PoolRun(plan, ps, [], [ReplicaState(k) for k in range(plan.replicas)], router,
                       np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                       seen_s=[-np.inf] * plan.replicas, seen_ns=[0] * plan.replicas)
        wrap = ((lambda ex: TransferredPrompts(ex, ps.specs.prompt_tokens))
                if plan.role == DECODE else None)
        shared = rp.shared_cost(plan.resolved)  # one priced model for the pool, where it can be
        for k in range(0 if self.alone else plan.replicas):
            look = (lambda: self._decode_lookahead()) if plan.role == DECODE else (
                lambda p=pool, k=k: self._entry_lookahead(p, k))
            ended = None if plan.role == DECODE else (lambda p=pool: self._entry_ended(p))
            pool.replicas.append(rp.build(self.env, plan, k, ps, self.stop, look,
                                          self._finished, self._step_hook(plan, k), wrap,
                                          ended, cost=shared))
        return pool

    def _assign_lanes(self) -> None:
        """Each client request to the pool listing its lane (or the catch-all pool)."""
        names = self.specs.lane_names
        entry = [p for p in self.pools if p.plan.role != DECODE]
        catch = next((p for p in entry if not p.plan.lanes), None)
        of_lane = {}
        for code, lane in enumerate(names):
            pool = next((p for p in entry if lane in p.plan.lanes), catch)
            if pool is None and np.any(self.specs.lane == code):
                listed = sorted(ln for p in entry for ln in p.plan.lanes)
                raise ConfigError(f"cluster.pools: no pool takes lane {lane!r} (pools list "
                                  f"{listed}; add it to one, or leave one pool's lanes empty)")
            of_lane[code] = pool
        for pool in entry:
            mine = np.flatnonzero([of_lane.get(c) is pool for c in self.specs.lane.tolist()])
            pool.arrivals = mine.astype(np.int64)
            pool.due_ns = to_ns(pool.specs.client.arrival_s[mine] + pool.specs.ingress_s)
            d = pool.specs.delays
            if d is not None:  # suffix minima (np.minimum.accumulate of the reversed)
                c = pool.specs.client.arrival_s[mine] + d[mine]
                pool.min_seen_after = np.minimum.accumulate(c[::-1])[::-1]
                # over every request in the order sent (a gated request's number)
                pool.min_delay_ns_after = np.minimum.accumulate(to_ns(d)[::-1])[::-1]

    def _step_hook(self, plan: PoolPlan, k: int):
        if self.log is None:
            return None
        name = f"{plan.name}/{k}"
        return lambda p, starts, durations, outcome: self.log.step(name, p, starts, durations,
                                                                   outcome)

    # ---- running ----------------------------------------------------------------------
    def run(self) -> FleetResult:
        if self.alone:
            return self._run_alone()
        t0 = time.perf_counter()
        if self.optimistic is not False:
            self._stage(optimistic=True)
        procs = []
        for p in self.pools:
            for rep in p.replicas:
                rep.source.on_fail = lambda reqs, now, rep=rep: self._failed(
                    rep, list(reqs), now)
                procs.append(rp.start(rep))
                procs[-1].callbacks.append(lambda _, rep=rep: self._stopped(rep))
                if p.plan.role == PREFILL:  # its end may end the decode pool's arrivals
                    procs[-1].callbacks.append(lambda _: self._poke(self.decode))
        if self.gate is not None:
            senders = [self.env.process(self._clients())]
        else:
            senders = [self.env.process(self._route_arrivals(p)) for p in self.pools
                       if p.plan.role != DECODE]
        self.env.run(until=simpy.AllOf(self.env, procs))
        if any(rep.source.dead for p in self.pools for rep in p.replicas):
            # a stopped replica fails what is routed to it: the rest is still sent and routed,
            # up to the horizon (s)
            sent = simpy.AllOf(self.env, [s for s in senders if s.is_alive])
            left = ns(self.stop) - self.env.now if self.stop < MAX_NS / NS_PER_S else None
            self.env.run(until=sent if left is None else self.env.any_of(
                [sent, self.env.timeout(max(0, left))]))
        wall = time.perf_counter() - t0
        queue = self._as_sent() if self.gate is not None else None
        results = {rep.name: rp.result(rep, self.never_sent, wall) for p in self.pools
                   for rep in p.replicas}
        received = {rep.name: {q: to_s(t) for q, t in rep.source.received.items()}
                    for p in self.pools for rep in p.replicas}
        return FleetResult(self.plan, self.specs, tuple(self.pools), results, self.first,
                           self.last, received, self.transfer_s, self.transfers,
                           self.never_sent, wall, queue)

    def _run_alone(self) -> FleetResult:
        from sim.fleet.independent import run_alone

        results = run_alone(self)
        wall = next(iter(results.values())).wall_s
        received = {}
        for p in self.pools:
            for rep in p.replicas:
                reqs, d = self.received[rep.name], p.specs.delays
                # as the replica's own API server delivered them (PoolRun.replica_due)
                seen = (p.specs.specs.arrival_s[reqs] if d is None else api_server_seen_all(
                    p.specs.client.arrival_s[reqs], d[reqs], p.specs.ingress_s,
                    p.specs.serial))
                received[rep.name] = dict(zip(reqs.tolist(), seen.tolist()))
        return FleetResult(self.plan, self.specs, tuple(self.pools), results, self.first,
                           self.last, received, self.transfer_s, self.transfers,
                           self.never_sent, wall, None, dict(self.received))

    def _stage(self, optimistic: bool) -> None:
        """Optimistic replicas (Engine.optimistic, FastEngine.optimistic): each cuts a decode
        run only where a request reaches it, woken by each push, instead of at the
        lookahead. Their same-time rule: at an instant, the replicas whose steps end commit
        them in replica order (LATE + a fraction), then each plans (LATER), so what one
        instant's step ends push (a gated finish with no egress, think time or ingress)
        reaches every replica planning at it, in an order that does not depend on where
        each replica cut its runs; a router reading a replica's KV during a run reads the
        blocks of the step in progress, as per-step plans show them. ``optimistic`` False:
        the lookahead's cuts under the same rule (the tests' reference)."""
        reps = [rep for p in self.pools for rep in p.replicas]
        for k, rep in enumerate(reps):
            rep.engine.staged, rep.engine.late = True, LATE + k / (2 * len(reps))
            rep.engine.optimistic = rep.source.pushed_only = optimistic

    @staticmethod
    def _poke(pool: PoolRun) -> None:
        """Wake ``pool``'s waiting replicas: nothing more may come to them."""
        for rep in pool.replicas:
            rep.source.poke()

    def _entry_lookahead(self, pool: PoolRun, k: int) -> int | None:
        """The earliest a request not yet routed could reach replica ``k`` of ``pool`` (ns),
        None if none can before that replica's own next finish."""
        if self.gate is None:
            if pool.next >= len(pool.due_ns):
                return None
            return pool.earliest_due(k, int(pool.arrivals[pool.next]),
                                     int(pool.due_ns[pool.next]), None)
        t = self.gate.next_time()
        if t is None and not self.gate.exhausted():
            t = self._earliest_free(pool.replicas[k])
        nxt = self.gate.slots.next_req
        heads = [] if t is None or nxt >= len(self.specs) else [
            pool.earliest_due(k, nxt, pool.route_ns(t), t)]
        if self.routes:  # sent, not yet at the router (by route time)
            heads += ([self.routes[0][0]] if pool.specs.delays is None else
                      [pool.peek_due(k, req, route, int(self.gate.sent[req]))
                       for route, req in self.routes])
        return min(heads) if heads else None

    def _entry_ended(self, pool: PoolRun) -> bool:
        """Nothing more will reach ``pool``'s replicas from the clients."""
        if self.gate is None:
            return pool.next >= len(pool.due_ns)
        return self.gate.exhausted() and not self.routes

    def _earliest_free(self, asking) -> int | None:
        """Every slot taken: the earliest a slot could free (ns), the soonest end of a step
        of another replica with requests in flight (an idle one's: its next request's
        arrival; one with none on the way finishes nothing), plus its egress and the think
        time (not before the next request is ready); None if only ``asking`` has requests
        in flight (its own finishes end its runs: it plans again then)."""
        now, best = self.env.now, None
        for p in self.pools:
            for st, rep in zip(p.states, p.replicas):
                if st.outstanding > 0 and rep is not asking:
                    b = rep.busy_until
                    if b < now:  # idle: nothing of it ends before a request reaches it
                        if not rep.source.pending:
                            continue
                        b = rep.source.pending[0][0]
                    t = max(b, now) + p.egress_ns + self.think_ns
                    best = t if best is None else min(best, t)
        if best is None:
            return None
        return max(self.gate.ready[self.gate.slots.next_req], best)

    def _clients(self):
        """The gated clients: send when the gate lets a request go, route it when it reaches
        its pool; between times, wait for the next send, route or finish."""
        env = self.env
        while True:
            self._release(env.now)
            nxt = [t for t in (self.gate.next_time(),
                               self.routes[0][0] if self.routes else None) if t is not None]
            if not nxt and self.gate.exhausted():
                return
            self.wake = env.event()
            events = [self.wake] + ([env.timeout(min(nxt) - env.now)] if nxt else [])
            yield env.any_of(events)

    def _release(self, now: int) -> None:
        """Send what the gate lets go at ``now``, route what has reached its pool."""
        for req in self.gate.due(now):
            pool = self.pools[self.entry_of[req]]
            heapq.heappush(self.routes, (pool.route_ns(int(self.gate.sent[req])), req))
        while self.routes and self.routes[0][0] <= now:
            due, req = heapq.heappop(self.routes)
            self._route(self.pools[self.entry_of[req]], req, due)
        if not self.routes and self.gate.exhausted():  # nothing more comes from the clients
            for p in self.pools:
                if p.plan.role != DECODE:
                    self._poke(p)

    def _as_sent(self) -> np.ndarray:
        """After a gated run: requests arrive when sent (latencies count from there); the
        client queue time of each (s; NaN: never sent, within the horizon)."""
        if self.routes:  # sent, still in the API server at the end: a single run's gate
            # has not released them (it releases at the engine's arrival), so neither here
            self.gate.sent[[req for _, req in self.routes]] = -1
        if any(p.specs.delays is not None for p in self.pools):  # exact, as a single run's
            sent = np.where(self.gate.sent >= 0, to_s(self.gate.sent), np.nan)
        else:  # as a single run computes it (its engine's arrival less the ingress), to the bit
            ingress = np.array([p.specs.ingress_s for p in self.pools])[self.entry_of]
            seen = self.gate.sent + to_ns(ingress)
            sent = client_sent(np.where(self.gate.sent >= 0, to_s(seen), np.nan), ingress,
                               self.specs.arrival_s)
        queue = sent - self.specs.arrival_s
        self.never_sent += int(np.isnan(sent).sum())
        self.specs = _with_arrival(self.specs, sent)
        for p in self.pools:
            p.specs = dataclasses.replace(p.specs, client=_with_arrival(p.specs.client, sent))
            for rep in p.replicas:
                rep.specs = p.specs
        return queue

    def _route_arrivals(self, pool: PoolRun):
        """The pool's router: every request at the time it reaches the pool."""
        due = pool.due_ns
        while pool.next < len(due):
            t = int(due[pool.next])
            if t > self.env.now:
                yield self.env.timeout(t - self.env.now)
            while pool.next < len(due) and due[pool.next] <= self.env.now:
                self._route(pool, int(pool.arrivals[pool.next]), self.env.now)
                pool.next += 1
        self._poke(pool)  # every request routed: the pool's arrivals have ended

    def _route(self, pool: PoolRun, req: int, due: int) -> None:
        s, now = pool.specs.specs, self.env.now
        if pool.router.reads_kv or self.log is not None:  # nothing else reads the reports
            self._refresh_kv(pool, now)
        rq = RouteRequest(req, int(s.prompt_tokens[req]), s.prefix_hashes[req],
                          s.lane_names[s.lane[req]])
        k = pool.router.choose(rq, pool.states)
        pool.router.routed(rq, k)
        rep, st = pool.replicas[k], pool.states[k]
        st.routed += 1
        st.outstanding += int(rep.source.admissible[req])
        # a decode pool has no per-token ingress (its delays None): due as given
        sent = None if self.gate is None else int(self.gate.sent[req])
        due = pool.replica_due(k, req, due, sent)
        rep.source.push(req, due)
        if rep.source.dead and rep.source.admissible[req]:
            self._failed(rep, [req], due)
        elif self.gate is not None and pool.plan.role != DECODE and self.rejected[req]:
            self.gate.finished(np.array([req], dtype=np.int64), due + pool.egress_ns)
        number = self.numbers[rep.name]
        if pool.plan.role != DECODE:
            self.first[req] = number
        if pool.plan.role != PREFILL:
            self.last[req] = number
        if self.log is not None:
            self.log.route(now, s.request_id[req], rep.name, due, pool.states,
                           pool.router.explain())

    def _refresh_kv(self, pool: PoolRun, now: int) -> None:
        """Replicas report KV usage every kv_report_interval (0: at each decision)."""
        every = self.plan.kv_report_ns
        for st, rep in zip(pool.states, pool.replicas):
            if st.kv_reported_ns < 0 or now - st.kv_reported_ns >= every:
                st.kv_used_fraction = rep.kv_used_fraction()
                st.kv_reported_ns = now

    def _finished(self, rep, reqs: np.ndarray, now: int) -> None:
        pool = next(p for p in self.pools if p.plan is rep.pool)
        pool.states[rep.index].outstanding -= len(reqs)
        if pool.plan.role != PREFILL:
            if self.gate is not None and len(reqs):
                # the clients see the end egress later; what that lets go now is routed
                # before this replica plans again (a single run's next step sees it too)
                self.gate.finished(reqs, now + pool.egress_ns)
                self._release(now)
                if self.wake is not None and not self.wake.triggered:
                    self.wake.succeed()
            return
        for req in reqs.tolist():  # each request's KV moves once, when its prefill ends
            took = self.plan.transfer.ns(int(pool.specs.specs.prompt_tokens[req]))
            self.transfer_s[req] = to_s(took)
            self.transfers[req] += 1
            self._route(self.decode, req, now + took)

    def _stopped(self, rep) -> None:
        """A replica whose engine stopped (vLLM v0: swap space full) fails the requests it
        held and every request routed to it later (``_route``), each answering its client
        then, as a failed request does (vllm bench serve sends the client's next)."""
        if rep.stopped:
            rep.source.dead = True
            self._failed(rep, rep.failed(), self.env.now)

    def _failed(self, rep, reqs: list[int], now: int) -> None:
        """``reqs`` (admissible) failed at replica ``rep`` at ``now`` (ns): the router's count
        drops, their clients are answered; the clients' process routes what that lets go
        (no routing from here: a request routed to a stopped replica comes back here)."""
        pool = next(p for p in self.pools if p.plan is rep.pool)
        pool.states[rep.index].outstanding -= len(reqs)
        if self.gate is not None and reqs:
            self.gate.finished(np.asarray(reqs, dtype=np.int64), now + pool.egress_ns)
            if self.wake is not None and not self.wake.triggered:
                self.wake.succeed()

    def _decode_lookahead(self) -> int | None:
        """The earliest a transfer not yet started could land: a prefill replica's current
        step end (or, idle, its next arrival) plus the shortest transfer. None when every
        prefill replica has ended."""
        now, bounds = self.env.now, []
        for rep in self.prefill.replicas:
            if rep.done:
                continue
            b = rep.busy_until if rep.busy_until >= now else rep.source.earliest()
            if b is not None:
                bounds.append(max(b, now))
        if not bounds:
            return None
        return min(bounds) + self.plan.transfer.ns(1)


def simulate_fleet(plan: FleetPlan, specs: RequestSpecs, *, seed: int = 0,
                   log=None, alone: bool | None = None,
                   optimistic: bool | None = None) -> FleetResult:
    """Replay ``specs`` through the fleet ``plan``. ``alone``: run each replica alone
    (sim/fleet/independent.py); default: whenever the replicas cannot affect each other
    and no step log is written (the log interleaves replicas in simulated time)."""
    from sim.fleet.independent import why_not

    for p in plan.pools:
        if p.resolved.scenario.cost.name == "live":
            raise ConfigError("cluster: live mode runs one replica; drop the cluster section")
    why = why_not(plan)
    if alone and why:
        raise ValueError(f"the replicas cannot run alone: {why}")
    if alone is None:
        alone = not why and log is None
    return Fleet(plan, specs, seed=seed, log=log, alone=alone, optimistic=optimistic).run()



def _with_arrival(specs: RequestSpecs, arrival_s: np.ndarray) -> RequestSpecs:
    a = np.ascontiguousarray(arrival_s, dtype=np.float64)
    a.flags.writeable = False
    return dataclasses.replace(specs, arrival_s=a)
