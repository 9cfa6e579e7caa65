"""Gated arrivals in a fleet: ``vllm bench serve --max-concurrency C`` against the fleet's
endpoint. One gate holds every client; a finish anywhere frees a slot (sim/fleet/cluster.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.fleet.helpers import fleet, single
from tests.fleet.test_identity import _same

SMALL = ("workload.num_requests=150", "workload.arrival.rate=12")
CLOSED8 = "workload.arrival={process: closed, concurrency: 8}"


@pytest.mark.parametrize("extra", [
    (CLOSED8,),
    ("workload.arrival={process: closed, concurrency: 16, think_s: 0.05}",
     "engine.ingress_ms=3", "engine.egress_ms=2"),
    ("workload.arrival.concurrency=4",),  # a cap on the Poisson stream
    ("workload.arrival={process: closed, concurrency: 64}", "engine.max_num_seqs=8"),
    (CLOSED8, "engine.enable_prefix_caching=false"),
    # the API server's per-token part: per-request delays, in the order sent
    ("workload.arrival={process: closed, concurrency: 16, think_s: 0.05}",
     "engine.ingress_ms=3", "engine.egress_ms=2", "engine.ingress_per_token_us=12"),
])
def test_one_replica_gated_fleet_equals_the_single_run(extra):
    plain, s1 = single(None, *SMALL, *extra)
    fr, res, s2 = fleet(None, *SMALL, *extra, "cluster={replicas: 1}")
    s2.pop("fleet")
    assert s2["stability"].pop("replica") == "default/0"
    _same(s1, s2)
    for name in ("first_scheduled_s", "first_token_s", "finish_s"):
        np.testing.assert_array_equal(getattr(plain.recorder, name),
                                      getattr(res.recorder, name))
    np.testing.assert_array_equal(plain.specs.arrival_s, res.specs.arrival_s)
    assert s2["sim"]["client_queue_ms"]["count"] == 150


def _in_flight(res) -> int:
    """Most requests between their send and their finish at the client, at any send (ns)."""
    sent = np.round(res.specs.arrival_s * 1e9).astype(np.int64)
    done = np.round(res.recorder.finish_s * 1e9)
    done = np.where(np.isnan(done), sent, done).astype(np.int64)  # rejected: freed at once
    return int(max(np.count_nonzero((sent <= t) & (done > t)) for t in sent.tolist()))


@pytest.mark.parametrize("router", ["round_robin", "least_outstanding", "random"])
def test_the_gate_holds_across_replicas_and_conserves_requests(router):
    c = 24
    fr, res, s = fleet(None, "workload.num_requests=400",
                       f"workload.arrival={{process: closed, concurrency: {c}}}",
                       f"cluster={{replicas: 3, router: {{name: {router}}}}}")
    assert _in_flight(res) == c  # every slot used, never more
    req = s["requests"]
    assert req["total"] == 400 == req["finished"] + req["rejected"] + req["unfinished"]
    assert req["never_sent"] == 0
    per = [v["requests"] for v in s["fleet"]["replica"].values()]
    assert sum(per) == 400 and min(per) > 0
    q = s["sim"]["client_queue_ms"]
    assert q["count"] == 400 and q["max"] > 0  # a closed loop: later requests wait client-side


def test_same_seed_same_fleet():
    args = ("workload.num_requests=200", "workload.arrival={process: closed, concurrency: 12}",
            "cluster={replicas: 3, router: {name: random}}")
    a, b = fleet(None, *args)[1], fleet(None, *args)[1]
    np.testing.assert_array_equal(a.recorder.finish_s, b.recorder.finish_s)
    np.testing.assert_array_equal(a.specs.arrival_s, b.specs.arrival_s)


def test_two_lockstep_clients_on_two_replicas_are_two_closed_loops_of_one():
    """Fixed lengths, round robin: request i goes to replica i % 2 and each replica serves a
    closed loop of one, so every request's TTFT and E2E are the single run's at C = 1."""
    lengths = "workload.lengths={dist: fixed, prompt: 300, output: 40}"
    _, one = single(None, "workload.num_requests=20", lengths,
                    "workload.arrival={process: closed, concurrency: 1}")
    fr, res, two = fleet(None, "workload.num_requests=40", lengths,
                         "workload.arrival={process: closed, concurrency: 2}",
                         "cluster={replicas: 2}")
    assert np.array_equal(fr.first, np.arange(40) % 2)
    for m in ("ttft", "e2el", "tpot"):
        assert two["latency_ms"][m]["mean"] == pytest.approx(one["latency_ms"][m]["mean"],
                                                             rel=1e-9)
    assert two["throughput"]["request_per_s"] == pytest.approx(
        2 * one["throughput"]["request_per_s"], rel=1e-6)


def test_disaggregated_fleet_takes_a_closed_loop():
    fr, res, s = fleet("scenarios/fleet-disagg.yaml", "workload.num_requests=300",
                       "workload.arrival={process: closed, concurrency: 32}")
    assert s["requests"]["finished"] == 300
    assert int(fr.transfers.sum()) == 300  # each prompt's KV moved once
    assert _in_flight(res) == 32


@pytest.mark.parametrize("ingress", [(), ("engine.ingress_ms=3", "engine.ingress_per_token_us=12")])
def test_horizon_leaves_requests_unsent_and_counts_them(ingress):
    """A request the client sent that is still in the API server at the horizon never
    reached the engine: never sent, as a single run's gate counts it."""
    fr, res, s = fleet(None, "workload.num_requests=400", "horizon_s=5",
                       "workload.arrival={process: closed, concurrency: 8}",
                       "cluster={replicas: 2}", *ingress)
    req = s["requests"]
    assert req["never_sent"] > 0
    assert req["total"] == 400
    assert req["total"] == (req["finished"] + req["rejected"] + req["unfinished"]
                            + req["aborted"] + req["never_sent"])


@pytest.mark.parametrize("core", ["general", "fast"])
def test_an_idle_replica_ends_at_the_horizon_when_no_client_is_free(core):
    """One client, two replicas: the horizon stops the replica holding the client's request,
    so no slot frees and the other replica, idle with nothing on the way, is never poked;
    it waits until the horizon (it had waited forever: SimPy ran out of events)."""
    _, _, s = fleet(None, "workload.num_requests=50", "workload.arrival.concurrency=1",
                    "horizon_s=5", "cluster={replicas: 2}", f"core={core}")
    r = s["requests"]
    assert (r["finished"], r["unfinished"], r["never_sent"], r["total"]) == (5, 1, 44, 50)


def test_a_fleet_of_one_with_a_horizon_counts_what_the_single_run_counts():
    args = ("workload.num_requests=400", "horizon_s=5", "engine.ingress_ms=3",
            "workload.arrival={process: closed, concurrency: 8}",
            "engine.ingress_per_token_us=12")
    _, s1 = single(None, *args)
    _, _, s2 = fleet(None, *args, "cluster={replicas: 1}")
    assert s2["requests"] == s1["requests"]
    r = s1["requests"]
    assert (r["finished"], r["unfinished"], r["never_sent"]) == (25, 8, 367)  # 8 clients
    assert s2["latency_ms"]["ttft"] == s1["latency_ms"]["ttft"]


@pytest.mark.parametrize("serial", [False, True])
@pytest.mark.parametrize("router", ["round_robin", "least_outstanding"])
@pytest.mark.parametrize("arrival", ["workload.arrival.rate=30",
                                     "workload.arrival={process: closed, concurrency: 6}"])
def test_a_per_token_ingress_per_replica_conserves_requests(router, arrival, serial):
    """Each replica's API server (sim/fleet/cluster.py PoolRun.replica_due) with a slow
    frontend (300 us per prompt token; tokenizing beside each other or one at a time):
    every request ends somewhere, the gate holds."""
    fr, res, s = fleet(None, "workload.num_requests=120", arrival, "engine.ingress_ms=2",
                       "engine.ingress_per_token_us=300",
                       f"engine.ingress_serial={str(serial).lower()}",
                       f"cluster={{replicas: 3, router: {{name: {router}}}}}")
    req = s["requests"]
    assert req["total"] == 120 == req["finished"]
    if "closed" in arrival:
        assert _in_flight(res) == 6
    # every request reached its replica after its own prompt's frontend time, and each
    # replica's requests in the order they were sent (fleet numbering: fr.specs)
    for name, got in fr.received_s.items():
        for q, t in got.items():
            sent = fr.specs.arrival_s[q]
            assert t >= sent + 0.002 + 300e-6 * fr.specs.prompt_tokens[q] - 1e-9, (name, q)
        order = sorted(got)
        assert all(got[a] <= got[b] for a, b in zip(order, order[1:])), name


@pytest.mark.parametrize("core", ["auto", "general"])
@pytest.mark.parametrize("ingress_ms", [0, 5])
def test_one_client_between_two_replicas(core, ingress_ms):
    """One client, three one-token requests (a 10 ms step each), two replicas: the idle
    replica's lookahead is the busy one's step end, the very instant the finish frees the
    client; it waits behind that instant's events instead of asking again at once (both
    engines looped there forever), and an idle replica with nothing on the way bounds
    nothing."""
    from sim.config.load import validate
    from sim.engine.requests import RequestSpecs
    from sim.fleet.cluster import simulate_fleet
    from sim.fleet.plan import plan_fleet
    from tests.fleet.test_golden import SCENARIO

    sc = {**SCENARIO, "core": core,
          "engine": {"async_scheduling": False, "ingress_ms": ingress_ms},
          "workload": {**SCENARIO["workload"],
                       "arrival": {"process": "closed", "concurrency": 1}}}
    specs = RequestSpecs.from_arrays([0.0] * 3, [1] * 3, [1] * 3)
    fr = simulate_fleet(plan_fleet(validate(sc, "one-client")), specs, alone=False)
    assert fr.first.tolist() == [0, 1, 0]  # least outstanding: the idle replica, in turn
    # each request: sent when the previous one ends, seen ingress later, one 10 ms step
    step, ing = 0.010, ingress_ms * 1e-3
    want = [(i + 1) * (step + ing) for i in range(3)]
    got = np.nanmin([r.recorder.finish_s for r in fr.results.values()], axis=0)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


CAPPED = ("workload.num_requests=900", "workload.arrival={process: poisson, rate: 30, "
          "concurrency: 16}")


def test_a_cap_the_offered_rate_overruns_is_unstable_though_every_replica_keeps_up():
    """vllm bench serve --request-rate 30 --max-concurrency 16: 16 clients in flight serve
    about 16 / E2EL ~ 10 req/s, so the requests the cap holds back pile up client-side.
    The engine's queue never holds more than 16 and every replica kept up, so the verdict
    was stable and capacity searches held at any rate (8,192 req/s on one H100; a fleet of
    one replica sized for 30 req/s). They count as waiting from when they were ready."""
    _, one = single(None, *CAPPED)
    st = one["stability"]
    served = one["throughput"]["request_per_s"]
    assert served < 15 and one["sim"]["client_queue_ms"]["p95"] > 10_000
    assert st["verdict"] == "unstable" and not st["sustainable"]
    assert st["queue_growth"] == pytest.approx(1 - served / 30, abs=0.1)
    # two replicas behind the same 16 clients: each keeps up, the fleet does not
    _, _, s = fleet(None, *CAPPED, "cluster={replicas: 2}")
    assert {r["stability"] for r in s["fleet"]["replica"].values()} == {"stable"}
    assert s["stability"]["verdict"] == "unstable" and s["stability"]["replica"] is None
    # the same cap at a rate it serves stays stable, from the client's view too
    _, ok = single(None, "workload.num_requests=900",
                   "workload.arrival={process: poisson, rate: 4, concurrency: 16}")
    assert ok["stability"]["verdict"] == "stable"


def test_a_capped_replay_sent_all_at_once_is_judged_from_its_sends(tmp_path):
    """A replay of vllm bench serve --request-rate inf --max-concurrency 32: every client is
    ready at 0, a closed loop in all but name. Its verdict is judged from the sends, not
    'fewer than two arrival times' from the ready times."""
    trace = tmp_path / "inf.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n"
                     + "".join(f"0.0,{300 + 7 * i},{60 + i % 50}\n" for i in range(300)))
    _, s = single(None, f"workload.trace={trace}",
                  "workload.arrival={process: replay, concurrency: 32}")
    st = s["stability"]
    assert "fewer than two arrival times" not in st["reason"]
    assert st["window_s"] > 0 and len(st["window_running"]) == 10
