"""Roofline pieces of the 2026 models: a MoE layer, MLA's attention widths, sliding windows.

A MoE layer on one GPU, for a step of T tokens (E experts, top-k, inner width I, hidden h):

    router          GEMM T x h -> E, 16-bit weights (vLLM keeps the gate unquantized)
    shared experts  gate_up + down GEMMs like a dense MLP of their width, TP-sharded
    routed experts  FLOPs 2 x pairs x 3 h w, pairs = the (token, expert) pairs this GPU runs
                    and w the expert width it holds:
                      TP (no EP): pairs = T k, w = I / tp, weights read for min(E, T k)
                                  experts (each expert's TP shard)
                      EP:         pairs = T k / tp (the DP ranks step in lockstep with equal
                                  batches and the router balances the experts evenly: an
                                  assumption; real routing is skewed), w = I, weights read
                                  for min(ceil(E / EP), ceil(pairs)) whole experts
                    activation bytes pairs x (2 h + 3 w) (read x, write gate_up, read the
                    product, write the output)
    all-to-all      under EP, dispatch and combine: pairs x h activations, (EP-1)/EP of them
                    crossing the link each way, at the GPU's all-reduce efficiency + latency

The expert count touched is the upper bound min(E, T k): with T k pairs drawn over E experts
fewer distinct experts are hit (E (1 - (1 - 1/E)^(T k)) on uniform routing), so small decode
batches are priced as reading slightly more weights than they do.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim.config.model_spec import ModelSpec
    from sim.cost.roofline import RooflineCost


def attention_dims(m: ModelSpec) -> tuple[tuple[int, int], tuple[int, int]]:
    """((qk, v) widths per head of prefill attention, (qk, v) of decode attention).

    GQA: head_dim both. MLA as vLLM runs it: prefill as multi-head attention over
    qk_nope + qk_rope and v_head_dim; decode absorbed into the latent (scores over
    kv_lora_rank + qk_rope, values over kv_lora_rank per query head)."""
    if not m.is_mla:
        return (m.head_dim, m.head_dim), (m.head_dim, m.head_dim)
    prefill = (m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim)
    return prefill, (m.kv_lora_rank + m.qk_rope_head_dim, m.kv_lora_rank)


def _causal_window(x: np.ndarray, w: int) -> np.ndarray:
    """Query-key pairs of the first ``x`` tokens of a sequence under a window of ``w``."""
    return np.where(x <= w, x * (x + 1) / 2, w * (w + 1) / 2 + (x - w) * w)


def window_pairs(q: np.ndarray, p: np.ndarray, w: int) -> np.ndarray:
    """Query-key pairs of a chunk of ``q`` tokens after ``p`` cached ones, each query
    attending to at most ``w`` tokens (itself included)."""
    return _causal_window(p + q, w) - _causal_window(p, w)


class MoeRoofline:
    """Time of one MoE layer's MLP on one GPU (router, shared experts, routed experts and,
    under expert parallelism, the all-to-all); attention is priced by the caller."""

    def __init__(self, cost: RooflineCost, ep: int):
        m, tp = cost.model, cost.tp
        self.cost, self.ep = cost, ep
        h, inter, self.experts, self.top_k = m.expert_shape
        self.h = h
        self.width = inter if ep > 1 else inter / tp
        self.local = math.ceil(self.experts / ep) if ep > 1 else self.experts
        self.router = [(h, m.num_experts)]
        self.shared = [(k, n) for _, n, k in m.shared_expert_gemms(tp)]
        self.peak = cost.peak_for(m.moe_bits)

    def layer_time(self, tokens: int) -> float:
        """Seconds of one MoE layer's MLP for a step of ``tokens`` tokens (one GPU)."""
        c, m = self.cost, self.cost.model
        t = c._gemm_time(tokens, self.router, bits=8 * m.act_bytes)
        if self.shared:
            t += c._gemm_time(tokens, self.shared)
        return t + self._experts(tokens) + self._all_to_all(tokens)

    def pairs(self, tokens: int) -> float:
        """(token, expert) pairs this GPU computes for a step of ``tokens`` tokens."""
        pairs = tokens * self.top_k
        return pairs / self.cost.tp if self.ep > 1 else float(pairs)

    def _experts(self, tokens: int) -> float:
        c, m = self.cost, self.cost.model
        pairs = self.pairs(tokens)
        touched = min(self.local, math.ceil(pairs))
        per_expert = 3 * self.h * self.width
        flops = 2.0 * pairs * per_expert
        nbytes = touched * per_expert * m.moe_weight_elem_bytes \
            + m.act_bytes * pairs * (2 * self.h + 3 * self.width)
        return max(flops / self.peak, nbytes / c.bw)

    def _all_to_all(self, tokens: int) -> float:
        if self.ep == 1:
            return 0.0
        g, m = self.cost.gpu, self.cost.model
        wire = self.pairs(tokens) * self.h * m.act_bytes * (self.ep - 1) / self.ep
        return 2 * (wire / (g.interconnect_bandwidth * g.allreduce_efficiency)
                    + g.allreduce_latency_s)
