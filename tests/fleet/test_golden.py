"""A golden tiny fleet: two replicas behind least_outstanding, linear cost (10 ms per step
+ 1 ms per prefill token, decodes free), every routing decision and time worked by hand.

    r0 P=8 O=2 at 0     -> replica 0 (both idle, tie: lowest index)
                           [0, 18) prefill -> token 1 | [18, 28) decode -> done at 28
    r1 P=4 O=2 at 5 ms  -> replica 1 (outstanding 1 vs 0)
                           [5, 19) prefill | [19, 29) decode -> done at 29
    r2 P=2 O=1 at 20 ms -> replica 0 (1 vs 1; routed 1 vs 1: lowest index); waits for the
                           step ending at 28: [28, 40) prefill -> its one token, done at 40
    r3 P=3 O=1 at 28 ms -> replica 1: the router acts before steps ending at 28 commit, so it
                           still counts r0 on replica 0 (2 vs 1); [29, 42) -> done at 42
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from sim.config.load import validate
from sim.engine.requests import RequestSpecs
from sim.fleet.cluster import simulate_fleet
from sim.fleet.plan import plan_fleet
from sim.fleet.run import FleetLog

SCENARIO = {
    "model": "llama-3-8b", "gpu": "h100-sxm",
    "cost": {"name": "linear", "base_ms": 10, "prefill_token_ms": 1, "decode_seq_ms": 0,
             "context_token_ms": 0},
    "workload": {"arrival": {"process": "poisson", "rate": 1.0}, "num_requests": 1,
                 "lengths": {"dist": "fixed", "prompt": 8, "output": 2}},  # unused
    "cluster": {"replicas": 2, "router": {"name": "least_outstanding"}},
}


def test_two_replica_event_log():
    specs = RequestSpecs.from_arrays([0.0, 0.005, 0.020, 0.028], [8, 4, 2, 3], [2, 2, 1, 1])
    fh = io.StringIO()
    fr = simulate_fleet(plan_fleet(validate(SCENARIO, "golden")), specs,
                        log=FleetLog(fh, specs.request_id))
    routes = [json.loads(x) for x in fh.getvalue().splitlines() if '"route"' in x]
    assert [(r["request"], r["replica"], r["t_s"], r["outstanding"]) for r in routes] == [
        ("0", "default/0", 0.0, [1, 0]), ("1", "default/1", 0.005, [1, 1]),
        ("2", "default/0", 0.020, [2, 1]), ("3", "default/1", 0.028, [2, 2])]
    rec = {rep.name: rep.recorder for rep in fr.replicas}
    first = np.where(fr.first == 0, rec["default/0"].first_token_s,
                     rec["default/1"].first_token_s)
    finish = np.where(fr.first == 0, rec["default/0"].finish_s, rec["default/1"].finish_s)
    assert first == pytest.approx([0.018, 0.019, 0.040, 0.042], abs=1e-12)
    assert finish == pytest.approx([0.028, 0.029, 0.040, 0.042], abs=1e-12)
    steps = [json.loads(x) for x in fh.getvalue().splitlines() if '"step"' in x]
    assert [(s["replica"], s["start_s"], s["tokens"]) for s in steps] == [
        ("default/0", 0.0, {"0": 8}), ("default/1", 0.005, {"1": 4}),
        ("default/0", 0.018, {"0": 1}), ("default/1", 0.019, {"1": 1}),
        ("default/0", 0.028, {"2": 2}), ("default/1", 0.029, {"3": 3})]


def test_stale_kv_reports():
    """least_kv with reports every 30 ms: decisions inside a window see the usage of its
    start (here: the empty caches at 0 until the report at 30 ms)."""
    sc = {**SCENARIO, "cluster": {"replicas": 2, "router": {"name": "least_kv"},
                                  "kv_report_interval_ms": 30}}
    specs = RequestSpecs.from_arrays([0.0, 0.005, 0.020, 0.031], [64, 64, 64, 64],
                                     [4, 4, 4, 4])
    fh = io.StringIO()
    simulate_fleet(plan_fleet(validate(sc, "golden")), specs, log=FleetLog(fh, specs.request_id))
    routes = [json.loads(x) for x in fh.getvalue().splitlines() if '"route"' in x]
    assert [r["kv_used"] for r in routes[:3]] == [[0.0, 0.0]] * 3  # stale: reported at 0
    assert routes[3]["kv_used"][0] > 0 and routes[3]["kv_used"][1] > 0  # fresh at 31 ms
    # stale zeros: ties broken by fewest routed, lowest index -> 0, 1, 0
    assert [r["replica"] for r in routes[:3]] == ["default/0", "default/1", "default/0"]


def test_each_replica_has_its_own_api_server():
    """A per-token ingress (1 ms per prompt token) is each replica's own API server: round
    robin sends r0 (P=100, at 0) to replica 0 and r1 (P=2, at 1 ms) to replica 1, which
    sees r1 at 1 + 2 = 3 ms, not behind r0's 100 ms; r2 (P=1, at 2 ms) goes to replica 0
    and waits there for its one tokenizing worker (engine.ingress_serial): tokenized [100,
    101) ms, it reaches the scheduler at 101 (not 3 ms). Linear cost: r1's prefill [3, 15),
    its token at 15; r0's [100, 210), r2 joins the step after: [210, 221)."""
    sc = {**SCENARIO, "cluster": {"replicas": 2, "router": {"name": "round_robin"}},
          "engine": {"ingress_per_token_us": 1000.0, "ingress_ms": 0.0, "egress_ms": 0.0}}
    specs = RequestSpecs.from_arrays([0.0, 0.001, 0.002], [100, 2, 1], [1, 1, 1])
    want = {"default/0": {0: pytest.approx(0.100), 2: pytest.approx(0.101)},
            "default/1": {1: pytest.approx(0.003)}}
    alone = simulate_fleet(plan_fleet(validate(sc, "golden")), specs, alone=True)
    assert alone.received_s == want  # each replica run alone on its own requests
    fr = simulate_fleet(plan_fleet(validate(sc, "golden")), specs, alone=False)
    assert fr.received_s == want
    rec = {rep.name: rep.recorder for rep in fr.replicas}
    assert rec["default/1"].first_token_s[1] == pytest.approx(0.015, abs=1e-12)
    assert rec["default/0"].first_token_s[0] == pytest.approx(0.210, abs=1e-12)
