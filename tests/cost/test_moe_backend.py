"""vLLM's --moe-backend (engine.moe_backend): a mixture-of-experts layer is priced from the
timing of the kernel the server runs, where the profile has it (sim/cost/moe.py).

The shipped B200 profile's default fused-MoE curve for MiniMax-M2.5's block-fp8 experts is
FlashInfer TRT-LLM (aiconfigurator's vLLM 0.24.0 table); its Triton fused_moe curve comes
from the 0.22.0 table (calibrate/aiconfigurator_curves.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from sim.cost.moe import backend_of
from sim.engine.plan import StepPlan
from sim.plan.emit import vllm_serve
from sim.runner import build_cost
from tests.fast.equivalence import prepared

MINIMAX = ("model=minimax-m2.5", "gpu=b200", "tensor_parallel_size=4")


def resolved(*sets):
    return prepared(None, *MINIMAX, *sets)[0]


def prefill(tokens: int) -> StepPlan:
    return StepPlan.build(np.arange(1), [tokens], [0])


@pytest.mark.parametrize("kernel, backend", [
    ("vllm_fused_moe", "triton"),
    ("vllm_fp8moe_triton_tritonexperts", "triton"),
    ("vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic", "triton"),
    ("vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic", "flashinfer_trtllm"),
    ("vllm_fp8moe_flashinfer_cutlass_flashinferexperts", "flashinfer_cutlass"),
    ("vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts", "marlin"),
    ("vllm_marlin_int4_moe", "marlin"),
    ("vllm_mxfp4_moe", None),  # the name does not say which kernel
])
def test_backend_of_an_aiconfigurator_kernel(kernel, backend):
    assert backend_of(kernel) == backend


def test_triton_is_priced_from_its_own_timing():
    auto, triton = (build_cost(resolved(*s)) for s in ((), ("engine.moe_backend=triton",)))
    assert auto.moe.kernel == "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic"
    assert triton.moe.kernel == "vllm_fused_moe"
    # aiconfigurator's tables at 8,192 tokens, MoE TP 4, power_law_1.2: 0.900 ms (TRT-LLM,
    # 0.24.0) and 1.637 ms (Triton, 0.22.0) per layer
    assert float(auto.moe.seconds(8192)) == pytest.approx(0.900e-3, rel=2e-3)
    assert float(triton.moe.seconds(8192)) == pytest.approx(1.637e-3, rel=2e-3)
    # everything else in the step is the same: the difference is 62 layers of it
    plan = prefill(8192)
    gap = triton.step_times(plan)[0] - auto.step_times(plan)[0]
    assert gap == pytest.approx(62 * (1.637e-3 - 0.900e-3), rel=5e-3)


def test_a_backend_without_a_timing_is_said_and_priced_as_auto():
    with pytest.warns(UserWarning, match=r"no marlin fused-MoE timing .* \(measured: "
                      r"flashinfer_trtllm, triton\); priced with vllm_fp8moe_flashinfer"):
        marlin = build_cost(resolved("engine.moe_backend=marlin"))
    auto = build_cost(resolved())
    assert marlin.step_times(prefill(1024))[0] == auto.step_times(prefill(1024))[0]


def test_the_flag_is_emitted_only_when_chosen():
    assert "--moe-backend triton" in vllm_serve(resolved("engine.moe_backend=triton"))
    assert "--moe-backend" not in vllm_serve(resolved())


def test_a_dense_model_ignores_it():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = prepared(None, "engine.moe_backend=triton")[0]
        base = prepared(None)[0]
        plan = prefill(512)
        assert build_cost(r).step_times(plan)[0] == build_cost(base).step_times(plan)[0]


def test_an_unknown_backend_is_refused_naming_the_choices(tmp_path, capsys):
    from tests.cli.test_cli_errors import assert_one_line_error, run_cli

    code, _, err = run_cli(["run", "--set", "engine.moe_backend=turbo", "-o",
                            tmp_path / "out"], capsys)
    assert_one_line_error(code, err, "engine.moe_backend", "'triton'", "'flashinfer_trtllm'",
                          "(got 'turbo')")
    assert not (tmp_path / "out").exists()
