"""Published end-to-end measurements of vLLM on GPUs, and servesim's run of each.

Two public sources time whole requests on real GPUs (no step logs exist for them):

* **vLLM's CI latency benchmark** (the "Performance Benchmark" Buildkite pipeline,
  ``.buildkite/nightly-benchmarks/tests/latency-tests.json``): ``vllm bench latency`` (the
  offline ``LLM`` engine) with 8 prompts of 32 dummy-weight tokens generating 128 tokens
  each (``ignore_eos``), 5 warm-up and 15 timed iterations; the figure is the mean batch
  latency. Models ``meta-llama/Meta-Llama-3-8B`` (tp 1) and
  ``meta-llama/Meta-Llama-3-70B-Instruct`` (tp 4), bf16 weights and KV.
* **NVIDIA's silicon measurements** shipped with aiconfigurator-core 0.12.0
  (``systems/silicon_sample.csv``): vLLM serving ``meta-llama/Llama-3.1-70B`` with fp8
  weights (InferenceMAX's sweep, whose server scripts pass ``--async-scheduling``), and
  ``Qwen/Qwen3-32B`` in bf16 (NVIDIA's aic-auto-gap-analysis sweep, vLLM 0.12.0, whose
  default schedules synchronously), fixed input/output lengths at a fixed concurrency; TTFT
  and TPOT in ms.

servesim runs each as the benchmark ran it: ``concurrency`` requests arriving at once
(batch latency = the last finish), which is also what a closed loop of that many clients
with equal lengths does (every batch starts and ends together).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BUILDKITE = "https://buildkite.com/vllm/performance-benchmark/builds/{}"
LATENCY_SOURCE = ("vLLM CI latency benchmark (vllm bench latency: 8 x 32 in / 128 out, "
                  "mean batch latency), {}")


@dataclass(frozen=True)
class Published:
    """One published measurement: what ran, on what, and the figure."""

    name: str
    gpu: str  # servesim catalog GPU
    model: str  # servesim catalog model (same shapes as the one measured)
    tp: int
    dtype_bytes: int  # weights: 2 bf16, 1 fp8 (KV stays bf16 in every point here)
    prompt: int  # tokens per request
    output: int  # tokens per request
    concurrency: int  # requests at once
    metric: str  # "batch_ms" (last finish) or "tpot_ms" (vllm bench serve's mean TPOT)
    measured_ms: float
    source: str
    # the server scheduled the next step while the GPU ran this one (vLLM's
    # --async-scheduling): the host cost hides under the kernels, so the point says nothing
    # of it (calibrate/overhead.py fits the synchronous points only)
    async_scheduling: bool = False

    @property
    def steps(self) -> int:
        """Engine steps one unit of the figure spans: a batch's prefill and decodes; TPOT
        is already per decode step."""
        return self.output if self.metric == "batch_ms" else 1


def _latency(gpu: str, build: int, llama8: float, llama70: float) -> tuple[Published, ...]:
    src = LATENCY_SOURCE.format(BUILDKITE.format(build))
    return (Published(f"latency llama-3-8b tp1 {gpu}", gpu, "llama-3-8b", 1, 2, 32, 128, 8,
                      "batch_ms", llama8, src),
            Published(f"latency llama-3-70b tp4 {gpu}", gpu, "llama-3-70b", 4, 2, 32, 128, 8,
                      "batch_ms", llama70, src))


# mean latency (ms) as the pipeline's build pages print them
LATENCY_BENCH: tuple[Published, ...] = (
    *_latency("h100-sxm", 9555, 997.542, 2444.47),  # "8xH100"
    *_latency("h200-sxm", 9513, 834.059, 2075.08),  # "H200"
    *_latency("a100-80gb", 9523, 1579.27, 3990.59),  # "A100-SXM4-80GB"
)

# NVIDIA's measurement the fp8 acceptance check uses (the row of silicon_sample.csv, copied
# so the check runs without the package): vLLM, Llama-3.1-70B fp8 weights, tp 2 on H100,
# 1024 in / 1024 out at concurrency 4 (InferenceMAX, --async-scheduling); mean TPOT (TTFT
# 121.3 ms)
FP8_H100_TP2 = Published(
    "silicon llama-3.1-70b fp8 tp2 c4 h100-sxm", "h100-sxm", "llama-3.1-70b", 2, 1, 1024,
    1024, 4, "tpot_ms", 17.40721787606792,
    "aiconfigurator-core 0.12.0 silicon_sample.csv "
    "2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_1024x1024_c4_tp2_ep1_738",
    async_scheduling=True)

SILICON_SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200"}


def silicon_sample_path() -> Path:
    from calibrate.aiconfigurator import package_root

    return package_root()[0] / "silicon_sample.csv"


def _vllm_rows(path: Path | None, model_path: str, isl: int, osl: int) -> list[dict]:
    """The vLLM rows of ``silicon_sample.csv`` (default: the package's) for MODEL_PATH at
    ISL / OSL."""
    with (path or silicon_sample_path()).open(newline="") as fh:
        return [r for r in csv.DictReader(fh)
                if r["backend"] == "vllm" and r["model_path"] == model_path
                and int(r["isl"]) == isl and int(r["osl"]) == osl]


def silicon_points(path: Path | None = None, *, isl: int = 1024, osl: int = 1024,
                   max_concurrency: int = 8) -> list[Published]:
    """vLLM Llama-3.1-70B fp8 TPOT rows of ``silicon_sample.csv`` (H100, H200, B200) at
    ``isl``/``osl`` up to ``max_concurrency`` (where decode, not queueing, sets TPOT)."""
    out = []
    for r in _vllm_rows(path, "meta-llama/Llama-3.1-70B", isl, osl):
        if (r["gemm_quant_mode"] != "fp8" or r["system"] not in SILICON_SYSTEMS
                or int(r["batch_size"]) > max_concurrency):
            continue
        gpu, c, tp = SILICON_SYSTEMS[r["system"]], int(r["batch_size"]), int(r["tp_size"])
        out.append(Published(f"silicon llama-3.1-70b fp8 tp{tp} c{c} {gpu}", gpu,
                             "llama-3.1-70b", tp, 1, isl, osl, c, "tpot_ms",
                             float(r["silicon_tpot_ms"]),
                             f"aiconfigurator-core 0.12.0 silicon_sample.csv {r['id']}",
                             async_scheduling=True))
    return sorted(out, key=lambda p: (p.gpu, p.tp, p.concurrency))


def synchronous_points(path: Path | None = None) -> list[Published]:
    """NVIDIA's Qwen3-32B bf16 TPOT rows on H100 at 1024 in / 1024 out, concurrency 8, tp
    2 / 4 / 8 (aic-auto-gap-analysis, vLLM 0.12.0: synchronous scheduling, its default):
    the servers' host cost in every decode step, at the lowest concurrency the sweep has and
    prompts short enough that one step prefills all eight."""
    out = []
    for r in _vllm_rows(path, "Qwen/Qwen3-32B", 1024, 1024):
        if (r["system"] != "h100_sxm" or r["gemm_quant_mode"]
                or int(float(r["batch_size"])) != 8
                or "aic-auto-gap-analysis" not in r["silicon_data_source"]):
            continue
        tp = int(float(r["tp_size"]))
        out.append(Published(f"silicon qwen3-32b bf16 tp{tp} c8 h100-sxm", "h100-sxm",
                             "qwen3-32b", tp, 2, 1024, 1024, 8, "tpot_ms",
                             float(r["silicon_tpot_ms"]),
                             f"aiconfigurator-core 0.12.0 silicon_sample.csv {r['id']}"))
    return sorted(out, key=lambda p: p.tp)


def simulate(p: Published, cost: dict | None = None) -> float:
    """servesim's figure for ``p`` (ms) under ``cost`` (default: the GPU's default model)."""
    from sim.catalog import get_model
    from sim.config.resolve import resolve
    from sim.config.scenario import Scenario
    from sim.engine.requests import RequestSpecs
    from sim.metrics.summary import summarize
    from sim.runner import simulate as run

    model = get_model(p.model).model_copy(update={"dtype_bytes": p.dtype_bytes})
    n = p.concurrency
    # scheduling as the point ran (the latency benchmark's build pages give no vLLM version:
    # synchronous, vLLM's default before 0.14; InferenceMAX passed --async-scheduling).
    # vLLM's latency benchmark runs the offline engine on token IDs: no API server, so no
    # per-token frontend time (vllm bench serve's TPOT points do not see it either)
    engine = dict(async_scheduling=p.async_scheduling)
    if p.metric == "batch_ms":
        engine["ingress_per_token_us"] = 0.0
    sc = Scenario.model_validate(dict(
        name=p.name, model=model.model_dump(), gpu=p.gpu, tensor_parallel_size=p.tp,
        engine=engine, cost=cost,
        workload=dict(lengths=dict(dist="fixed", prompt=p.prompt, output=p.output),
                      num_requests=n, arrival=dict(process="constant", rate=1.0))))
    specs = RequestSpecs.from_arrays(np.zeros(n), np.full(n, p.prompt), np.full(n, p.output))
    lat = summarize(run(resolve(sc), specs))["latency_ms"]
    return float(lat["e2el"]["max"] if p.metric == "batch_ms" else lat["tpot"]["mean"])
