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
import dataclasses
import gzip
import io
import re
from dataclasses import dataclass
from pathlib import Path

# What the silicon rows' model paths are in servesim's catalog. An entry gives the catalog
# name, the weight and KV bytes per element the deployment served with, and the protocol.
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200",
           "b300_sxm": "b300"}


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
    # --kv-cache-dtype: True fp8; False the model's dtype (bf16); None `auto` on an image
    # that resolves it from the served checkpoint (vLLM >= 0.13, PR 29980: a modelopt
    # checkpoint naming an fp8 KV cache gets one; the catalog entry's kv_dtype_bytes)
    kv_fp8: bool | None
    gpu_memory_utilization: float
    async_scheduling: bool    # --async-scheduling
    source: str
    block_size: int | None = None  # --block-size (None: vLLM's 16)
    prefix_caching: bool = False   # random prompts share nothing: on or off changes no step
    moe_backend: str = "auto"      # --moe-backend (or the env flags that choose it)
    moe_activation: str = "auto"   # mxfp8: VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1
    max_cudagraph_capture_size: int | None = None  # None: vLLM's default
    # the API server's time per prompt token (us; engine.ingress_per_token_us); None: the
    # profile's (vLLM's Python frontend tokenizing the text prompts the client sends)
    ingress_per_token_us: float | None = None
    # the deployment as the server ran it: --tensor-parallel-size, --data-parallel-size
    # (attention DP ranks; one is replayed with its share of the clients) and
    # --enable-expert-parallel; None: the row's tp, attention_dp and MoE EP size > 1
    tensor_parallel: int | None = None
    data_parallel: int | None = None
    expert_parallel: bool | None = None
    stream_interval: int = 1  # --stream-interval (recorded; not modelled)


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
    moe_tp: int
    moe_ep: int
    attn_dp: int
    ttft_ms: float
    tpot_ms: float
    data_source: str

    @property
    def family(self) -> str:
        return f"{self.model_path.split('/')[-1]} {self.precision}"

    @property
    def measured(self) -> str:
        """The measurement date the source names (ISO, 'YYYY-MM-DD'), or ''."""
        m = re.search(r"measured=(\d{4}-\d\d-\d\d)", self.data_source)
        return m.group(1) if m else ""


def _num(value: str) -> float | None:
    return float(value) if value not in ("", None) else None


def _int(value: str) -> int:
    """A parallelism column: blank or 0 (dense rows of some sources) read as 1."""
    return max(1, int(float(value))) if value not in ("", None) else 1


def _attn_dp(rec: dict) -> int:
    """Attention data-parallel ranks. A blank column (the gap-analysis rows) is implied by
    aiconfigurator's rule tp x attention_dp = moe_tp x moe_ep (sdk/models/moe.py): Qwen3-235B
    at tp 1, MoE TP 2 ran two DP ranks."""
    if rec["attention_dp_size"] not in ("", None):
        return _int(rec["attention_dp_size"])
    tp = _int(rec["tp_size"])
    return max(1, _int(rec["moe_tp_size"]) * _int(rec["moe_ep_size"]) // tp)


def _concurrency(rec: dict) -> int:
    m = re.search(r"silicon_concurrency=(\d+)", rec["silicon_data_source"])
    if m:
        return int(m.group(1))
    # Qwen3-32B fp8 rows name no concurrency: their batch_size is the client count
    return int(float(rec["batch_size"]))


def read_rows(path: Path) -> list[Row]:
    """Every vLLM aggregated-serving row of a silicon CSV (plain or gzipped); a file that
    cannot be read, or a row without a column or with a bad number, is one InputError naming
    the file, the row and the field."""
    from traces.errors import InputError

    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode()
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot be read as a silicon CSV ({e})") from None
    rows = []
    for n, rec in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        try:
            if rec["backend"] != "vllm" or rec["mode"] != "agg":
                continue
            rows.append(_row(rec))
        except KeyError as e:
            raise InputError(f"{path}: no column {e} (silicon_sample.csv's columns "
                             f"are needed)") from None
        except (TypeError, ValueError) as e:
            raise InputError(f"{path}, row {n}: {e} (isl, osl, tp_size, batch_size, "
                             f"silicon_ttft_ms, silicon_tpot_ms must be numbers)") from None
    return rows


def _row(rec: dict) -> Row:
    return Row(
        id=rec["id"], model_path=rec["model_path"], system=rec["system"],
        gpu=SYSTEMS.get(rec["system"]), precision=rec["precision"] or "bf16",
        version=rec["backend_version"] or "", isl=int(rec["isl"]), osl=int(rec["osl"]),
        tp=int(float(rec["tp_size"])), concurrency=_concurrency(rec),
        moe_tp=_int(rec["moe_tp_size"]), moe_ep=_int(rec["moe_ep_size"]),
        attn_dp=_attn_dp(rec),
        ttft_ms=float(rec["silicon_ttft_ms"]), tpot_ms=float(rec["silicon_tpot_ms"]),
        data_source=rec["silicon_data_source"])


def unrepresentable(row: Row) -> str | None:
    """Why servesim cannot replay ROW yet, or None."""
    if row.gpu is None:
        return (f"system {row.system}: no servesim GPU entry (catalog: "
                f"{', '.join(SYSTEMS.values())})")
    if row.model_path not in MODELS:
        return f"{row.model_path}: not in servesim's catalog"
    if row.precision not in MODELS[row.model_path]:
        return f"{row.model_path} {row.precision} weights: no catalog checkpoint of them"
    p = protocol(row)
    tp, dp = p.tensor_parallel or row.tp, p.data_parallel or row.attn_dp
    if tp * dp > 8:
        return f"{tp * dp} GPUs (TP {tp} x attention DP {dp}): more than one 8-GPU node"
    return None


# model path -> precision -> (catalog name, spec fields the served checkpoint changes)
MODELS: dict[str, dict[str, tuple[str, dict]]] = {
    "meta-llama/Llama-3.1-70B": {
        "fp8": ("llama-3.1-70b", {"dtype_bits": 8}),
        # nvidia/Llama-3.1-70B-Instruct-FP4: ModelOpt NVFP4 on every linear layer
        "fp4": ("llama-3.1-70b", {"dtype_bits": 4, "quantization": "modelopt_fp4"})},
    "nvidia/Llama-3.1-8B-Instruct-FP8": {"fp8": ("llama-3.1-8b", {"dtype_bits": 8})},
    "Qwen/Qwen3-32B": {"bf16": ("qwen3-32b", {}), "fp8": ("qwen3-32b", {"dtype_bits": 8})},
    # Qwen/Qwen3-235B-A22B-FP8: fp8 with 128 x 128 block scales on every linear layer
    "Qwen/Qwen3-235B-A22B-FP8": {"fp8": ("qwen3-235b-a22b", {
        "dtype_bits": 8, "moe_dtype_bits": 8, "quantization": "fp8",
        "weight_block_size": 128})},
    # MiniMaxAI/MiniMax-M2.5 ships block-fp8 (the catalog's); nvidia/MiniMax-M2.5-NVFP4
    "MiniMaxAI/MiniMax-M2.5": {
        "fp8": ("minimax-m2.5", {}),
        # nvidia/MiniMax-M2.5-NVFP4 (InferenceX's fp4 checkpoint): NVFP4 experts, bf16
        # attention and router, fp8 KV named by the checkpoint
        "fp4": ("minimax-m2.5-nvfp4", {})},
    # openai/gpt-oss-120b: MXFP4 experts, bf16 attention (the CSV's "nvfp4" label aside)
    "openai/gpt-oss-120b": {"fp4": ("gpt-oss-120b", {})},
    # moonshotai/Kimi-K2.5: int4 weight-only experts (compressed-tensors), bf16 elsewhere;
    # nvidia/Kimi-K2.5-NVFP4: NVFP4 experts, bf16 attention, fp8 KV named by the checkpoint
    "moonshotai/Kimi-K2.5": {
        "int4": ("kimi-k2.5", {}),
        "fp4": ("kimi-k2.5-nvfp4", {})},
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
# The Kimi-K2.5 rows of `kimi-k2.5-gap-analysis.csv` are InferenceX measurements: 32 of its
# 47 rows equal an InferenceX row of the same model, GPU, ISL/OSL, TP and concurrency (image
# vllm/vllm-openai v0.15.1 / v0.16.0 / v0.17.0) in TTFT and TPOT to 0.2 %; the other 15
# (B200 fp4, TP 4 EP 4, v0.17.0) match InferenceX runs of that configuration on other dates
# (TPOT median 1.7 %, max 10.5 % apart; TTFT median 5.9 %)
KIMI_GAP_FILE = "kimi-k2.5-gap-analysis.csv"
GAP_ANALYSIS = (
    "NVIDIA aic-auto-gap-analysis sweep (vLLM 0.12.0): ASSUMPTION, no public protocol: "
    "vllm bench serve --dataset-name random with its default range ratio 0 (fixed lengths), "
    "--ignore-eos, 10*CONC prompts, --max-concurrency CONC, engine flags at vLLM's defaults "
    "(KV cache dtype auto = bf16: vLLM took the checkpoint's kv_cache_quant_algo only from "
    "PR 29980, merged 2025-12-10, after 0.12.0; async scheduling off: on by default only "
    "from PR 27614, after 0.12.0); frontend: NVIDIA Dynamo's (the sweep's rows that name an "
    "image name ai-dynamo runtimes, vllm-runtime:0.8.0 for Qwen3-32B), which tokenizes in "
    "Rust: no per-token API-server time (ASSUMPTION)")


INFERENCEX = (
    "SemiAnalysis InferenceX single-node sweeps of 2026 (the rows' image=vllm/vllm-openai:"
    "v0.15.1-v0.19.0 and db-dump workflow runs): client utils/bench_serving/"
    "benchmark_serving.py --dataset-name random --random-range-ratio 0.8 --num-prompts "
    "10*CONC --max-concurrency CONC --request-rate inf --ignore-eos --num-warmups 2*CONC "
    "(benchmarks/benchmark_lib.sh run_benchmark_serving), lengths np.random.randint(int(L*0.8),"
    " L+1); server: the model's benchmarks/single_node/<model>_<precision>_<gpu>.sh as read "
    "(the version in force for the row's image and date: SCRIPTS); async scheduling on "
    "(vLLM's default since PR 27614, before these images)")

# The InferenceX server scripts as they ran for the rows: (model path, precision, GPU) ->
# each version of benchmarks/single_node/<model>_<precision>_<gpu>.sh, oldest first, with
# when it took over (the row's image release, or its measured date). Read at the commits
# named in `src` (SemiAnalysisAI/InferenceX and forks holding earlier states) and dated
# from perf-changelog.yaml's PR entries (image bumps) and the PR threads; what no source
# dates is marked INFERRED in `src`. util: --gpu-memory-utilization; kv: --kv-cache-dtype
# (True fp8, None not passed: `auto`); seqs / mnbt: --max-num-seqs / --max-num-batched-
# tokens ("conc", "2isl", "minimax_h200", a number, None: vLLM's default); prefix: prefix
# caching left on; ep: how the script turns --enable-expert-parallel on from the matrix's
# EP_SIZE ("always": `[ "$EP_SIZE" -ge 1 ]`, every row, the sweep's EP_SIZE is 1 by
# default; "gt1": EP_SIZE > 1; "none": no such code); dp_attn: its DP_ATTENTION branch
# (--tensor-parallel-size 1 --data-parallel-size $TP --enable-expert-parallel); graphs:
# --max-cudagraph-capture-size; stream: --stream-interval (recorded, not modelled: vLLM's
# output processor sends a request's first token at once).


@dataclass(frozen=True)
class Script:
    src: str
    release: tuple[int, ...] = ()  # in force for images of this release and later
    since: str = ""                # ... or for rows measured on this date (ISO) and later
    util: float = 0.90
    kv: bool | None = None
    block: int | None = None
    seqs: int | str | None = None
    mnbt: int | str | None = None
    prefix: bool = True
    ep: str = "gt1"
    dp_attn: bool = False
    moe: str = "auto"
    act: str = "auto"
    graphs: int | None = None
    mml: int | None = None         # a fixed --max-model-len (None: the sweep's by ISL/OSL)
    stream: int = 1

    def applies(self, row: Row) -> bool:
        rel = _release(row.version)
        if self.release and (rel is None or rel < self.release):
            return False
        return not self.since or row.measured >= self.since


_V019 = dict(util=0.90, kv=True, graphs=2048, mnbt="2isl", stream=20, prefix=False)
# minimaxm2.5_fp8_b200.sh from PR 947 (the v0.19.0-cu130 bump): fp8 KV, 2 x ISL batched
# tokens, 2048-token graphs, --stream-interval 20, no prefix caching, EP only for EP_SIZE > 1,
# and no VLLM_USE_FLASHINFER_MOE_FP8=0 / VLLM_MOE_USE_DEEP_GEMM=0 (vLLM's own MoE choice)
_MM_FP8_V3 = dict(block=32, **_V019)
# minimaxm2.5_fp4_b200.sh from PR 996: the same flags, no --max-num-seqs, a DP-attention branch
_MM_FP4_F2 = dict(dp_attn=True, **_V019)

SCRIPTS: dict[tuple[str, str, str], tuple[Script, ...]] = {
    ("MiniMaxAI/MiniMax-M2.5", "fp8", "b200"): (
        Script("minimaxm2.5_fp8_b200.sh @07e171a3 (PR 757, v0.17.0): VLLM_USE_FLASHINFER_"
               "MOE_FP8=0 and VLLM_MOE_USE_DEEP_GEMM=0 leave vLLM's Triton fused_moe "
               "(ASSUMPTION: aiconfigurator's vllm_fused_moe timing)",
               util=0.95, block=32, ep="always", moe="triton"),
        Script("minimaxm2.5_fp8_b200.sh whn09/InferenceX @43ae41b7 (PR 947, v0.19.0-cu130; "
               "PR 1068's VLLM_FLOAT32_MATMUL_PRECISION=high after it)",
               release=(0, 19, 0), **_MM_FP8_V3)),
    ("MiniMaxAI/MiniMax-M2.5", "fp8", "b300"): (
        Script("minimaxm2.5_fp8_b300.sh lishuoshuo-amd/InferenceX @9ea1e1c2 (PR 1054: the B200 "
               "recipe of PR 947 as is); the nightly rows of 2026-04-03 predate PR 1054: "
               "INFERRED the same", **_MM_FP8_V3),),
    ("MiniMaxAI/MiniMax-M2.5", "fp4", "b200"): (
        Script("minimaxm2.5_fp4_b200.sh @56245be3 (before PR 996: the nightly rows of "
               "2026-04-03)", seqs="conc"),
        Script("minimaxm2.5_fp4_b200.sh @a52c31a2 (PR 996, v0.19.0-cu130; vLLM recipes PR 320 "
               "of 2026-04-08 quotes its flags)", release=(0, 19, 0), **_MM_FP4_F2)),
    ("MiniMaxAI/MiniMax-M2.5", "fp4", "b300"): (
        Script("minimaxm2.5_fp4_b300.sh lishuoshuo-amd/InferenceX @9ea1e1c2 (PR 1055: the B200 "
               "recipe of PR 996 as is)", **_MM_FP4_F2),),
    ("MiniMaxAI/MiniMax-M2.5", "fp8", "h200"): (
        Script("minimaxm2.5_fp8_h200.sh @1c3aa8bf (PR 831, v0.16.0, TP 4): no expert-parallel "
               "code", util=0.95, ep="none"),
        Script("minimaxm2.5_fp8_h200.sh whn09/InferenceX @53605e05 (PR 869 of 2026-03-05, TP 8: "
               "`[ \"$EP_SIZE\" -ge 1 ]`; PR 966 then turned prefix caching off)",
               since="2026-03-05", util=0.95, ep="always"),
        Script("minimaxm2.5_fp8_h200.sh @0949de54 (PR 1354, v0.20.1: --moe-backend triton)",
               release=(0, 20, 1), util=0.95, kv=True, seqs=512, mnbt="minimax_h200",
               prefix=False, moe="triton")),
    ("MiniMaxAI/MiniMax-M2.5", "fp8", "h100"): (
        Script("minimaxm2.5_fp8_h100.sh akao-amd/InferenceX @ac0d2a85 (PR 832; PR 966 then "
               "turned prefix caching off): --max-num-seqs 256, cudagraph_mode PIECEWISE "
               "(not modelled)", seqs=256),),
    ("openai/gpt-oss-120b", "fp4", "b200"): (
        # VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1: FlashInfer TRT-LLM with mxfp8 activations
        # (the profile's w4a8_mxfp4_mxfp8 curves: SGLang's timing of the same kernel)
        Script("gptoss_fp4_b200.sh @34bc7c40 (PR 789, v0.15.1; "
               "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1)", kv=True, seqs=512, mnbt=8192,
               graphs=2048, prefix=False, act="mxfp8", ep="none"),),
    ("openai/gpt-oss-120b", "fp4", "h200"): (
        Script("gptoss_fp4_h200.sh whn09/InferenceX @53605e05 (v0.18.0, PR 960; "
               "VLLM_MXFP4_USE_MARLIN=1)", seqs="conc", mnbt=8192, graphs=2048, prefix=False,
               moe="marlin", ep="none"),),
    ("openai/gpt-oss-120b", "fp4", "h100"): (
        Script("gptoss_fp4_h100.sh before PR 327 (v0.11.2: no VLLM_MXFP4_USE_MARLIN yet; "
               "INFERRED from perf-changelog PR 327)", seqs="conc", mnbt=8192, graphs=2048,
               prefix=False, ep="none", mml=10240),
        Script("gptoss_fp4_h100.sh whn09/InferenceX @53605e05 (v0.18.0, PR 960; "
               "VLLM_MXFP4_USE_MARLIN=1 since PR 327)", release=(0, 13, 0), seqs="conc",
               mnbt=8192, graphs=2048, prefix=False, moe="marlin", ep="none", mml=10240)),
    ("moonshotai/Kimi-K2.5", "int4", "h200"): (
        Script("kimik2.5_int4_h200.sh @34bc7c40 (PR 847, v0.16.0; PR 926 then turned prefix "
               "caching off): tensor parallel only", util=0.95, seqs="conc", ep="none"),),
    ("moonshotai/Kimi-K2.5", "int4", "b200"): (
        Script("kimik2.5_int4_b200.sh whn09/InferenceX @53605e05 (v0.15.1; INFERRED in force "
               "for the 2026-03-24 rows, after PR 735's util 0.97 original): tensor "
               "parallel only", util=0.95, seqs="conc", ep="none"),),
    ("moonshotai/Kimi-K2.5", "fp4", "b200"): (
        Script("kimik2.5_fp4_b200.sh @04107b3d (PR 862, v0.17.0; PR 926 then turned prefix "
               "caching off; PR 1047's fp8 KV and 2048-token graphs came after the rows of "
               "2026-04-20: INFERRED): tensor parallel only, even for the rows' EP 4",
               seqs="conc", ep="none"),),
    ("moonshotai/Kimi-K2.5", "fp4", "b300"): (
        Script("kimik2.5_fp4_b300.sh mpashkovskii/InferenceX @01d209c2 (PR 1100, v0.19.0-cu130;"
               " the rows of 2026-04-03 predate it: INFERRED the same): tensor parallel only",
               seqs="conc", prefix=False, ep="none"),),
}
_BORROW = {"h100": "h200", "b300": "b200", "h200": "b200"}  # ASSUMPTION: the sibling script

# The InferenceX matrix entries that ran with dp-attn (nvidia-master.yaml, mpashkovskii/
# InferenceX @01d209c2, late April 2026): (ISL, OSL, TP, EP_SIZE, lowest and highest CONC).
# Only scripts with a DP_ATTENTION branch (Script.dp_attn) act on it.
DP_ATTENTION: dict[tuple[str, str, str], tuple[tuple[int, ...], ...]] = {
    ("MiniMaxAI/MiniMax-M2.5", "fp4", "b200"): ((1024, 1024, 2, 2, 256, 1024),),
    ("MiniMaxAI/MiniMax-M2.5", "fp4", "b300"): ((1024, 1024, 2, 2, 256, 2048),
                                                (8192, 1024, 2, 2, 512, 512)),
}


def _release(version: str) -> tuple[int, ...] | None:
    """(major, minor, patch) of a release image's version ('0.18.0'); None for a nightly
    or an unnamed one."""
    parts = version.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def _script(row: Row) -> Script:
    """The server script ROW ran: the newest version in force for its image and date, or a
    sibling GPU's (ASSUMPTION), or vLLM's defaults (ASSUMPTION)."""
    gpu = row.gpu.split("-")[0]
    for g in (gpu, _BORROW.get(gpu, "")):
        versions = [s for s in SCRIPTS.get((row.model_path, row.precision, g), ())
                    if s.applies(row)]
        if versions:
            s = versions[-1]
            return s if g == gpu else dataclasses.replace(
                s, src=f"ASSUMPTION: as {s.src} (no {gpu} script read)")
    return Script("ASSUMPTION: vLLM's defaults at --gpu-memory-utilization 0.9")


def _matrix(row: Row) -> tuple[int, int]:
    """(TP, EP_SIZE) of the InferenceX matrix entry ROW ran. aiconfigurator's db-dump rows
    write an expert-parallel entry either as attention_dp 1, moe_ep EP or as attention_dp EP,
    moe_ep TP x EP (the same 4-GPU TP 4 EP 4 deployment both ways: 61 rows that read as 16
    GPUs); attention_dp > 1 says nothing of DP attention (InferenceX's dp-attn is in
    DP_ATTENTION)."""
    if row.attn_dp > 1 and row.moe_tp == 1 and row.moe_ep == row.tp * row.attn_dp:
        return row.tp, row.attn_dp
    return row.tp, row.moe_ep


def _mnbt(rule, row: Row) -> int | None:
    """--max-num-batched-tokens of the script: a number, vLLM's default, 2 x ISL, or the
    MiniMax H200 script's rule by concurrency (16384 up to 32 clients, 32768 for 64-256, 2 x
    ISL else)."""
    if rule == "minimax_h200":
        c = row.concurrency
        return 16384 if c <= 32 else 32768 if c <= 256 else 2 * row.isl
    return 2 * row.isl if rule == "2isl" else rule


def _inferencex(row: Row) -> Protocol:
    srv, c = _script(row), row.concurrency
    key = (row.model_path, row.precision, row.gpu.split("-")[0])
    tp, ep = _matrix(row)
    dp_attn = srv.dp_attn and any(
        (row.isl, row.osl, tp, ep) == e[:4] and e[4] <= c <= e[5]
        for e in DP_ATTENTION.get(key, ()))
    if dp_attn:  # --tensor-parallel-size 1 --data-parallel-size $TP --enable-expert-parallel
        tp, dp, expert = 1, tp, True
    else:
        dp, expert = 1, {"always": True, "gt1": ep > 1, "none": False}[srv.ep]
    seqs = c if srv.seqs == "conc" else srv.seqs
    if srv.mml is not None:
        mml = srv.mml
    elif row.isl == 1024 and row.osl == 1024:  # the scripts' CALCULATED_MAX_MODEL_LEN
        mml = row.isl + row.osl + 20
    elif 8192 in (row.isl, row.osl):
        mml = row.isl + row.osl + 200
    else:
        mml = 10240
    block = 32 if srv.mnbt == "minimax_h200" and c in (128, 256) else srv.block
    # one DP rank of the load-balanced endpoint: its share of the clients and prompts
    return Protocol(
        name="inferencex", num_prompts=10 * c // dp, concurrency=max(1, c // dp),
        range_ratio=0.8, range_below=True, max_num_seqs=seqs,
        max_num_batched_tokens=_mnbt(srv.mnbt, row), max_model_len=mml,
        kv_fp8=srv.kv, gpu_memory_utilization=srv.util, async_scheduling=True,
        source=f"{INFERENCEX}; server {srv.src}", block_size=block,
        prefix_caching=srv.prefix, moe_backend=srv.moe, moe_activation=srv.act,
        max_cudagraph_capture_size=srv.graphs, tensor_parallel=tp, data_parallel=dp,
        expert_parallel=expert, stream_interval=srv.stream)


def protocol(row: Row) -> Protocol:
    """How ROW was measured (see INFERENCEMAX / GAP_ANALYSIS for the sources)."""
    c = row.concurrency
    if "model=Llama-3.1-70B" in row.data_source:
        return Protocol(
            name="inferencemax", num_prompts=10 * c, concurrency=c, range_ratio=0.8,
            range_below=True, max_num_seqs=512 if row.gpu == "b200" else c,
            max_num_batched_tokens=8192, max_model_len=10240, kv_fp8=row.gpu != "h100-sxm",
            gpu_memory_utilization=0.9, async_scheduling=True, source=INFERENCEMAX)
    if "image=vllm/vllm-openai" in row.data_source or "db-dump/" in row.data_source \
            or "model=" in row.data_source or KIMI_GAP_FILE in row.data_source:
        return _inferencex(row)
    return Protocol(
        name="gap-analysis", num_prompts=10 * c, concurrency=c, range_ratio=0.0,
        range_below=False, max_num_seqs=None, max_num_batched_tokens=None, max_model_len=None,
        kv_fp8=False, gpu_memory_utilization=0.9, async_scheduling=False, source=GAP_ANALYSIS,
        ingress_per_token_us=0.0)
