"""A replica whose engine stops (``engine.swap_space_full: stop_engine``, vLLM v0's
RuntimeError when a swap victim does not fit the host) fails what it holds and every
request routed to it later, each answering its client at once (sim/fleet/cluster.py
``Fleet._stopped``): a closed loop goes on with the other replicas instead of waiting on the
stopped one for ever, and an open loop's later arrivals are still routed and counted (as
failed) when every replica has stopped. Both cores alike."""

from __future__ import annotations

import pytest

from sim.config.load import load_scenario
from sim.fleet.cluster import simulate_fleet
from sim.fleet.plan import plan_fleet
from sim.fleet.run import fleet_outputs
from sim.pipeline import prepare
from tests.fleet.helpers import fleet
from tests.fleet.test_identity import _same

SWAP = ("engine.swap_space=0.05", "engine.swap_space_full=stop_engine")


def _counts(summary: dict) -> tuple[int, int, int]:
    r = summary["requests"]
    return r["total"], r["finished"], r["aborted"]


@pytest.mark.parametrize("router", ["round_robin", "random"])
def test_a_closed_loop_goes_on_past_a_stopped_replica(router):
    sets = (*SWAP, "seed=2", "workload.num_requests=111",
            "workload.arrival={process: closed, concurrency: 16}",
            f"cluster={{replicas: 2, router: {{name: {router}}}}}")
    fr, _, s_auto = fleet("scenarios/swap-preemption.yaml", *sets)
    _, _, s_gen = fleet("scenarios/swap-preemption.yaml", *sets, "core=general")
    stopped = [r for r in fr.results.values() if r.counters["engine_stopped"]]
    assert len(stopped) >= 1 and {r.core for r in fr.results.values()} == {"fast"}
    total, finished, aborted = _counts(s_auto)
    assert total == 111 and finished + aborted == 111 and finished > 0 and aborted > 0
    assert s_auto["requests"]["never_sent"] == 0
    for s in (s_auto, s_gen):
        s.pop("sim")
    _same(s_gen, s_auto)


@pytest.mark.parametrize("core", ["auto", "general"])
def test_arrivals_after_every_replica_stopped_are_counted_failed(core):
    """The event loop (``alone=False``, as with a step log) counts what the replicas run
    alone count: every request, those arriving after the last replica stopped failed."""
    r, specs, _ = prepare(load_scenario("scenarios/swap-preemption.yaml", (
        f"core={core}", "cluster={replicas: 3, router: {name: round_robin}}",
        "workload.arrival.rate=12", "engine.swap_space=0.01",
        "engine.num_gpu_blocks_override=600", "workload.num_requests=300")))
    counts = []
    for alone in (True, False):
        fr = simulate_fleet(plan_fleet(r.scenario, r), specs, seed=r.scenario.seed,
                            alone=alone)
        assert all(x.counters["engine_stopped"] for x in fr.results.values())
        counts.append(_counts(fleet_outputs(fr)[1]))
    assert counts[0] == counts[1] == (300, 3, 297)


def test_failed_requests_answer_the_fleets_clients():
    sets = ("engine.swap_space=0.004", "engine.swap_space_full=abort_request",
            "engine.num_gpu_blocks_override=300", "engine.max_model_len=4096",
            "workload.num_requests=300",
            "workload.arrival={process: closed, concurrency: 4}",
            "cluster={replicas: 2, router: {name: round_robin}}")
    _, _, s_auto = fleet("scenarios/swap-preemption.yaml", *sets)
    _, _, s_gen = fleet("scenarios/swap-preemption.yaml", *sets, "core=general")
    r = s_auto["requests"]
    assert r["total"] == 300 and r["never_sent"] == 0 and r["aborted"] > 8
    for s in (s_auto, s_gen):
        s.pop("sim")
    _same(s_gen, s_auto)
