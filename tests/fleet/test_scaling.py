"""Two replicas behind least_outstanding sustain at least 1.8x one replica's rate on the
default scenario (capacity search figures: NOTES.md, fleet section). Here, cut to 600
requests: one replica holds the SLOs and keeps up at 20 req/s but not at 36 (1.8x); two
replicas hold 36 req/s with least_outstanding, and with round_robin and random too."""

from __future__ import annotations

import pytest

from sim.config.load import load_scenario
from sim.plan.capacity import judge
from sim.plan.point import flatten
from sim.plan.slo import scenario_slo
from sim.plan.sustain import engine_sustains
from tests.fleet.helpers import fleet, single

N = ("workload.num_requests=600",)
BUDGETS = scenario_slo(load_scenario(None).scenario)  # TTFT p95 500 ms, TPOT p95 50 ms


def _verdict(summary: dict) -> str | None:
    """None when sustainable (keeps up, every budget holds), else what failed first."""
    return judge({**flatten(summary), "engine_sustains": engine_sustains(summary)}, BUDGETS)


def test_one_replica_holds_20_but_not_36_req_s():
    assert _verdict(single(None, *N, "workload.arrival.rate=20")[1]) is None
    assert _verdict(single(None, *N, "workload.arrival.rate=36")[1]) is not None


@pytest.mark.parametrize("router", ["least_outstanding", "round_robin", "random"])
def test_two_replicas_hold_1_8x_the_rate(router):
    _, _, s = fleet(None, *N, "workload.arrival.rate=36",
                    f"cluster={{replicas: 2, router: {{name: {router}}}}}")
    assert _verdict(s) is None
    assert s["fleet"]["gpus"] == 2
