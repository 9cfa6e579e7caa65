"""Fleet runs keep the single-replica guarantees: every request ends finished, rejected
or unfinished, routed once; each replica's KV blocks are conserved; same seed, same run."""

from __future__ import annotations

import numpy as np
import pytest

from sim.fleet.routers import ROUTERS
from sim.sched.base import Status
from tests.fleet.helpers import fleet

BASE = ("workload.num_requests=240", "workload.arrival.rate=30",
        "engine.num_gpu_blocks_override=1200")  # small KV: preemptions happen


@pytest.mark.parametrize("router", ROUTERS.names())
def test_conservation_per_router(router):
    fr, res, s = fleet(None, *BASE, f"cluster={{replicas: 3, router: {{name: {router}}}}}")
    req = s["requests"]
    assert req["finished"] + req["rejected"] + req["unfinished"] + req["aborted"] \
        + req["never_sent"] == req["total"] == 240
    assert np.isin(res.status, (Status.FINISHED, Status.REJECTED, Status.WAITING,
                                Status.RUNNING)).all()
    # routed exactly once: replica request counts add up to the fleet's
    per = s["fleet"]["replica"]
    assert sum(r["requests"] for r in per.values()) == 240
    assert (fr.first >= 0).all() and (fr.first == fr.last).all()
    for k, rep in enumerate(fr.replicas):
        mine = set(np.flatnonzero(fr.first == k).tolist())
        if fr.own_requests is not None:  # run alone (round_robin, random): its own result
            assert set(fr.own_requests[rep.name].tolist()) == mine
            assert len(fr.results[rep.name].status) == len(mine)
            continue
        rep.kv.check_integrity()
        assert rep.kv.usage().used == 0  # every block back once the replica drained
        assert rep.source.received.keys() == mine


def test_small_kv_preempts_and_still_conserves():
    _, _, s = fleet(None, *BASE, "cluster={replicas: 2, router: {name: least_kv}}")
    assert s["preemption"]["count"] > 0
    assert s["requests"]["finished"] == 240


def test_same_seed_same_fleet_run():
    sets = (*BASE, "cluster={replicas: 3, router: {name: random}}")
    a, b = fleet(None, *sets)[2], fleet(None, *sets)[2]
    a.pop("sim"), b.pop("sim")
    assert a == b
    c = fleet(None, *sets[:-1], "seed=5", "cluster={replicas: 3, router: {name: random}}")[2]
    assert c["fleet"]["replica"] != a["fleet"]["replica"]


def test_fleet_kv_cache_block_is_one_replicas_mean_and_highest_peak():
    """kv_cache in a fleet summary is per replica: the mean of the replicas' means, the
    highest replica's peak (so mean <= peak), the blocks of every replica in total. The
    client view's steps summed every replica's running sequences into the mean only: 4
    replicas at 4x one replica's load reported ~60 concurrent on average, 28 at the peak."""
    from sim.fleet.summary import replica_view
    from sim.metrics.summary import summarize

    fr, _, s = fleet(None, "workload.num_requests=400", "workload.arrival.rate=32",
                     "cluster={replicas: 4}")
    per = [summarize(replica_view(fr, rep)[0])["kv_cache"] for rep in fr.replicas]
    kv = s["kv_cache"]
    assert kv["mean_concurrent_seqs"] == pytest.approx(
        np.mean([p["mean_concurrent_seqs"] for p in per]), rel=1e-12)
    assert kv["peak_concurrent_seqs"] == max(p["peak_concurrent_seqs"] for p in per)
    assert 0 < kv["mean_concurrent_seqs"] <= kv["peak_concurrent_seqs"]
    assert kv["total_blocks"] == sum(p["total_blocks"] for p in per)
    # a prefill/decode split: the prefill pool's replicas count too
    fr, _, s = fleet("scenarios/fleet-disagg.yaml", "workload.num_requests=200")
    per = [summarize(replica_view(fr, rep)[0])["kv_cache"] for rep in fr.replicas]
    kv = s["kv_cache"]
    assert len(per) == 2 and kv["total_blocks"] == sum(p["total_blocks"] for p in per)
    assert kv["peak_used_blocks"] == max(p["peak_used_blocks"] for p in per)
    assert kv["mean_concurrent_seqs"] <= kv["peak_concurrent_seqs"]
