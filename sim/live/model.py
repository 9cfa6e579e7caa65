"""A random-weight Llama-style transformer with the scenario model's shapes.

Per step, over the step's T tokens (R requests), as a vLLM model runner executes it:

    x = embed[token_ids]                                      [T, hidden]
    per executed layer:
        h = rmsnorm(x);  q, k, v = split(h @ W_qkv);  rope(q, k at their positions)
        kv_write(k, v -> the step's slots);  attention (paged_prefill | paged_decode)
        x = x + attn @ W_o
        h = rmsnorm(x);  g, u = split(h @ W_gate_up);  x = x + (silu(g) * u) @ W_down
    logits = rmsnorm(x[last token of each request]) @ W_lm_head      [R, vocab]

The GEMMs are the calibration profile's (calibrate/shapes.py ``model_gemms``): fused QKV
and gate+up, ``torch.matmul(x, W)`` with W stored [in, out], so the fitted model is timed
on the same calls. Weights are N(0, 1/fan_in) so activations keep unit scale; their values
do not matter for time, but finite, distinct values let tests compare KV contents.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sim.live.inputs import StepInputs

ROPE_THETA = 500000.0  # Llama 3's rotary base


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    var = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(var + eps)).to(x.dtype) * w


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE of x [T, heads, D] with cos/sin [T, D/2] (a new tensor)."""
    x1, x2 = x.chunk(2, dim=-1)
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


class RandomTransformer:
    def __init__(self, model, layers: int, dtype: torch.dtype, device: str, seed: int):
        self.m, self.layers, self.dtype, self.device = model, layers, dtype, device
        self.heads, self.kv_heads, self.d = (model.num_attention_heads, model.num_kv_heads,
                                             model.head_dim)
        g = torch.Generator(device=device).manual_seed(seed)
        h, inter = model.hidden_size, model.intermediate_size
        qkv = model.q_size + 2 * model.kv_size
        self.embed = self._w((model.vocab_size, h), 1.0, g)
        self.blocks = [{
            "norm1": self._ones(h), "qkv": self._w((h, qkv), h ** -0.5, g),
            "o": self._w((model.q_size, h), model.q_size ** -0.5, g),
            "norm2": self._ones(h), "gate_up": self._w((h, 2 * inter), h ** -0.5, g),
            "down": self._w((inter, h), inter ** -0.5, g),
        } for _ in range(layers)]
        self.final_norm = self._ones(h)
        self.lm_head = self._w((h, model.vocab_size), h ** -0.5, g)
        half = self.d // 2
        inv = 1.0 / ROPE_THETA ** (torch.arange(half, dtype=torch.float64) / half)
        self._inv_freq = inv.to(device)
        self._cos = self._sin = torch.zeros((0, half), dtype=dtype, device=device)

    def _w(self, shape, std: float, g: torch.Generator) -> torch.Tensor:
        # drawn on the device itself: an 8B model's weights in seconds on a GPU
        return torch.randn(shape, generator=g, dtype=self.dtype, device=self.device).mul_(std)

    def _ones(self, n: int) -> torch.Tensor:
        return torch.ones(n, dtype=self.dtype, device=self.device)

    @staticmethod
    def weight_bytes(model, layers: int, elt: int) -> int:
        """Bytes of the weights this model allocates (executed layers only)."""
        h, inter = model.hidden_size, model.intermediate_size
        qkv = model.q_size + 2 * model.kv_size
        per_layer = h * qkv + model.q_size * h + 3 * h * inter + 2 * h
        return elt * (layers * per_layer + 2 * model.vocab_size * h + h)

    def rope_tables(self, max_pos: int) -> None:
        """Precompute cos/sin for positions [0, max_pos) (grown on demand, never in a step
        of a sized run)."""
        if max_pos <= len(self._cos):
            return
        t = torch.arange(max_pos, dtype=torch.float64, device=self.device)
        ang = t[:, None] * self._inv_freq[None, :]
        self._cos, self._sin = ang.cos().to(self.dtype), ang.sin().to(self.dtype)

    def forward(self, inp: StepInputs, cache, attn, marks=None) -> torch.Tensor:
        """Logits [R, vocab] of the step; ``marks(name)`` is called around the layers."""
        self.rope_tables(int(inp.positions.max()) + 1)
        cos, sin = self._cos[inp.positions], self._sin[inp.positions]
        x = self.embed[inp.token_ids]
        if marks:
            marks("layers_start")
        for i, w in enumerate(self.blocks):
            x = self._block(x, w, inp, cache.layer(i), attn, cos, sin)
        if marks:
            marks("layers_end")
        h = rms_norm(x[inp.logit_rows], self.final_norm)
        return torch.matmul(h, self.lm_head)

    def _block(self, x, w, inp, kv_cache, attn, cos, sin) -> torch.Tensor:
        t = x.shape[0]
        qkv = torch.matmul(rms_norm(x, w["norm1"]), w["qkv"])
        q, k, v = qkv.split([self.m.q_size, self.m.kv_size, self.m.kv_size], dim=-1)
        q = rope(q.view(t, self.heads, self.d), cos, sin)
        k = rope(k.view(t, self.kv_heads, self.d), cos, sin)
        v = v.view(t, self.kv_heads, self.d)
        k_cache, v_cache = kv_cache
        attn.write(k, v, k_cache, v_cache, inp.slots)
        out = torch.empty_like(q)
        p = inp.num_prefill_tokens
        if inp.prefill is not None:
            b = inp.prefill
            attn.prefill(q[:p], k_cache, v_cache, b.table, b.start, b.qsl, out[:p], b.max_len)
        if inp.decode is not None:
            b = inp.decode
            attn.decode(q[p:], k_cache, v_cache, b.table, b.start, out[p:], b.max_len)
        x = x + torch.matmul(out.view(t, -1), w["o"])
        gate, up = torch.matmul(rms_norm(x, w["norm2"]), w["gate_up"]).chunk(2, dim=-1)
        return x + torch.matmul(F.silu(gate) * up, w["down"])

    def kv_contiguous(self, token_ids: torch.Tensor) -> list[tuple[torch.Tensor, ...]]:
        """Every layer's K and V [n, Hkv, D] for a whole sequence computed at once with
        causal attention over contiguous tensors: no pages, no chunks (the check that the
        paged cache holds what a request's tokens produce)."""
        n = len(token_ids)
        self.rope_tables(n)
        pos = torch.arange(n, device=self.device)
        cos, sin = self._cos[pos], self._sin[pos]
        x = self.embed[token_ids]
        out = []
        for w in self.blocks:
            qkv = torch.matmul(rms_norm(x, w["norm1"]), w["qkv"])
            q, k, v = qkv.split([self.m.q_size, self.m.kv_size, self.m.kv_size], dim=-1)
            q = rope(q.view(n, self.heads, self.d), cos, sin)
            k = rope(k.view(n, self.kv_heads, self.d), cos, sin)
            v = v.reshape(n, self.kv_heads, self.d)
            out.append((k, v))
            a = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                               v.transpose(0, 1)[None], is_causal=True,
                                               enable_gqa=True)
            x = x + torch.matmul(a[0].transpose(0, 1).reshape(n, -1), w["o"])
            gate, up = torch.matmul(rms_norm(x, w["norm2"]), w["gate_up"]).chunk(2, dim=-1)
            x = x + torch.matmul(F.silu(gate) * up, w["down"])
        return out
