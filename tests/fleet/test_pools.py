"""A pool per lane keeps interactive TTFT within budget under a batch flood; the same two
GPUs as one shared pool do not (scenarios/fleet-pools.yaml, cut to 10 s of traffic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.config.resolve import ConfigError
from sim.fleet.summary import _compact, _fleet_blocks, client_view, replica_view
from sim.fleet.views import combine
from sim.metrics.stability import waiting_from
from sim.metrics.summary import summarize
from tests.fleet.helpers import fleet

POOLS = str(Path(__file__).resolve().parents[2] / "scenarios" / "fleet-pools.yaml")
SHORT = ("workload.mix.0.duration_s=10", "workload.mix.1.duration_s=10",
         "workload.mix.1.arrival.rate=25")  # a denser flood: the backlog builds in 10 s


def test_pool_per_lane_protects_interactive_ttft():
    _, _, pooled = fleet(POOLS, *SHORT)
    _, _, shared = fleet(POOLS, *SHORT, "cluster={replicas: 2, router: {name: "
                         "least_outstanding}}")
    budget = 500.0
    inter = pooled["lanes"]["interactive"]["latency_ms"]["ttft"]["p95"]
    shared_inter = shared["lanes"]["interactive"]["latency_ms"]["ttft"]["p95"]
    assert inter <= budget < shared_inter
    assert pooled["fleet"]["gpus"] == shared["fleet"]["gpus"] == 2
    pools = pooled["fleet"]["pools"]
    assert pools["interactive"]["lanes"] == ["interactive"]
    assert pools["interactive"]["finished"] + pools["batch"]["finished"] \
        == pooled["requests"]["finished"]


def test_pools_that_price_steps_differently_report_no_fleet_schedule_block():
    """The fleet's host time per step comes from one cost model only where every pool
    prices steps alike; pools on different GPUs (fitted profiles) leave the block empty
    rather than price the other pool's steps with the first one's host figures."""
    fitted = ("cost=fitted",)
    _, _, same = fleet(POOLS, *SHORT, *fitted)
    _, _, mixed = fleet(POOLS, *SHORT, *fitted, "cluster.pools.1.gpu=h200-sxm")
    assert same["schedule"]["host_ms_per_step"]["mean"] > 0
    assert mixed["schedule"] == {}


def test_pools_of_other_batch_limits_are_judged_by_their_own():
    """The fleet's batch_limits weighs each step against its own pool's max_num_seqs: the
    seconds at the limit add up over the replicas' own figures."""
    fr, _, s = fleet(POOLS, *SHORT, "cluster.pools.0.engine={max_num_seqs: 4}")
    parts = [summarize(replica_view(fr, rep)[0]) for rep in fr.replicas]
    busy = [p["steps"]["busy_s"] for p in parts]
    at = sum(p["batch_limits"]["at_max_num_seqs"] * b for p, b in zip(parts, busy))
    assert parts[0]["batch_limits"]["at_max_num_seqs"] > 0.5  # the 4-seat pool is full
    assert s["batch_limits"]["at_max_num_seqs"] == pytest.approx(at / sum(busy), rel=1e-9)


def test_a_lane_without_a_pool_is_a_config_error():
    with pytest.raises(ConfigError, match="no pool takes lane 'batch'"):
        fleet(POOLS, *SHORT, "cluster.pools.1.lanes=[other]")


@pytest.mark.parametrize("sets", [
    ("cluster={replicas: 3, router: least_outstanding}", "workload.num_requests=600",
     "workload.arrival.rate=40"),
    ("cluster={replicas: 3}", "workload.num_requests=600",
     "workload.arrival={process: closed, concurrency: 24}"),
    ("cluster={replicas: 2, router: random}", "workload.num_requests=600",
     "workload.arrival={process: poisson, rate: 40, concurrency: 8}", "horizon_s=10"),
])
def test_one_pool_reports_the_fleet(sets):
    """A fleet of one pool gives the pool the fleet's figures (fleet_summary reuses them):
    its replicas' requests combined, summarised the long way, say the same."""
    fr, _, summary = fleet(None, *sets)
    (pool,) = summary["fleet"]["pools"].values()
    views = [replica_view(fr, rep)[0] for rep in fr.replicas]
    long_way = summarize(combine(views))
    # the one pool has every client: a cap on an open stream queues them for it alone
    seen = client_view(fr, {rep.name: replica_view(fr, rep) for rep in fr.replicas})
    clients = summarize(seen)["stability"] if waiting_from(seen) is not seen.specs.arrival_s \
        else None
    _fleet_blocks(long_way, [summarize(v) for v in views], [r.name for r in fr.replicas],
                  clients)
    assert {k: pool[k] for k in _compact(long_way)} == _compact(long_way) == _compact(summary)
    assert pool["finished"] == summary["requests"]["finished"] > 0
