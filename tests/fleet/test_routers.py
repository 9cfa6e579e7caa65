"""Routers decide from the router's view only (hand-built states, no engine)."""

from __future__ import annotations

import numpy as np
import pytest

from sim.fleet.routers import ROUTERS, ReplicaState, RouteRequest


def _router(name, n=3, **params):
    cls = ROUTERS.get(name)
    return cls(n, cls.Params(**params), np.random.default_rng(0))


def _req(i=0, hashes=None):
    return RouteRequest(i, 100, None if hashes is None else np.asarray(hashes), "default")


def _states(outstanding, routed=None, kv=None):
    routed = routed or [0] * len(outstanding)
    kv = kv or [0.0] * len(outstanding)
    return [ReplicaState(i, o, r, f) for i, (o, r, f) in enumerate(zip(outstanding, routed, kv))]


def test_registry_names_are_the_cli_choices():
    assert ROUTERS.names() == ["least_kv", "least_outstanding", "prefix_affinity", "random",
                               "round_robin"]


def test_round_robin_cycles_whatever_the_load():
    r = _router("round_robin")
    states = _states([9, 0, 0])
    assert [r.choose(_req(), states) for _ in range(5)] == [0, 1, 2, 0, 1]


def test_least_outstanding_picks_the_shortest_then_fewest_routed_then_lowest_index():
    r = _router("least_outstanding")
    assert r.choose(_req(), _states([3, 1, 2])) == 1
    assert r.choose(_req(), _states([1, 1, 1], routed=[5, 4, 4])) == 1
    assert r.choose(_req(), _states([0, 0, 0])) == 0


def test_least_kv_reads_the_reported_usage_then_outstanding():
    r = _router("least_kv")
    assert r.choose(_req(), _states([0, 5, 0], kv=[0.5, 0.1, 0.3])) == 1
    assert r.choose(_req(), _states([4, 2, 3], kv=[0.2, 0.2, 0.2])) == 1


def test_random_is_seeded_and_covers_every_replica():
    picks = [_router("random").choose(_req(), _states([0] * 3)) for _ in range(3)]
    assert len(set(picks)) == 1  # same seed, same first pick
    r = _router("random")
    assert set(r.choose(_req(), _states([0] * 3)) for _ in range(60)) == {0, 1, 2}


def test_prefix_affinity_follows_the_longest_remembered_prefix():
    r = _router("prefix_affinity")
    states = _states([0, 0, 0])
    first = r.choose(_req(0, [1, 2, 3]), states)
    r.routed(_req(0, [1, 2, 3]), first)
    states[first].outstanding = 3  # busier, but within the balance threshold
    assert r.choose(_req(1, [1, 2, 3, 4]), states) == first
    assert r.explain() == {"matched_blocks": 3, "by": "prefix"}
    # a different prefix goes by load
    assert r.choose(_req(2, [7, 8]), states) != first
    assert r.explain()["by"] == "load"


@pytest.mark.parametrize("gap,expect_affinity", [(32, True), (33, False)])
def test_prefix_affinity_gives_way_when_the_load_is_unbalanced(gap, expect_affinity):
    r = _router("prefix_affinity", n=2)
    r.routed(_req(0, [1, 2]), 0)
    states = _states([gap, 0])
    assert (r.choose(_req(1, [1, 2]), states) == 0) == expect_affinity


def test_prefix_affinity_needs_the_cache_threshold_share():
    r = _router("prefix_affinity", n=2, cache_threshold=0.6)
    r.routed(_req(0, [1, 2]), 1)
    assert r.choose(_req(1, [1, 2, 3, 4]), _states([0, 1])) == 0  # 2 of 4 < 60%: by load
    assert r.choose(_req(1, [1, 2, 3]), _states([0, 1])) == 1  # 2 of 3 >= 60%
