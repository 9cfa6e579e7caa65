"""What a ``ModelSpec`` refuses: fields that contradict each other (one message each).

vLLM's own rule first (query heads in whole GQA groups), then the mixture-of-experts, MLA
and sliding-window fields, each of which must come with its companions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.config.model_spec import ModelSpec

_MOE_ONLY = ("num_experts_per_tok", "moe_intermediate_size", "num_shared_experts",
             "shared_expert_intermediate_size", "first_dense_layers")
_MLA = ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


def legacy_dtype_bytes(data):
    """A mapping with ``dtype_bytes: 1|2|4`` (the key before dtype_bits) -> ``dtype_bits``.

    The legacy key wins over a ``dtype_bits`` beside it: code written before dtype_bits
    dumps a spec and sets ``dtype_bytes`` on the dump (benchmarks/silicon/replay.py)."""
    if not isinstance(data, dict) or "dtype_bytes" not in data:
        return data
    data = dict(data)
    legacy = data.pop("dtype_bytes")
    if legacy not in (1, 2, 4) or isinstance(legacy, bool):
        raise ValueError(f"dtype_bytes must be 1 (fp8/int8), 2 (bf16/fp16) or 4 (fp32) "
                         f"bytes, not {legacy!r}; 4-bit weights: dtype_bits 4")
    data["dtype_bits"] = 8 * legacy
    return data


def problems(m: ModelSpec) -> Iterator[str]:
    """Every contradiction in ``m``, first the most basic."""
    if m.kv_dtype_bytes not in (None, 1, 2, 4):
        yield (f"kv_dtype_bytes must be 1 (fp8/int8), 2 (bf16/fp16) or 4 (fp32) bytes, not "
               f"{m.kv_dtype_bytes}")
    # vLLM: vllm/model_executor/layers/attention/attention.py:329 asserts
    # num_heads % num_kv_heads == 0 (each KV head serves a whole group of query heads)
    if m.num_attention_heads % m.num_kv_heads:
        yield (f"num_kv_heads ({m.num_kv_heads}) must divide num_attention_heads "
               f"({m.num_attention_heads}): each KV head serves a group of query heads, as "
               "vLLM's attention layer requires")
    if m.qk_norm_layerwise and not m.qk_norm:
        yield "qk_norm_layerwise needs qk_norm (it says how wide the q/k norm is)"
    yield from _moe(m)
    yield from _mla(m)
    yield from _window(m)


def _moe(m: ModelSpec) -> Iterator[str]:
    if not m.num_experts:
        given = [k for k in _MOE_ONLY if getattr(m, k)]
        if given:
            yield f"{given[0]} needs num_experts > 0 (a mixture-of-experts model)"
        return
    if not 1 <= m.num_experts_per_tok <= m.num_experts:
        yield (f"num_experts_per_tok must be 1 .. num_experts ({m.num_experts}), not "
               f"{m.num_experts_per_tok}")
    if not m.moe_intermediate_size:
        yield "moe_intermediate_size must be > 0 elements in a mixture-of-experts model"
    if m.first_dense_layers >= m.num_layers:
        yield (f"first_dense_layers ({m.first_dense_layers}) must be below num_layers "
               f"({m.num_layers})")


def _mla(m: ModelSpec) -> Iterator[str]:
    if m.kv_lora_rank:
        missing = [k for k in _MLA if not getattr(m, k)]
        if missing:
            yield f"{missing[0]} must be > 0 elements in an MLA model (kv_lora_rank > 0)"
    elif m.q_lora_rank or any(getattr(m, k) for k in _MLA):
        yield ("q_lora_rank, qk_rope_head_dim, qk_nope_head_dim and v_head_dim need "
               "kv_lora_rank > 0 (MLA)")


def _window(m: ModelSpec) -> Iterator[str]:
    if m.num_sliding_layers > m.num_layers:
        yield (f"num_sliding_layers ({m.num_sliding_layers}) exceeds num_layers "
               f"({m.num_layers})")
    if bool(m.sliding_window) != bool(m.num_sliding_layers):
        yield ("sliding_window and num_sliding_layers go together: both > 0 (num_layers "
               "sliding layers if every layer slides) or both 0")
