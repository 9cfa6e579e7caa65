"""The `fitted` cost model: decode runs price like single steps, sane magnitudes, defaults."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from sim.catalog import get_gpu, get_model
from sim.config.load import load_scenario
from sim.config.resolve import resolve
from sim.cost.fitted import FittedCost, FittedParams
from sim.cost.profile.model_file import shipped_profiles
from sim.cost.roofline import RooflineCost
from sim.engine.plan import StepPlan

LLAMA8, H100 = get_model("llama-3-8b"), get_gpu("h100-sxm")


def plan(tokens, ctx, steps=1):
    return StepPlan.build(np.arange(len(tokens)), tokens, ctx, num_steps=steps)


def cost(model=LLAMA8, gpu=H100, tp=1, **params):
    return FittedCost(model, gpu, tp, FittedParams(**params))


def test_shipped_profiles():
    assert {"h100-sxm/vllm", "h200-sxm/vllm"} <= set(shipped_profiles())


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200-sxm"])
@pytest.mark.parametrize("tp", [1, 2])
def test_decode_run_equals_single_steps(gpu, tp):
    c = cost(gpu=get_gpu(gpu), tp=tp)
    ctx = np.array([100, 2000, 37])
    run = c.step_times(plan([1, 1, 1], ctx, steps=50))
    single = [c.step_times(plan([1, 1, 1], ctx + j))[0] for j in range(50)]
    np.testing.assert_allclose(run, single, rtol=1e-12)
    assert np.all(np.diff(run) >= 0)  # more context never costs less


def test_llama8b_decode_step_on_h100_is_sane():
    c = cost()
    t = c.step_times(plan([1] * 32, [1000] * 32))[0]
    assert 3e-3 < t < 15e-3
    # the fixed overhead is the catalog's estimate, the rest is the kernels: 16 GB of
    # weights streamed at < 3.35 TB/s takes at least ~4.8 ms
    assert t - c.overhead > 16e9 / 3.35e12


def test_prefill_is_compute_bound_and_close_to_roofline():
    c, r = cost(), RooflineCost(LLAMA8, H100, 1)
    short, long = (c.step_times(plan([n], [0]))[0] for n in (512, 8192))
    assert long > 10 * short
    assert 0.5 < long / r.step_times(plan([8192], [0]))[0] < 2.0


def test_prefix_and_batch_cost_time():
    c = cost()
    assert c.step_times(plan([512], [4096]))[0] > c.step_times(plan([512], [0]))[0]
    two = c.step_times(plan([512, 512], [0, 0]))[0]
    one = c.step_times(plan([1024], [0]))[0]
    assert 0.5 * one < two < 1.5 * one
    assert c.step_times(plan([1] * 64, [8000] * 64))[0] > c.step_times(plan([1] * 64,
                                                                           [100] * 64))[0]


def test_prices_a_model_it_was_not_fitted_to():
    qwen = cost(model=get_model("qwen2.5-7b"))
    tiny = cost(model=get_model("tiny-2l"))
    big = cost(model=get_model("llama-3-70b"), tp=4)
    for c in (qwen, tiny, big):
        t = c.step_times(plan([1000, 1, 1], [0, 500, 700]))[0]
        assert np.isfinite(t) and t > c.overhead


def test_overhead_override_and_unknown_profile():
    c = cost()
    base = c.step_times(plan([1], [10]))[0]
    h = c.file.host_overhead  # base + per layer + per extra rank, fitted (calibrate/overhead.py)
    assert c.overhead == pytest.approx(1e-3 * (h.base_ms + 32 * h.per_layer_ms))
    assert cost(step_overhead_ms=0).step_times(plan([1], [10]))[0] == pytest.approx(
        base - c.overhead)
    with pytest.raises(ValueError, match="h100-sxm/vllm"):
        FittedParams(profile="nope/vllm")
    with pytest.raises(ValueError, match="no shipped profile for GPU 'l40s'"):
        FittedCost(LLAMA8, get_gpu("l40s"), 1, FittedParams())


def test_default_cost_is_fitted_where_shipped_else_roofline():
    sc = load_scenario().scenario
    assert sc.cost is None  # the default scenario uses the per-GPU default
    r = resolve(sc)
    assert r.scenario.cost.name == "fitted" and r.scenario.cost.extras == {
        "profile": "h100-sxm/vllm"}
    l40s = resolve(load_scenario(None, ("gpu=l40s", "model=qwen2.5-0.5b")).scenario)
    assert l40s.scenario.cost.name == "roofline"
    explicit = resolve(load_scenario(None, ("cost.name=roofline",)).scenario)
    assert explicit.scenario.cost.name == "roofline"


def test_cost_params_without_a_name_are_the_default_models():
    """`--set cost.moe_reach=0.25` alone tunes the GPU's default model: fitted on H100 (a
    shipped profile), roofline on L40S, where a fitted-only key is refused in one line."""
    from traces.errors import InputError

    sc = load_scenario(None, ("cost.moe_reach=0.25",)).scenario
    assert sc.cost.name == "fitted" and sc.cost.extras == {"moe_reach": 0.25}
    assert resolve(sc).scenario.cost.params.moe_reach == 0.25
    rf = load_scenario(None, ("gpu=l40s", "model=qwen2.5-0.5b",
                              "cost.mem_efficiency=0.7")).scenario
    assert rf.cost.name == "roofline"
    with pytest.raises(InputError, match="cost: roofline: moe_reach: unknown key"):
        load_scenario(None, ("gpu=l40s", "model=qwen2.5-0.5b", "cost.moe_reach=0.25"))


def test_fitted_summary_differs_from_roofline(tmp_path):
    import json

    from sim.cli import main

    out = {}
    for name in ("roofline", "fitted"):
        args = ["run", "--out", str(tmp_path / name), "-q", "--no-plots", "--set",
                f"cost.name={name}", "--set", "workload.num_requests=200"]
        assert main(args) == 0
        out[name] = json.loads((tmp_path / name / "summary.json").read_text())
    # deterministic runs priced by different models: the step-time distributions differ
    # (their medians happen to land within 1 % of each other on this mix: 8.07 vs 8.10 ms)
    steps = [out[n]["steps"] for n in ("roofline", "fitted")]
    assert steps[0]["duration_ms_p99"] != pytest.approx(steps[1]["duration_ms_p99"], rel=0.01)
    assert steps[0]["busy_s"] != steps[1]["busy_s"]


def test_the_cost_model_imports_neither_torch_nor_triton():
    import subprocess

    code = ("import sys, sim.cost.fitted, sim.cost; "
            "print('torch' in sys.modules, 'triton' in sys.modules)")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root).stdout.split()
    assert out == ["False", "False"]


def test_overhead_by_requests_replaces_fixed_and_per_request(tmp_path):
    """A measured table prices each request count (linear between, flat beyond); the
    per-token term still adds; a scenario's step_overhead_ms override ignores the table."""
    from sim.cost.profile.model_file import (
        OverheadByRequests,
        load_model_file,
        resolve_profile,
        save_model_file,
    )

    mf = load_model_file(resolve_profile("h100-sxm/vllm")).model_copy(deep=True)
    mf.host_overhead = None
    mf.step_overhead_ms, mf.step_overhead_per_request_ms = 9.0, 9.0  # not used with a table
    mf.step_overhead_per_token_ms = 0.5
    mf.step_overhead_by_requests = OverheadByRequests(requests=[1, 2, 4], ms=[1.0, 3.0, 4.0])
    path = save_model_file(mf, tmp_path / "m.yaml")
    c, bare = cost(profile=str(path)), cost(profile=str(path), step_overhead_ms=0)
    for reqs, table_ms in ((1, 1.0), (2, 3.0), (3, 3.5), (4, 4.0), (8, 4.0)):
        p = plan([1] * reqs, [100] * reqs)
        extra = c.step_times(p)[0] - bare.step_times(p)[0]
        assert extra == pytest.approx(1e-3 * (table_ms + 0.5 * reqs)), reqs
    for bad in ({"requests": [2, 1], "ms": [1.0, 1.0]}, {"requests": [1], "ms": [-1.0]},
                {"requests": [1, 2], "ms": [1.0]}):
        with pytest.raises(ValueError):
            OverheadByRequests(**bad)
