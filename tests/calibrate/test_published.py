"""The shipped fitted profiles against published vLLM measurements on real GPUs (no GPU
needed: servesim runs each benchmark as it ran, with the shipped profiles)."""

from __future__ import annotations

import pytest

from calibrate.overhead import fit, is_fit_point, residuals
from calibrate.published import FP8_H100_TP2, LATENCY_BENCH, simulate
from sim.cost.profile.model_file import load_model_file, shipped_profiles


def _latency(gpu: str, model: str):
    return next(p for p in LATENCY_BENCH if p.gpu == gpu and p.model == model)


@pytest.mark.parametrize("gpu,model,measured", [
    ("h100-sxm", "llama-3-8b", 997.542), ("h100-sxm", "llama-3-70b", 2444.47),
    ("h200-sxm", "llama-3-8b", 834.059), ("h200-sxm", "llama-3-70b", 2075.08),
    ("a100-80gb", "llama-3-8b", 1579.27), ("a100-80gb", "llama-3-70b", 3990.59)])
def test_latency_benchmark_within_10_percent(gpu, model, measured):
    # vLLM CI latency benchmark: 8 requests x 32 in / 128 out at once, batch latency
    p = _latency(gpu, model)
    assert p.measured_ms == measured and "buildkite.com/vllm/performance-benchmark" in p.source
    assert not p.async_scheduling
    got = simulate(p)  # the default cost: fitted, the GPU's shipped <gpu>/vllm profile
    assert abs(got / measured - 1) < 0.10, got


def test_fp8_70b_tp2_h100_tpot_within_15_percent_of_nvidia():
    # NVIDIA's silicon measurement (aiconfigurator-core silicon_sample.csv), held out of
    # the host-overhead fit: vLLM, Llama-3.1-70B fp8, tp 2, 1024 in / 1024 out, 4 at once
    assert FP8_H100_TP2.measured_ms == pytest.approx(17.407, abs=1e-3)
    assert FP8_H100_TP2.async_scheduling and not is_fit_point(FP8_H100_TP2)
    got = simulate(FP8_H100_TP2)
    assert abs(got / FP8_H100_TP2.measured_ms - 1) < 0.15, got


def test_host_overhead_names_its_source_and_refits_to_the_shipped_terms():
    h = load_model_file(shipped_profiles()["h100-sxm/vllm"]).host_overhead
    assert "latency benchmark" in h.source and "silicon_sample.csv" in h.source
    # fitted on the synchronous points only: the latency benchmark (tp 1, 4) and NVIDIA's
    # Qwen3-32B sweep (tp 2, 4, 8); the async InferenceMAX rows are listed, not fitted
    used = [p for p in h.points if p.used]
    assert len(used) == 9 and {p.tp for p in used} == {1, 2, 4, 8}
    assert not any(p.async_scheduling for p in used)
    assert sum(p.async_scheduling for p in h.points) == 22
    # refit from the points the file lists (kernel times recomputed here for the H100 pair)
    res = residuals([_latency("h100-sxm", "llama-3-8b")],
                    {"h100-sxm": str(shipped_profiles()["h100-sxm/vllm"])})
    listed = next(p for p in h.points if p.name == res[0].point.name)
    assert res[0].kernels_ms == pytest.approx(listed.kernels_ms, rel=1e-6)
    assert fit([]).base_ms == 0.0  # nothing to fit: no host cost invented


def test_an_async_point_sees_the_longer_of_kernels_and_host():
    # vLLM's --async-scheduling: the host schedules step k + 1 while the GPU runs step k
    from calibrate.overhead import predicted_ms
    from sim.cost.profile.model_file import HostOverhead, OverheadPoint

    h = HostOverhead(base_ms=1.0, per_layer_ms=0.01, per_tp_ms=0.0, source="hand")
    pt = dict(name="p", layers=80, tp=2, steps=1, measured_ms=10.0, used=False)
    assert h.ms(80, 2) == pytest.approx(1.8)
    assert predicted_ms(h, OverheadPoint(kernels_ms=9.0, **pt)) == pytest.approx(10.8)
    assert predicted_ms(h, OverheadPoint(kernels_ms=9.0, async_scheduling=True, **pt)) == 9.0
    assert predicted_ms(h, OverheadPoint(kernels_ms=1.0, async_scheduling=True, **pt)) == \
        pytest.approx(1.8)


@pytest.mark.parametrize(("profile", "needle"), [
    ("h200-sxm={h100}", "the model was timed on h100-sxm, not h200-sxm"),
    ("h100-sxm={steps}", "a steps model (fit-steps)"),
    ("h100-sxm={bad}", "invalid YAML"),
])
def test_fit_overhead_takes_an_ops_model_of_that_gpu(tmp_path, capsys, profile, needle):
    # an H100 profile named as H200's, a fit-steps model, a file that is not YAML: refused
    from sim.cli import main

    (tmp_path / "bad.yaml").write_text("a: [\n")
    steps = tmp_path / "steps.yaml"
    steps.write_text(shipped_profiles()["h100-sxm/vllm"].read_text().replace(
        "kind: ops", "kind: steps", 1))
    arg = profile.format(h100=shipped_profiles()["h100-sxm/vllm"], steps=steps,
                         bad=tmp_path / "bad.yaml")
    assert main(["calibrate", "fit-overhead", "--profile", arg]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
