"""A model's parameters, GEMM shapes and weight bytes, from its ``ModelSpec`` fields.

Pure arithmetic over the spec (no pydantic): ``ModelSpec``'s properties delegate here.
Parameters are elements; bytes are per GPU. A block is attention + MLP + two RMSNorms:

    attention  GQA: q/k/v/o projections (+ q/k/v bias, + q_norm/k_norm weights)
               MLA (DeepSeek-V2/V3, Kimi-K2): q_a -> q_a_layernorm -> q_b (or one q_proj
               when q_lora_rank is 0), kv_a_proj_with_mqa -> kv_a_layernorm -> kv_b, o_proj
    MLP        dense layers (the first ``first_dense_layers`` of a MoE, every layer of a
               dense model): gate/up/down of ``intermediate_size``
               MoE layers: ``num_experts`` routed experts of ``moe_intermediate_size``, the
               shared expert(s), the router (hidden x num_experts, kept 16-bit)

Sharding as vLLM does it: attention heads, MLP widths, shared experts, the embedding and LM
head (vocabulary) over TP; MLA's q_a / kv_a projections replicated (vLLM's
``fused_qkv_a_proj`` / ``kv_a_proj_with_mqa`` are ``ReplicatedLinear``), the router
replicated; routed experts TP-sharded, or split whole across the EP ranks under
``--enable-expert-parallel`` (EP = TP x DP). Norms and biases are counted as sharded, as
before this module existed (they are a few MB). Not counted: gpt-oss's attention sinks and
o_proj / expert biases, Qwen2-MoE's shared-expert gate, DeepSeek's e_score_correction_bias
and multi-token-prediction layers (each below 0.1 % of the parameters; the MTP layer is
not served unless speculative decoding asks for it), quantization scales (nvfp4 adds 0.5
bit per element, mxfp4 0.25).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.config.model_spec import ModelSpec

Gemm = tuple[str, int, int]  # (name, n: output width, k: input width), one GPU


def attn_gemms(m: ModelSpec, tp: int) -> list[Gemm]:
    """The attention GEMMs of one layer on one GPU, in execution order."""
    h = m.hidden_size
    if not m.is_mla:
        kv = m.kv_heads_per_gpu(tp) * m.head_dim
        return [("qkv", m.q_size // tp + 2 * kv, h), ("o", h, m.q_size // tp)]
    heads = m.num_attention_heads // tp
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    latent = m.kv_lora_rank + m.qk_rope_head_dim
    if m.q_lora_rank:
        q = [("qkv_a", m.q_lora_rank + latent, h), ("q_b", heads * qk, m.q_lora_rank)]
    else:
        q = [("q", heads * qk, h), ("kv_a", latent, h)]
    return [*q, ("kv_b", heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank),
            ("o", h, heads * m.v_head_dim)]


def dense_mlp_gemms(m: ModelSpec, tp: int) -> list[Gemm]:
    """gate+up and down of a dense MLP layer on one GPU ([] if no layer is dense)."""
    if not m.num_dense_layers:
        return []
    inter, h = m.intermediate_size, m.hidden_size
    return [("gate_up", 2 * inter // tp, h), ("down", h, inter // tp)]


def shared_expert_gemms(m: ModelSpec, tp: int) -> list[Gemm]:
    """gate+up and down of a MoE layer's shared expert(s) on one GPU ([] if none)."""
    s, h = m.shared_expert_size, m.hidden_size
    if not (m.is_moe and s):
        return []
    return [("shared_gate_up", 2 * s // tp, h), ("shared_down", h, s // tp)]


def _attn_linear(m: ModelSpec) -> tuple[int, int]:
    """(sharded, replicated) linear weights of one attention layer (elements)."""
    h = m.hidden_size
    if not m.is_mla:
        return h * (m.q_size + 2 * m.kv_size) + m.q_size * h, 0
    heads = m.num_attention_heads
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    latent = m.kv_lora_rank + m.qk_rope_head_dim
    q_b = m.q_lora_rank * heads * qk if m.q_lora_rank else h * heads * qk
    sharded = q_b + m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim) \
        + heads * m.v_head_dim * h
    return sharded, h * (m.q_lora_rank + latent)


def _attn_small(m: ModelSpec) -> int:
    """Bias and norm weights inside one attention layer (elements)."""
    if m.is_mla:
        return m.q_lora_rank + m.kv_lora_rank  # q_a_layernorm, kv_a_layernorm
    bias = (m.q_size + 2 * m.kv_size) if m.qkv_bias else 0
    if not m.qk_norm:
        return bias
    if m.qk_norm_layerwise:  # one scale per element of q and of k (MiniMax-M2)
        return bias + m.q_size + m.kv_size
    return bias + 2 * m.head_dim  # one per head dim, shared by the heads (Qwen3)


def attn_params(m: ModelSpec) -> int:
    """Parameters of one attention layer (elements), its norms and bias included."""
    return sum(_attn_linear(m)) + _attn_small(m)


def expert_params(m: ModelSpec) -> int:
    """One routed expert: gate, up, down of ``moe_intermediate_size`` (elements)."""
    return 3 * m.hidden_size * m.moe_intermediate_size


def moe_dense_params(m: ModelSpec) -> tuple[int, int]:
    """(shared experts, router) of one MoE layer (elements)."""
    return 3 * m.hidden_size * m.shared_expert_size, m.hidden_size * m.num_experts


def _outer(m: ModelSpec) -> int:
    """Embedding, LM head (unless tied) and the final norm (elements)."""
    embed = m.vocab_size * m.hidden_size
    return embed + (0 if m.tie_word_embeddings else embed) + m.hidden_size


def num_params(m: ModelSpec, active: bool = False) -> int:
    """Total parameters, or (``active``) those one token uses: every non-expert weight plus
    ``num_experts_per_tok`` routed experts per MoE layer (embedding and LM head included)."""
    per_layer = attn_params(m) + 2 * m.hidden_size
    dense = m.num_dense_layers * 3 * m.hidden_size * m.intermediate_size
    shared, router = moe_dense_params(m)
    experts = m.num_experts_per_tok if active else m.num_experts
    moe = m.num_moe_layers * (experts * expert_params(m) + shared + router)
    return m.num_layers * per_layer + dense + moe + _outer(m)


def weight_bytes_per_gpu(m: ModelSpec, tp: int, ep: int = 1, moe_tp: int | None = None) -> int:
    """Weight bytes one GPU holds under tensor parallelism ``tp`` and, when ``ep > 1``,
    expert parallelism over ``ep`` ranks (vLLM's --enable-expert-parallel: EP = TP x DP,
    each rank holding ``ceil(num_experts / ep)`` whole experts per MoE layer); without EP
    the routed experts are TP-sharded over ``moe_tp`` ranks (default ``tp``; vLLM's data
    parallelism without EP shards them over TP x DP: the MoE layers form one TP group).

    Linear weights of attention, dense MLPs and shared experts at ``dtype_bits``; routed
    experts at ``moe_dtype_bits``; router, norms, bias, embedding and LM head at the
    activation dtype. Bits are summed exactly and rounded up to bytes once."""
    act = 8 * m.act_bytes
    sharded, replicated = _attn_linear(m)
    shared, router = moe_dense_params(m)
    linear = m.num_layers * sharded + m.num_moe_layers * shared \
        + m.num_dense_layers * 3 * m.hidden_size * m.intermediate_size
    small = m.num_layers * (_attn_small(m) + 2 * m.hidden_size) + _outer(m)
    bits = -(-(linear * m.dtype_bits + small * act) // tp)
    bits += m.num_layers * replicated * m.dtype_bits + m.num_moe_layers * router * act
    expert = m.num_moe_layers * expert_params(m) * m.moe_bits
    if ep > 1:
        bits += -(-m.num_experts // ep) * expert
    else:
        bits += -(-m.num_experts * expert // (moe_tp or tp))
    return -(-bits // 8)
