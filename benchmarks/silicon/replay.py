"""Replay one silicon row through servesim the way it was measured (rows.Protocol)."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import numpy as np
import yaml

from benchmarks.silicon.rows import MODELS, Protocol, Row, protocol
from sim import pipeline
from sim.catalog import get_model
from sim.config.load import load_scenario
from sim.config.resolve import unset_budget


def lengths(row: Row, p: Protocol, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The client's prompt and output lengths: numpy's legacy global stream seeded with the
    client's --seed (default 0), input lengths drawn before output lengths, as
    benchmark_serving.py's sample_random_requests does."""
    rs = np.random.RandomState(seed)

    def draw(n_tokens: int) -> np.ndarray:
        if p.range_below:
            lo, hi = int(n_tokens * p.range_ratio), n_tokens
        else:
            lo, hi = int(n_tokens * (1 - p.range_ratio)), int(n_tokens * (1 + p.range_ratio))
        return rs.randint(max(lo, 1), hi + 1, size=p.num_prompts)

    prompt = draw(row.isl)
    return prompt, draw(row.osl)


def model_spec(row: Row, p: Protocol) -> dict:
    """The catalog model of the served checkpoint (rows.MODELS) and the protocol's KV dtype:
    the script's, or under `auto` the checkpoint's (Protocol.kv_fp8 None)."""
    entry, fields = MODELS[row.model_path][row.precision]
    spec = get_model(entry).model_dump(exclude={"dtype_bytes"})
    spec.update(fields)
    if p.kv_fp8 is not None:  # the script's --kv-cache-dtype (or an image before vLLM
        spec["kv_dtype_bytes"] = 1 if p.kv_fp8 else None  # read the checkpoint's)
    return spec


def scenario(row: Row, p: Protocol, trace: Path) -> dict:
    engine = {"gpu_memory_utilization": p.gpu_memory_utilization,
              "enable_prefix_caching": p.prefix_caching,
              "async_scheduling": p.async_scheduling}
    if p.block_size is not None:
        engine["block_size"] = p.block_size
    if p.moe_backend != "auto":
        engine["moe_backend"] = p.moe_backend
    if p.moe_activation != "auto":
        engine["moe_activation"] = p.moe_activation
    if p.ingress_per_token_us is not None:
        engine["ingress_per_token_us"] = p.ingress_per_token_us
    if p.max_cudagraph_capture_size is not None:
        engine["max_cudagraph_capture_size"] = p.max_cudagraph_capture_size
    for key in ("max_num_seqs", "max_num_batched_tokens", "max_model_len"):
        if getattr(p, key) is not None:
            engine[key] = getattr(p, key)
    return {
        "name": row.id, "seed": 0, "model": model_spec(row, p), "gpu": row.gpu,
        # the deployment as the script ran it (rows.Protocol), else as the row says; EP is
        # vLLM's --enable-expert-parallel (EP = TP x DP)
        "tensor_parallel_size": p.tensor_parallel or row.tp,
        "data_parallel_size": p.data_parallel or row.attn_dp,
        "enable_expert_parallel": row.moe_ep > 1 if p.expert_parallel is None
        else p.expert_parallel, "engine": engine,
        "workload": {"trace": str(trace), "format": "native",
                     "arrival": {"process": "replay", "concurrency": p.concurrency}},
        "slo": {"ttft_ms": None, "tpot_ms": None},
    }


def _graph_ceiling(r, p: Protocol) -> str | None:
    """The CUDA-graph capture ceiling of the rows' vLLM where the script set none: every row
    ran a vLLM of spring 2026 at the latest (0.11-0.19, nightlies; measured by 2026-04), whose
    default was min(2 x max_num_seqs, 512) on every GPU. vLLM 0.32's (servesim's default) is
    1,024 on data-center Blackwell since PR 49390 (July 2026), so B200 / B300 rows are pinned
    to theirs (None: nothing to pin)."""
    if p.max_cudagraph_capture_size is not None or r.scenario.engine.enforce_eager:
        return None
    if not r.gpu.datacenter_blackwell:
        return None
    return f"engine.max_cudagraph_capture_size={min(2 * r.limits.max_num_seqs, 512)}"


def _budget_of_the_time(r, p: Protocol) -> str | None:
    """The token budget of the rows' vLLM where the script set none: 8,192 on every GPU of
    70 GiB or more (A100 aside) until PR 51726 (August 2026) made it 16,384 from 160 GiB,
    which vLLM 0.32 (servesim's default) has; every row ran a vLLM of spring 2026 at the
    latest, so B200 / B300 rows are pinned to the old default, derived as vLLM derives an
    unset budget (sim.config.resolve.unset_budget)."""
    if p.max_num_batched_tokens is not None or r.scenario.engine.max_num_batched_tokens:
        return None
    if r.limits.max_num_batched_tokens != 16384:
        return None
    lim = r.limits
    old = unset_budget(8192, lim.max_num_seqs, lim.max_model_len, lim.enable_chunked_prefill)
    return f"engine.max_num_batched_tokens={old}"


def replay(row: Row, p: Protocol | None = None, overrides: tuple[str, ...] = ()) -> dict:
    """Simulated TTFT/TPOT (mean and median, ms) of ROW, with the run's preemptions."""
    p = p or protocol(row)
    prompt, output = lengths(row, p)
    with tempfile.TemporaryDirectory(prefix="servesim-silicon-") as tmp:
        trace = Path(tmp) / "requests.csv"
        rows = "".join(f"0,{a},{b}\n" for a, b in zip(prompt, output))
        trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)
        path = Path(tmp) / "scenario.yaml"
        path.write_text(yaml.safe_dump(scenario(row, p, trace), sort_keys=False))
        with warnings.catch_warnings(record=True) as caught:  # said once per row, in rows.csv
            warnings.simplefilter("always")
            loaded = load_scenario(path, overrides)
            resolved = pipeline.resolve_loaded(loaded)
            pins = [x for x in (_graph_ceiling(resolved, p), _budget_of_the_time(resolved, p))
                    if x is not None]
            if pins:
                loaded = load_scenario(path, (*overrides, *pins))
            res = pipeline.run(loaded, None, plots=False)
    lat = res.summary["latency_ms"]
    return {"ttft_mean": lat["ttft"]["mean"], "ttft_median": lat["ttft"]["median"],
            "tpot_mean": lat["tpot"]["mean"], "tpot_median": lat["tpot"]["median"],
            "preemptions": res.summary["preemption"]["count"],
            "warnings": " | ".join(dict.fromkeys(str(w.message) for w in caught)),
            "cost": res.config.get("cost", {}).get("name") if res.config.get("cost") else None}
