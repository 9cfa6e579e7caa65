"""engine.moe_activation: an mxfp4 checkpoint's experts with mxfp8 activations (vLLM's
--quantization-config '{"moe": {"activation": "mxfp8"}}', VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1
before) run FlashInfer TRT-LLM's mxfp4 x mxfp8 kernel; the shipped B200 profile prices it
from SGLang's timing of that kernel for gpt-oss's shape, which vLLM's tables lack
(calibrate/aiconfigurator_curves.py BORROW)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibrate.aiconfigurator_curves import convert_moe
from sim.engine.plan import StepPlan
from sim.plan.emit import vllm_serve
from sim.runner import build_cost
from tests.fast.equivalence import prepared
from traces.errors import InputError

GPT_OSS = ("model=gpt-oss-120b", "gpu=b200")


def test_mxfp8_activations_are_priced_from_the_flashinfer_mxfp8_kernel():
    auto, mx = (build_cost(prepared(None, *GPT_OSS, *s)[0])
                for s in ((), ("engine.moe_activation=mxfp8",)))
    assert auto.moe.kernel.startswith("vllm_gptossmxfp4moe_flashinfer_trtllm_mxfp4_bf16")
    assert mx.moe.kernel == "sglang_flashinfer_trtllm_moe"
    # aiconfigurator's B200 tables, 8,192 tokens, MoE TP 1, power_law_1.2, one layer:
    # 3.280 ms with bf16 activations (vLLM 0.24.0), 0.983 ms with mxfp8 (SGLang 0.5.14)
    assert float(auto.moe.seconds(8192)) == pytest.approx(3.280e-3, rel=2e-3)
    assert float(mx.moe.seconds(8192)) == pytest.approx(0.983e-3, rel=2e-3)
    plan = StepPlan.build(np.arange(1), [8192], [0])
    gap = auto.step_times(plan)[0] - mx.step_times(plan)[0]
    assert gap == pytest.approx(36 * (3.280e-3 - 0.983e-3), rel=5e-3)  # 36 MoE layers


def test_the_flag_deploys_it():
    flag = """--quantization-config '{"moe":{"activation":"mxfp8"}}'"""
    assert flag in vllm_serve(prepared(None, *GPT_OSS, "engine.moe_activation=mxfp8")[0])
    assert "--quantization-config" not in vllm_serve(prepared(None, *GPT_OSS)[0])


def test_experts_that_are_not_mxfp4_are_refused():
    r = prepared(None, "model=minimax-m2.5", "gpu=b200", "tensor_parallel_size=4",
                 "engine.moe_activation=mxfp8")[0]
    with pytest.raises(InputError, match="moe_activation mxfp8 applies to mxfp4 experts; "
                                         "this model's are fp8_block"):
        build_cost(r)


def _table(path, rows):
    cols = ["moe_dtype", "hidden_size", "inter_size", "num_experts", "topk", "moe_tp_size",
            "moe_ep_size", "distribution", "num_tokens", "latency", "kernel_source"]
    pd.DataFrame(rows, columns=cols).to_parquet(path)
    return path


@pytest.mark.parametrize("theirs, lent", [(1.02, True), (1.30, False)])
def test_a_format_is_borrowed_only_where_the_kernel_agrees(tmp_path, theirs, lent):
    """SGLang's mxfp8 curve of a shape is taken only when its bf16-activation timing of the
    same shape agrees with vLLM's (here 2 % apart: taken; 30 %: not)."""
    shape = [2880, 2880, 128, 4, 1, 1, "balanced"]
    vllm = _table(tmp_path / "v.parquet", [
        ["w4a16_mxfp4", *shape, t, ms, "vllm_gptossmxfp4moe_flashinfer_trtllm_mxfp4_bf16"]
        for t, ms in ((1, 0.03), (1024, 0.9))])
    sgl = _table(tmp_path / "s.parquet", [
        [fmt, *shape, t, ms * (theirs if fmt == "w4a16_mxfp4" else 0.5),
         "sglang_flashinfer_trtllm_moe"]
        for fmt in ("w4a16_mxfp4", "w4a8_mxfp4_mxfp8") for t, ms in ((1, 0.03), (1024, 0.9))])
    table, _ = convert_moe(vllm, "vllm", borrowed=((sgl, "sglang"),))
    key = "w4a8_mxfp4_mxfp8|2880|2880|128|4|1|1|balanced"
    assert (key in table.curves) is lent
    assert ("same kernel" in table.source) is lent
