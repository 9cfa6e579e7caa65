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
    kv_fp8: bool              # --kv-cache-dtype fp8
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
    # --enable-expert-parallel; None: on where the row's MoE EP size is > 1
    expert_parallel: bool | None = None


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
    if row.tp * row.attn_dp > 8:
        return (f"{row.tp * row.attn_dp} GPUs (TP {row.tp} x attention DP {row.attn_dp}): "
                "more than one 8-GPU node")
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
        "fp4": ("minimax-m2.5", {"dtype_bits": 4, "moe_dtype_bits": 4,
                                 "quantization": "modelopt_fp4", "weight_block_size": 0})},
    # openai/gpt-oss-120b: MXFP4 experts, bf16 attention (the CSV's "nvfp4" label aside)
    "openai/gpt-oss-120b": {"fp4": ("gpt-oss-120b", {})},
    # moonshotai/Kimi-K2.5: int4 weight-only experts (compressed-tensors), bf16 elsewhere;
    # nvidia/Kimi-K2.5-NVFP4: NVFP4 experts
    "moonshotai/Kimi-K2.5": {
        "int4": ("kimi-k2.5", {}),
        "fp4": ("kimi-k2.5", {"moe_dtype_bits": 4, "quantization": "modelopt_fp4"})},
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
    "(commit in SERVERS); async scheduling on (vLLM's default since PR 27614, before these "
    "images)")

# (model path, precision, GPU) -> server flags of the InferenceX script read (commit), or an
# ASSUMPTION naming the script it borrows from. seqs/mnbt None: vLLM's default.
SERVERS: dict[tuple[str, str, str], dict] = {
    ("MiniMaxAI/MiniMax-M2.5", "fp8", "b200"): dict(
        util=0.95, block=32, kv_fp8=False, prefix=True, seqs=None, mnbt=None,
        # VLLM_USE_FLASHINFER_MOE_FP8=0, VLLM_MOE_USE_DEEP_GEMM=0: ASSUMPTION, what is left
        # for block-fp8 experts is vLLM's Triton fused_moe (aiconfigurator timed it, 0.22)
        moe="triton", src="minimaxm2.5_fp8_b200.sh @07e171a3"),
    ("MiniMaxAI/MiniMax-M2.5", "fp8", "h200"): dict(
        util=0.95, block=None, kv_fp8=True, prefix=False, seqs=512, mnbt="minimax_h200",
        moe="triton", src="minimaxm2.5_fp8_h200.sh @0949de54 (--moe-backend triton)"),
    ("MiniMaxAI/MiniMax-M2.5", "fp4", "b200"): dict(
        util=0.90, block=None, kv_fp8=False, prefix=True, seqs="conc", mnbt=None,
        src="minimaxm2.5_fp4_b200.sh @56245be3"),
    ("openai/gpt-oss-120b", "fp4", "b200"): dict(
        util=0.90, block=None, kv_fp8=True, prefix=False, seqs=512, mnbt=8192, graphs=2048,
        # VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1: FlashInfer TRT-LLM with mxfp8 activations
        # (the profile's w4a8_mxfp4_mxfp8 curves: SGLang's timing of the same kernel)
        act="mxfp8", src="gptoss_fp4_b200.sh @34bc7c40 (VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1)"),
    ("openai/gpt-oss-120b", "fp4", "h200"): dict(
        util=0.90, block=None, kv_fp8=False, prefix=False, seqs="conc", mnbt=8192, graphs=2048,
        moe="marlin", src="gptoss_fp4_h200.sh @34bc7c40 (VLLM_MXFP4_USE_MARLIN=1)"),
    ("openai/gpt-oss-120b", "fp4", "h100"): dict(
        util=0.90, block=None, kv_fp8=False, prefix=False, seqs="conc", mnbt=8192, graphs=2048,
        moe="marlin", src="gptoss_fp4_h100.sh @34bc7c40 (VLLM_MXFP4_USE_MARLIN=1)"),
    ("moonshotai/Kimi-K2.5", "int4", "h200"): dict(
        util=0.95, block=None, kv_fp8=False, prefix=True, seqs="conc", mnbt=None,
        src="kimik2.5_int4_h200.sh @34bc7c40"),
    ("moonshotai/Kimi-K2.5", "int4", "b200"): dict(
        util=0.97, block=None, kv_fp8=False, prefix=True, seqs=None, mnbt=None,
        src="kimik2.5_int4_b200.sh @2b7b6949"),
    ("moonshotai/Kimi-K2.5", "fp4", "b200"): dict(
        util=0.90, block=None, kv_fp8=False, prefix=True, seqs="conc", mnbt=None,
        src="kimik2.5_fp4_b200.sh @04107b3d"),
}
# (model path, precision, GPU) -> (the image the script in SERVERS came with, the script
# before it): rows measured on an older image ran the older script. InferenceX's
# perf-changelog: MiniMax-M2.5 FP8 H200 came at v0.16.0 (PRs 831 TP4, 869 TP8), moved to
# v0.18.0 (958), lost prefix caching (966), and took fp8 KV, FlashInfer attention, Triton
# MoE and the QK-norm fusion only with v0.20.1 (1354). The script before (whn09/InferenceX
# @53605e05, lishuoshuo-amd/InferenceX @f2931b49): `if [ "$EP_SIZE" -ge 1 ]` turns
# --enable-expert-parallel on for every row (its EP_SIZE is 1, the rows' moe_ep), with
# --gpu-memory-utilization 0.95 and vLLM's defaults otherwise (KV dtype auto: bf16).
EARLIER: dict[tuple[str, str, str], tuple[tuple[int, ...], dict]] = {
    ("MiniMaxAI/MiniMax-M2.5", "fp8", "h200"): ((0, 20), dict(
        util=0.95, block=None, kv_fp8=False, prefix=False, seqs=None, mnbt=None, ep=True,
        src="minimaxm2.5_fp8_h200.sh before InferenceX PR 1354 (whn09/InferenceX "
            "@53605e05: --enable-expert-parallel whenever EP_SIZE >= 1)")),
}
_BORROW = {"h100": "h200", "b300": "b200", "h200": "b200"}  # ASSUMPTION: the sibling script


def _release(version: str) -> tuple[int, ...] | None:
    """(major, minor, patch) of a release image's version ('0.18.0'); None for a nightly
    or an unnamed one."""
    parts = version.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def _script(key: tuple[str, str, str], row: Row) -> dict | None:
    """The server flags of KEY's script as ROW's image ran it, or None if none was read."""
    if key in EARLIER:
        since, older = EARLIER[key]
        release = _release(row.version)
        if release is not None and release < since:
            return older
    return SERVERS.get(key)


def _server(row: Row) -> dict:
    gpu = row.gpu.split("-")[0]
    srv = _script((row.model_path, row.precision, gpu), row)
    if srv is not None:
        return srv
    alt = _script((row.model_path, row.precision, _BORROW.get(gpu, "")), row)
    if alt is not None:
        return {**alt, "src": f"ASSUMPTION: as {alt['src']} (no {gpu} script read)"}
    return dict(util=0.90, block=None, kv_fp8=False, prefix=True, seqs=None, mnbt=None,
                src="ASSUMPTION: vLLM's defaults at --gpu-memory-utilization 0.9")


def _mnbt(rule, row: Row) -> int | None:
    """--max-num-batched-tokens of the script: a number, vLLM's default, or the MiniMax H200
    script's rule by concurrency (16384 up to 32 clients, 32768 for 64-256, 2 x ISL else)."""
    if rule == "minimax_h200":
        c = row.concurrency
        return 16384 if c <= 32 else 32768 if c <= 256 else 2 * row.isl
    return rule


def _inferencex(row: Row) -> Protocol:
    srv, c = _server(row), row.concurrency
    dp = row.attn_dp
    seqs = c if srv["seqs"] == "conc" else srv["seqs"]
    if row.isl == 1024 and row.osl == 1024:  # the scripts' CALCULATED_MAX_MODEL_LEN
        mml = row.isl + row.osl + 20
    elif 8192 in (row.isl, row.osl):
        mml = row.isl + row.osl + 200
    else:
        mml = 10240
    block = 32 if srv["mnbt"] == "minimax_h200" and c in (128, 256) else srv["block"]
    # one DP rank of the load-balanced endpoint: its share of the clients and prompts
    return Protocol(
        name="inferencex", num_prompts=10 * c // dp, concurrency=max(1, c // dp),
        range_ratio=0.8, range_below=True, max_num_seqs=seqs,
        max_num_batched_tokens=_mnbt(srv["mnbt"], row), max_model_len=mml,
        kv_fp8=srv["kv_fp8"], gpu_memory_utilization=srv["util"], async_scheduling=True,
        source=f"{INFERENCEX}; server {srv['src']}", block_size=block,
        prefix_caching=srv["prefix"], moe_backend=srv.get("moe", "auto"),
        moe_activation=srv.get("act", "auto"),
        max_cudagraph_capture_size=srv.get("graphs"), expert_parallel=srv.get("ep"))


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
