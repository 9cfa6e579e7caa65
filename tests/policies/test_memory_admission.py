"""Acceptance 5: under KV pressure, reserve admission preempts far less than vLLM's
optimistic admission, at the cost of more queueing."""

from __future__ import annotations

import numpy as np

from sim.sched.admission_reserve import Reserve, ReserveParams
from sim.sched.base import SchedulerLimits
from tests.kv.e2e import run_file
from tests.kv.helpers import run


def test_reserve_trades_preemptions_for_queueing():
    _, reserve = run_file("reserve-admission")
    _, optimistic = run_file("reserve-admission", "admission.name=optimistic")
    p_opt, p_res = optimistic["preemption"], reserve["preemption"]
    assert p_opt["count"] >= 30 and p_opt["recomputed_tokens"] > 50_000
    assert p_res["count"] <= p_opt["count"] // 10
    assert p_res["recomputed_tokens"] <= p_opt["recomputed_tokens"] // 10
    w_opt, w_res = optimistic["waiting"], reserve["waiting"]
    assert w_res["mean_waiting"] > 2 * w_opt["mean_waiting"]
    assert w_res.get("mean_waiting_on_admission", 0) > 0.5 * w_res["mean_waiting"]
    assert reserve["latency_ms"]["ttft"]["median"] > optimistic["latency_ms"]["ttft"]["median"]
    assert (reserve["kv_cache"]["peak_concurrent_seqs"]
            < optimistic["kv_cache"]["peak_concurrent_seqs"])


def test_exact_expectation_never_preempts():
    _, s = run_file("reserve-admission", "admission.expect=max_tokens")
    assert s["preemption"]["count"] == 0 and s["requests"]["finished"] > 0


def test_reserve_holds_the_second_request_until_the_first_finishes():
    # two requests of 16 + 48 tokens (4 blocks each) on 6 blocks: optimistic starts both
    # (one block each) and must preempt later; reserve waits for the first to finish
    kw = dict(usable_blocks=6, max_model_len=64)
    opt = run([0, 0], [16, 16], [48, 48], **kw)
    res = run([0, 0], [16, 16], [48, 48], admission="reserve",
              admission_params=ReserveParams(expect="max_tokens"), **kw)
    assert opt.scheduler.num_preemptions.sum() >= 1
    assert res.scheduler.num_preemptions.sum() == 0
    assert res.recorder.first_scheduled_s[1] == res.recorder.finish_s[0]
    assert set(res.recorder.steps()["blocked"][:2]) == {"admission"}


def _rule(outputs, **params):
    from sim.engine.requests import RequestSpecs

    n = len(outputs)
    specs = RequestSpecs.from_arrays(np.zeros(n), np.ones(n), outputs)
    return Reserve(specs, SchedulerLimits(8, 64, 4096, True, 0), None, ReserveParams(**params))


def test_expected_output_is_a_conditional_quantile_of_the_recorded_lengths():
    rule = _rule([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], quantile=0.5)
    got = rule.expected_output(np.array([0, 0, 0, 0]), np.array([0, 55, 99, 100]))
    # all ten -> rank ceil(4.5) = 60; above 55: 60..100 -> 80; above 99: 100; none -> g + 1
    assert got.tolist() == [60, 80, 100, 101]
    assert _rule([10, 20, 30], quantile=0.9).expected_output(
        np.array([1]), np.array([0])).tolist() == [30]
    exact = _rule([10, 20, 30], expect="max_tokens")
    assert exact.expected_output(np.array([0, 2]), np.array([5, 5])).tolist() == [10, 30]
