"""Lock the chosen config with the traffic shape (the seed's step 5).

``vllm_serve`` turns a resolved scenario into the `vllm serve` command line that deploys
it (vLLM 0.32 flag names, ``vllm/engine/arg_utils.py``); every simulated engine value is
spelled out, including the defaults servesim resolved, so the server cannot pick others.
``chosen_doc`` is ``chosen.yaml``: a runnable scenario (the resolved config, workload
included) under a ``locked`` section with those flags, the length-mix percentiles of the
workload that was planned for, the SLOs and the capacity found.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np

from sim.config.hardware import ModelSpec
from sim.config.model_spec import METHOD_BITS
from sim.config.resolve import Resolved
from sim.config.runnable import scenario_as_run
from sim.engine.requests import RequestSpecs

_HF = re.compile(r"huggingface\.co/([^/]+/[^/]+)/")


def hf_model(r: Resolved) -> str:
    """The Hugging Face id in the model's source URL, else the catalog name."""
    return _hf_id(r.model)


def _hf_id(model: ModelSpec) -> str:
    m = _HF.search(model.source or "")
    return m[1] if m else model.name


def _speculative_json(spec) -> str:
    """vLLM's --speculative-config value: a draft model by its Hugging Face id (servesim
    names it by its catalog name, which vLLM cannot load)."""
    out = spec.vllm_json()
    if spec.method == "draft_model" and spec.model:
        from sim.catalog import get_model

        out["model"] = _hf_id(get_model(spec.model))
    return json.dumps(out, separators=(",", ":"))


def _dtype_flags(m: ModelSpec) -> tuple[list[str], list[str]]:
    """Weights, activations and KV cache as vLLM's --dtype, --quantization, --kv-cache-dtype."""
    flags = ["--dtype float32" if m.act_bytes == 4 else "--dtype auto"]
    notes = []
    other = _other_bits(m)
    if other:  # the method names a checkpoint of other precisions than those simulated
        notes.append(other)
    elif m.quantization:  # the checkpoint's method (ModelSpec.quantization)
        flags.append(f"--quantization {m.quantization}")
    elif m.dtype_bits == 8:  # fp8 linear weights, 16-bit activations: online fp8
        flags.append("--quantization fp8")
    elif min(m.dtype_bits, m.moe_bits) == 4:
        notes.append("4-bit weights need a quantized checkpoint: set model.quantization to "
                     "its method (modelopt_fp4, mxfp4, compressed-tensors, awq, gptq)")
    if m.kv_bytes == 1:
        flags.append("--kv-cache-dtype fp8")
    elif m.kv_bytes == m.act_bytes == 2 and m.checkpoint_kv_fp8:
        # auto would take the checkpoint's fp8 (vLLM 0.32 resolve_kv_cache_dtype_string)
        flags.append("--kv-cache-dtype bfloat16")
    elif m.kv_bytes == m.act_bytes:
        flags.append("--kv-cache-dtype auto")  # the model's dtype
    else:
        notes.append(f"a {m.kv_bytes}-byte KV cache with {m.act_bytes}-byte activations has no "
                     "vLLM flag: --kv-cache-dtype auto stores KV in the model's dtype")
    return flags, notes


def _other_bits(m: ModelSpec) -> str:
    """Why ``--quantization`` would not deploy the simulated weights ('' = it would)."""
    allowed = METHOD_BITS.get(m.quantization or "")
    if allowed is None or (m.dtype_bits in allowed[0] and m.moe_bits in allowed[1]):
        return ""
    experts = f", {m.moe_bits}-bit experts" if m.is_moe else ""
    return (f"model.quantization {m.quantization} names a checkpoint of other precisions than "
            f"the {m.dtype_bits}-bit weights{experts} simulated: no --quantization written; "
            "deploy a checkpoint of the simulated precisions")


def _engine_flags(r: Resolved) -> list[str]:
    e, lim = r.scenario.engine, r.limits
    on = lambda flag, v: f"--{flag}" if v else f"--no-{flag}"  # noqa: E731 (argparse's pairs)
    flags = [f"--tensor-parallel-size {r.tp}",
             *([f"--data-parallel-size {r.dp}"] if r.dp > 1 else []),
             *(["--enable-expert-parallel"] if r.scenario.enable_expert_parallel else []),
             f"--max-model-len {lim.max_model_len}",
             f"--max-num-seqs {lim.max_num_seqs}",
             f"--max-num-batched-tokens {lim.max_num_batched_tokens}",
             f"--block-size {r.block_size}", f"--gpu-memory-utilization {e.gpu_memory_utilization}",
             on("enable-chunked-prefill", lim.enable_chunked_prefill),
             on("enable-prefix-caching", r.scenario.prefix_caching),
             f"--long-prefill-token-threshold {lim.long_prefill_token_threshold}",
             on("long-prefill-token-threshold-adaptive", lim.long_prefill_token_threshold_adaptive),
             on("scheduler-reserve-full-isl", lim.scheduler_reserve_full_isl)]
    if e.num_gpu_blocks_override:
        flags.append(f"--num-gpu-blocks-override {e.num_gpu_blocks_override}")
    # engine.async_scheduling off is the synchronous scheduler (each step planned after the
    # previous step's tokens are known); on GPUs vLLM 0.32 turns async scheduling on unless
    # told not to, so both values are spelled out
    flags.append(on("async-scheduling", e.async_scheduling))
    # CUDA graphs: a capture ceiling the scenario sets is written; an unset one is vLLM
    # 0.32's own default (Resolved.cuda_graph_max_tokens models it), left to vLLM, since an
    # explicit --max-cudagraph-capture-size keeps vLLM from adding its uniform-decode sizes
    # (speculative decoding's 1 + K multiples, an odd max_num_seqs: vllm/config/vllm.py
    # 2350-2353, 2436-2443), whose batches then fall from full to piecewise graphs
    if e.enforce_eager:
        flags.append("--enforce-eager")
    graphs = e.max_cudagraph_capture_size
    if graphs == 0 and not e.enforce_eager:
        # no step from a graph: vLLM 0.32 asserts a capture size >= 1 while CUDA graphs are
        # on (vllm/config/vllm.py:2448, _set_cudagraph_sizes), so they are turned off by mode
        # (the sizes are skipped under cudagraph_mode NONE, vllm/config/vllm.py:2341-2345)
        mode = json.dumps({"cudagraph_mode": "NONE"}, separators=(",", ":"))
        flags.append(f"--compilation-config {shlex.quote(mode)}")
    elif graphs is not None:
        flags.append(f"--max-cudagraph-capture-size {graphs}")
    if e.moe_backend != "auto":
        flags.append(f"--moe-backend {e.moe_backend}")
    if e.moe_activation != "auto":
        quant = json.dumps({"moe": {"activation": e.moe_activation}}, separators=(",", ":"))
        flags.append(f"--quantization-config {shlex.quote(quant)}")
    if e.speculative_config is not None:  # vLLM's keys only (the acceptance is servesim's)
        flags.append(f"--speculative-config {shlex.quote(_speculative_json(e.speculative_config))}")
    return flags


def _policy_flags(sc) -> tuple[list[str], list[str]]:
    flags, notes = [], []
    sched = sc.scheduler.name.lower()
    if sched in ("vllm", "vllm-priority"):
        flags.append(f"--scheduling-policy {'priority' if sched == 'vllm-priority' else 'fcfs'}")
    else:
        notes.append(f"scheduler {sched!r} has no vLLM flag: vLLM runs its v1 scheduler")
    if sc.kv.name.lower() != "paged":
        notes.append(f"kv policy {sc.kv.name!r} has no vLLM flag: vLLM pages its KV cache")
    elif getattr(sc.kv.params, "watermark", 0.0):
        notes.append(f"kv.watermark {sc.kv.params.watermark:g} is vLLM v0's (always, usable "
                     "blocks only); vLLM 0.32's --watermark counts the null block and applies "
                     "only while a request runs")
    if sc.admission.name.lower() != "optimistic":
        notes.append(f"admission {sc.admission.name!r} has no vLLM flag")
    if sc.engine.strict_max_model_len:
        notes.append("strict_max_model_len has no vLLM flag: its server shortens max_tokens")
    if not sc.engine.ingress_serial and sc.engine.ingress_per_token_us != 0:
        # vLLM 0.32's API server renders (tokenizes) on --renderer-num-workers threads, 1 by
        # default (vllm/config/model.py:408, vllm/renderers/base.py:142)
        notes.append("engine.ingress_serial false tokenizes every prompt beside the others; "
                     "vLLM's API server tokenizes one at a time (--renderer-num-workers 1): "
                     "raise --renderer-num-workers or --api-server-count to deploy it")
    if sc.engine.preemption_mode == "swap":
        notes.append("preemption_mode swap is vLLM v0's; v1 always recomputes")
    spec = sc.engine.speculative_config
    if spec is not None:
        notes.append(f"speculative acceptance was modelled ({spec.mean_accepted():.2f} of "
                     f"{spec.num_speculative_tokens} drafts per verify step expected): check "
                     "the server's logged mean acceptance length against it")
        if spec.method in ("eagle", "eagle3") and not spec.model:
            notes.append(f"speculative_config.model is unset: method {spec.method} needs the "
                         "drafter head's repository")
    return flags, notes


def vllm_flags(r: Resolved) -> tuple[list[str], list[str]]:
    """(flags, notes) of one server: notes name what the scenario models that vLLM has no
    flag for."""
    dtype, dtype_notes = _dtype_flags(r.model)
    policy, notes = _policy_flags(r.scenario)
    return ([*dtype, *_engine_flags(r), *policy],
            dtype_notes + notes + _backend_notes(r) + _graph_notes(r) + _drafter_notes(r)
            + _server_notes(r))


def _server_notes(r: Resolved) -> list[str]:
    """What the line leaves to vLLM that the simulation fixed: the model's repository, the
    KV pool's size; and a choice vLLM warns about."""
    notes = []
    if not _HF.search(r.model.source or ""):
        notes.append(f"the model is named by its catalog name {r.model.name!r} (the catalog "
                     "has no Hugging Face repository for it): put its repository there")
    e = r.scenario.engine
    if not e.num_gpu_blocks_override:
        # vLLM sizes its KV pool from its own memory profiling (vllm/v1/worker/gpu_worker.py
        # determine_available_memory); --num-gpu-blocks-override pins it
        notes.append(f"the KV cache was simulated at {r.memory.num_gpu_blocks:,} blocks of "
                     f"{r.block_size} tokens; vLLM sizes its own from profiled memory: add "
                     f"--num-gpu-blocks-override {r.memory.num_gpu_blocks} to pin it")
    if not r.limits.enable_chunked_prefill:
        notes.append("chunked prefill off: vLLM 0.32 warns that the model does not officially "
                     "support disabling it (vllm/engine/arg_utils.py:2999-3008)")
    return notes


def _drafter_notes(r: Resolved) -> list[str]:
    """A draft model the catalog knows by no Hugging Face repository is emitted by its
    catalog name, which vLLM cannot load: say so."""
    spec = r.scenario.engine.speculative_config
    if spec is None or spec.method != "draft_model" or not spec.model:
        return []
    from sim.catalog import get_model

    if _HF.search(get_model(spec.model).source or ""):
        return []
    return [f"--speculative-config names the draft model by its catalog name "
            f"{spec.model!r} (the catalog has no Hugging Face repository for it): put the "
            "drafter's repository there"]


def capture_grid_max(cap: int, max_num_tokens: int) -> int:
    """The largest CUDA-graph size vLLM 0.32 captures under --max-cudagraph-capture-size
    ``cap`` (vllm/config/vllm.py:2450-2480): 1, 2, 4, multiples of 8 below 256, of 16 from
    256, and max_num_batched_tokens when it fits; a ceiling between them is truncated."""
    cap = min(cap, max_num_tokens)
    sizes = [i for i in (1, 2, 4) if i <= cap]
    sizes += list(range(8, min(cap + 1, 256), 8)) + list(range(256, cap + 1, 16))
    return max(sizes + ([max_num_tokens] if max_num_tokens <= cap else []), default=0)


def _graph_notes(r: Resolved) -> list[str]:
    """An explicit capture ceiling vLLM truncates, or one that drops the uniform-decode
    sizes speculative decoding's verify batches would use."""
    e = r.scenario.engine
    cap = e.max_cudagraph_capture_size
    if cap is None or cap == 0 or e.enforce_eager:
        return []
    notes = []
    valid = capture_grid_max(cap, r.limits.max_num_batched_tokens)
    if valid != min(cap, r.limits.max_num_batched_tokens):
        notes.append(f"vLLM 0.32 truncates --max-cudagraph-capture-size {cap} to {valid} (its "
                     "capture sizes: 1, 2, 4, multiples of 8 below 256, of 16 from 256); "
                     f"steps of {valid + 1}-{cap} tokens were priced from graphs")
    if e.speculative_config is not None:
        notes.append("an explicit --max-cudagraph-capture-size keeps vLLM 0.32 from capturing "
                     "the verify batches' (1 + K)-token multiples (vllm/config/vllm.py:"
                     "2350-2353); leave engine.max_cudagraph_capture_size unset to keep them")
    return notes


def _backend_notes(r: Resolved) -> list[str]:
    """Where the block size asked rules out the attention kernel the cost model prices: an
    MLA model on data-center Blackwell under a block size FlashInfer MLA (first there) does
    not take (32 or 64) runs Triton MLA ("--block-size N precluded higher-priority
    backend(s)", vllm/platforms/cuda.py:485-506; sim/config/resolve.py default_block_size)."""
    if r.model.is_mla and r.gpu.datacenter_blackwell and r.block_size not in (32, 64):
        return [f"--block-size {r.block_size} makes vLLM 0.32 run Triton MLA on this GPU "
                "(FlashInfer MLA takes 32 or 64), slower than the MLA kernel priced: leave "
                "engine.block_size unset (32) to deploy what was simulated"]
    if r.model.is_mla and r.gpu.hopper and r.model.kv_bytes == 1 and r.block_size != 64:
        return [f"--block-size {r.block_size} with an fp8 KV cache makes vLLM 0.32 run Triton "
                "MLA on Hopper (FlashAttention MLA stores no fp8 KV, FlashMLA takes 64 only), "
                "slower than the MLA kernel priced: leave engine.block_size unset (64)"]
    return []


def vllm_serve(r: Resolved) -> str:
    return " ".join(["vllm serve", shlex.quote(hf_model(r)), *vllm_flags(r)[0]])


def arrival_shape(arrival_s) -> dict:
    """Mean rate ((n - 1) / span, requests/s) and burstiness as the coefficient of variation
    of the inter-arrival gaps (1 for Poisson; `vllm bench serve`'s --burstiness is 1 / CV^2);
    None where fewer than two arrivals or a zero span leave them undefined."""
    t = np.asarray(arrival_s, dtype=np.float64)
    gaps = np.diff(t)
    span = float(t[-1] - t[0]) if len(t) else 0.0
    mean_gap = float(gaps.mean()) if gaps.size else 0.0
    return {"rate_mean_req_s": round((len(t) - 1) / span, 4) if span > 0 else None,
            "interarrival_cv": round(float(gaps.std() / mean_gap), 4) if mean_gap > 0 else None}


def length_mix(specs: RequestSpecs) -> dict:
    """Prompt and output token percentiles of the workload (p50 / p90 / p99 / max, mean) and
    its arrival shape (``arrival_shape``)."""
    def dist(v: np.ndarray) -> dict:
        p50, p90, p99 = np.percentile(v, [50, 90, 99])
        return {"p50": round(float(p50), 1), "p90": round(float(p90), 1),
                "p99": round(float(p99), 1), "max": int(v.max()), "mean": round(float(v.mean()), 1)}
    return {"requests": len(specs), "prompt_tokens": dist(specs.prompt_tokens),
            "output_tokens": dist(specs.output_tokens),
            "arrivals": arrival_shape(specs.arrival_s)}


def plain(obj):
    """``obj`` with numpy scalars as Python numbers (YAML writes only plain types)."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj.item() if isinstance(obj, np.generic) else obj


def deployment(r: Resolved) -> tuple[list[dict], list[str]]:
    """A fleet's servers, one entry per pool (its replicas and `vllm serve` line), and what
    the fleet models that vLLM's server has no flag for."""
    c = r.scenario.cluster
    if c is None:
        return [], []
    from sim.fleet.plan import plan_fleet

    pools, notes = [], []
    for p in plan_fleet(r.scenario, r).pools:
        flags, pool_notes = vllm_flags(p.resolved)
        pools.append({"pool": p.name, "role": p.role, "replicas": p.replicas, "gpus": p.gpus,
                      "lanes": list(p.lanes), "router": p.router.name,
                      "vllm_serve": " ".join(["vllm serve", shlex.quote(hf_model(p.resolved)),
                                              *flags]),
                      "notes": pool_notes})
        notes.append(f"pool {p.name!r}: {p.replicas} replica(s) behind router "
                     f"{p.router.name!r}, which vLLM's server does not provide: run the pool's "
                     "command once per replica behind a router of your own")
    if c.disaggregation is not None:
        notes.append("prefill/decode disaggregation needs a KV connector on both pools "
                     "(--kv-transfer-config); servesim models the transfer, not a connector")
    return pools, notes


def chosen_doc(r: Resolved, specs: RequestSpecs, source: str, config: dict, slo: dict,
               capacity: dict, base_dir: Path | str, dest: Path | str) -> dict:
    """chosen.yaml: the scenario as run (`servesim run chosen.yaml` simulates the chosen
    point again) under ``locked``: the deployment that was simulated, the SLOs, the capacity
    found and the length mix of the traffic it was found for."""
    flags, notes = vllm_flags(r)
    pools, fleet_notes = deployment(r)
    locked = {
        "config": config, "model": r.model.name, "hf_model": hf_model(r), "gpu": r.gpu.name,
        "gpus": sum(p["gpus"] for p in pools) if pools else r.gpus,
        "vllm_serve": vllm_serve(r), "vllm_flags": flags, "notes": notes + fleet_notes,
        **({"pools": pools} if pools else {}),
        "slo": slo, "capacity": capacity,
        "length_mix": {"source": source, **length_mix(specs)},
    }
    return plain({"locked": locked, **scenario_as_run(r, base_dir, dest)})
