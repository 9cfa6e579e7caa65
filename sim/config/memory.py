"""KV capacity, derived the way vLLM derives it.

    kv_bytes = hbm * gpu_memory_utilization - weights/TP - activation peak - non-torch
    num_gpu_blocks = kv_bytes // (block_size * kv_bytes_per_token)

vLLM measures the activation peak with a dummy forward pass of
``max_num_batched_tokens`` tokens plus a dummy sampler pass over ``max_num_seqs``
requests; we estimate the same two terms from the model's shapes:

* the forward pass: the widest intermediate (gate+up output, 2 * intermediate / TP; a MoE
  layer: top-k x (2 * moe_intermediate / TP + hidden), fused_moe's per-expert caches) plus
  four hidden-size buffers per token, in the activation dtype (16-bit for fp8 weights);

Weights are this GPU's share under TP and, with ``--enable-expert-parallel``, EP = TP x DP
(``ModelSpec.weight_bytes_per_gpu``); data parallelism without EP shards the routed experts
over TP x DP (vLLM's MoE layers form one TP group across the DP ranks). Under data
parallelism every rank holds the full attention of its TP group and its own KV pool, so the
plan is the same on every GPU. A sliding-window model's blocks are sized by its
full-attention layers only (``ModelSpec.kv_bytes_per_token``): the window's few blocks per
request are not reserved.
* the sampler: fp32 logits and probabilities for max_num_seqs x vocab.

``NON_TORCH_BYTES`` stands for the CUDA context, NCCL and allocator slack that
vLLM's profiler reports as non-torch memory (an estimate; vLLM logs show a few
hundred MiB on one GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.config.hardware import GpuSpec, ModelSpec

GIB = 1 << 30
NON_TORCH_BYTES = GIB // 2  # estimate, see module docstring


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU memory budget (bytes) and the resulting KV blocks."""

    usable_bytes: int  # hbm * gpu_memory_utilization
    weight_bytes: int  # this GPU's shard of the weights
    activation_bytes: int  # estimated activation + sampler peak
    non_torch_bytes: int
    kv_bytes: int  # left for the KV cache (may be <= 0: does not fit)
    block_bytes: int  # one KV block on this GPU
    num_gpu_blocks: int  # blocks in the pool, the null block included

    @property
    def usable_blocks(self) -> int:
        """Blocks requests can hold: vLLM keeps block 0 as its null block."""
        return max(0, self.num_gpu_blocks - 1)


def activation_bytes(model: ModelSpec, tp: int, max_tokens: int, max_seqs: int) -> int:
    widest = 2 * model.intermediate_size // tp if model.num_dense_layers else 0
    if model.is_moe:  # fused_moe's caches: gate+up and the output of every (token, expert)
        k, inter = model.num_experts_per_tok, model.moe_intermediate_size
        widest = max(widest, k * (2 * inter // tp + model.hidden_size))
    per_token = (widest + 4 * model.hidden_size) * model.act_bytes
    sampler = 2 * 4 * max_seqs * model.vocab_size // tp
    return max_tokens * per_token + sampler


def plan_memory(model: ModelSpec, gpu: GpuSpec, tp: int, *, ep: int = 1, block_size: int,
                utilization: float, max_tokens: int, max_seqs: int,
                blocks_override: int | None, moe_tp: int | None = None,
                drafter: tuple[int, int] = (0, 0)) -> MemoryPlan:
    """``drafter``: a speculative-decoding drafter's (weight bytes, KV bytes per token) on
    this GPU (SpeculativeConfig.drafter_bytes); its KV shares the target's blocks."""
    usable = int(gpu.hbm_bytes * utilization)
    weights = model.weight_bytes_per_gpu(tp, ep, moe_tp) + drafter[0]
    per_token = model.kv_bytes_per_token(tp) + drafter[1]
    act = activation_bytes(model, tp, max_tokens, max_seqs)
    kv = usable - weights - act - NON_TORCH_BYTES
    block = block_size * per_token
    blocks = blocks_override if blocks_override is not None else max(0, kv // block)
    return MemoryPlan(usable, weights, act, NON_TORCH_BYTES, kv, block, blocks)
