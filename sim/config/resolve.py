"""Resolve a scenario: fill vLLM's defaults, derive KV capacity, reject the impossible.

Everything here is a pure function of the scenario; the result is frozen.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.catalog import CatalogError
from sim.config.hardware import GpuSpec, ModelSpec
from sim.config.limits import MAX_KV_BLOCKS
from sim.config.memory import GIB, MemoryPlan, plan_memory
from sim.config.scenario import CostChoice, Scenario
from sim.config.speculative import ASYNC_METHODS
from sim.sched.base import SchedulerLimits
from traces.errors import InputError


class ConfigError(InputError):
    """A scenario that validates field by field but cannot run as a whole."""


@dataclass(frozen=True)
class Resolved:
    scenario: Scenario
    model: ModelSpec
    gpu: GpuSpec
    tp: int
    limits: SchedulerLimits
    block_size: int
    memory: MemoryPlan

    @property
    def dp(self) -> int:
        """Data-parallel ranks of the server (count)."""
        return self.scenario.data_parallel_size

    @property
    def ep(self) -> int:
        """Expert-parallel ranks: tp x dp under --enable-expert-parallel on a MoE model, else 1."""
        on = self.scenario.enable_expert_parallel and self.model.is_moe
        return self.tp * self.dp if on else 1

    @property
    def gpus(self) -> int:
        """GPUs of one server: tp x dp (count)."""
        return self.tp * self.dp

    @property
    def cuda_graph_max_tokens(self) -> int:
        """The largest step (tokens) vLLM runs from a captured CUDA graph; a step with more
        runs eager (0 under --enforce-eager). vLLM 0.32's default (vllm/config/vllm.py
        _set_cudagraph_sizes, 2354-2437): min(2 x max_num_seqs x (1 + num_speculative_tokens),
        1,024 on data-center Blackwell (compute capability 10.x, vLLM PR 49390) else 512),
        and never above max_num_batched_tokens."""
        e = self.scenario.engine
        if e.enforce_eager:
            return 0
        cap = e.max_cudagraph_capture_size
        if cap is None:
            spec = e.speculative_config
            query = 1 + (spec.num_speculative_tokens if spec is not None else 0)
            ceiling = 1024 if self.gpu.datacenter_blackwell else 512
            cap = min(2 * self.limits.max_num_seqs * query, ceiling)
        return min(cap, self.limits.max_num_batched_tokens)

    @property
    def kv_capacity_tokens(self) -> int:
        return self.memory.usable_blocks * self.block_size

    def derived(self) -> dict:
        """Derived values for reports and `scenario show` (units in the keys)."""
        m, lim = self.memory, self.limits
        return {
            "max_num_seqs": lim.max_num_seqs,
            "max_num_batched_tokens": lim.max_num_batched_tokens,
            "max_model_len": lim.max_model_len,
            "enable_chunked_prefill": lim.enable_chunked_prefill,
            # engine.enable_prefix_caching unset stays null in the scenario (a --set of
            # another scheduler or KV policy re-derives it); what this run uses:
            "enable_prefix_caching": self.scenario.prefix_caching,
            "block_size": self.block_size,  # engine.block_size unset: vLLM's choice
            "weights_gib_per_gpu": round(m.weight_bytes / GIB, 3),
            "activation_reserve_gib": round((m.activation_bytes + m.non_torch_bytes) / GIB, 3),
            "kv_cache_gib_per_gpu": round(max(m.kv_bytes, 0) / GIB, 3),
            "kv_bytes_per_token_per_gpu": m.block_bytes // self.block_size,
            "kv_block_bytes": m.block_bytes,
            "num_gpu_blocks": m.num_gpu_blocks,
            "usable_kv_blocks": m.usable_blocks,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "model_params_b": round(self.model.num_params / 1e9, 3),
            **self.model_plan(),
            **self._drafter_plan(),
        }

    def _drafter_plan(self) -> dict:
        """The speculative drafter's share of the memory plan (empty without one)."""
        spec = self.scenario.engine.speculative_config
        d = _drafter(self.scenario, self.model) if spec is not None else None
        if d is None:
            return {}
        w, kv = spec.drafter_bytes(self.model, self.tp, self.ep,
                                   self.gpus if self.ep == 1 else None)
        return {"drafter": d.name, "drafter_weights_gib_per_gpu": round(w / GIB, 3),
                "drafter_kv_bytes_per_token_per_gpu": kv}

    def model_plan(self) -> dict:
        """The MoE / parallel layout behind the memory plan (empty for a dense model on one
        rank): what `scenario show` prints for a MoE model, per GPU."""
        m, out = self.model, {}
        if m.is_moe or self.dp > 1:
            out = {"model_active_params_b": round(m.active_params / 1e9, 3),
                   "gpus_per_server": self.gpus, "data_parallel_size": self.dp,
                   "expert_parallel_size": self.ep}
        if m.is_moe:
            local = -(-m.num_experts // self.ep) if self.ep > 1 else m.num_experts
            out.update(experts_per_gpu=local, expert_shard=(
                "whole experts" if self.ep > 1 else f"1/{self.gpus} of each expert"),
                moe_layers=m.num_moe_layers, dense_layers=m.num_dense_layers)
        if m.sliding_window:
            out.update(sliding_window_tokens=m.sliding_window,
                       sliding_layers=m.num_sliding_layers,
                       kv_bytes_per_max_len_seq_per_gpu=m.kv_bytes_per_sequence(
                           self.limits.max_model_len, self.tp))
        return out


def _big_gpu(gpu: GpuSpec) -> bool:
    # vLLM: "GPUs like H100 and MI300x" get larger defaults; A100 is excluded on purpose
    return gpu.hbm_bytes >= 70 * GIB and "a100" not in gpu.name.lower()


def default_batched_tokens(gpu: GpuSpec) -> int:
    """vLLM 0.32's API-server token budget for the GPU (vllm/engine/arg_utils.py:2922-2948):
    16,384 from 160 GiB (B200, B300; PR 51726, August 2026), 8,192 on the other GPUs of 70 GiB
    or more but A100, else 2,048."""
    if gpu.hbm_bytes >= 160 * GIB:
        return 16384
    return 8192 if _big_gpu(gpu) else 2048


def unset_budget(default: int, seqs: int, max_len: int, chunked: bool) -> int:
    """An unset max_num_batched_tokens as vLLM derives it from its ``default`` for the GPU:
    with chunked prefill off at least max_model_len, at most max_num_seqs x max_model_len."""
    tokens = default if chunked else max(max_len, default)
    return min(seqs * max_len, tokens)


def _limits(sc: Scenario, model: ModelSpec, gpu: GpuSpec) -> SchedulerLimits:
    """vLLM's defaults and refusals for the token budget and sequence cap.

    vllm/engine/arg_utils.py:3097-3185: an unset max_num_seqs is the API server's default
    capped at max_num_batched_tokens; an unset max_num_batched_tokens is the default (with
    chunked prefill off, at least max_model_len) capped at max_num_seqs * max_model_len.
    """
    e = sc.engine
    max_len = e.max_model_len or model.max_position_embeddings
    if max_len > model.max_position_embeddings:
        raise ConfigError(
            f"engine.max_model_len {max_len} exceeds {model.name}'s context of "
            f"{model.max_position_embeddings} tokens")
    big = _big_gpu(gpu)
    seqs = e.max_num_seqs or (1024 if big else 256)
    if e.max_num_batched_tokens:
        tokens = e.max_num_batched_tokens
    else:
        tokens = unset_budget(default_batched_tokens(gpu), seqs, max_len,
                              e.enable_chunked_prefill)
    if e.max_num_seqs is None:
        seqs = min(seqs, tokens)
    _check_limits(e, seqs, tokens, max_len)
    return SchedulerLimits(
        max_num_seqs=seqs, max_num_batched_tokens=tokens, max_model_len=max_len,
        enable_chunked_prefill=e.enable_chunked_prefill,
        long_prefill_token_threshold=e.long_prefill_token_threshold,
        scheduler_reserve_full_isl=e.scheduler_reserve_full_isl,
        long_prefill_token_threshold_adaptive=e.long_prefill_token_threshold_adaptive)


def _check_limits(e, seqs: int, tokens: int, max_len: int) -> None:
    """vLLM's own refusals (vllm/config/scheduler.py:315-357, verify_max_model_len)."""
    if not e.enable_chunked_prefill and tokens < max_len:  # scheduler.py:316
        raise ConfigError(
            f"engine.max_num_batched_tokens ({tokens}) is smaller than max_model_len "
            f"({max_len}) with chunked prefill off: long prompts could never be scheduled; "
            "raise max_num_batched_tokens, lower max_model_len or enable chunked prefill")
    if tokens < seqs:  # scheduler.py:328
        raise ConfigError(
            f"engine.max_num_batched_tokens ({tokens}) must be >= max_num_seqs ({seqs}), as "
            "vLLM requires: every running request needs a token of the step budget")
    if e.long_prefill_token_threshold > max_len:  # scheduler.py:352
        raise ConfigError(
            f"engine.long_prefill_token_threshold ({e.long_prefill_token_threshold}) cannot "
            f"exceed max_model_len ({max_len}), as vLLM requires")


def _check_parallel(model: ModelSpec, tp: int) -> None:
    if model.num_attention_heads % tp:
        raise ConfigError(
            f"tensor_parallel_size {tp} must divide {model.name}'s "
            f"{model.num_attention_heads} attention heads")
    if model.num_kv_heads % tp and tp % model.num_kv_heads:
        raise ConfigError(
            f"tensor_parallel_size {tp} and {model.name}'s {model.num_kv_heads} KV heads: "
            "one must divide the other")


def default_block_size(model: ModelSpec, gpu: GpuSpec) -> int:
    """vLLM 0.32's KV block size when --block-size is not given: the preferred size of the
    attention backend it picks (vllm/platforms/interface.py _preferred_block_size_for_backends:
    16 where the backend takes it, else its smallest). MLA on data-center Blackwell runs
    FlashInfer MLA first (vllm/platforms/cuda.py _get_backend_priorities), which takes 32 or
    64; the CPU backend takes multiples of 32 (vllm/v1/attention/backends/cpu_attn.py);
    Hopper's FlashAttention MLA and every dense backend take 16. An fp8 KV cache rules
    FlashAttention MLA out (auto / float16 / bfloat16 only, v1/attention/backends/mla/
    flashattn_mla.py:42-47), so MLA on Hopper then runs FlashMLA, which takes 64 only
    (flashmla.py:58-59)."""
    if gpu.platform == "cpu":
        return 32
    if model.is_mla and gpu.datacenter_blackwell:
        return 32
    if model.is_mla and gpu.hopper and model.kv_bytes == 1:
        return 64
    return 16



def _check_memory(sc: Scenario, model, gpu, tp, mem: MemoryPlan, limits, block_size: int,
                  drafter: int = 0) -> None:
    """``block_size``: the resolved one (tokens); ``drafter``: the speculative drafter's
    weight bytes per GPU (in ``mem``'s weights)."""
    util = sc.engine.gpu_memory_utilization
    if sc.engine.num_gpu_blocks_override is None and mem.kv_bytes <= 0:
        need = (mem.weight_bytes + mem.activation_bytes + mem.non_torch_bytes) / GIB
        named = (f"model {model.name} with its {sc.engine.speculative_config.method} drafter "
                 f"(engine.speculative_config: {drafter / GIB:.1f} GiB of the weights)"
                 if drafter else f"model {model.name}")
        raise ConfigError(
            f"{named} does not fit {gpu.name} at tensor_parallel_size {tp}: "
            f"weights {mem.weight_bytes / GIB:.1f} GiB + activations "
            f"{(mem.activation_bytes + mem.non_torch_bytes) / GIB:.1f} GiB = {need:.1f} GiB per "
            f"GPU > {mem.usable_bytes / GIB:.1f} GiB usable at engine.gpu_memory_utilization "
            f"{util}; "
            "raise tensor_parallel_size or use a larger GPU")
    if mem.num_gpu_blocks > MAX_KV_BLOCKS:
        raise ConfigError(
            f"the KV cache would have {mem.num_gpu_blocks:,} blocks of {block_size} "
            f"tokens ({mem.kv_bytes / GIB:,.1f} GiB at {mem.block_bytes:,} bytes per block), "
            f"more than the {MAX_KV_BLOCKS:,} the simulator holds; check the model and GPU "
            "figures, raise engine.block_size or set engine.num_gpu_blocks_override")
    per_seq = -(-limits.max_model_len // block_size)
    if per_seq > mem.usable_blocks:
        # an override fixes the pool whatever the memory: name it (and its --set)
        override = sc.engine.num_gpu_blocks_override
        more = ("give the KV cache more memory" if override is None else
                f"raise engine.num_gpu_blocks_override ({override} blocks, one of them vLLM's "
                "null block)")
        raise ConfigError(
            f"one request of max_model_len {limits.max_model_len} tokens needs {per_seq} KV "
            f"blocks but only {mem.usable_blocks} fit ({mem.usable_blocks * block_size}"
            f" tokens); lower engine.max_model_len or {more}")


def resolve(sc: Scenario) -> Resolved:
    """Derive everything a run needs from a scenario; ConfigError if it cannot run."""
    model, gpu, tp = sc.model_spec, sc.gpu_spec, sc.tensor_parallel_size
    _check_parallel(model, tp)
    limits = _limits(sc, model, gpu)
    sc, limits = sc.scheduler.cls.resolve_defaults(sc, limits)  # e.g. vLLM v0's for prefill-first
    if sc.engine.async_scheduling is None:  # vLLM's default for the platform
        sc = sc.model_copy(update={"engine": sc.engine.model_copy(
            update={"async_scheduling": async_default(sc, gpu)})})
    ep = tp * sc.data_parallel_size if sc.enable_expert_parallel and model.is_moe else 1
    moe_tp = tp * sc.data_parallel_size if ep == 1 else None  # experts over the DP group
    drafter = _drafter_bytes(sc, model, tp, ep, moe_tp)
    block_size = sc.engine.block_size or default_block_size(model, gpu)
    mem = plan_memory(model, gpu, tp, ep=ep, moe_tp=moe_tp, block_size=block_size,
                      utilization=sc.engine.gpu_memory_utilization,
                      max_tokens=limits.max_num_batched_tokens, max_seqs=limits.max_num_seqs,
                      blocks_override=sc.engine.num_gpu_blocks_override, drafter=drafter)
    _check_memory(sc, model, gpu, tp, mem, limits, block_size, drafter[0])
    try:  # the policy's own refusals, here so that they name the file or --set at fault
        sc.scheduler.cls.check_resolved(sc.scheduler.params, limits, mem.usable_blocks,
                                        block_size)
    except InputError as e:
        raise ConfigError(str(e)) from None
    if sc.cost is None:  # the per-GPU default step-time model
        sc = sc.model_copy(update={"cost": default_cost(gpu)})
    return Resolved(sc, model, gpu, tp, limits, block_size, mem)


def _drafter(sc: Scenario, model: ModelSpec) -> ModelSpec | None:
    spec = sc.engine.speculative_config
    if spec is None:
        return None
    try:
        return spec.drafter_spec(model)
    except CatalogError as e:
        raise ConfigError(f"engine.speculative_config.model: {e}") from None


def _drafter_bytes(sc: Scenario, model: ModelSpec, tp: int, ep: int,
                   moe_tp: int | None) -> tuple[int, int]:
    if _drafter(sc, model) is None:
        return 0, 0
    return sc.engine.speculative_config.drafter_bytes(model, tp, ep, moe_tp)


def async_default(sc: Scenario, gpu: GpuSpec) -> bool:
    """vLLM 0.32's --async-scheduling default: on for CUDA (vllm/config/vllm.py:1585-1644
    turns it on where the platform and configuration support it: not the CPU backend,
    pipeline parallelism in the V1 runner, or a speculative method that drafts on the host,
    ``ngram``), for the vLLM v1 schedulers servesim models as vLLM (lanes included: a vLLM
    server with a router's lanes; lanes with drafts stay synchronous) with recompute
    preemption."""
    spec = sc.engine.speculative_config
    return (gpu.platform == "cuda"
            and sc.scheduler.name in ("vllm", "vllm-priority", "lanes")
            and sc.engine.preemption_mode == "recompute" and sc.kv.name.lower() == "paged"
            and (spec is None or (spec.method in ASYNC_METHODS
                                  and sc.scheduler.name != "lanes")))


def default_cost(gpu: GpuSpec) -> CostChoice:
    """``fitted`` with the shipped ``<gpu>/vllm`` profile when one exists, else ``roofline``."""
    from sim.cost.fitted import default_profile

    profile = default_profile(gpu.name)
    return CostChoice(name="fitted", profile=profile) if profile else CostChoice(name="roofline")
