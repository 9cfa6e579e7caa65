"""A fleet of one replica is the single run: same steps, same per-request times, same
summary (the fleet only adds its ``fleet`` block and names the replica in ``stability``)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fleet.helpers import fleet, single

SMALL = ("workload.num_requests=150", "workload.arrival.rate=12")


def _same(a, b, path=""):
    if isinstance(a, dict):
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), path
    else:
        assert a == b, path


@pytest.mark.parametrize("extra", [(), ("engine.max_num_seqs=8",),
                                   ("engine.ingress_ms=3", "engine.egress_ms=2"),
                                   ("engine.ingress_ms=3", "engine.ingress_per_token_us=40"),
                                   ("engine.ingress_ms=3", "engine.ingress_per_token_us=40",
                                    "engine.ingress_serial=true")])
def test_one_replica_cluster_equals_a_plain_run(extra):
    plain, s1 = single(None, *SMALL, *extra)
    fr, res, s2 = fleet(None, *SMALL, *extra, "cluster={replicas: 1}")
    fl = s2.pop("fleet")
    assert s2["stability"].pop("replica") == "default/0"
    s1.pop("sim"), s2.pop("sim")  # wall times
    _same(s1, s2)
    for name in ("first_scheduled_s", "first_token_s", "finish_s", "max_itl_s"):
        np.testing.assert_array_equal(getattr(plain.recorder, name),
                                      getattr(res.recorder, name))
    np.testing.assert_array_equal(plain.status, res.status)
    np.testing.assert_array_equal(plain.recorder.steps()["start_s"],
                                  res.recorder.steps()["start_s"])
    assert fl["replicas"] == fl["gpus"] == 1 and fl["routing_imbalance"] == 1.0


def test_a_speculative_replica_prices_its_drafter_as_a_single_run_does():
    # the event-loop fleet (a stateful router) prices each step verify + draft, as a run
    spec = ("engine.speculative_config={method: eagle, num_speculative_tokens: 3}",
            "cost=fitted")
    plain, s1 = single(None, *SMALL, *spec)
    _, res, s2 = fleet(None, *SMALL, *spec, "cluster={replicas: 1, router: least_outstanding}")
    np.testing.assert_array_equal(plain.recorder.steps()["start_s"],
                                  res.recorder.steps()["start_s"])
    np.testing.assert_array_equal(plain.recorder.finish_s, res.recorder.finish_s)
    assert s1["speculative"]["verify_steps"] > 0
    assert s2["speculative"] == s1["speculative"]  # acceptance counts and drafter time


def test_a_speculative_fleet_reports_its_replicas_acceptance():
    """The fleet's speculative block adds up its replicas' counts and times; rates come
    from the totals (vLLM's mean acceptance length: 1 + accepted per verify step)."""
    spec = ("engine.speculative_config={method: eagle, num_speculative_tokens: 3}",
            "cost=fitted")
    fr, _, s = fleet(None, *SMALL, *spec, "cluster={replicas: 2, router: least_outstanding}")
    parts = [r.speculative for r in fr.results.values()]
    assert len(parts) == 2 and all(p["verify_steps"] > 0 for p in parts)
    got = s["speculative"]
    for key in ("verify_steps", "draft_tokens", "accepted_tokens"):
        assert got[key] == parts[0][key] + parts[1][key]
    assert got["accepted_histogram"] == [a + b for a, b in zip(
        parts[0]["accepted_histogram"], parts[1]["accepted_histogram"])]
    assert got["mean_acceptance_length"] == round(
        1 + got["accepted_tokens"] / got["verify_steps"], 4)
    assert got["draft_acceptance_rate"] == round(got["accepted_tokens"] / got["draft_tokens"], 4)
    assert (got["method"], got["num_speculative_tokens"]) == ("eagle", 3)
    assert got["draft_s"] == pytest.approx(parts[0]["draft_s"] + parts[1]["draft_s"], abs=2e-6)
    assert got["draft_share"] == round(got["draft_s"] / (got["draft_s"] + got["verify_s"]), 4)


@pytest.mark.parametrize("extra", [(), ("engine.egress_ms=2", "engine.ingress_serial=true")])
def test_a_closed_loops_rejected_requests_answer_as_in_a_plain_run(extra):
    """A request too long for max_model_len is refused by the API server once it has seen
    it (ingress, the per-token part included) and the error is back (egress): its client's
    next request goes then, in a fleet as in a single run (before, a fleet freed the slot
    at the send)."""
    sets = ("workload.num_requests=60", "engine.max_model_len=1000",
            "workload.arrival={process: closed, concurrency: 8}", *extra)
    plain, s1 = single(None, *sets)
    fr, res, s2 = fleet(None, *sets, "cluster={replicas: 1}")
    assert 5 < (plain.status == 4).sum() < 55  # some rejected (REJECTED), some served
    np.testing.assert_array_equal(plain.specs.arrival_s, res.specs.arrival_s)
    np.testing.assert_array_equal(plain.status, res.status)
    for name in ("first_token_s", "finish_s"):
        np.testing.assert_array_equal(getattr(plain.recorder, name),
                                      getattr(res.recorder, name))
    assert s1["duration_s"] == s2["duration_s"] and s1["latency_ms"] == s2["latency_ms"]


def test_a_fleet_whose_every_request_is_rejected_reports_kv_as_a_plain_run():
    """No step ran: a single run's kv_cache block has no used-block figures, and neither
    has the fleet's (it listed them as 0 before)."""
    sets = ("workload.num_requests=20", "engine.max_model_len=512",
            "workload.lengths={dist: fixed, prompt: 1000, output: 10}")
    plain, s1 = single(None, *sets)
    fr, res, s2 = fleet(None, *sets, "cluster={replicas: 1, router: round_robin}")
    assert (plain.status == 4).all() and (res.status == 4).all()  # every one REJECTED
    assert s2["kv_cache"] == s1["kv_cache"]
    assert "peak_used_blocks" not in s2["kv_cache"]
