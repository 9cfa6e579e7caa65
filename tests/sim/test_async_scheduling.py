"""engine.async_scheduling: the plan that runs from a step's end was made when that step
started (vLLM's batch queue of two, vllm/v1/engine/core.py step_with_batch_queue), so a
request arriving during a step joins one step later than without it. Hand-computed times
with the linear cost model (10 ms a step + 1 ms per prefill token)."""

from __future__ import annotations

import numpy as np

from sim.config.load import LoadedScenario, validate
from sim.pipeline import prepare
from sim.runner import simulate
from tests.sim.test_engine_delays import LINEAR, run, trace


def test_an_arrival_during_a_step_joins_one_step_later(tmp_path):
    # r0 (P=8, O=4) at 0: s1 [0, 18) prefill 8 -> token 1; r1 (P=4, O=2) arrives at 16 ms,
    # inside s1.
    # sync:  s2 [18, 32) r0 decode + r1 prefill 4; s3 [32, 42) both decode (r1 ends);
    #        s4 [42, 52) r0's last token. r1 TTFT 32 - 16 = 16 ms.
    # async: s2 was planned when s1 started (r1 not there yet): [18, 28) r0 decode;
    #        s3 (planned at 18, r1 visible) [28, 42) r0 decode + r1 prefill 4;
    #        s4 [42, 52) both decode: r0 and r1 end. r1 TTFT 42 - 16 = 26 ms.
    rows = [(0.0, 8, 4), (0.016, 4, 2)]
    _, sync, _ = run(tmp_path, rows)
    _, lag, s = run(tmp_path, rows, async_scheduling=True)
    np.testing.assert_allclose(sync["ttft_s"], [0.018, 0.016], atol=1e-12)
    np.testing.assert_allclose(sync["e2el_s"], [0.052, 0.026], atol=1e-12)
    np.testing.assert_allclose(lag["first_scheduled_s"], [0.0, 0.028], atol=1e-12)
    np.testing.assert_allclose(lag["ttft_s"], [0.018, 0.026], atol=1e-12)
    np.testing.assert_allclose(lag["token_times_s"][0], [0.018, 0.028, 0.042, 0.052],
                               atol=1e-12)
    np.testing.assert_allclose(lag["e2el_s"], [0.052, 0.036], atol=1e-12)
    assert s["steps"]["count"] == 4


def test_an_idle_engine_schedules_an_arrival_at_once(tmp_path):
    # r1 arrives at 30 ms, after r0 (P=8, O=1) finished at 18 ms: nothing is in flight, so
    # vLLM schedules it immediately, async or not: s2 [30, 44) prefill 4
    rows = [(0.0, 8, 1), (0.030, 4, 1)]
    _, sync, _ = run(tmp_path, rows)
    _, lag, _ = run(tmp_path, rows, async_scheduling=True)
    np.testing.assert_allclose(lag["ttft_s"], [0.018, 0.014], atol=1e-12)
    np.testing.assert_allclose(lag["ttft_s"], sync["ttft_s"], atol=1e-12)


def test_an_arrival_behind_an_empty_next_plan_is_not_held(tmp_path):
    # r0 (P=8, O=1) finishes in s1 [0, 18); r1 arrives at 10 ms, inside s1. The plan made
    # when s1 started had nothing after r0's last token, so at 18 ms vLLM's loop schedules
    # with every arrival so far: s2 [18, 32) prefill 4 (sync and async alike)
    rows = [(0.0, 8, 1), (0.010, 4, 1)]
    _, lag, _ = run(tmp_path, rows, async_scheduling=True)
    np.testing.assert_allclose(lag["first_scheduled_s"], [0.0, 0.018], atol=1e-12)
    np.testing.assert_allclose(lag["ttft_s"], [0.018, 0.022], atol=1e-12)


def test_requests_and_tokens_are_conserved(tmp_path):
    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(0, 2.0, 60))
    rows = [(float(a), int(p), int(o)) for a, p, o in
            zip(t, rng.integers(1, 300, 60), rng.integers(1, 40, 60))]
    _, sync, s0 = run(tmp_path, rows)
    _, lag, s1 = run(tmp_path, rows, async_scheduling=True)
    assert (lag["generated_tokens"] == lag["output_tokens"]).all()
    assert s1["requests"]["finished"] == s0["requests"]["finished"] == 60
    assert (lag["first_scheduled_s"] >= lag["arrival_s"] - 1e-9).all()  # ns clock
    assert s1["steps"]["prefill_tokens"] == s0["steps"]["prefill_tokens"] == sum(
        p for _, p, _ in rows)


def test_both_cores_run_async_scheduling(tmp_path):
    # the cases here run on the fast core (core: auto); tests/fast/test_async.py compares
    # it with the general engine
    rows = [(0.0, 8, 4)]
    assert run(tmp_path, rows)[0].core == "fast"
    assert run(tmp_path, rows, async_scheduling=True)[0].core == "fast"
    data = {"name": "d", "model": "llama-3-8b", "gpu": "h100-sxm", "cost": LINEAR,
            "core": "general", "engine": {"async_scheduling": True},
            "workload": {"trace": str(trace(tmp_path, rows))}}
    r, specs, _ = prepare(LoadedScenario(validate(data, "test"), "test", tmp_path))
    assert simulate(r, specs).core == "general"


def test_kv_freed_by_a_finish_reaches_the_scheduler_a_step_later(tmp_path):
    # 6 usable blocks of 16 tokens (7 with the null block). r2 (P=16, O=20), r0 (P=48,
    # O=2) and r1 (P=48, O=1) arrive at 0. s1 [0, 74) prefills r2 and r0 (4 blocks); r1
    # needs 3 more: waits. s2 [74, 84) decodes both (r2 2 blocks, r0 4: full); r0 ends.
    # sync:  the plan at 84 sees r0's 4 blocks free: s3 [84, 142) r1 prefill + r2 decode.
    # async: that plan was made before r0's finish was known (its blocks still held):
    #        s3 [84, 94) r2 decode; s4 [94, 152) r1 prefill + r2 decode.
    rows = [(0.0, 16, 20), (0.0, 48, 2), (0.0, 48, 1)]
    kv = {"num_gpu_blocks_override": 7, "max_model_len": 96}
    _, sync, _ = run(tmp_path, rows, **kv)
    _, lag, _ = run(tmp_path, rows, **kv, async_scheduling=True)
    np.testing.assert_allclose(sync["first_scheduled_s"], [0.0, 0.0, 0.084], atol=1e-12)
    np.testing.assert_allclose(sync["ttft_s"], [0.074, 0.074, 0.142], atol=1e-12)
    np.testing.assert_allclose(lag["first_scheduled_s"], [0.0, 0.0, 0.094], atol=1e-12)
    np.testing.assert_allclose(lag["ttft_s"], [0.074, 0.074, 0.152], atol=1e-12)
