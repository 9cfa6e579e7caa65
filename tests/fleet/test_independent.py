"""Fleets whose replicas cannot affect each other run each replica alone
(sim/fleet/independent.py): the same results as the event loop (sim/fleet/cluster.py)."""

from __future__ import annotations

import numpy as np
import pytest

from sim.config.load import load_scenario
from sim.fleet.cluster import simulate_fleet
from sim.fleet.independent import why_not
from sim.fleet.plan import plan_fleet
from sim.fleet.run import fleet_outputs
from sim.pipeline import prepare


def _both(*sets):
    r, specs, _ = prepare(load_scenario(None, tuple(sets)))
    plan = plan_fleet(r.scenario, r)
    out = []
    for alone in (False, True):
        fr = simulate_fleet(plan, specs, seed=r.scenario.seed, alone=alone)
        out.append((fr, *fleet_outputs(fr)))
    return out


def _close(a, b, path=""):
    """Equal, but floats to 1e-12 relative: the event loop cut every replica's decode runs
    at every fleet arrival, and a gap at a plan's first step is a difference of end times
    (s) where inside a run it is the step's duration: the same number to the last bit or
    two (ITL mean, std and max only; every time and count is equal)."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, float):
        assert (np.isnan(a) and np.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=0), path
    else:
        assert a == b, path


@pytest.mark.parametrize("extra", [
    ("workload.num_requests=600", "workload.arrival.rate=40", "cluster={replicas: 4}"),
    ("workload.num_requests=900", "workload.arrival.rate=60",
     "cluster={replicas: 3, router: {name: random}}"),
    ("workload.num_requests=500", "workload.arrival.rate=50", "engine.max_num_seqs=8",
     "cluster={replicas: 3}"),
    ("workload.num_requests=400", "workload.arrival.rate=30", "engine.ingress_ms=3",
     "engine.egress_ms=2", "scheduler=vllm-priority", "cluster={replicas: 2}"),
    ("workload.num_requests=600", "workload.arrival.rate=40", "horizon_s=8",
     "cluster={replicas: 2}"),
    ("workload.num_requests=400", "workload.arrival.rate=30",
     "engine.enable_prefix_caching=false", "core=general", "cluster={replicas: 2}"),
    ("workload.num_requests=3", "cluster={replicas: 5}"),  # two replicas get nothing
    ("workload.num_requests=400", "workload.arrival.rate=40", "engine.ingress_serial=true",
     "engine.ingress_per_token_us=300", "cluster={replicas: 3}"),  # one tokenizer each
])
def test_replicas_run_alone_report_what_the_event_loop_reports(extra):
    (f1, r1, s1), (f2, r2, s2) = _both(*extra)
    assert f1.own_requests is None and f2.own_requests is not None
    _close(s1, s2)
    np.testing.assert_array_equal(f1.first, f2.first)
    np.testing.assert_array_equal(r1.status, r2.status)
    for name in ("first_scheduled_s", "first_token_s", "finish_s"):
        np.testing.assert_array_equal(getattr(r1.recorder, name), getattr(r2.recorder, name))
    np.testing.assert_allclose(r1.recorder.max_itl_s, r2.recorder.max_itl_s, rtol=1e-12)
    np.testing.assert_array_equal(r1.recorder.steps()["start_s"], r2.recorder.steps()["start_s"])
    assert s2["requests"]["total"] == int(extra[0].split("=")[1])


@pytest.mark.parametrize("sets, why", [
    (("workload.arrival={process: closed, concurrency: 8}", "cluster={replicas: 2}"),
     "concurrency gate"),
    (("cluster={replicas: 2, router: {name: least_outstanding}}",), "reads the replicas"),
    (("cluster={replicas: 2, router: {name: least_kv}}",), "reads the replicas"),
    (("cluster={replicas: 2}",), ""),
    (("cluster={replicas: 2, router: {name: random}}",), ""),
    (("cluster={replicas: 2}", "engine.ingress_per_token_us=12"), ""),  # per replica
    (("cluster={replicas: 2}", "engine.speculative_config={method: eagle3, "
      "num_speculative_tokens: 3}"), "speculative decoding"),  # draws by run numbers
])
def test_which_fleets_run_alone(sets, why):
    r, _, _ = prepare(load_scenario(None, ("workload.num_requests=20", *sets)))
    got = why_not(plan_fleet(r.scenario, r))
    assert (why in got) if why else got == ""


def test_a_fleet_that_cannot_run_alone_is_refused_when_asked_to():
    r, specs, _ = prepare(load_scenario(None, (
        "workload.num_requests=20", "cluster={replicas: 2, router: {name: least_outstanding}}")))
    with pytest.raises(ValueError, match="cannot run alone: router least_outstanding"):
        simulate_fleet(plan_fleet(r.scenario, r), specs, alone=True)
    fr = simulate_fleet(plan_fleet(r.scenario, r), specs)  # default: the event loop
    assert fr.own_requests is None and (fr.first >= 0).all()


def test_a_speculative_fleet_draws_as_the_event_loop_does():
    """Acceptance is drawn by a request's number in the run (sim/sched/spec.py); a replica
    run alone would number its requests 0..m-1, so a speculative fleet runs as one event
    loop, and a step log (which forces it) changes nothing."""
    r, specs, _ = prepare(load_scenario("scenarios/speculative-eagle3.yaml", (
        "workload.num_requests=120", "cluster={replicas: 3, router: {name: round_robin}}")))
    plan = plan_fleet(r.scenario, r)
    with pytest.raises(ValueError, match="speculative decoding"):
        simulate_fleet(plan, specs, alone=True)
    spec = [fleet_outputs(simulate_fleet(plan, specs, seed=r.scenario.seed, alone=a))[1]
            ["speculative"] for a in (None, False)]
    assert spec[0] == spec[1] and spec[0]["verify_steps"] > 1000
