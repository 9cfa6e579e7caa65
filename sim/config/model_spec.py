"""ModelSpec: a decoder-only transformer as vLLM serves it, field names close to Hugging Face's.

Every default describes a dense Llama block (GQA attention, gated MLP, 16-bit weights, full
attention), so a spec that sets none of the newer fields is the model it always was. The
newer fields (Hugging Face ``config.json`` key in brackets):

    mixture of experts  num_experts [num_experts | num_local_experts | n_routed_experts],
                        num_experts_per_tok, moe_intermediate_size, num_shared_experts
                        [n_shared_experts], shared_expert_intermediate_size (Qwen2-MoE),
                        first_dense_layers [first_k_dense_replace]
    MLA                 kv_lora_rank, q_lora_rank, qk_rope_head_dim, qk_nope_head_dim,
                        v_head_dim (DeepSeek-V2/V3, Kimi-K2)
    sliding window      sliding_window, num_sliding_layers [count of layer_types ==
                        "sliding_attention"] (gpt-oss alternates; Mistral-7B-v0.1: all)
    weights             dtype_bits, moe_dtype_bits, quantization (vLLM's method name)

KV cache: ``kv_bytes_per_token`` is what servesim's block manager accounts per token, the
full-attention layers only (every layer when all of them slide). vLLM's hybrid KV cache
manager keeps just the last ``sliding_window`` tokens of a sliding layer, a few blocks per
request that the block accounting leaves out (capacity is overstated by those blocks);
``kv_bytes_per_sequence`` gives the exact bytes of one sequence for memory reports.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, PositiveInt, model_validator

from sim.config import model_checks as checks
from sim.config import model_shapes as shapes
from sim.config.limits import MAX_TOKENS, TOKENS_WHY, why
from traces.validated import Validated

_FROZEN = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
_SHAPE = why("larger than any transformer's")
_BYTES = why("1 (fp8/int8), 2 (bf16/fp16) or 4 (fp32)", "bytes")
_BITS = (4, 8, 16, 32)
#: vLLM --quantization methods a spec may name (vllm/model_executor/layers/quantization)
QUANTIZATIONS = ("fp8", "modelopt", "modelopt_fp4", "mxfp4", "compressed-tensors", "awq",
                 "gptq", "bitsandbytes")
#: weight bits (dense, routed experts) a method's checkpoints store, as
#: sim/catalog/hf_quant.py reads them (16: left unquantized, as an ignore list may keep
#: attention); compressed-tensors and bitsandbytes vary per checkpoint: not listed
METHOD_BITS = {"fp8": ((8,), (8,)), "mxfp4": ((16, 32), (4,)), "awq": ((4, 8), (4, 8)),
               "gptq": ((4, 8), (4, 8)), "modelopt_fp4": ((4, 16), (4,)),
               "modelopt": ((8, 16), (8,))}


def _count(desc: str, le: int = 1 << 22, default: int = 0):
    return Field(default, ge=0, le=le, json_schema_extra=_SHAPE, description=desc)


class ModelSpec(Validated):
    """A decoder-only transformer: dense or mixture-of-experts, GQA or MLA attention."""

    model_config = _FROZEN

    name: str = Field(description="Display name, e.g. 'llama-3-8b'.")
    num_layers: PositiveInt = Field(le=1024, json_schema_extra=_SHAPE,
                                    description="Transformer blocks (count).")
    hidden_size: PositiveInt = Field(le=1 << 20, json_schema_extra=_SHAPE,
                                     description="Residual stream width (elements).")
    num_attention_heads: PositiveInt = Field(le=1 << 14, json_schema_extra=_SHAPE,
                                             description="Query heads per layer (count).")
    num_kv_heads: PositiveInt = Field(le=1 << 14, json_schema_extra=_SHAPE,
                                      description="Key/value heads per layer (count, GQA; "
                                      "MLA: the query heads, as its config.json says).")
    head_dim: PositiveInt = Field(le=4096, json_schema_extra=_SHAPE,
                                  description="Elements per attention head (MLA: "
                                  "qk_nope_head_dim + qk_rope_head_dim).")
    intermediate_size: PositiveInt = Field(le=1 << 22, json_schema_extra=_SHAPE,
                                           description="Gated-MLP inner width of a dense "
                                           "layer (elements).")
    vocab_size: PositiveInt = Field(le=1 << 24, json_schema_extra=_SHAPE,
                                    description="Vocabulary size (tokens).")
    max_position_embeddings: PositiveInt = Field(
        le=MAX_TOKENS, json_schema_extra=why(TOKENS_WHY, "tokens"),
        description="Longest context the model supports (tokens); max_model_len defaults to it."
    )
    dtype_bits: Literal[4, 8, 16, 32] = Field(
        16, description="Bits per element of the blocks' dense linear weights (attention, "
        "dense MLP, shared experts): 16 bf16/fp16, 8 fp8 (as vLLM's --quantization fp8), 4 "
        "nvfp4/mxfp4/int4; activations, embeddings and the LM head stay 16-bit. The legacy "
        "key dtype_bytes (1, 2 or 4) sets it to 8 x dtype_bytes.")
    moe_dtype_bits: Literal[4, 8, 16, 32] | None = Field(
        None, description="Bits per element of the routed experts' weights (None: "
        "dtype_bits), e.g. 4 for gpt-oss's mxfp4 experts beside 16-bit attention.")
    quantization: Literal[QUANTIZATIONS] | None = Field(  # type: ignore[valid-type]
        None, description="vLLM's --quantization method of the checkpoint (fp8, modelopt "
        "(fp8), modelopt_fp4 (nvfp4), mxfp4, compressed-tensors, awq, gptq, bitsandbytes); "
        "None: unquantized, or fp8 when dtype_bits is 8.")
    weight_block_size: int = Field(
        0, ge=0, le=4096, json_schema_extra=_SHAPE, description="Side of the checkpoint's "
        "block scales of fp8 weights (elements; 128 for DeepSeek-V3, Kimi-K2, Qwen3-FP8, "
        "MiniMax-M2: config.json's weight_block_size); 0 = per-tensor scales.")
    kv_dtype_bytes: PositiveInt | None = Field(
        None, le=4, json_schema_extra=_BYTES,
        description="Bytes per KV-cache element (default: the activation dtype, 2 for "
        "fp8 or 16-bit weights, as vLLM's --kv-cache-dtype auto; 1 = fp8 KV)."
    )
    checkpoint_kv_fp8: bool = Field(
        False, description="The checkpoint's quantization config names an fp8 KV cache "
        "(modelopt kv_cache_quant_algo / kv_cache_scheme), which vLLM's --kv-cache-dtype auto "
        "serves: the emitted flags then ask for a 16-bit KV cache by name (--kv-cache-dtype "
        "bfloat16) where kv_dtype_bytes is 2.")
    qkv_bias: bool = Field(False, description="Q/K/V projections carry a bias (Qwen2).")
    qk_norm: bool = Field(False, description="Per-head RMSNorm on queries and keys before "
                          "RoPE (Qwen3; Hugging Face's Qwen3Attention q_norm / k_norm): two "
                          "more elementwise kernels per block.")
    qk_norm_layerwise: bool = Field(
        False, description="The q/k RMSNorm spans all heads at once, not one head "
        "(MiniMax-M2: config.json's qk_norm_type per_layer; vLLM's MiniMaxText01RMSNormTP): "
        "its weights are one scale per q and k element, and under tensor parallelism every "
        "block also all-reduces each token's two fp32 variances (one all-reduce per block, "
        "vLLM's minimax_qk_norm_fusion). Needs qk_norm.")
    tie_word_embeddings: bool = Field(
        False, description="The LM head shares the embedding matrix (no separate weights)."
    )
    num_experts: int = _count("Routed experts per MoE layer (count; 0 = dense model).", 1 << 16)
    num_experts_per_tok: int = _count("Routed experts each token uses per MoE layer (count, "
                                      "top-k).", 1 << 10)
    moe_intermediate_size: int = _count("Gated-MLP inner width of one routed expert "
                                        "(elements).")
    num_shared_experts: int = _count("Shared experts every token uses, each of "
                                     "moe_intermediate_size (count; DeepSeek's "
                                     "n_shared_experts).", 64)
    shared_expert_intermediate_size: int = _count(
        "Total inner width of the shared expert(s) (elements; Qwen2-MoE's key); 0 = "
        "num_shared_experts x moe_intermediate_size.")
    first_dense_layers: int = _count("Leading layers with a dense MLP of intermediate_size "
                                     "instead of experts (count; DeepSeek's "
                                     "first_k_dense_replace).", 1024)
    mtp_layers: int = _count("Multi-token-prediction layers the checkpoint ships (count; "
                             "config.json's num_nextn_predict_layers, MiniMax's "
                             "num_mtp_modules): what vLLM's speculative method mtp drafts "
                             "with; 0: none, and vLLM has no mtp drafter for the model.", 64)
    kv_lora_rank: int = _count("MLA latent width cached per token and layer (elements; 0 = "
                               "not MLA).", 1 << 16)
    q_lora_rank: int = _count("MLA query compression width (elements; 0 = one q_proj).",
                              1 << 16)
    qk_rope_head_dim: int = _count("MLA: rotary part of each query/key head, the decoupled "
                                   "key cached beside the latent (elements).", 4096)
    qk_nope_head_dim: int = _count("MLA: non-rotary part of each query/key head "
                                   "(elements).", 4096)
    v_head_dim: int = _count("MLA: elements per value head.", 4096)
    sliding_window: int = _count("Tokens a sliding-window layer attends to (tokens; 0 = "
                                 "full attention everywhere).", MAX_TOKENS)
    num_sliding_layers: int = _count("How many of num_layers use the sliding window (count; "
                                     "gpt-oss: half, Mistral-7B-v0.1: all).", 1024)
    source: str = Field("", description="Where the figures come from (config.json URL).")

    @model_validator(mode="before")
    @classmethod
    def _legacy_dtype_bytes(cls, data):
        """``dtype_bytes: 1|2|4`` (the key before dtype_bits existed) -> dtype_bits."""
        return checks.legacy_dtype_bytes(data)

    @model_validator(mode="after")
    def _consistent(self):
        for problem in checks.problems(self):
            raise ValueError(problem)
        return self

    def model_copy(self, *, update=None, deep: bool = False):
        """pydantic's copy; a legacy ``dtype_bytes`` in ``update`` sets ``dtype_bits``."""
        if update and "dtype_bytes" in update:
            update = {**update, "dtype_bits": 8 * update["dtype_bytes"]}
            del update["dtype_bytes"]
        return super().model_copy(update=update, deep=deep)

    # -- precision ---------------------------------------------------------------------
    @property
    def moe_bits(self) -> int:
        """Bits per element of routed-expert weights (``moe_dtype_bits`` or ``dtype_bits``)."""
        return self.moe_dtype_bits or self.dtype_bits

    @property
    def dtype_bytes(self) -> int:
        """Bytes per dense linear weight element, rounded up (4-bit: 1), as before dtype_bits."""
        return -(-self.dtype_bits // 8)

    @property
    def weight_elem_bytes(self) -> float:
        """Bytes per dense linear weight element (0.5 for 4-bit weights)."""
        return self.dtype_bits / 8

    @property
    def moe_weight_elem_bytes(self) -> float:
        """Bytes per routed-expert weight element (0.5 for 4-bit experts)."""
        return self.moe_bits / 8

    @property
    def act_bytes(self) -> int:
        """Bytes per activation element: quantized weights (fp8, fp4, int4) still compute with
        16-bit activations (vLLM: the model's dtype stays bf16/fp16)."""
        return max(self.dtype_bytes, 2)

    @property
    def kv_bytes(self) -> int:
        """Bytes per KV-cache element: ``kv_dtype_bytes``, else the activation dtype (vLLM's
        ``--kv-cache-dtype auto``: fp8 weights with bf16 KV read 2 bytes per element)."""
        return self.kv_dtype_bytes or self.act_bytes

    # -- structure ---------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        """Mixture of experts: ``num_experts`` > 0."""
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention: ``kv_lora_rank`` > 0."""
        return self.kv_lora_rank > 0

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is the experts (count): num_layers - first_dense_layers, or 0."""
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def num_dense_layers(self) -> int:
        """Layers with a dense MLP of ``intermediate_size`` (count)."""
        return self.num_layers - self.num_moe_layers

    @property
    def num_full_attention_layers(self) -> int:
        """Layers attending over the whole context (count)."""
        return self.num_layers - self.num_sliding_layers

    @property
    def shared_expert_size(self) -> int:
        """Total inner width of a MoE layer's shared expert(s) (elements; 0 = none)."""
        return self.shared_expert_intermediate_size or \
            self.num_shared_experts * self.moe_intermediate_size

    @property
    def expert_shape(self) -> tuple[int, int, int, int]:
        """(hidden_size, moe_intermediate_size, num_experts, num_experts_per_tok) of the
        routed experts (elements, elements, count, count)."""
        return (self.hidden_size, self.moe_intermediate_size, self.num_experts,
                self.num_experts_per_tok)

    @property
    def q_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    def attn_gemms(self, tp: int) -> list[tuple[str, int, int]]:
        """(name, n, k) of one layer's attention GEMMs on one GPU: qkv, o (GQA); qkv_a or q +
        kv_a, q_b, kv_b, o (MLA). n = output width, k = input width (elements)."""
        return shapes.attn_gemms(self, tp)

    def dense_mlp_gemms(self, tp: int) -> list[tuple[str, int, int]]:
        """(name, n, k) of a dense layer's gate_up and down on one GPU ([] if none)."""
        return shapes.dense_mlp_gemms(self, tp)

    def shared_expert_gemms(self, tp: int) -> list[tuple[str, int, int]]:
        """(name, n, k) of a MoE layer's shared_gate_up and shared_down on one GPU."""
        return shapes.shared_expert_gemms(self, tp)

    # -- parameters and weights ---------------------------------------------------------
    @property
    def layer_params(self) -> int:
        """Parameters of one dense transformer block (elements): attention, norms and a
        dense MLP of ``intermediate_size``."""
        return shapes.attn_params(self) + 3 * self.hidden_size * self.intermediate_size \
            + 2 * self.hidden_size

    @property
    def num_params(self) -> int:
        """Total parameters (elements): blocks (every expert) + embeddings + LM head + norm."""
        return shapes.num_params(self)

    @property
    def active_params(self) -> int:
        """Parameters one token uses (elements): all but the routed experts, plus
        ``num_experts_per_tok`` of them per MoE layer; ``num_params`` for a dense model."""
        return shapes.num_params(self, active=True)

    def weight_bytes_per_gpu(self, tp: int, ep: int = 1, moe_tp: int | None = None) -> int:
        """Weight bytes one GPU holds under TP ``tp``, EP ``ep`` and the experts' TP
        ``moe_tp`` (default ``tp``; ``model_shapes``)."""
        return shapes.weight_bytes_per_gpu(self, tp, ep, moe_tp)

    # -- KV cache ----------------------------------------------------------------------
    def kv_heads_per_gpu(self, tp: int) -> int:
        """KV heads per GPU: heads are split across ranks, replicated when tp > num_kv_heads."""
        return max(1, self.num_kv_heads // tp)

    def kv_bytes_per_token_layer(self, tp: int) -> int:
        """KV-cache bytes of one token in one attention layer on one GPU: K and V of this
        GPU's heads; MLA: the latent plus the rotary key, (kv_lora_rank + qk_rope_head_dim)
        elements on every rank (vLLM's MLA caches the whole latent on each TP rank)."""
        if self.is_mla:
            return (self.kv_lora_rank + self.qk_rope_head_dim) * self.kv_bytes
        return 2 * self.kv_heads_per_gpu(tp) * self.head_dim * self.kv_bytes

    @property
    def kv_accounted_layers(self) -> int:
        """Layers the KV block manager accounts per token (count): the full-attention layers,
        or every layer when all of them slide (then KV per sequence is overstated)."""
        return self.num_full_attention_layers or self.num_layers

    def kv_bytes_per_token(self, tp: int) -> int:
        """KV-cache bytes one token occupies on one GPU in the accounted layers (bytes):
        what one slot of a KV block costs."""
        return self.kv_accounted_layers * self.kv_bytes_per_token_layer(tp)

    def kv_bytes_per_sequence(self, num_tokens: int, tp: int) -> int:
        """KV bytes one sequence of ``num_tokens`` tokens holds on one GPU (bytes): full layers
        ``num_tokens`` tokens each, sliding layers min(num_tokens, sliding_window)."""
        kept = min(num_tokens, self.sliding_window) if self.sliding_window else num_tokens
        per = self.kv_bytes_per_token_layer(tp)
        return per * (self.num_full_attention_layers * num_tokens
                      + self.num_sliding_layers * kept)
