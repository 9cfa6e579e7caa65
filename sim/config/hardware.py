"""Model and GPU descriptions: the physical facts a cost model and the KV sizing need.

Both are frozen pydantic models. Catalog entries (``sim/catalog``) are instances of these;
a scenario may name a catalog entry or spell a model/GPU out field by field.
Units are in every field's description; derived quantities are properties.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

_FROZEN = ConfigDict(extra="forbid", frozen=True)


class ModelSpec(BaseModel):
    """A dense decoder-only transformer (Llama-style: RMSNorm, GQA attention, gated MLP)."""

    model_config = _FROZEN

    name: str = Field(description="Display name, e.g. 'llama-3-8b'.")
    num_layers: PositiveInt = Field(description="Transformer blocks (count).")
    hidden_size: PositiveInt = Field(description="Residual stream width (elements).")
    num_attention_heads: PositiveInt = Field(description="Query heads per layer (count).")
    num_kv_heads: PositiveInt = Field(description="Key/value heads per layer (count, GQA).")
    head_dim: PositiveInt = Field(description="Elements per attention head.")
    intermediate_size: PositiveInt = Field(description="Gated-MLP inner width (elements).")
    vocab_size: PositiveInt = Field(description="Vocabulary size (tokens).")
    max_position_embeddings: PositiveInt = Field(
        description="Longest context the model supports (tokens); max_model_len defaults to it."
    )
    dtype_bytes: PositiveInt = Field(
        2, description="Bytes per element of the transformer blocks' linear weights (2 = "
        "bf16/fp16; 1 = fp8, as vLLM's --quantization fp8: activations, embeddings and the LM "
        "head stay 16-bit)."
    )
    kv_dtype_bytes: PositiveInt | None = Field(
        None, description="Bytes per KV-cache element (default: the activation dtype, 2 for "
        "fp8 or 16-bit weights, as vLLM's --kv-cache-dtype auto; 1 = fp8 KV)."
    )
    qkv_bias: bool = Field(False, description="Q/K/V projections carry a bias (Qwen2).")
    tie_word_embeddings: bool = Field(
        False, description="The LM head shares the embedding matrix (no separate weights)."
    )
    source: str = Field("", description="Where the figures come from (config.json URL).")

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
        return attn + bias + mlp + 2 * h  # + two RMSNorm weight vectors

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
                                               if self.qkv_bias else 0)
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
    hbm_bytes: PositiveInt = Field(description="Device memory (bytes) as the driver reports it.")
    mem_bandwidth: PositiveFloat = Field(description="Peak HBM bandwidth (bytes/s).")
    bf16_flops: PositiveFloat = Field(description="Peak dense bf16 tensor-core rate (FLOP/s).")
    fp8_flops: PositiveFloat | None = Field(
        None, description="Peak dense fp8 tensor-core rate (FLOP/s); None if unsupported."
    )
    interconnect_bandwidth: PositiveFloat = Field(
        description="GPU-to-GPU bandwidth per GPU, one direction (bytes/s): NVLink or PCIe."
    )
    host_bandwidth: PositiveFloat = Field(
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
        10e-6, ge=0, description="Fixed latency of one all-reduce (seconds)."
    )
    step_overhead_s: float = Field(
        2e-3, ge=0, description="Fixed CPU + launch cost of one engine step (seconds)."
    )
    source: str = Field("", description="Where the figures come from.")

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity at which compute and bandwidth limits meet (FLOP/byte)."""
        return self.bf16_flops / self.mem_bandwidth
