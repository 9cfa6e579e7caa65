"""The library calls behind a fleet run: simulate, summarize, log steps and routing.

``servesim run`` and capacity points call these when the scenario has a ``cluster``
section; everything else about a run (results folder, tables, plots) is the single-run
path, fed the fleet as its clients see it.
"""

from __future__ import annotations

import json
from typing import IO

from sim.config.resolve import Resolved
from sim.engine.clock import to_s
from sim.engine.requests import RequestSpecs
from sim.fleet.cluster import FleetResult, simulate_fleet
from sim.fleet.plan import plan_fleet
from sim.fleet.summary import client_view, fleet_summary, replica_view
from sim.report.steplog import StepLog
from sim.runner import RunResult


class FleetLog:
    """``steps.jsonl`` of a fleet: each replica's steps (the single-run record plus
    ``"replica"``) and each routing decision, in simulated-time order:

        {"event": "route", "t_s": t, "request": id, "replica": "pool/i", "due_s": t',
         "outstanding": [n, ...], "kv_used": [f, ...], ...the router's reason}
    """

    def __init__(self, fh: IO[str], request_ids):
        self.fh, self.ids, self.logs = fh, request_ids, {}

    def step(self, replica: str, plan, starts, durations, outcome) -> None:
        log = self.logs.get(replica)
        if log is None:
            log = self.logs[replica] = StepLog(_Tagged(self.fh, replica), self.ids)
        log(plan, starts, durations, outcome)

    def route(self, now: int, request, replica: str, due: int, states, why: dict) -> None:
        rec = {"event": "route", "t_s": float(to_s(now)), "request": str(request),
               "replica": replica, "due_s": float(to_s(due)),
               "outstanding": [s.outstanding for s in states],
               "kv_used": [round(s.kv_used_fraction, 4) for s in states], **why}
        self.fh.write(json.dumps(rec) + "\n")


class _Tagged:
    """A file whose JSON lines get ``"replica": name`` added."""

    def __init__(self, fh: IO[str], name: str):
        self.fh, self.tag = fh, f'{{"replica": {json.dumps(name)}, '

    def write(self, line: str) -> None:
        self.fh.write(self.tag + line[1:])


def run_fleet(r: Resolved, specs: RequestSpecs, fh: IO[str] | None = None) -> FleetResult:
    """Simulate the resolved scenario's fleet (``fh``: write steps.jsonl there)."""
    log = FleetLog(fh, specs.request_id) if fh is not None else None
    return simulate_fleet(plan_fleet(r.scenario, r), specs, seed=r.scenario.seed, log=log)


def fleet_outputs(fr: FleetResult) -> tuple[RunResult, dict]:
    """The fleet as its clients see it (one RunResult for the request tables) and its
    summary (with the ``fleet`` block)."""
    views = {rep.name: replica_view(fr, rep) for rep in fr.replicas}
    return client_view(fr, views), fleet_summary(fr, views)
