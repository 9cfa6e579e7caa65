"""The CPU-side schedule time per step (summary ``schedule``): the cost model's host part
of each step, its distribution and its share of busy time; the same on both cores."""

from __future__ import annotations

import numpy as np
import pytest

from sim.config.load import load_scenario
from sim.cost.profile.model_file import load_model_file, shipped_profiles
from sim.metrics.summary import summarize
from sim.pipeline import prepare
from sim.runner import build_cost, simulate

SMALL = ("workload.num_requests=200",)
# the shipped H100 profile's host cost per step of Llama-3-8B (32 blocks) at tp 1 (ms;
# calibrate/overhead.py: base + per block x 32 + per extra rank x 0)
HOST_MS = load_model_file(shipped_profiles()["h100-sxm/vllm"]).host_overhead.ms(32, 1)


def run(*sets):
    r, specs, _ = prepare(load_scenario(None, (*SMALL, *sets)))
    res = simulate(r, specs)
    return res, summarize(res)


def test_the_fitted_host_cost_per_step_and_its_share():
    # the default scenario: Llama-3-8B at tp 1 on H100, the shipped host cost (0.3055 ms +
    # 0.0188 ms x 32 blocks = 0.9071 ms)
    res, s = run()
    sch = s["schedule"]
    assert HOST_MS == pytest.approx(0.3055 + 0.0188 * 32, abs=1e-9)
    assert sch["host_ms_per_step"] == pytest.approx(
        {"mean": HOST_MS, "median": HOST_MS, "p99": HOST_MS, "max": HOST_MS})
    steps = res.recorder.steps()
    busy = float(steps["duration_s"].sum())
    assert sch["host_share_of_busy_time"] == pytest.approx(
        len(steps["duration_s"]) * HOST_MS * 1e-3 / busy)
    # vLLM 0.32's default on CUDA: async, the host hidden behind kernels ~10x longer
    assert 0.01 < sch["host_share_of_busy_time"] < 0.2 and sch["async_scheduling"] is True
    assert sch["host_bound_step_share"] == 0.0
    _, sync = run("engine.async_scheduling=false")
    assert sync["schedule"]["async_scheduling"] is False
    assert "host_bound_step_share" not in sync["schedule"]


def test_a_host_slower_than_the_kernels_binds_the_async_step():
    # a 20 ms host cost (cost.step_overhead_ms) outlasts every decode step's kernels
    _, s = run("cost.name=fitted", "cost.step_overhead_ms=20")
    assert s["schedule"]["host_bound_step_share"] > 0.9


def test_both_cores_report_the_same():
    assert run("core=general")[1]["schedule"] == run("core=fast")[1]["schedule"]


def test_roofline_reports_its_step_overhead_and_linear_reports_none():
    res, s = run("cost={name: roofline, step_overhead_ms: 0.25}")
    assert s["schedule"]["host_ms_per_step"]["max"] == pytest.approx(0.25)
    _, lin = run("cost={name: linear, base_ms: 3, prefill_token_ms: 0.05, "
                 "decode_seq_ms: 0.1, context_token_ms: 0.0}")
    assert lin["schedule"] == {}


def test_a_per_request_host_term_grows_with_the_batch():
    r, _, _ = prepare(load_scenario(None, SMALL))
    cost = build_cost(r)
    cost.over_req = 1e-5  # 10 us per request, as a CPU step fit has (fit-steps)
    got = cost.host_times(np.array([10, 100]), np.array([1, 100]))
    assert got == pytest.approx([HOST_MS * 1e-3 + 1e-5, HOST_MS * 1e-3 + 1e-3])
