"""Optimistic fleet replicas (sim/fleet/cluster.py ``Fleet._stage``): a decode run is cut
only where a request reaches its replica, not at the fleet's lookahead (the earliest any
request could come), and the result is the lookahead's under the same same-time rule; a
router reading KV reads the step in progress, as it would with one plan a step."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import sim.fast.engine as fast_engine
import sim.sched.vllm as vllm_sched
from sim.config.load import validate
from sim.engine.requests import RequestSpecs
from sim.fleet.cluster import Fleet, simulate_fleet
from sim.fleet.plan import plan_fleet
from sim.fleet.routers import ROUTERS
from tests.fleet.test_golden import SCENARIO
from tests.fleet.test_properties import _replica_rows, _specs, trace


@pytest.mark.parametrize("core", ["auto", "general"])
def test_a_run_is_cut_only_by_the_requests_its_replica_gets(core):
    # linear cost: 10 ms a step + 1 ms a prompt token. Request 0 (8 + 50 tokens) goes to
    # replica 0: an 18 ms prefill, then 49 decode steps to 0.508 s. The short ones, every
    # 40 ms, go to replica 1 (least outstanding: replica 0 has one)
    arrival = [0.0, 0.001] + [0.04 * i for i in range(1, 11)]
    specs = RequestSpecs.from_arrays(arrival, [8] + [2] * 11, [50] + [1] * 11)
    plan = plan_fleet(validate({**SCENARIO, "core": core}, "optimistic"))
    runs = {opt: simulate_fleet(plan, specs, alone=False, optimistic=opt)
            for opt in (None, False)}
    for fr in runs.values():
        assert fr.first.tolist() == [0] + [1] * 11
        r0, r1 = fr.results["default/0"], fr.results["default/1"]
        assert (r0.recorder.num_steps, r0.run.end_s) == (50, 0.508)
        assert (r1.recorder.num_plans, r1.run.end_s) == (11, 0.412)
    # the prefill step and one 49-step run; the lookahead cut the run at each of the ten
    # arrivals replica 1 took during it
    assert runs[None].results["default/0"].recorder.num_plans == 2
    assert runs[False].results["default/0"].recorder.num_plans == 12
    _same_rows(_replica_rows(runs[False]), _replica_rows(runs[None]))


def _same_rows(lookahead: dict, optimistic: dict) -> None:
    for name, cols in lookahead.items():
        for col, want in cols.items():
            got = optimistic[name][col]
            if col == "end_s":  # an idle replica ends when told nothing more comes, not
                assert got <= want, name  # at its next lookahead wake-up
            elif col == "max_itl_s":  # a gap across plans is a difference of end times (s)
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, err_msg=name)
            else:
                np.testing.assert_array_equal(want, got, err_msg=f"{name} {col}")


def test_step_ends_of_one_instant_commit_in_replica_order():
    # three clients; prefill pool p and decode pool d of two replicas each, round robin.
    # Requests 4 and 5 end their prefills on p/0 and p/1 at the same instant (0.294 s): the
    # decode pool's round robin takes p/0's first (d/0), then p/1's (d/1). At the
    # lookahead (optimistic=False) the order was the one the two plans were made in
    rows = [(0, 2, 1), (0, 1, 27), (1, 252, 8), (100, 39, 13), (191, 1, 1), (101, 1, 1)]
    sc = {**SCENARIO, "engine": {"num_gpu_blocks_override": 40, "max_model_len": 512,
                                 "async_scheduling": False, "ingress_ms": 1, "egress_ms": 2},
          "workload": {**SCENARIO["workload"],
                       "arrival": {"process": "closed", "concurrency": 3}},
          "cluster": {"pools": [{"name": "p", "replicas": 2},
                                {"name": "d", "replicas": 2,
                                 "router": {"name": "round_robin"}}],
                      "disaggregation": {"prefill_pool": "p", "decode_pool": "d"}}}
    plan, specs = plan_fleet(validate(sc, "ties")), _specs(rows)
    fr = simulate_fleet(plan, specs, alone=False)
    assert fr.first[4:].tolist() == [0, 1]  # p/0, p/1
    assert fr.results["p/0"].recorder.finish_s[4] == fr.results["p/1"].recorder.finish_s[5]
    assert fr.last[4:].tolist() == [2, 3]  # d/0, d/1
    assert _staged_lookahead(plan, specs).last[4:].tolist() == [2, 3]
    assert simulate_fleet(plan, specs, alone=False, optimistic=False).last[4:].tolist() == [
        3, 2]


def _staged_lookahead(plan, specs, per_step: bool = False):
    """The lookahead's cuts under the optimistic replicas' same-time rule; ``per_step``:
    one plan a step (no decode runs), where a replica's KV reading is its step's."""
    fl = Fleet(plan, specs, optimistic=False)
    fl._stage(optimistic=False)
    if not per_step:
        return fl.run()
    run_steps = vllm_sched.MAX_RUN_STEPS
    vllm_sched.MAX_RUN_STEPS = fast_engine.MAX_RUN_STEPS = 1
    try:
        return fl.run()
    finally:
        vllm_sched.MAX_RUN_STEPS = fast_engine.MAX_RUN_STEPS = run_steps


@settings(max_examples=40, deadline=None)
@given(rows=trace, replicas=st.integers(1, 3), router=st.sampled_from(ROUTERS.names()),
       blocks=st.sampled_from([40, 4000]), clients=st.sampled_from([None, 1, 3, 8]),
       lag=st.booleans(), split=st.booleans(), per_token_us=st.sampled_from([0, 40]),
       delays=st.booleans(), core=st.sampled_from(["auto", "general"]),
       report_ms=st.sampled_from([0, 5]), seqs=st.sampled_from([1, 1024]))
# a decode run no arrival could join (max_num_seqs full), read by least_kv mid-run
@example(rows=[(0, 1, 1), (0, 1, 1), (0, 253, 5), (0, 266, 2), (1, 2, 1), (1, 2, 1),
               (1, 2, 1), (1, 6, 1)], replicas=2, router="least_kv", blocks=40, clients=None,
         lag=False, split=True, per_token_us=0, delays=True, core="auto", report_ms=0, seqs=1)
def test_optimistic_replicas_give_the_lookaheads_results(rows, replicas, router, blocks,
                                                         clients, lag, split, per_token_us,
                                                         delays, core, report_ms, seqs):
    specs = _specs(rows)
    cluster = {"replicas": replicas, "router": {"name": router},
               "kv_report_interval_ms": report_ms}
    if split:
        cluster = {"pools": [{"name": "p", "replicas": replicas},
                             {"name": "d", "replicas": 2, "router": {"name": router}}],
                   "disaggregation": {"prefill_pool": "p", "decode_pool": "d"},
                   "kv_report_interval_ms": report_ms}
    sc = {**SCENARIO, "core": core, "cluster": cluster,
          "engine": {"num_gpu_blocks_override": blocks, "max_model_len": 512,
                     "max_num_seqs": seqs, "async_scheduling": lag,
                     "ingress_ms": 1 if delays else 0,
                     "egress_ms": 2 if delays else 0, "ingress_per_token_us": per_token_us}}
    if clients is not None:  # no delays: a finish pushes a request due at once
        sc["workload"] = {**SCENARIO["workload"],
                          "arrival": {"process": "closed", "concurrency": clients}}
    plan = plan_fleet(validate(sc, "prop"))
    # a KV-reading router reads a replica's step in progress: the lookahead's plans would
    # show their first step's blocks, so they are made one a step for the comparison
    reference = _staged_lookahead(plan, specs, per_step=router == "least_kv")
    _same_rows(_replica_rows(reference), _replica_rows(simulate_fleet(plan, specs, alone=False)))


def test_a_kv_router_reads_the_step_in_progress():
    # least_kv, async scheduling: request 3 (0.271 s) finds replica 0 mid-step; its reading
    # is that step's blocks, as with one plan a step, which sends request 3 to replica 0.
    # The lookahead's plans showed their first step's blocks, which sent it to replica 1
    sc = {**SCENARIO, "engine": {"async_scheduling": True},
          "cluster": {"replicas": 2, "router": {"name": "least_kv"}}}
    plan = plan_fleet(validate(sc, "kv"))
    specs = RequestSpecs.from_arrays([0.061, 0.078, 0.15, 0.271], [2, 45, 4, 17],
                                     [40, 39, 10, 78])
    assert simulate_fleet(plan, specs, alone=False).first.tolist() == [0, 1, 0, 0]
    assert _staged_lookahead(plan, specs, per_step=True).first.tolist() == [0, 1, 0, 0]
    assert simulate_fleet(plan, specs, alone=False, optimistic=False).first.tolist() == [
        0, 1, 0, 1]
