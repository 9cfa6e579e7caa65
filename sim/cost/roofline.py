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

then the LM head (never quantized) for one row per scheduled request (vLLM computes
logits for the last scheduled token of every request), the elementwise kernels' bytes
(norms, RoPE, KV write, activation, embedding, sampler: sim/cost/elementwise.py) at the
achieved bandwidth, and a fixed per-step overhead. Efficiency and overhead figures come
from the GPU catalog entry (see sim/catalog/SOURCES.md).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from sim.cost.base import COST_MODELS, ShapeCost, decode_contexts
from sim.cost.elementwise import ElementwiseWork


class RooflineParams(BaseModel):
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
        fp8 = self.model.dtype_bytes == 1 and g.fp8_flops  # else fp8 weights upcast to bf16
        self.peak_layer_gemm = (g.fp8_flops / g.bf16_flops) * self.peak_gemm if fp8 \
            else self.peak_gemm
        self.peak_attn = g.bf16_flops * (p.attention_efficiency or g.attention_efficiency)
        self.bw = g.mem_bandwidth * (p.mem_efficiency or g.mem_efficiency)
        ms = p.step_overhead_ms
        self.overhead = g.step_overhead_s if ms is None else ms * 1e-3
        m, tp = self.model, self.tp
        h, q, kv, inter = m.hidden_size, m.q_size, m.kv_size, m.intermediate_size
        # (input width, output width) of each GEMM on one rank
        self.gemms = [(h, (q + 2 * kv) // tp), (q // tp, h), (h, 2 * inter // tp),
                      (inter // tp, h)]
        self.heads = m.num_attention_heads // tp
        self.kv_token_layer = m.kv_bytes_per_token(tp) // m.num_layers  # bytes/token/layer
        self.elem = ElementwiseWork.of(m, tp)
        self._memo: dict[tuple[int, int], float] = {}

    def _per_token_count(self, tokens: int, rows: int) -> float:
        """Layer GEMMs + all-reduce for ``tokens`` and the LM head for ``rows`` (memoized:
        both depend only on the counts, which the token budget bounds)."""
        key = (tokens, rows)
        t = self._memo.get(key)
        if t is None:
            layer = self._gemm_time(tokens) + self._allreduce(tokens)
            elem = float(self.elem.bytes_per_step(self.model.num_layers, tokens, rows)) / self.bw
            t = self._memo[key] = self.model.num_layers * layer + self._lm_head(rows) + elem
        return t

    def _gemm_time(self, tokens: int) -> float:
        w, a, t = self.model.dtype_bytes, self.model.act_bytes, 0.0
        for k, n in self.gemms:
            flops = 2.0 * tokens * k * n
            nbytes = w * k * n + a * tokens * (k + n)
            t += max(flops / self.peak_layer_gemm, nbytes / self.bw)
        return t

    def _prefill_attention(self, q: np.ndarray, p: np.ndarray) -> float:
        if not len(q):
            return 0.0
        qf, pf = q.astype(np.float64), p.astype(np.float64)
        hd = self.model.head_dim
        flops = 4.0 * self.heads * hd * float((qf * pf + qf * (qf + 1) / 2).sum())
        nbytes = self.kv_token_layer * float((pf + qf).sum())
        return max(flops / self.peak_attn, nbytes / self.bw)

    def _decode_attention(self, n: int, ctx: np.ndarray) -> np.ndarray:
        # each decode request reads its context plus the token it just wrote
        tokens = ctx.astype(np.float64) + n
        flops = 4.0 * self.heads * self.model.head_dim * tokens
        return _roof(flops, self.kv_token_layer * tokens, self.peak_attn, self.bw)

    def _allreduce(self, tokens: int) -> float:
        if self.tp == 1:
            return 0.0
        g = self.gpu
        msg = tokens * self.model.hidden_size * self.model.act_bytes
        wire = 2.0 * (self.tp - 1) / self.tp * msg
        return 2 * (wire / (g.interconnect_bandwidth * g.allreduce_efficiency)
                    + g.allreduce_latency_s)

    def _lm_head(self, rows: int) -> float:
        m = self.model
        n = m.vocab_size // self.tp
        flops = 2.0 * rows * m.hidden_size * n
        nbytes = m.act_bytes * (m.hidden_size * n + rows * (m.hidden_size + n))
        return max(flops / self.peak_gemm, nbytes / self.bw)

    def shape_times(self, total, reqs, prefill_q, prefill_ctx, num_decode, decode_ctx0,
                    num_steps):
        fixed = self._per_token_count(total, reqs) + self.overhead
        if len(prefill_q):
            fixed += self.model.num_layers * self._prefill_attention(
                np.asarray(prefill_q, dtype=np.int64), np.asarray(prefill_ctx, dtype=np.int64))
        if num_decode:
            ctx = decode_contexts(decode_ctx0, num_decode, num_steps)
            out = self.model.num_layers * self._decode_attention(num_decode, ctx)
            out += fixed
        else:
            out = np.full(num_steps, fixed)
        return out
