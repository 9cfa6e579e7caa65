"""NVIDIA's measured vLLM deployments (aiconfigurator-core 0.12.0 `silicon_sample.csv`), as
servesim rows: which rows servesim can represent, and how each was measured.

Source: `aiconfigurator_core/systems/silicon_sample.csv` (Apache-2.0, NVIDIA), one row per
(model, system, backend and version, precision, ISL, OSL, concurrency, parallelism) with the
measured `silicon_ttft_ms` and `silicon_tpot_ms`; `silicon_data_source` names where the row
came from. Only `backend == vllm`, `mode == agg` rows are replayed here.

Every protocol fact below names where it came from; what no source states is marked
ASSUMPTION and said again in benchmarks/silicon/README.md.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from dataclasses import dataclass
from pathlib import Path

# What the silicon rows' model paths are in servesim's catalog. An entry gives the catalog
# name, the weight and KV bytes per element the deployment served with, and the protocol.
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200"}


@dataclass(frozen=True)
class Protocol:
    """How one row was measured: the client and the server, as servesim replays them."""

    name: str
    num_prompts: int          # requests sent (count)
    concurrency: int          # --max-concurrency (clients)
    range_ratio: float        # --random-range-ratio
    range_below: bool         # True: lengths in [r L, L] (older clients); False: [L(1-r), L(1+r)]
    max_num_seqs: int | None  # --max-num-seqs (None: vLLM's default)
    max_num_batched_tokens: int | None
    max_model_len: int | None
    kv_fp8: bool              # --kv-cache-dtype fp8
    gpu_memory_utilization: float
    async_scheduling: bool    # --async-scheduling
    source: str


@dataclass(frozen=True)
class Row:
    id: str
    model_path: str
    system: str
    gpu: str | None
    precision: str
    version: str
    isl: int
    osl: int
    tp: int
    concurrency: int
    ttft_ms: float
    tpot_ms: float
    data_source: str

    @property
    def family(self) -> str:
        return f"{self.model_path.split('/')[-1]} {self.precision}"


def _num(value: str) -> float | None:
    return float(value) if value not in ("", None) else None


def _concurrency(rec: dict) -> int:
    m = re.search(r"silicon_concurrency=(\d+)", rec["silicon_data_source"])
    if m:
        return int(m.group(1))
    # Qwen3-32B fp8 rows name no concurrency: their batch_size is the client count
    return int(float(rec["batch_size"]))


def read_rows(path: Path) -> list[Row]:
    """Every vLLM aggregated-serving row of a silicon CSV (plain or gzipped)."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    rows = []
    for rec in csv.DictReader(io.StringIO(raw.decode())):
        if rec["backend"] != "vllm" or rec["mode"] != "agg":
            continue
        rows.append(Row(
            id=rec["id"], model_path=rec["model_path"], system=rec["system"],
            gpu=SYSTEMS.get(rec["system"]), precision=rec["precision"] or "bf16",
            version=rec["backend_version"] or "", isl=int(rec["isl"]), osl=int(rec["osl"]),
            tp=int(float(rec["tp_size"])), concurrency=_concurrency(rec),
            ttft_ms=float(rec["silicon_ttft_ms"]), tpot_ms=float(rec["silicon_tpot_ms"]),
            data_source=rec["silicon_data_source"]))
    return rows


def unrepresentable(row: Row) -> str | None:
    """Why servesim cannot replay ROW yet, or None."""
    if row.gpu is None:
        return f"system {row.system}: no servesim GPU entry (catalog: h100-sxm, h200-sxm, b200)"
    if row.model_path not in MODELS:
        return (f"{row.model_path}: mixture-of-experts / MLA model, not in the model spec yet "
                "(issue 20)")
    if row.precision not in MODELS[row.model_path]:
        return f"{row.model_path} {row.precision} weights: not modelled yet (fp4/int4: issue 20)"
    return None


# model path -> precision -> (catalog name, weight bytes)
MODELS: dict[str, dict[str, tuple[str, int]]] = {
    "meta-llama/Llama-3.1-70B": {"fp8": ("llama-3.1-70b", 1)},
    "nvidia/Llama-3.1-8B-Instruct-FP8": {"fp8": ("llama-3.1-8b", 1)},
    "Qwen/Qwen3-32B": {"bf16": ("qwen3-32b", 2), "fp8": ("qwen3-32b", 1)},
}

INFERENCEMAX = (
    "SemiAnalysis InferenceMAX (the rows' ISL/OSL 1k/1k, 1k/8k, 8k/1k, concurrency 4-64 and "
    "measured=2025-10-29 are its sweep): client bench_serving/benchmark_serving.py "
    "(kimbochen/bench_serving) --dataset-name random --random-range-ratio 0.8 "
    "--num-prompts 10*CONC --max-concurrency CONC --request-rate inf --ignore-eos, lengths "
    "drawn by np.random.randint(int(L*0.8), L+1); server (benchmarks/70b_fp8_*.sh): "
    "--kv-cache-dtype fp8 on H200 (70b_fp8_h200_slurm.sh) and B200 (70b_fp8_b200_docker.sh), "
    "none on H100 (70b_fp8_h100_docker.sh, 70b_h100_slurm.sh: KV auto, which vLLM of "
    "2025-10 served in bf16: it read the checkpoint's kv_cache_quant_algo only from PR 29980, "
    "merged 2025-12-10), --async-scheduling, --no-enable-prefix-caching, "
    "--max-num-batched-tokens 8192, --gpu-memory-utilization 0.9, --max-num-seqs CONC "
    "(H100/H200) or 512 (B200), --max-model-len 10240 (H200 script)")
GAP_ANALYSIS = (
    "NVIDIA aic-auto-gap-analysis sweep (vLLM 0.12.0): ASSUMPTION, no public protocol: "
    "vllm bench serve --dataset-name random with its default range ratio 0 (fixed lengths), "
    "--ignore-eos, 10*CONC prompts, --max-concurrency CONC, engine flags at vLLM's defaults "
    "(KV cache dtype auto = bf16: vLLM took the checkpoint's kv_cache_quant_algo only from "
    "PR 29980, merged 2025-12-10, after 0.12.0; async scheduling off: on by default only "
    "from PR 27614, after 0.12.0)")


def protocol(row: Row) -> Protocol:
    """How ROW was measured (see INFERENCEMAX / GAP_ANALYSIS for the sources)."""
    c = row.concurrency
    if "model=Llama-3.1-70B" in row.data_source:
        return Protocol(
            name="inferencemax", num_prompts=10 * c, concurrency=c, range_ratio=0.8,
            range_below=True, max_num_seqs=512 if row.gpu == "b200" else c,
            max_num_batched_tokens=8192, max_model_len=10240, kv_fp8=row.gpu != "h100-sxm",
            gpu_memory_utilization=0.9, async_scheduling=True, source=INFERENCEMAX)
    return Protocol(
        name="gap-analysis", num_prompts=10 * c, concurrency=c, range_ratio=0.0,
        range_below=False, max_num_seqs=None, max_num_batched_tokens=None, max_model_len=None,
        kv_fp8=False, gpu_memory_utilization=0.9, async_scheduling=False, source=GAP_ANALYSIS)
