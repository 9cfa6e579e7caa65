"""Model and GPU descriptions: the physical facts a cost model and the KV sizing need.

Both are frozen pydantic models. Catalog entries (``sim/catalog``) are instances of these;
a scenario may name a catalog entry or spell a model/GPU out field by field.
Units are in every field's description; derived quantities are properties.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from sim.config.limits import MAX_TOKENS, TOKENS_WHY, why

_FROZEN = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
_SHAPE = why("larger than any transformer's")
_BYTES = why("1 (fp8/int8), 2 (bf16/fp16) or 4 (fp32)", "bytes")
_SLOW = "slower than any accelerator: steps would outlast any simulated horizon"
_FAST = "faster than any device built"


class ModelSpec(BaseModel):
    """A dense decoder-only transformer (Llama-style: RMSNorm, GQA attention, gated MLP)."""

    model_config = _FROZEN

    name: str = Field(description="Display name, e.g. 'llama-3-8b'.")
    num_layers: PositiveInt = Field(le=1024, json_schema_extra=_SHAPE,
                                    description="Transformer blocks (count).")
    hidden_size: PositiveInt = Field(le=1 << 20, json_schema_extra=_SHAPE,
                                     description="Residual stream width (elements).")
    num_attention_heads: PositiveInt = Field(le=1 << 14, json_schema_extra=_SHAPE,
                                             description="Query heads per layer (count).")
    num_kv_heads: PositiveInt = Field(le=1 << 14, json_schema_extra=_SHAPE,
                                      description="Key/value heads per layer (count, GQA).")
    head_dim: PositiveInt = Field(le=4096, json_schema_extra=_SHAPE,
                                  description="Elements per attention head.")
    intermediate_size: PositiveInt = Field(le=1 << 22, json_schema_extra=_SHAPE,
                                           description="Gated-MLP inner width (elements).")
    vocab_size: PositiveInt = Field(le=1 << 24, json_schema_extra=_SHAPE,
                                    description="Vocabulary size (tokens).")
    max_position_embeddings: PositiveInt = Field(
        le=MAX_TOKENS, json_schema_extra=why(TOKENS_WHY, "tokens"),
        description="Longest context the model supports (tokens); max_model_len defaults to it."
    )
    dtype_bytes: PositiveInt = Field(
        2, le=4, json_schema_extra=_BYTES,
        description="Bytes per element of the transformer blocks' linear weights (2 = "
        "bf16/fp16; 1 = fp8, as vLLM's --quantization fp8: activations, embeddings and the LM "
        "head stay 16-bit)."
    )
    kv_dtype_bytes: PositiveInt | None = Field(
        None, le=4, json_schema_extra=_BYTES,
        description="Bytes per KV-cache element (default: the activation dtype, 2 for "
        "fp8 or 16-bit weights, as vLLM's --kv-cache-dtype auto; 1 = fp8 KV)."
    )
    qkv_bias: bool = Field(False, description="Q/K/V projections carry a bias (Qwen2).")
    qk_norm: bool = Field(False, description="Per-head RMSNorm on queries and keys before "
                          "RoPE (Qwen3; Hugging Face's Qwen3Attention q_norm / k_norm): two "
                          "more elementwise kernels per block.")
    tie_word_embeddings: bool = Field(
        False, description="The LM head shares the embedding matrix (no separate weights)."
    )
    source: str = Field("", description="Where the figures come from (config.json URL).")

    @model_validator(mode="after")
    def _gqa(self):
        for key in ("dtype_bytes", "kv_dtype_bytes"):
            if getattr(self, key) not in (None, 1, 2, 4):
                raise ValueError(f"{key} must be 1 (fp8/int8), 2 (bf16/fp16) or 4 (fp32) "
                                 f"bytes, not {getattr(self, key)}")
        # vLLM: vllm/model_executor/layers/attention/attention.py:329 asserts
        # num_heads % num_kv_heads == 0 (each KV head serves a whole group of query heads)
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_kv_heads ({self.num_kv_heads}) must divide num_attention_heads "
                f"({self.num_attention_heads}): each KV head serves a group of query heads, "
                "as vLLM's attention layer requires")
        return self

    @property
    def act_bytes(self) -> int:
        """Bytes per activation element: quantized weights (fp8, 1 byte) still compute with
        16-bit activations (vLLM: the model's dtype stays bf16/fp16)."""
        return max(self.dtype_bytes, 2)

    @property
    def kv_bytes(self) -> int:
        """Bytes per KV-cache element: ``kv_dtype_bytes``, else the activation dtype (vLLM's
        ``--kv-cache-dtype auto``: fp8 weights with bf16 KV read 2 bytes per element)."""
        return self.kv_dtype_bytes or self.act_bytes

    @property
    def q_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def layer_params(self) -> int:
        """Parameters of one transformer block (elements)."""
        h = self.hidden_size
        attn = h * (self.q_size + 2 * self.kv_size) + self.q_size * h
        bias = (self.q_size + 2 * self.kv_size) if self.qkv_bias else 0
        mlp = 3 * h * self.intermediate_size  # gate, up, down
        qk = 2 * self.head_dim if self.qk_norm else 0  # q_norm, k_norm weights
        return attn + bias + mlp + 2 * h + qk  # + two RMSNorm weight vectors

    @property
    def num_params(self) -> int:
        """Total parameters (elements): blocks + embeddings + LM head + final norm."""
        embed = self.vocab_size * self.hidden_size
        head = 0 if self.tie_word_embeddings else embed
        return self.num_layers * self.layer_params + embed + head + self.hidden_size

    def weight_bytes_per_gpu(self, tp: int) -> int:
        """Weight bytes one GPU holds under tensor parallelism ``tp`` (all matrices sharded):
        the blocks' linear weights at ``dtype_bytes``, their norms and bias, the embedding,
        LM head and final norm at the activation dtype."""
        h = self.hidden_size
        linear = self.layer_params - 2 * h - ((self.q_size + 2 * self.kv_size)
                                               if self.qkv_bias else 0) - (
            2 * self.head_dim if self.qk_norm else 0)
        rest = self.num_params - self.num_layers * linear
        return -(-(self.num_layers * linear * self.dtype_bytes + rest * self.act_bytes) // tp)

    def kv_heads_per_gpu(self, tp: int) -> int:
        """KV heads per GPU: heads are split across ranks, replicated when tp > num_kv_heads."""
        return max(1, self.num_kv_heads // tp)

    def kv_bytes_per_token(self, tp: int) -> int:
        """KV-cache bytes one token occupies on one GPU (K and V, all layers)."""
        return 2 * self.num_layers * self.kv_heads_per_gpu(tp) * self.head_dim * self.kv_bytes


class GpuSpec(BaseModel):
    """One accelerator: capacities from its datasheet, efficiencies from public measurements."""

    model_config = _FROZEN

    name: str = Field(description="Display name, e.g. 'h100-sxm'.")
    hbm_bytes: PositiveInt = Field(
        ge=1 << 30, le=1 << 42, json_schema_extra=why("1 GiB to 4 TiB per device", "bytes"),
        description="Device memory (bytes) as the driver reports it.")
    mem_bandwidth: PositiveFloat = Field(
        ge=1e9, le=1e15, json_schema_extra=why(f"1 GB/s to 1 PB/s: {_SLOW}; {_FAST}",
                                               "bytes/s"),
        description="Peak HBM bandwidth (bytes/s).")
    bf16_flops: PositiveFloat = Field(
        ge=1e9, le=1e18, json_schema_extra=why(f"1 GFLOP/s to 1 EFLOP/s: {_SLOW}; {_FAST}",
                                               "FLOP/s"),
        description="Peak dense bf16 tensor-core rate (FLOP/s).")
    fp8_flops: PositiveFloat | None = Field(
        None, ge=1e9, le=1e18, json_schema_extra=why(f"1 GFLOP/s to 1 EFLOP/s: {_SLOW}",
                                                     "FLOP/s"),
        description="Peak dense fp8 tensor-core rate (FLOP/s); None if unsupported."
    )
    interconnect_bandwidth: PositiveFloat = Field(
        ge=1e6, le=1e15, json_schema_extra=why(f"1 MB/s to 1 PB/s: {_SLOW}", "bytes/s"),
        description="GPU-to-GPU bandwidth per GPU, one direction (bytes/s): NVLink or PCIe."
    )
    host_bandwidth: PositiveFloat = Field(
        ge=1e6, le=1e15, json_schema_extra=why(f"1 MB/s to 1 PB/s: {_SLOW}", "bytes/s"),
        description="GPU-to-host link bandwidth, one direction (bytes/s): KV swap traffic."
    )
    gemm_efficiency: float = Field(
        0.7, gt=0, le=1, description="Achieved / peak FLOP/s for large bf16 GEMMs (fraction)."
    )
    attention_efficiency: float = Field(
        0.5, gt=0, le=1, description="Achieved / peak FLOP/s for prefill attention (fraction)."
    )
    mem_efficiency: float = Field(
        0.8, gt=0, le=1, description="Achieved / peak HBM bandwidth for streaming reads (fraction)."
    )
    allreduce_efficiency: float = Field(
        0.7, gt=0, le=1, description="Achieved / peak interconnect bandwidth in all-reduce."
    )
    allreduce_latency_s: float = Field(
        10e-6, ge=0, le=1.0, json_schema_extra=why("a second per all-reduce is no GPU link"),
        description="Fixed latency of one all-reduce (seconds)."
    )
    step_overhead_s: float = Field(
        2e-3, ge=0, le=10.0, json_schema_extra=why("ten seconds of host time per step is no "
                                                   "serving engine"),
        description="Fixed CPU + launch cost of one engine step (seconds)."
    )
    source: str = Field("", description="Where the figures come from.")

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity at which compute and bandwidth limits meet (FLOP/byte)."""
        return self.bf16_flops / self.mem_bandwidth
