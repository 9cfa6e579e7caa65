"""The roofline step-time model: each operation bound by compute or by memory.

Per transformer layer and step, on one GPU of a tensor-parallel group:

* four GEMMs (QKV, O, gate+up, down), each ``max(FLOPs / (peak * gemm_eff),
  bytes / (bandwidth * mem_eff))`` with bytes = the weight shard (``dtype_bytes`` per
  element) + activations (16-bit); fp8 weights run against the GPU's fp8 peak;
* prefill attention: FLOPs of each chunk's queries against its prefix plus the
  causal half of the chunk, ``4 * heads * head_dim * (q*p + q*(q+1)/2)``, priced
  against ``attention_efficiency``; bytes = K/V read for prefix + chunk;
* decode attention: K/V bytes of every decode request's context (memory bound);
* two all-reduces of the step's activations when ``tp > 1`` (ring: 2(tp-1)/tp of
  the message crosses each link), plus a fixed latency;

Mixture-of-experts layers (``sim/cost/moe_roofline.py``) replace the dense MLP by the router,
the shared expert(s) and the routed experts: FLOPs of the top-k experts only, weight bytes of
the experts the step touches (min(num_experts, tokens x top-k) per GPU, whole experts under
expert parallelism), and under EP an all-to-all dispatch and combine. MLA attention
(DeepSeek-V3, Kimi-K2) runs its projections as GEMMs (``ModelSpec.attn_gemms``), prefill
as multi-head attention over qk_nope + qk_rope / v_head_dim, decode absorbed into the
latent (kv_lora_rank + qk_rope per head for scores, kv_lora_rank for values), reading the
latent cache. Sliding-window layers attend over at most ``sliding_window`` tokens.

then the LM head (never quantized) for one row per scheduled request (vLLM computes
logits for the last scheduled token of every request), the elementwise kernels' bytes
(norms, RoPE, KV write, activation, embedding, sampler: sim/cost/elementwise.py) at the
achieved bandwidth, and a fixed per-step overhead. Efficiency and overhead figures come
from the GPU catalog entry (see sim/catalog/SOURCES.md).
"""

from __future__ import annotations

import numpy as np
from pydantic import ConfigDict, Field

from sim.cost.base import COST_MODELS, ShapeCost, decode_contexts
from sim.cost.elementwise import QK_VARIANCE_BYTES, ElementwiseWork
from sim.cost.moe_roofline import MoeRoofline, attention_dims, window_pairs
from traces.validated import Validated


class RooflineParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gemm_efficiency: float | None = Field(
        None, gt=0, le=1, description="Override the GPU's GEMM efficiency (fraction)."
    )
    attention_efficiency: float | None = Field(
        None, gt=0, le=1, description="Override the GPU's prefill-attention efficiency."
    )
    mem_efficiency: float | None = Field(
        None, gt=0, le=1, description="Override the GPU's achieved HBM bandwidth fraction."
    )
    step_overhead_ms: float | None = Field(
        None, ge=0, description="Override the GPU's fixed per-step overhead (ms)."
    )


def _roof(flops, nbytes, peak, bw):
    return np.maximum(flops / peak, nbytes / bw)


@COST_MODELS.register("roofline")
class RooflineCost(ShapeCost):
    description = "per-op max(FLOPs/peak, bytes/bandwidth) from model + GPU datasheets"
    Params = RooflineParams

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        g, p = self.gpu, self.params
        self.peak_gemm = g.bf16_flops * (p.gemm_efficiency or g.gemm_efficiency)
        self.peak_layer_gemm = self.peak_for(self.model.dtype_bits)
        self.peak_attn = g.bf16_flops * (p.attention_efficiency or g.attention_efficiency)
        self.bw = g.mem_bandwidth * (p.mem_efficiency or g.mem_efficiency)
        ms = p.step_overhead_ms
        self.overhead = g.step_overhead_s if ms is None else ms * 1e-3
        m, tp = self.model, self.tp
        # (input width, output width) of each GEMM on one rank: attention, then dense MLP
        self.attn = [(k, n) for _, n, k in m.attn_gemms(tp)]
        self.gemms = self.attn + [(k, n) for _, n, k in m.dense_mlp_gemms(tp)]
        resolved = kw.get("resolved")
        self.moe = MoeRoofline(self, resolved.ep if resolved is not None else 1) \
            if m.is_moe else None
        self.heads = m.num_attention_heads // tp
        self.kv_token_layer = m.kv_bytes_per_token_layer(tp)  # bytes/token/layer
        self.prefill_dims, self.decode_dims = attention_dims(m)
        self.elem = ElementwiseWork.of(m, tp)
        self._memo: dict[tuple[int, int], float] = {}

    def peak_for(self, bits: int) -> float:
        """Achieved GEMM FLOP/s for weights of ``bits``: the fp8 peak for fp8 (and nvfp4,
        whose fp4 rate no GpuSpec carries), else bf16 (w4a16 kernels upcast the weights)."""
        g = self.gpu
        fast = g.fp8_flops and (bits == 8 or (bits == 4 and self.model.quantization
                                               == "modelopt_fp4"))
        return (g.fp8_flops / g.bf16_flops) * self.peak_gemm if fast else self.peak_gemm

    def _per_token_count(self, tokens: int, rows: int) -> float:
        """Layer GEMMs + all-reduce for ``tokens`` and the LM head for ``rows`` (memoized:
        both depend only on the counts, which the token budget bounds)."""
        key = (tokens, rows)
        t = self._memo.get(key)
        if t is None:
            m = self.model
            elem = float(self.elem.bytes_per_step(m.num_layers, tokens, rows)) / self.bw
            if self.moe is None:
                layers = m.num_layers * (self._gemm_time(tokens) + self._allreduce(tokens))
            else:
                layers = m.num_layers * (self._gemm_time(tokens, self.attn)
                                         + self._allreduce(tokens)) \
                    + m.num_dense_layers * self._gemm_time(tokens, self.gemms[len(self.attn):]) \
                    + m.num_moe_layers * self.moe.layer_time(tokens)
            t = self._memo[key] = layers + self._lm_head(rows) + elem
        return t

    def _gemm_time(self, tokens: int, gemms=None, bits: int | None = None) -> float:
        """GEMMs ``(k, n)`` (default: a dense layer's) on ``tokens`` rows, weights of
        ``bits`` (default: dtype_bits) against the matching peak."""
        m, t = self.model, 0.0
        w, a = (bits or m.dtype_bits) / 8, m.act_bytes
        peak = self.peak_layer_gemm if bits is None else self.peak_for(bits)
        for k, n in self.gemms if gemms is None else gemms:
            flops = 2.0 * tokens * k * n
            nbytes = w * k * n + a * tokens * (k + n)
            t += max(flops / peak, nbytes / self.bw)
        return t

    def _prefill_attention(self, q: np.ndarray, p: np.ndarray, window: int = 0) -> float:
        """One layer's prefill attention; ``window`` > 0: a sliding-window layer."""
        if not len(q):
            return 0.0
        qf, pf = q.astype(np.float64), p.astype(np.float64)
        dqk, dv = self.prefill_dims
        if window:
            pairs, read = window_pairs(qf, pf, window), np.minimum(pf, window) + qf
        else:
            pairs, read = qf * pf + qf * (qf + 1) / 2, pf + qf
        flops = 2.0 * self.heads * (dqk + dv) * float(pairs.sum())
        nbytes = self.kv_token_layer * float(read.sum())
        return max(flops / self.peak_attn, nbytes / self.bw)

    def _decode_attention(self, n: int, ctx: np.ndarray, window: int = 0) -> np.ndarray:
        # each decode request reads its context plus the token it just wrote; ``ctx`` sums
        # the requests' contexts, so a window caps the average request's tokens
        tokens = ctx.astype(np.float64) + n
        if window:
            tokens = np.minimum(tokens, float(n * window))
        dqk, dv = self.decode_dims
        flops = 2.0 * self.heads * (dqk + dv) * tokens
        return _roof(flops, self.kv_token_layer * tokens, self.peak_attn, self.bw)

    def _allreduce(self, tokens: int) -> float:
        """One block's all-reduces: two of the activations, plus the q/k norm's variances
        (two fp32 per token) for a layerwise q/k norm (MiniMax-M2)."""
        if self.tp == 1:
            return 0.0
        m = self.model
        t = 2 * self._allreduce_bytes(tokens * m.hidden_size * m.act_bytes)
        if m.qk_norm_layerwise:
            t += self._allreduce_bytes(tokens * QK_VARIANCE_BYTES)
        return t

    def _allreduce_bytes(self, msg: float) -> float:
        g = self.gpu
        wire = 2.0 * (self.tp - 1) / self.tp * msg
        return wire / (g.interconnect_bandwidth * g.allreduce_efficiency) + \
            g.allreduce_latency_s

    def _lm_head(self, rows: int) -> float:
        m = self.model
        n = m.vocab_size // self.tp
        flops = 2.0 * rows * m.hidden_size * n
        nbytes = m.act_bytes * (m.hidden_size * n + rows * (m.hidden_size + n))
        return max(flops / self.peak_gemm, nbytes / self.bw)

    def host_times(self, total, reqs):
        """The fixed per-step overhead (the GPU's step_overhead_s or the override)."""
        return np.full(len(total), self.overhead)

    def shape_times(self, total, reqs, prefill_q, prefill_ctx, num_decode, decode_ctx0,
                    num_steps):
        m = self.model
        full, sliding, window = m.num_full_attention_layers, m.num_sliding_layers, \
            m.sliding_window
        fixed = self._per_token_count(total, reqs) + self.overhead
        if len(prefill_q):
            q = np.asarray(prefill_q, dtype=np.int64)
            p = np.asarray(prefill_ctx, dtype=np.int64)
            fixed += full * self._prefill_attention(q, p)
            if sliding:
                fixed += sliding * self._prefill_attention(q, p, window)
        if num_decode:
            ctx = decode_contexts(decode_ctx0, num_decode, num_steps)
            out = full * self._decode_attention(num_decode, ctx)
            if sliding:
                out = out + sliding * self._decode_attention(num_decode, ctx, window)
            out += fixed
        else:
            out = np.full(num_steps, fixed)
        return out
