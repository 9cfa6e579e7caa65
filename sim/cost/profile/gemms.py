"""Which GEMMs a model runs per layer on one GPU, and the element size of each dtype name."""

from __future__ import annotations

from sim.config.hardware import ModelSpec

ELEM_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "fp8_block": 1, "nvfp4": 0.5}


def model_gemms(model: ModelSpec, tp: int) -> dict[str, tuple[int, int]]:
    """(n, k) per GEMM of one layer on one GPU, plus the LM head: the spec's attention,
    dense-MLP and shared-expert GEMMs (``ModelSpec.attn_gemms`` ...; routed experts are
    not GEMMs of this list)."""
    gemms = model.attn_gemms(tp) + model.dense_mlp_gemms(tp) + model.shared_expert_gemms(tp)
    return {name: (n, k) for name, n, k in gemms} | {
        "lm_head": (model.vocab_size // tp, model.hidden_size)}
