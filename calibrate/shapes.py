"""Which shapes a profile times, derived from the model, tensor parallelism and engine knobs.

Per layer on one GPU the step time is made of (see sim/cost/fitted.py):

* the model's GEMMs (QKV, O, gate+up, down) at every token count a step can have, 1 ..
  max_num_batched_tokens, on a log grid, plus the LM head at 1 .. max_num_seqs rows;
* prefill attention over (chunk length q, cached prefix p), and a few batched chunks;
* decode attention over (batch size, context length), capped so one layer's KV fits;
* an all-reduce of the step's activations when tp > 1;
* the fixed cost of an empty step.

The default grid for Llama-3-8B at tp 1 (8192 tokens, 256 sequences) is 208 shapes; each
is called 3 + 10 times (microseconds to a few ms each) after building its tensors, so the
profile should take a minute or two on an H100, mostly Triton compilation and cache set-up
(an estimate: not yet timed on a GPU). ``quick`` is the CI grid (~140 shapes of tiny-2l).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from sim.config.hardware import ModelSpec
from sim.cost.profile import work
from sim.cost.profile.gemms import ELEM_BYTES, model_gemms

# bytes per element by dtype; fp8_block (128x128-block scales) and nvfp4 (4-bit values, one fp8
# scale per 16) are weight formats: their activations stay 16-bit in the byte count


@dataclass(frozen=True)
class Shape:
    """One timed operation. Unused fields stay 0; sizes are per GPU (after tp sharding)."""

    op: str  # gemm | prefill_attn | decode_attn | allreduce | step_overhead
    name: str  # which instance: qkv, o, gate_up, down, lm_head, chunk, batch, empty_step...
    m: int = 0  # GEMM rows (tokens)
    n: int = 0  # GEMM output width (elements)
    k: int = 0  # GEMM input width (elements)
    batch: int = 0  # attention sequences (count)
    q_len: int = 0  # query tokens per sequence (tokens; 1 for decode)
    ctx_len: int = 0  # tokens cached before the query tokens, per sequence (tokens)
    num_heads: int = 0  # query heads on this GPU (count)
    num_kv_heads: int = 0  # KV heads on this GPU (count)
    head_dim: int = 0  # elements per head
    num_gpus: int = 1  # all-reduce group size (count)
    message_bytes: int = 0  # all-reduce message (bytes)
    dtype: str = "bfloat16"  # GEMM / activation dtype
    kv_dtype: str = "bfloat16"  # KV-cache dtype

    def key(self) -> str:
        """Stable identity of the shape: resuming skips rows whose key is already written."""
        vals = asdict(self)
        return "|".join(f"{f.name}={vals[f.name]}" for f in fields(self))

    def work(self) -> tuple[float, float]:
        """(FLOPs, bytes) of this operation (sim/cost/profile/work.py)."""
        e, kv = ELEM_BYTES[self.dtype], ELEM_BYTES[self.kv_dtype]
        if self.op == "gemm":  # fp8 weights multiply 16-bit activations
            f, b = work.gemm_work(self.m, self.n, self.k, max(e, 2), e)
        elif self.op == "prefill_attn":
            f, b = work.prefill_work(self.batch, self.q_len, self.ctx_len, self.num_heads,
                                     self.num_kv_heads, self.head_dim, max(e, 2), kv)
        elif self.op == "decode_attn":
            f, b = work.decode_work(self.batch, self.ctx_len + 1, self.num_heads,
                                    self.num_kv_heads, self.head_dim, max(e, 2), kv)
        elif self.op == "allreduce":
            f, b = 0.0, work.allreduce_wire_bytes(self.message_bytes, self.num_gpus)
        else:
            f, b = 0.0, 0.0
        return float(f), float(b)


@dataclass(frozen=True)
class GridSpec:
    """Grid density. Values beyond the engine limits are dropped."""

    gemm_per_octave: int = 2  # GEMM token counts per doubling
    prefill_q: tuple[int, ...] = tuple(2**i for i in range(4, 15))  # 16 .. 16384
    prefill_prefix: tuple[int, ...] = (0, 512, 2048, 8192, 32768)
    prefill_batches: tuple[int, ...] = (4, 16)  # batched chunks (prefix 0)
    decode_batches: tuple[int, ...] = tuple(2**i for i in range(0, 11))  # 1 .. 1024
    decode_ctx: tuple[int, ...] = (16, 128, 512, 2048, 8192, 32768, 131072)
    decode_max_kv_tokens: int = 1 << 21  # cap on batch x context (one layer's cache)
    allreduce: bool = True  # time all-reduce when tp > 1 (needs torch.distributed)


PRESETS: dict[str, GridSpec] = {
    "default": GridSpec(),
    "quick": GridSpec(gemm_per_octave=3, prefill_q=(16, 32, 64, 128, 256),
                      prefill_prefix=(0, 64, 256, 512),
                      prefill_batches=(4,),
                      decode_batches=(1, 2, 4, 8, 16), decode_ctx=(16, 64, 256, 1024),
                      decode_max_kv_tokens=1 << 13),
}


def log_grid(hi: int, per_octave: int) -> list[int]:
    """Integers 1 .. hi spaced ``per_octave`` per doubling (hi always included)."""
    steps = int(np.ceil(np.log2(max(hi, 1)) * per_octave))
    vals = {int(round(2 ** (i / per_octave))) for i in range(steps + 1)}
    return sorted(v for v in vals | {hi} if 1 <= v <= hi)



def derive_shapes(model: ModelSpec, tp: int = 1, *, max_num_batched_tokens: int = 8192,
                  max_num_seqs: int = 256, max_model_len: int | None = None,
                  grid: GridSpec | None = None, dtype: str = "bfloat16") -> list[Shape]:
    """Every shape to time, cheap ones first (so an interrupted run already has GEMMs)."""
    g = grid or GridSpec()
    max_len = min(max_model_len or model.max_position_embeddings,
                  model.max_position_embeddings)
    heads = dict(num_heads=model.num_attention_heads // tp,
                 num_kv_heads=model.kv_heads_per_gpu(tp), head_dim=model.head_dim,
                 dtype=dtype, kv_dtype=dtype)
    out = [Shape("step_overhead", "empty_step", batch=1, dtype=dtype)]
    for name, (n, k) in model_gemms(model, tp).items():
        top = max_num_seqs if name == "lm_head" else max_num_batched_tokens
        out += [Shape("gemm", name, m=m, n=n, k=k, dtype=dtype)
                for m in log_grid(top, g.gemm_per_octave)]
    for q in (q for q in g.prefill_q if q <= max_num_batched_tokens):
        out += [Shape("prefill_attn", "chunk", batch=1, q_len=q, ctx_len=p, **heads)
                for p in g.prefill_prefix if p + q <= max_len]
        out += [Shape("prefill_attn", "batch", batch=b, q_len=q, **heads)
                for b in g.prefill_batches if b * q <= max_num_batched_tokens]
    for b in (b for b in g.decode_batches if b <= max_num_seqs):
        out += [Shape("decode_attn", "decode", batch=b, q_len=1, ctx_len=c - 1, **heads)
                for c in g.decode_ctx if c <= max_len and b * c <= g.decode_max_kv_tokens]
    if tp > 1 and g.allreduce:
        e = ELEM_BYTES[dtype]
        out += [Shape("allreduce", "hidden", m=t, num_gpus=tp,
                      message_bytes=t * model.hidden_size * e, dtype=dtype)
                for t in log_grid(max_num_batched_tokens, g.gemm_per_octave)]
    return out
