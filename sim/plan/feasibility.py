"""Zero-load feasibility: each budget's statistic with one request in flight at a time.

A capacity search bisects the load down when no load holds; it cannot tell a budget no
load can meet (the requests alone take longer) from traffic that arrives bunched (a
trace's same-timestamp groups queue behind each other at any rate). Replaying the first
``UNLOADED_REQUESTS`` requests one at a time (``workload.arrival.concurrency: 1``, latency
measured from each send, as `vllm bench serve --max-concurrency 1`) gives the floor every
load starts from; a budget within ``CLOSE`` of it decides capacity by a few milliseconds.
"""

from __future__ import annotations

import math

import numpy as np

from sim import pipeline
from sim.plan.point import Base, flatten
from sim.plan.slo import Budget

UNLOADED_REQUESTS = 200  # the first requests of the workload, one at a time
CLOSE = 0.10  # a budget within 10 % of its zero-load value is "close"


SENT = "requests"  # unloaded()'s count of the requests it sent


def unloaded(base: Base, config, budgets: tuple[Budget, ...]) -> dict[str, float] | None:
    """Budget name -> its statistic (ms) over the first requests sent one at a time (and
    ``SENT``: how many); None
    for a fleet with pools (they may differ in engine and GPU: no single floor). A fleet of
    identical replicas is measured on one of them (a fleet runs open loops only, and one
    request in flight meets an idle replica whatever the router)."""
    cluster = base.load(tuple(config)).scenario.cluster
    if cluster is not None and (cluster.pools or cluster.disaggregation is not None):
        return None
    overrides = (*config, *((("cluster", None),) if cluster is not None else ()),
                 ("workload.arrival.concurrency", 1),
                 ("workload.max_requests", UNLOADED_REQUESTS))
    run = pipeline.run(base.load(overrides), None, plots=False)
    metrics = flatten(run.summary)
    sent = int(run.summary["requests"]["total"])  # fewer when the workload has fewer
    return {b.name: b.value(metrics) for b in budgets} | {SENT: sent}


def bunched_share(base: Base, config) -> float:
    """Fraction of the workload's requests sent at the same instant as the one before."""
    _, specs, _ = pipeline.prepare(base.load(tuple(config)))
    t = np.asarray(specs.arrival_s)
    return float((np.diff(t) == 0).mean()) if len(t) > 1 else 0.0


def verdict(values: dict[str, float], budgets: tuple[Budget, ...]) -> tuple[list[str], list[str]]:
    """(budgets no load can meet, budgets within CLOSE of their zero-load value), as text."""
    over, close = [], []
    for b in budgets:
        v = values[b.name]
        if not math.isfinite(v):
            over.append(f"{b.label} has no value one request at a time")
        elif v > b.ms:
            over.append(f"{b.label} {v:,.1f} ms > budget {b.ms:g} ms")
        elif v > b.ms * (1 - CLOSE):
            close.append(f"{b.label} budget {b.ms:g} ms is within {CLOSE:.0%} of its zero-load "
                         f"value {v:,.1f} ms")
    return over, close


def explain_none(base: Base, config, budgets: tuple[Budget, ...]) -> str:
    """Why no load held, for the capacity command's last line."""
    values = unloaded(base, config, budgets)
    if values is None:
        return "zero load: not measured for a fleet with pools (each pool has its own floor)"
    over, _ = verdict(values, budgets)
    head = f"zero load (the first {values[SENT]:,} requests, one at a time): "
    if over:
        return head + "; ".join(over) + ": no load can meet it (a faster configuration or " \
            "a looser budget)"
    share = bunched_share(base, config)
    hint = (f"; {share:.0%} of the requests arrive at the same instant as the one before "
            "(workload.spread_s spreads a Mooncake trace's groups)" if share > 0.05 else "")
    return head + "every budget holds: the requests queue behind each other at every load " \
        "tried" + hint


def note_close(base: Base, config, budgets: tuple[Budget, ...]) -> list[str]:
    """Notes for budgets within CLOSE of their zero-load value (capacity swings with them)."""
    values = unloaded(base, config, budgets)
    if values is None:
        return []
    _, close = verdict(values, budgets)
    return [f"note: {c}: capacity hinges on a few ms of it" for c in close]
