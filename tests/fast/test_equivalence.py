"""The fast core (sim/fast) and the general engine give identical results.

Each test runs one scenario through both cores (``core: general`` and ``core: fast``) and
compares every step column, per-request time, ITL sample, token time, counter and the
run's end exactly (tests/fast/equivalence.py), plus what the scenario is there to exercise
(preemptions happened, the horizon cut the run, requests were rejected, ...).
"""

from __future__ import annotations

import numpy as np
import pytest

import sim.runner
from sim.engine.requests import RequestSpecs
from sim.sched.base import Status
from tests.fast.equivalence import (
    assert_same,
    prepared,
    run_both,
    run_both_logged,
    same_runs,
    same_scenario,
)

SMALL = "workload.num_requests=300"


@pytest.mark.parametrize("scenario,overrides", [
    ("default", (SMALL,)),
    ("small-kv-pressure", ("workload.num_requests=250",)),
    ("max-num-seqs", (SMALL,)),
    ("bursty-chat", (SMALL,)),
    ("llama70b-tp2-h100", ("workload.num_requests=200",)),
    ("chunked-vs-prefill-first", ("workload.mix.0.duration_s=8", "workload.mix.1.duration_s=8")),
])
def test_shipped_scenarios(scenario, overrides):
    a, _ = same_scenario(scenario, *overrides)
    assert a.recorder.num_steps > a.recorder.num_plans > 100  # decode runs folded
    assert (a.status == Status.FINISHED).all()


def test_shipped_kv_pressure_preempts():
    a, _ = same_scenario("small-kv-pressure", "workload.num_requests=250")
    assert a.num_preemptions.sum() > 0 and a.recomputed_tokens > 0


def test_a_horizon_cuts_the_run():
    a, b = same_scenario(None, SMALL, "horizon_s=12")
    assert a.run.stopped_at_limit and a.never_sent > 0
    unfinished = (a.status == Status.WAITING) | (a.status == Status.RUNNING)
    assert unfinished.any() and (a.status == Status.FINISHED).any()


def test_a_horizon_inside_a_decode_run():
    # few long outputs: the horizon falls in the middle of a folded decode run
    a, _ = same_scenario(None, "workload.num_requests=20",
                         "workload.lengths={dist: fixed, prompt: 100, output: 2000}",
                         "horizon_s=3.3")
    assert a.run.stopped_at_limit and (a.status == Status.RUNNING).any()


def test_ingress_and_egress_delays():
    a, _ = same_scenario(None, SMALL, "engine.ingress_ms=3.5", "engine.egress_ms=7")
    assert (a.ingress_s, a.egress_s) == (0.0035, 0.007)
    first = a.recorder.first_token_s - a.recorder.first_scheduled_s
    assert (first[a.status == Status.FINISHED] > 0.007).all()


def test_rejected_and_shortened_requests():
    a, _ = same_scenario(None, SMALL, "engine.max_model_len=1024")
    assert (a.status == Status.REJECTED).sum() > 0 and a.shortened > 0


def test_chunked_prefill_off():
    a, _ = same_scenario(None, SMALL, "engine.enable_chunked_prefill=false",
                         "engine.max_num_batched_tokens=8192")
    assert a.resolved.limits.enable_chunked_prefill is False


@pytest.mark.parametrize("adaptive", [False, True])
def test_long_prefill_token_threshold(adaptive):
    a, _ = same_scenario(None, SMALL, "engine.long_prefill_token_threshold=256",
                         f"engine.long_prefill_token_threshold_adaptive={str(adaptive).lower()}",
                         "workload.arrival.rate=20")
    assert a.resolved.limits.long_prefill_token_threshold == 256


def test_reserve_full_isl_off():
    a, _ = same_scenario("small-kv-pressure", "workload.num_requests=200",
                         "engine.scheduler_reserve_full_isl=false")
    assert a.num_preemptions.sum() > 0


def test_kv_watermark():
    a, _ = same_scenario("small-kv-pressure", "workload.num_requests=200", "kv.watermark=0.1")
    assert a.counters["memory_blocked"] > 0


def test_tiny_kv_pool_preempts():
    a, _ = same_scenario(None, "workload.num_requests=120", "engine.max_model_len=2048",
                         "engine.num_gpu_blocks_override=300", "workload.arrival.rate=30")
    assert a.num_preemptions.sum() > 0 and a.recomputed_tokens > 0
    assert a.counters["memory_blocked"] > 0


def test_overload_hits_the_drain_limit(monkeypatch):
    monkeypatch.setattr(sim.runner, "DRAIN_MIN_PLANS", 200)
    r, specs = prepared(None, "workload.num_requests=150", "workload.arrival.rate=1000",
                        "engine.max_num_seqs=2", "engine.max_num_batched_tokens=64")
    with pytest.warns(RuntimeWarning, match="drain limit"):
        a, b = run_both(r, specs)
    assert_same(a, b)
    assert a.drain_cut and b.drain_cut
    assert (a.status == Status.WAITING).sum() > 0


@pytest.mark.parametrize("cost", [
    "{name: roofline}",
    "{name: linear, base_ms: 4, prefill_token_ms: 0.02, decode_seq_ms: 0.03, "
    "context_token_ms: 0.0001}",
    "{name: fitted}",
])
def test_cost_models(cost):
    a, _ = same_scenario(None, SMALL, f"cost={cost}")
    assert a.resolved.scenario.cost.name == cost.split(",")[0].split()[1].strip("}")
    assert np.all(a.recorder.steps()["duration_s"] > 0)


def test_a_one_token_last_prompt_chunk_starts_a_decode_run():
    # 129 prompt tokens in 64-token chunks: 64, 64, then 1. With nothing else running or
    # waiting, the general engine plans that last 1-token chunk and the 4 decode steps after
    # it as one 5-step decode run (sim/sched/vllm.py _is_pure_decode: ctx + 1 == known),
    # whose inter-token gaps are the steps' durations
    r, _ = prepared(None, "engine.max_num_batched_tokens=64", "engine.max_model_len=256")
    a, _ = run_both(r, RequestSpecs.from_arrays([0.0], [129], [5]))
    assert a.recorder.plan_steps.tolist() == [1, 1, 5]
    same_runs(r, RequestSpecs.from_arrays([0.0], [129], [5]))


def test_a_one_step_decode_plan_keeps_its_interruptible_flag():
    # max_num_seqs 1: request 0 decodes its last token while request 1 waits (admission
    # blocked by the sequence cap for good). The general engine plans a pure-decode step
    # and gives it interruptible=False even though its run length is 1; the hooks (step
    # log, conformance, live executor) see that plan
    r, _ = prepared(None, "engine.max_num_seqs=1")
    specs = RequestSpecs.from_arrays([0.0, 0.0], [10, 10], [2, 2])
    a, _ = run_both_logged(r, specs, strict=True)
    assert a.recorder.plan_steps.tolist() == [1, 1, 1, 1]


def test_arrivals_at_step_ends():
    # every step lasts exactly 10 ms: arrivals on the 10 ms grid meet step ends (the
    # same-time rule: an arrival at a step's end is seen by the next step) and cut decode runs
    r, _ = prepared(None, "cost={name: linear, base_ms: 10, prefill_token_ms: 0, "
                          "decode_seq_ms: 0, context_token_ms: 0}")
    arrival = np.repeat(np.arange(0, 0.6, 0.05), 3)
    n = len(arrival)
    specs = RequestSpecs.from_arrays(arrival, [20 + 7 * i for i in range(n)],
                                     [5 + (11 * i) % 40 for i in range(n)])
    a, _ = same_runs(r, specs)
    starts = a.recorder.steps()["start_s"]
    assert np.isin(np.round(arrival[1:] * 1e9), np.round(starts * 1e9)).sum() >= 5
    assert a.recorder.num_steps > a.recorder.num_plans


def test_decode_runs_longer_than_the_run_cap():
    # one long output: the general scheduler cuts decode runs at MAX_RUN_STEPS (4096) steps;
    # the fitted model prices runs over 32 steps vectorised
    r, _ = prepared(None)
    a, _ = same_runs(r, RequestSpecs.from_arrays([0.0, 0.0], [10, 3000], [9000, 5000]))
    assert a.recorder.plan_steps.max() == 4096


def test_no_requests():
    r, _ = prepared(None)
    a, _ = same_runs(r, RequestSpecs.from_arrays([], [], []))
    assert a.recorder.num_plans == 0 and a.run.end_s == 0.0


def test_a_horizon_inside_the_first_step():
    a, _ = same_scenario(None, "workload.num_requests=3", "horizon_s=0.0001",
                         "engine.ingress_per_token_us=0")  # the first arrival at 0
    assert a.recorder.num_plans == 1 and a.run.stopped_at_limit
