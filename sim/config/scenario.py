"""The scenario: one validated tree describing a what-if run.

    name, description, seed, horizon_s
    model        catalog name or explicit ModelSpec
    gpu          catalog name or explicit GpuSpec
    tensor_parallel_size, data_parallel_size, enable_expert_parallel
    engine       vLLM's knobs, names and defaults
    scheduler    {name: vllm, ...params}
    kv           {name: paged, ...params}
    cost         {name: fitted|roofline|..., ...params}; unset: fitted if shipped for the GPU
    workload     trace file or synthetic spec (traces.spec.WorkloadSpec)
    slo          latency budgets for goodput and the verdict
    gpu_hour_price  price per GPU-hour (capacity's cost per million tokens, per 1k requests)
    cluster      replicas behind a router, pools, prefill/decode split (sim.fleet.config)

Every field states its unit. The tree is frozen: derived values (KV capacity,
resolved defaults) live in ``sim.config.resolve``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, PositiveInt, field_validator, model_validator

import sim.cost  # noqa: F401  (registers cost models)
import sim.kv  # noqa: F401  (registers KV policies)
import sim.sched  # noqa: F401  (registers schedulers)
from sim.catalog import CatalogError, get_gpu, get_model
from sim.config.choice import RegistryChoice
from sim.config.hardware import GpuSpec, ModelSpec
from sim.config.limits import (
    MAX_GPUS,
    MAX_KV_BLOCKS,
    MAX_SEED,
    MAX_SEQS,
    MAX_TIME_S,
    MAX_TOKENS,
    TIME_WHY,
    TOKENS_WHY,
    why,
)
from sim.config.speculative import ASYNC_METHODS, SpeculativeConfig
from sim.cost.base import COST_MODELS
from sim.cost.moe import BACKENDS
from sim.fleet.config import ClusterConfig
from sim.kv.base import KV_POLICIES
from sim.sched.admission import ADMISSION_RULES
from sim.sched.base import SCHEDULERS
from traces.spec import WorkloadSpec
from traces.validated import Validated

MoeBackend = Literal[BACKENDS]  # vLLM's --moe-backend values a profile can price

_STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
# vLLM 0.32 on CUDA: every attention backend for a dense model needs a multiple of 16
# (vllm/v1/attention/backends/flash_attn.py:365, triton_attn.py:316, flex_attention.py:154;
# flashinfer.py:478-479: 16, 32, 64, up to 1024 on Blackwell); with none left,
# vllm/platforms/cuda.py:469 raises "No valid attention backend found".
BLOCK_MULTIPLE, BLOCK_MAX = 16, 1024


class EngineConfig(Validated):
    """vLLM engine arguments (same names; None = vLLM's default for this GPU)."""

    model_config = _STRICT

    block_size: PositiveInt | None = Field(
        None, le=BLOCK_MAX, description="Token slots per KV block (tokens); a multiple of 16 "
        "(vLLM's CUDA attention backends). None: vLLM 0.32's choice for the attention "
        "backend it picks: 32 for an MLA model on data-center Blackwell (FlashInfer MLA "
        "takes 32 or 64) and on the cpu platform (multiples of 32), else 16.",
        json_schema_extra=why("the largest KV page any vLLM kernel offers (FlashInfer)"))
    gpu_memory_utilization: float = Field(
        0.9, gt=0, le=1, description="Fraction of GPU memory vLLM may use (fraction)."
    )
    max_num_seqs: PositiveInt | None = Field(
        None, le=MAX_SEQS, json_schema_extra=why("a million concurrent requests is beyond "
                                                 "any replica's KV cache", "requests"),
        description="Most requests running at once (requests). Default as vLLM's API "
        "server: 1024 on GPUs with >= 70 GiB other than A100, else 256, at most "
        "max_num_batched_tokens. vLLM refuses a budget below it.",
    )
    max_num_batched_tokens: PositiveInt | None = Field(
        None, le=MAX_TOKENS, json_schema_extra=why(TOKENS_WHY, "tokens"),
        description="Token budget of one step (tokens). Default as vLLM's API server: "
        "16384 on GPUs with >= 160 GiB (B200, B300), 8192 on the others with >= 70 GiB "
        "other than A100, else 2048; with chunked prefill off, "
        "max(max_model_len, that); at most max_num_seqs x max_model_len.",
    )
    enable_chunked_prefill: bool = Field(
        True, description="Split prompts across steps to fit the token budget (vLLM v1: on)."
    )
    long_prefill_token_threshold: int = Field(
        0, ge=0, le=MAX_TOKENS, json_schema_extra=why(TOKENS_WHY, "tokens"),
        description="Cap on one request's tokens per step while more than one "
        "request is running or waiting (a lone request may use the whole budget); 0 = no cap "
        "(tokens).",
    )
    long_prefill_token_threshold_adaptive: bool = Field(
        False, description="Floor long_prefill_token_threshold at max_num_batched_tokens // "
        "(running + waiting requests), a fair share of the budget (vLLM 0.32; off by default).",
    )
    scheduler_reserve_full_isl: bool = Field(
        True, description="Admit a waiting or preempted request only when KV blocks for all "
        "its tokens (prompt + output so far) are free, although only its first chunk is "
        "allocated (vLLM 0.32's default). Off: only the first chunk's blocks must be free.",
    )
    max_model_len: PositiveInt | None = Field(
        None, le=MAX_TOKENS, json_schema_extra=why(TOKENS_WHY, "tokens"),
        description="Longest prompt + output served (tokens); default: the model's "
        "context length. A prompt >= max_model_len is rejected; a longer prompt + output has "
        "its output shortened to fit, as vLLM's OpenAI server does (see strict_max_model_len).",
    )
    strict_max_model_len: bool = Field(
        False, description="Reject every request whose prompt + output exceeds max_model_len "
        "(servesim's earlier rule). Off: as vLLM's OpenAI server, shorten max_tokens to "
        "max_model_len - prompt (counted in summary requests.shortened).",
    )
    num_gpu_blocks_override: PositiveInt | None = Field(
        None, le=MAX_KV_BLOCKS, json_schema_extra=why(
            "the simulator's block pool would need gigabytes of memory", "blocks"),
        description="Use this many KV blocks instead of deriving them from memory "
        "(blocks; one is vLLM's null block, so N - 1 are usable).",
    )
    enable_prefix_caching: bool | None = Field(
        None, description="Reuse KV blocks of identical prompt prefixes (vLLM's automatic "
        "prefix caching; hits need prefix hashes in the trace or a shared_prefix workload, "
        "otherwise it only changes what a recompute-preempted request finds again). Unset: "
        "vLLM's default, on for paged KV with the vLLM v1 schedulers and recompute "
        "preemption (vLLM v1 turns it on, vllm/config/cache.py CacheConfig), off otherwise "
        "(other KV policies; the v0-era schedulers and swap preemption, as vLLM v0 had it).",
    )
    preemption_mode: Literal["recompute", "swap"] = Field(
        "recompute", description="What preemption does with the victim's KV: recompute (vLLM "
        "v1: drop it, recompute later) or swap (vLLM v0: copy it to host memory and back, "
        "charged to the step at the GPU's host_bandwidth; see swap_space_full).",
    )
    swap_space: float = Field(
        4.0, ge=0, le=4096, json_schema_extra=why("more host memory per GPU than any server "
                                                  "has", "GiB"),
        description="Host memory for swapped-out KV, per GPU (GiB; vLLM v0's --swap-space "
        "default 4; vLLM 0.32 has no swap). Used by preemption_mode swap.",
    )
    swap_space_full: Literal["stop_engine", "abort_request", "recompute"] = Field(
        "stop_engine", description="A swap victim that does not fit swap_space: stop_engine "
        "(vLLM v0 raises 'Aborted due to the lack of CPU swap space' and the engine stops; "
        "every unfinished request is aborted; in a fleet, that replica fails what is routed "
        "to it later), abort_request (only the victim is aborted) or recompute (the victim "
        "is recomputed; not what vLLM does). A failed request answers its client at once: a "
        "closed loop's client sends its next.",
    )
    async_scheduling: bool | None = Field(
        None, description="vLLM's --async-scheduling: the scheduler plans the next step while "
        "the current one runs, so a request arriving during a step is first scheduled one "
        "step later than without it (vllm/v1/engine/core.py step_with_batch_queue, two "
        "batches in flight), the KV its finishes free reaches the scheduler one step later, "
        "and with a fitted profile the host's schedule time overlaps the kernels; conformed "
        "step for step to vLLM 0.32's AsyncScheduler (the async_* conformance cases). Unset: "
        "vLLM 0.32's default, on for a cuda GPU with a vLLM v1 scheduler (vllm, "
        "vllm-priority, lanes) and recompute preemption, except speculative decoding by "
        "ngram (drafted on the host; vLLM refuses async with it) and lanes with drafts; off "
        "on the cpu platform and for the other policies.",
    )
    speculative_config: SpeculativeConfig | None = Field(
        None, description="vLLM's --speculative-config: draft K tokens per decoding request "
        "and verify them in the next step (method, num_speculative_tokens, model: vLLM's "
        "keys), with servesim's acceptance process (acceptance_rates or "
        "acceptance_histogram, seeded). Unset: off, as vLLM. Runs on the general engine; "
        "with async_scheduling as vLLM's AsyncScheduler does (vllm and vllm-priority).",
    )
    enforce_eager: bool = Field(
        False, description="vLLM's --enforce-eager: no CUDA graphs, so every step's kernels "
        "are launched one by one from the host (priced by the fitted cost model's "
        "eager_per_layer_ms and eager_moe_per_layer_ms).",
    )
    max_cudagraph_capture_size: int | None = Field(
        None, ge=0, le=MAX_TOKENS, json_schema_extra=why(TOKENS_WHY, "tokens"),
        description="vLLM's --max-cudagraph-capture-size: the largest step (tokens) run from "
        "a captured CUDA graph; a step with more runs eager. Unset: vLLM 0.32's default, "
        "min(2 x max_num_seqs x (1 + num_speculative_tokens), 1024 on data-center Blackwell "
        "(gpu.compute_capability 10.x) else 512), at most max_num_batched_tokens "
        "(vllm/config/vllm.py, _set_cudagraph_sizes); the emitted flags leave it to vLLM "
        "(an explicit value stops vLLM adding its uniform-decode sizes).",
    )
    moe_backend: MoeBackend = Field(
        "auto", description="vLLM's --moe-backend: the kernels of a mixture-of-experts "
        "layer (triton, flashinfer_trtllm, flashinfer_cutlass, marlin, deep_gemm, cutlass). "
        "auto: vLLM chooses; the fitted cost model then prices the kernel aiconfigurator "
        "measured most for the shape. A named one is priced from its own timing where the "
        "profile has it (sim/cost/moe.py). Dense models ignore it.",
    )
    moe_activation: Literal["auto", "mxfp8"] = Field(
        "auto", description="The activations of an mxfp4 checkpoint's experts: mxfp8 is "
        "vLLM's --quantization-config '{\"moe\": {\"activation\": \"mxfp8\"}}' (before "
        "0.2x VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1): FlashInfer TRT-LLM's mxfp4 x mxfp8 "
        "kernel on Blackwell, priced from the profile's w4a8_mxfp4_mxfp8 curves; auto: the "
        "checkpoint's (bf16 for gpt-oss). Only mxfp4 experts take it.",
    )
    ingress_ms: float | None = Field(
        None, ge=0, le=60_000, description="A request becomes visible to the scheduler this "
        "long after the client sends it (ms). None: the cost profile's fitted value (fit-steps "
        "from a recorded engine run), else 0. Reported arrival stays the client's send time.",
    )
    egress_ms: float | None = Field(
        None, ge=0, le=60_000, description="A token reaches the client this long after the "
        "step that made it ends (ms). None: the cost profile's fitted value, else 0. Added to "
        "the first-token, token and finish times reported.",
    )
    ingress_per_token_us: float | None = Field(
        None, ge=0, le=1000, description="Plus this per prompt token (us): the API server's "
        "work on a text prompt before the engine sees it (tokenizing it, building and sending "
        "the request), which grows with its length. None: the cost profile's value "
        "(frontend_us_per_token: 12 in the shipped GPU profiles, vLLM's Python API server "
        "fitted on NVIDIA's measured deployments, NOTES.md), else 0; 0 for a client that "
        "sends token IDs or a frontend that tokenizes elsewhere. Requests still reach the "
        "scheduler in the order sent.",
    )
    ingress_serial: bool = Field(
        True, description="The per-token part of the ingress is one worker's (true/false): "
        "a request's prompt is tokenized only after the ones sent before it, so a burst of "
        "prompts queues, as vLLM's API server tokenizes in one thread (--renderer-num-workers "
        "1, its default; one single-thread executor since vLLM PR 34789, the event loop "
        "before). false: each prompt's time runs beside the others' (several API servers "
        "or tokenizer threads).",
    )


    @field_validator("block_size")
    @classmethod
    def _vllm_block_size(cls, v: int | None) -> int | None:
        if v is not None and v % BLOCK_MULTIPLE:
            raise ValueError(
                f"must be a multiple of {BLOCK_MULTIPLE} tokens (got {v}): vLLM 0.32's CUDA "
                "attention backends (FlashAttention, FlashInfer, Triton) refuse other sizes "
                "('No valid attention backend found')")
        return v


class SchedulerChoice(RegistryChoice):
    registry = SCHEDULERS
    name: str = Field("vllm", description="Scheduling policy (see `servesim policies`).")


class KVChoice(RegistryChoice):
    registry = KV_POLICIES
    name: str = Field("paged", description="KV memory policy (see `servesim policies`).")


class AdmissionChoice(RegistryChoice):
    registry = ADMISSION_RULES
    name: str = Field("optimistic", description="Admission rule (see `servesim policies`).")


class CostChoice(RegistryChoice):
    registry = COST_MODELS
    name: str = Field("roofline", description="Step-time model (see `servesim policies`).")


class SloConfig(Validated):
    """Latency budgets, as `vllm bench serve --goodput` (ms), and the verdict percentile."""

    model_config = _STRICT

    ttft_ms: float | None = Field(500.0, gt=0, le=MAX_TIME_S * 1e3, json_schema_extra=why(
        TIME_WHY), description="Time-to-first-token budget (ms).")
    tpot_ms: float | None = Field(50.0, gt=0, le=MAX_TIME_S * 1e3, json_schema_extra=why(
        TIME_WHY), description="Time-per-output-token budget (ms).")
    e2el_ms: float | None = Field(None, gt=0, le=MAX_TIME_S * 1e3, json_schema_extra=why(
        TIME_WHY), description="End-to-end latency budget (ms).")
    percentile: float = Field(
        95.0, gt=0, le=100, description="Percentile the verdict checks against each budget (%)."
    )


class Scenario(Validated):
    """A complete what-if scenario."""

    model_config = _STRICT

    name: str = Field("scenario", description="Name shown in reports.")
    description: str = Field("", description="Free text shown in reports.")
    seed: int = Field(0, ge=0, le=MAX_SEED, json_schema_extra=why("a 64-bit seed", ""),
                      description="The one seed every random stream derives from.")
    horizon_s: float | None = Field(
        None, gt=0, le=MAX_TIME_S, json_schema_extra=why(TIME_WHY, "s"),
        description="Stop simulating at this time (s); requests arriving later "
        "are not sent, unfinished ones are reported. None: run until all finish (a safety "
        "limit ends runaway overloaded runs and marks them unstable).",
    )
    model: str | ModelSpec = Field(description="Catalog model name or an explicit model.")
    gpu: str | GpuSpec = Field(description="Catalog GPU name or an explicit GPU.")
    tensor_parallel_size: PositiveInt = Field(
        1, le=MAX_GPUS, json_schema_extra=why("no replica shards over more GPUs", "GPUs"),
        description="GPUs per replica (count).")
    data_parallel_size: PositiveInt = Field(
        1, le=MAX_GPUS, json_schema_extra=why("no server runs more engine replicas", "ranks"),
        description="vLLM's --data-parallel-size: engine ranks in one server, each with its "
        "own scheduler and KV cache on tensor_parallel_size GPUs (count; vLLM allows it for "
        "dense models too). The memory plan is per GPU; servesim steps one engine for the DP "
        "group: the workload goes to one rank's scheduler and KV pool (give it one rank's "
        "share, rate / data_parallel_size), the other ranks assumed to step in lockstep with "
        "equal batches, as vLLM's MoE DP engines do.")
    enable_expert_parallel: bool = Field(
        False, description="vLLM's --enable-expert-parallel: a MoE layer's routed experts are "
        "split whole across EP = tensor_parallel_size x data_parallel_size GPUs (ceil("
        "num_experts / EP) per GPU) instead of TP-sharded; attention, dense layers and shared "
        "experts stay TP-sharded within each DP rank (attention data parallelism). No effect "
        "on a dense model.")
    engine: EngineConfig = Field(default_factory=EngineConfig,
                                 description="vLLM engine arguments (vLLM's names).")
    scheduler: SchedulerChoice = Field(default_factory=lambda: SchedulerChoice(name="vllm"),
                                       description="Scheduling policy and its parameters.")
    kv: KVChoice = Field(default_factory=lambda: KVChoice(name="paged"),
                         description="KV memory policy and its parameters.")
    admission: AdmissionChoice = Field(
        default_factory=lambda: AdmissionChoice(name="optimistic"),
        description="Admission rule for waiting requests and its parameters.")
    cost: CostChoice | None = Field(
        None, description="Step-time model and its parameters. Unset: `fitted` with the "
        "shipped `<gpu>/vllm` profile when one exists for the GPU, else `roofline`; "
        "parameters given without a name (`--set cost.moe_reach=0.25`) are that default's.")
    workload: WorkloadSpec = Field(description="Where requests come from.")
    slo: SloConfig = Field(default_factory=SloConfig,
                           description="Latency budgets for goodput and the SLO verdict.")
    gpu_hour_price: float | None = Field(
        None, gt=0, description="Price of one GPU for one hour (currency units per GPU-hour, "
        "e.g. USD); `servesim capacity` reports cost per million output tokens, per million "
        "prompt + output tokens and per thousand requests with it.")
    core: Literal["auto", "general", "fast"] = Field(
        "auto", description="Simulation core. auto: the fast core (sim/fast) when it runs "
        "the scenario (the vllm, vllm-priority, lanes or orca scheduler, or prefill-first, "
        "sarathi or static without prefix caching and with optimistic admission; one "
        "replica or a fleet; optimistic or reserve "
        "admission, paged KV with or without prefix caching or KV reserved up front "
        "(contiguous-max, contiguous-exact; not with lanes or reserve admission), recompute "
        "or swap preemption (swap with vllm, vllm-priority or prefill-first and paged KV), "
        "async scheduling or "
        "not, open-loop or gated arrivals (closed loops, concurrency caps), any cost model "
        "but live mode: fitted, roofline, linear), else the general engine; "
        "general: always the general engine; fast: the fast core, or an error naming what "
        "it does not run. Both give the same results.")
    cluster: ClusterConfig | None = Field(
        None, description="Several replicas behind a router, named pools or a prefill/decode "
        "split (sim.fleet); unset: one replica.")

    @field_validator("model")
    @classmethod
    def _known_model(cls, v):
        if isinstance(v, str):
            try:
                get_model(v)
            except CatalogError as e:
                raise ValueError(str(e)) from None
        return v

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, v):
        if isinstance(v, str):
            try:
                get_gpu(v)
            except CatalogError as e:
                raise ValueError(str(e)) from None
        return v

    @model_validator(mode="after")
    def _speculative_supported(self):
        spec = self.engine.speculative_config
        if spec is None:
            return self
        if self.engine.async_scheduling is True and self.scheduler.name == "lanes":
            raise ValueError("engine.speculative_config with engine.async_scheduling runs the "
                             "vllm and vllm-priority schedulers (lanes: turn one off)")
        if self.engine.async_scheduling is True and spec.method not in ASYNC_METHODS:
            raise ValueError(  # vllm/config/vllm.py:1563-1574: "async scheduling is only
                # supported with EAGLE/MTP/Draft Model/NGram GPU/... speculative decoding"
                f"engine.async_scheduling: vLLM 0.32 refuses --async-scheduling with "
                f"speculative method {spec.method!r}: leave it unset or false, or draft with "
                f"ngram_gpu")
        if spec.method == "mtp" and not self.model_spec.mtp_layers:
            raise ValueError(f"engine.speculative_config: method mtp drafts with the model's "
                             f"own multi-token-prediction layers, and {self.model_spec.name} "
                             "has none (model.mtp_layers 0); use eagle, eagle3, ngram or "
                             "draft_model")
        if spec.method == "draft_model" and not spec.use_heterogeneous_vocab:
            draft = spec.drafter_spec(self.model_spec)
            if draft.vocab_size != self.model_spec.vocab_size:
                # vLLM 0.32 config/speculative.py verify_equal_vocab_size_if_draft_model
                raise ValueError(
                    f"engine.speculative_config.model: the draft model {draft.name} has "
                    f"vocab_size {draft.vocab_size} and {self.model_spec.name} "
                    f"{self.model_spec.vocab_size}; vLLM 0.32 refuses a drafter whose "
                    "vocabulary differs from the target's (pick one of the target's family, or "
                    "set use_heterogeneous_vocab: true as vLLM allows)")
        if self.scheduler.name not in ("vllm", "vllm-priority", "lanes"):
            raise ValueError(f"engine.speculative_config needs a vLLM v1 scheduler (vllm, "
                             f"vllm-priority, lanes), not {self.scheduler.name!r}")
        if self.kv.name.lower() != "paged" or self.engine.preemption_mode != "recompute":
            raise ValueError("engine.speculative_config needs kv policy paged and recompute "
                             "preemption (vLLM v1)")
        return self

    @model_validator(mode="after")
    def _memory_policies_agree(self):
        kv = self.kv.name.lower()
        if self.engine.enable_prefix_caching is True and kv != "paged":
            raise ValueError(f"engine.enable_prefix_caching needs kv policy paged, not {kv!r} "
                             "(a reservation is not made of shareable blocks)")
        wanted = getattr(self.scheduler.cls, "kv_policies", None)
        if wanted and kv not in wanted:
            raise ValueError(f"scheduler {self.scheduler.name} needs kv policy "
                             f"{' or '.join(wanted)}, not {kv!r}")
        return self

    @property
    def prefix_caching(self) -> bool:
        """Whether the run has vLLM's prefix cache: ``engine.enable_prefix_caching``, or
        where unset vLLM's default (v1: on, ``vllm/config/cache.py:141``; the server's
        ``--enable-prefix-caching`` unset means the model's default,
        ``vllm/engine/arg_utils.py:3021-3022``, on for generative models) for paged KV with
        a scheduler that defaults it on and recompute preemption."""
        e = self.engine
        if e.enable_prefix_caching is not None:
            return e.enable_prefix_caching
        return (self.kv.name.lower() == "paged" and e.preemption_mode == "recompute"
                and getattr(self.scheduler.cls, "prefix_caching_by_default", False))

    @model_validator(mode="before")
    @classmethod
    def _cost_name_from_gpu(cls, data):
        """Cost parameters without a name (``--set cost.moe_reach=0.25``) are the unset
        default's: ``fitted`` where the GPU has a shipped profile, else ``roofline``."""
        if (isinstance(data, dict) and isinstance(data.get("cost"), dict)
                and "name" not in data["cost"]):
            data = {**data, "cost": {"name": _default_cost_name(data.get("gpu")),
                                     **data["cost"]}}
        return data

    @property
    def model_spec(self) -> ModelSpec:
        return get_model(self.model) if isinstance(self.model, str) else self.model

    @property
    def gpu_spec(self) -> GpuSpec:
        return get_gpu(self.gpu) if isinstance(self.gpu, str) else self.gpu


def _default_cost_name(gpu) -> str:
    """The unset cost model's name for GPU as written (sim/config/resolve.py default_cost):
    ``fitted`` where a shipped profile exists, else ``roofline`` (also for a GPU the
    catalog does not know: the gpu field reports that)."""
    from sim.catalog import CatalogError
    from sim.cost.fitted import default_profile

    try:
        name = get_gpu(gpu).name if isinstance(gpu, str) else (gpu or {}).get("name", "")
    except CatalogError:
        return "roofline"
    return "fitted" if name and default_profile(str(name)) else "roofline"
