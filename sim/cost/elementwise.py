"""Elementwise kernels of a step: the bytes they move and how many of them launch.

Memory-bound work beside the GEMMs and attention, priced by both GPU cost models as
``bytes / (HBM bandwidth x efficiency) + a per-kernel floor``. What vLLM's Llama forward
runs, on one GPU of the tensor-parallel group (``a`` activation bytes, ``kv`` KV-cache
bytes per element, ``d`` head_dim, ``hq``/``hkv`` heads on this GPU, ``I`` intermediate):

    per block, per token
      fused residual add + RMSNorm, twice   read x and residual, write both   4 h a  (x2)
      RoPE on q and k, in place             read and write them               2 (hq + hkv) d a
      KV-cache write                        read k, v; write them paged       2 hkv d (a + kv)
      SiLU-and-mul                          read gate and up, write product   3 (I / tp) a
      q_norm, k_norm (qk_norm: Qwen3)       read and write q, k per head      2 hq d a, 2 hkv d a
    per step
      embedding gather, per token           read a row, write it              2 h a
      final add + RMSNorm, per token                                          4 h a
      sampler, per request                  logits to fp32, temperature, softmax, exponential
                                            race, argmax over the vocabulary  ~42 V bytes

A MoE model (every layer MoE) runs SiLU-and-mul over top-k x moe_intermediate per token; MLA
ropes only the rotary parts (qk_rope_head_dim of each query head and the one shared key) and
writes the latent + rotary key (kv_lora_rank + qk_rope_head_dim) to the cache.

Kernels: 5 per block (7 with qk_norm), 1 embedding, 1 final norm and ``SAMPLER_KERNELS`` per
step. The same list is aiconfigurator's (add_norm x2, act, RoPE, KV write, embedding), whose
models price them the same way. Pure numpy; no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.config.hardware import ModelSpec

LAYER_KERNELS = 5  # add+norm x2, RoPE, KV write, SiLU-and-mul (without qk_norm)
SAMPLER_KERNELS = 6  # fp32 cast, temperature, softmax, exponential draw, divide, argmax
# vocabulary bytes per request: 2 (bf16 logits in) + 4 (fp32 out) + 8 (temperature r/w)
# + 8 (softmax r/w) + 4 (exponential draw) + 12 (divide r/r/w) + 4 (argmax read)
SAMPLER_BYTES_PER_VOCAB = 42
# a layerwise q/k norm under TP all-reduces each token's q and k variances, fp32 (bytes):
# vLLM's MiniMaxText01RMSNormTP, the variance kernel before the all-reduce and the apply
# kernel after it standing in for the two norm kernels above
QK_VARIANCE_BYTES = 8


@dataclass(frozen=True)
class ElementwiseWork:
    """Bytes per token of each block kernel, and of the per-step kernels (one GPU)."""

    layer_bytes: tuple[float, ...]  # per token, one entry per kernel of a block
    norm_bytes: float  # final add + RMSNorm, per token
    gather_bytes: float  # embedding, per token
    sampler_bytes: float  # per request

    @staticmethod
    def of(model: ModelSpec, tp: int) -> ElementwiseWork:
        a, kv, h, d = model.act_bytes, model.kv_bytes, model.hidden_size, model.head_dim
        hq, hkv = model.num_attention_heads // tp, model.kv_heads_per_gpu(tp)
        inter = model.intermediate_size // tp
        if model.is_moe and not model.num_dense_layers:  # SiLU over every (token, expert)
            inter = model.num_experts_per_tok * model.moe_intermediate_size // tp
        rope, write = 2.0 * (hq + hkv) * d * a, 2.0 * hkv * d * (a + kv)
        if model.is_mla:  # RoPE on the rotary parts; the cache takes latent + rotary key
            rope = 2.0 * (hq + 1) * model.qk_rope_head_dim * a
            write = (model.kv_lora_rank + model.qk_rope_head_dim) * (a + kv)
        layer = (4.0 * h * a, 4.0 * h * a, rope, write, 3.0 * inter * a)
        if model.qk_norm:  # vLLM's Qwen3Attention: q_norm, then k_norm, one kernel each
            # (MiniMax-M2's layerwise norm: a variance kernel and an apply kernel, same bytes)
            layer += (2.0 * hq * d * a, 2.0 * hkv * d * a)
        return ElementwiseWork(layer, 4.0 * h * a, 2.0 * h * a,
                               float(SAMPLER_BYTES_PER_VOCAB * model.vocab_size))

    def bytes_per_step(self, layers: int, tokens, requests) -> np.ndarray:
        """All elementwise bytes of a step of ``tokens`` tokens and ``requests`` requests."""
        t, r = np.asarray(tokens, np.float64), np.asarray(requests, np.float64)
        per_token = layers * sum(self.layer_bytes) + self.norm_bytes + self.gather_bytes
        return t * per_token + r * self.sampler_bytes

    def token_seconds(self, layers: int, tokens, bandwidth: float, efficiency: float,
                      gather_efficiency: float, floor_s: float) -> np.ndarray:
        """Time of a step's per-token kernels (seconds), each ``bytes / (bandwidth x
        efficiency) + floor_s`` (the embedding gather at ``gather_efficiency``), plus the
        floors of the sampler's kernels (every step samples)."""
        t = np.asarray(tokens, np.float64)
        kernels = layers * len(self.layer_bytes) + 2 + SAMPLER_KERNELS
        moved = t * (layers * sum(self.layer_bytes) + self.norm_bytes) / (bandwidth * efficiency)
        gather = t * self.gather_bytes / (bandwidth * gather_efficiency)
        return moved + gather + kernels * floor_s

    def request_seconds(self, requests, bandwidth: float, efficiency: float) -> np.ndarray:
        """Time the sampler streams the vocabulary of ``requests`` requests (seconds)."""
        return np.asarray(requests, np.float64) * self.sampler_bytes / (bandwidth * efficiency)
