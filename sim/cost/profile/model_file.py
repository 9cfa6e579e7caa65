"""The fitted step-time model file: a versioned YAML schema (pydantic), read and written here.

Pure pydantic + numpy + yaml (no torch): the simulator's ``fitted`` cost model imports it.

    schema_version: 1
    kind: ops | steps          ops: per-operation tables; steps: a fit of whole engine steps
    gpu, framework, dtype      what the timings describe (e.g. h200-sxm, vllm, bfloat16)
    provenance                 source, device, versions, date, profile hash, seed, notes
    hardware                   (optional) the fingerprint of what was timed: CPU, speed flags,
                               cores, GPU, dtype, threads, load (calibrate/fingerprint.py);
                               files from before it have none ("hardware not recorded")
    norm                       the roofline each table is relative to (peak FLOP/s, B/s, floor)
    ops: {gemm, prefill_attn, decode_attn, allreduce}: each a table of
         log2(measured / roofline) on log2 axes (sim/cost/profile/work.py), with its held-out error;
         dtype variants beside them: gemm.fp8 (fp8 weights), prefill_attn.fp8_kv,
         decode_attn.fp8_kv (fp8 KV cache)
    elementwise                norms, activation, RoPE, KV write, embedding, sampling: the
                               bandwidth roofline's efficiency and per-kernel floor
    step_overhead_ms           fixed per-step cost added once per engine step
    host_overhead              per-step host cost: base + per layer + per extra TP rank
    steps                      (kind steps) execution + host terms of whole steps, delays,
                               covered ranges (sim/cost/stepfit.py prices them)

Table values are stored compactly: int16-quantised (error < 1e-4 in log2), zlib, base64.
"""

from __future__ import annotations

import base64
import functools
import os
import zlib
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from sim.cost.profile.grid import evaluate
from traces.errors import InputError
from traces.files import read_utf8

SCHEMA_VERSION = 1
# the shipped profiles are calibration outputs, kept beside the harness that writes them
MODELS_DIR = Path(__file__).resolve().parents[3] / "calibrate" / "models"
MODEL_MAX_BYTES = 256 << 20  # shipped model files are < 1 MiB
HEADER = "# servesim fitted step-time model (calibrate/README.md)\n"  # every model file's start
_STRICT = ConfigDict(extra="forbid")


class ModelFileError(InputError):
    """A model file that cannot be read or does not follow the schema."""


class Errors(BaseModel):
    """Absolute percentage errors |predicted / measured - 1| over a set of rows (percent)."""

    model_config = _STRICT
    rows: int = Field(ge=0, description="Rows evaluated (count).")
    median_ape: float = Field(description="Median absolute percentage error (%).")
    p90_ape: float = Field(description="90th-percentile absolute percentage error (%).")
    max_ape: float = Field(description="Largest absolute percentage error (%).")

    def over_bar(self) -> bool:
        """Misses ``BAR``, the held-out error a shipped table should meet."""
        return self.median_ape > BAR["median_ape"] or self.p90_ape > BAR["p90_ape"]


BAR = {"median_ape": 5.0, "p90_ape": 15.0}  # held-out error a shipped table should meet (%)


class Axis(BaseModel):
    model_config = _STRICT
    name: str = Field(description="Quantity on this axis (sim/cost/profile/work.py AXES).")
    nodes: list[float] = Field(min_length=1, description="Grid nodes, log2 of the quantity.")


class OpTable(BaseModel):
    """log2(measured / roofline) of one operation on a grid of log2 coordinates."""

    model_config = _STRICT
    axes: list[Axis]
    encoding: Literal["zlib-int16-b64"] = "zlib-int16-b64"
    offset: float = Field(description="value = offset + scale * stored int16.")
    scale: float = Field(gt=0)
    values: str = Field(description="Node values, C order over the axes, encoded.")
    train: Errors = Field(description="Error on the rows the table was fitted to.")
    heldout: Errors | None = Field(None, description="Error on rows held out of the fit.")
    _grid: np.ndarray | None = PrivateAttr(None)  # the decoded values (``grid``)

    def __eq__(self, other) -> bool:  # the tables, not whether ``grid`` was decoded yet
        if not isinstance(other, OpTable):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in type(self).model_fields)

    __hash__ = None  # as a mutable pydantic model's

    def nodes(self) -> list[np.ndarray]:
        return [np.asarray(a.nodes, dtype=np.float64) for a in self.axes]

    def grid(self) -> np.ndarray:
        """Decoded node values, shape = node counts per axis (read-only: decoded once per
        table, and a model file is loaded once per path; a fleet's replicas share it)."""
        if self._grid is None:
            raw = np.frombuffer(zlib.decompress(base64.b64decode(self.values)), dtype="<i2")
            shape = tuple(len(a.nodes) for a in self.axes)
            if raw.size != int(np.prod(shape)):
                raise ValueError(f"table has {raw.size} values, its axes need "
                                 f"{int(np.prod(shape))}")
            grid = (self.offset + self.scale * raw.astype(np.float64)).reshape(shape)
            grid.setflags(write=False)
            self._grid = grid
        return self._grid

    def log2_ratio(self, coords: np.ndarray) -> np.ndarray:
        """Interpolated log2(measured / roofline) at [N, D] coordinates."""
        return evaluate(self.grid(), self.nodes(), coords)

    @staticmethod
    def encode(values: np.ndarray) -> tuple[str, float, float]:
        """(encoded, offset, scale) of float node values."""
        lo, hi = float(values.min()), float(values.max())
        scale = max(hi - lo, 1e-9) / 65000.0
        offset = (lo + hi) / 2
        q = np.rint((values - offset) / scale).astype("<i2")
        return base64.b64encode(zlib.compress(q.tobytes(), 9)).decode("ascii"), offset, scale


# curve keys: one fused-MoE layer (calibrate/aiconfigurator_curves.py); one MLA attention module
MOE_KEY = ("dtype", "hidden", "inter", "experts", "topk", "tp", "ep", "distribution")
MLA_KEY = ("arch", "kv_dtype", "gemm", "heads")
WINDOW_KEY = ("window", "kv_dtype", "heads", "kv_heads", "head_dim")  # heads: per GPU
_MISSING = -32768  # stored int16 of a node the measurement did not cover


def moe_key(dtype: str, hidden: int, inter: int, experts: int, topk: int, tp: int, ep: int,
            distribution: str) -> str:
    """The curve key of one expert configuration (``MOE_KEY`` order)."""
    return "|".join(str(v) for v in (dtype, hidden, inter, experts, topk, tp, ep, distribution))


def window_key(window: int, kv_dtype: str, heads: int, kv_heads: int, head_dim: int) -> str:
    """The curve key of one sliding-window attention shape (``WINDOW_KEY`` order)."""
    return "|".join(str(v) for v in (window, kv_dtype, heads, kv_heads, head_dim))


class CurveAxis(BaseModel):
    model_config = _STRICT
    name: str = Field(description="Quantity on this axis (tokens, batch, isl, context).")
    nodes: list[int] = Field(min_length=2, description="Measured values, increasing.")

    @model_validator(mode="after")
    def _check(self) -> CurveAxis:
        if any(b <= a for a, b in zip(self.nodes, self.nodes[1:])) or self.nodes[0] < 0:
            raise ValueError(f"{self.name}: nodes must be strictly increasing counts >= 0")
        return self


class CurveTable(BaseModel):
    """Measured kernel (or module) times keyed by configuration: one curve per key over
    shared integer axes (e.g. the fused-MoE layer over the step's token count; the MLA
    attention module over batch and sequence length). A key is ``fields`` joined by
    ``|``; values are log2(ms), NaN where the measurement did not cover a node."""

    model_config = _STRICT
    fields: list[str] = Field(description="What each part of a key names, in order.")
    axes: list[CurveAxis] = Field(min_length=1, max_length=2)
    curves: list[str] = Field(description="One key per curve (fields joined by '|').")
    kernels: list[str] = Field(description="The kernel each curve timed (aiconfigurator's "
                               "kernel_source).")
    encoding: Literal["zlib-int16-b64"] = "zlib-int16-b64"
    offset: float = Field(description="log2(ms) = offset + scale * stored int16.")
    scale: float = Field(gt=0)
    values: str = Field(description="[curve, *axes] log2(ms), C order, encoded; -32768 = "
                        "not measured.")
    source: str = Field(description="Where the timings come from.")

    @model_validator(mode="after")
    def _check(self) -> CurveTable:
        if len(self.kernels) != len(self.curves):
            raise ValueError("kernels and curves must have the same length")
        return self

    @property
    def tokens(self) -> list[int]:
        """The first axis' nodes (the token counts of a MoE table)."""
        return self.axes[0].nodes

    def index(self) -> dict[str, int]:
        return {k: i for i, k in enumerate(self.curves)}

    def ms(self) -> np.ndarray:
        """[curve, *axes] milliseconds, NaN where not measured."""
        raw = np.frombuffer(zlib.decompress(base64.b64decode(self.values)), dtype="<i2")
        raw = raw.reshape(len(self.curves), *(len(a.nodes) for a in self.axes))
        out = np.exp2(self.offset + self.scale * raw.astype(np.float64))
        out[raw == _MISSING] = np.nan
        return out

    @staticmethod
    def encode(ms: np.ndarray) -> tuple[str, float, float]:
        """(encoded, offset, scale) of a [curve, *axes] ms array (NaN = not measured)."""
        lg = np.log2(ms)
        ok = np.isfinite(lg)
        lo, hi = float(lg[ok].min()), float(lg[ok].max())
        scale = max(hi - lo, 1e-9) / 65000.0
        offset = (lo + hi) / 2
        q = np.where(ok, np.rint((np.where(ok, lg, offset) - offset) / scale), _MISSING)
        q = q.astype("<i2")
        return base64.b64encode(zlib.compress(q.tobytes(), 9)).decode("ascii"), offset, scale


class Norm(BaseModel):
    """The roofline the tables are relative to (sim/cost/profile/work.py roofline_s)."""

    model_config = _STRICT
    peak_flops: float = Field(gt=0, description="Compute roof (FLOP/s).")
    mem_bandwidth: float = Field(gt=0, description="Memory roof (bytes/s).")
    link_bandwidth: float = Field(gt=0, description="All-reduce link roof per GPU (bytes/s).")
    floor_s: float = Field(ge=0, description="Added to every roofline time (seconds).")
    fp8_peak_flops: float | None = Field(
        None, gt=0, description="Compute roof of fp8 GEMMs (FLOP/s); None: no fp8 tables.")
    fp4_peak_flops: float | None = Field(
        None, gt=0, description="Compute roof of fp4 GEMMs (FLOP/s); None: no fp4 tables.")


class Provenance(BaseModel):
    model_config = _STRICT
    source: str = Field(description="Where the timings come from.")
    device: str = Field(description="Device name as the measuring library reported it.")
    created: str = Field(description="When the fit was made (ISO 8601, UTC).")
    tool: str = Field(description="What made the file.")
    profile: str = Field("", description="The profile / log fitted (path or table list).")
    profile_sha256: str = Field("", description="Hash of the fitted rows' shape keys+times.")
    rows: int = Field(0, ge=0, description="Rows in the profile (count).")
    versions: dict[str, str] = Field(default_factory=dict, description="Library versions.")
    seed: int = Field(0, description="Seed of the held-out split.")
    heldout_fraction: float = Field(0.2, ge=0, lt=1, description="Rows held out (fraction).")
    notes: list[str] = Field(default_factory=list, description="Caveats, in words.")


class Hardware(BaseModel):
    """What the timings were measured on (calibrate/fingerprint.py capture)."""

    model_config = _STRICT
    source: str = Field(description="Where the fingerprint was taken: this machine, recorded "
                        "runs (their run.json), aiconfigurator tables.")
    cpu: str = Field("", description="CPU model name ('' for imported GPU tables).")
    cpu_flags: list[str] = Field(default_factory=list, description="Speed-relevant CPU "
                                 "flags present (avx2, avx512f, avx512_bf16, amx_bf16, ...).")
    cores: int = Field(0, ge=0, description="Logical CPUs online (count; 0: not recorded).")
    gpu: str | None = Field(None, description="GPU name; None: timed on the CPU.")
    dtype: str = Field(description="Model / activation dtype timed.")
    threads: dict[str, str] = Field(default_factory=dict, description="Thread binding and "
                                    "counts, in words (affinity, OMP and vLLM settings).")
    loadavg: list[float] = Field(default_factory=list, description="1, 5, 15-minute load "
                                 "average when measured (a condition, not identity).")
    captured: str = Field("", description="When the fingerprint was taken (ISO 8601, UTC).")


def hardware_of(fp: dict, source: str | None = None) -> Hardware:
    """A fingerprint dict (calibrate/fingerprint.py, run.json) as the schema's Hardware;
    keys it does not know are dropped, thread values made strings."""
    doc = {k: v for k, v in fp.items() if k in Hardware.model_fields}
    doc["threads"] = {str(k): str(v) for k, v in (doc.get("threads") or {}).items()}
    doc["loadavg"] = [float(x) for x in doc.get("loadavg") or []]
    if source is not None:
        doc["source"] = source
    try:
        return Hardware.model_validate(doc)
    except ValidationError as e:
        err = e.errors()[0]
        raise ModelFileError(f"hardware fingerprint: {'.'.join(map(str, err['loc']))}: "
                             f"{err['msg']}") from None


class StepTerms(BaseModel):
    """A linear step-time model (ms): ``base + request * R + prefill_token * P
    + prefill_pair * A + decode_seq * max(0, D - decode_knee) + context_token * C
    + N * (new_shape + new_shape_token * P)`` with R requests scheduled, P prefill-shaped
    tokens, A prefill attention pairs (sum over prefill-shaped requests of q * (prefix +
    q / 2)), D decode-shaped requests, C context tokens those decode requests read, N = 1 on
    the first step of the run with its token count (P + D), else 0. Every coefficient >= 0
    (sim/cost/stepfit.py)."""

    model_config = _STRICT
    base_ms: float = Field(ge=0, description="Fixed time of every step (ms).")
    request_ms: float = Field(0.0, ge=0, description="Per scheduled request (ms/request).")
    prefill_token_ms: float = Field(0.0, ge=0, description="Per prefill-shaped token (ms).")
    prefill_pair_ms: float = Field(0.0, ge=0, description="Per prefill query-key pair (ms).")
    decode_seq_ms: float = Field(0.0, ge=0, description="Per decode request beyond the knee "
                                 "(ms/request).")
    decode_knee: int = Field(0, ge=0, description="Decode requests a step carries before the "
                             "per-request decode term starts (requests).")
    context_token_ms: float = Field(0.0, ge=0, description="Per context token a decode "
                                    "request reads (ms/token).")
    new_shape_ms: float = Field(0.0, ge=0, description="Once per token count: a step whose "
                                "scheduled tokens the engine has not run before in the run "
                                "(ms; vLLM on the CPU pays it: sim/cost/stepfit.py).")
    new_shape_token_ms: float = Field(0.0, ge=0, description="Per prefill-shaped token of such "
                                      "a first-of-its-count step (ms/token).")


class HostTerms(BaseModel):
    """Host time between steps, beyond model execution: scheduling, IPC, output handling."""

    model_config = _STRICT
    base_ms: float = Field(ge=0, description="Fixed host time per step (ms).")
    request_ms: float = Field(0.0, ge=0, description="Per scheduled request (ms/request).")


class StepErrors(Errors):
    """Errors of whole steps, with the bias that matters for totals."""

    time_bias_pct: float = Field(0.0, description="sum(predicted) / sum(measured) - 1 (%): "
                                 "the time-weighted bias.")


class StepRanges(BaseModel):
    """What the fitted logs covered; a run outside is extrapolating."""

    model_config = _STRICT
    requests: int = Field(ge=0, description="Most requests in one step (batch).")
    decode_seqs: int = Field(ge=0, description="Most decode-shaped requests in one step.")
    prefill_tokens: int = Field(ge=0, description="Most prefill-shaped tokens in one step.")
    context_tokens: int | None = Field(None, ge=0, description="Longest KV a decode request "
                                       "read (tokens; None: not in the logs).")
    prompt_tokens: int | None = Field(None, ge=0, description="Longest prompt prefilled "
                                      "(prefix + chunk, tokens; None: not in the logs).")


class StepsFit(BaseModel):
    """kind steps (fit-steps): step = execution + host, each a linear model (ms)."""

    model_config = _STRICT
    target: Literal["interval", "execution"] = Field(
        "interval", description="interval: the model prices the step-to-step interval "
        "(execution + host); execution: model execution only (the log had no intervals).")
    execution: StepTerms = Field(description="Model execution (or the whole interval when "
                                 "the log timed intervals only).")
    host: HostTerms | None = Field(None, description="Interval minus execution, when both "
                                   "were logged.")
    ingress_ms: float | None = Field(None, ge=0, description="Client send -> scheduler "
                                     "sees the request (ms), from recorded runs.")
    egress_ms: float | None = Field(None, ge=0, description="Step end -> client has the "
                                    "token (ms), from recorded runs.")
    ranges: StepRanges | None = None
    weighting: str = Field("time", description="How steps weigh in the least squares.")
    logs: list[str] = Field(default_factory=list, description="Step logs fitted.")
    train: StepErrors
    heldout: StepErrors | None = None


class Elementwise(BaseModel):
    """Memory-bound kernels priced as bytes / (bandwidth x efficiency) + a per-kernel floor."""

    model_config = _STRICT
    mem_efficiency: float = Field(gt=0, le=1, description="Achieved / peak HBM bandwidth of "
                                  "norms, activation, RoPE, KV write, sampling (fraction).")
    gather_efficiency: float = Field(gt=0, le=1, description="Achieved / peak HBM bandwidth "
                                     "of the embedding gather (fraction).")
    kernel_floor_s: float = Field(ge=0, description="Fixed GPU time of one such kernel (s).")
    source: str = Field(description="Where the figures come from.")


class OverheadByRequests(BaseModel):
    """Per-step cost outside the timed operations by the step's request count, measured
    (servesim fidelity): linear between the counts, constant beyond the ends."""

    model_config = _STRICT
    requests: list[int] = Field(min_length=1, description="Request counts of a step, "
                                "strictly increasing (count).")
    ms: list[float] = Field(min_length=1, description="Cost at each count (ms, >= 0).")

    @model_validator(mode="after")
    def _check(self) -> OverheadByRequests:
        if len(self.requests) != len(self.ms):
            raise ValueError("requests and ms must have the same length")
        if any(b <= a for a, b in zip(self.requests, self.requests[1:])) or \
                self.requests[0] < 1:
            raise ValueError("requests must be strictly increasing counts >= 1")
        if any(not np.isfinite(v) or v < 0 for v in self.ms):
            raise ValueError("ms must be finite and >= 0")
        return self

    def at(self, requests):
        """Cost (ms) at ``requests`` (a number or an array)."""
        return np.interp(requests, self.requests, self.ms)


class OverheadPoint(BaseModel):
    """One published end-to-end measurement the host overhead was fitted to (or checked on)."""

    model_config = _STRICT
    name: str = Field(description="Which measurement (benchmark, model, GPU, tp).")
    layers: int = Field(ge=1, description="Transformer blocks of the model (count).")
    tp: int = Field(ge=1, description="Tensor-parallel size (GPUs).")
    steps: int = Field(ge=1, description="Engine steps the measurement spans (count).")
    measured_ms: float = Field(gt=0, description="The published figure (ms).")
    kernels_ms: float = Field(ge=0, description="servesim's kernel time alone (ms).")
    used: bool = Field(description="Fitted to (true) or held out and only checked (false).")
    async_scheduling: bool = Field(False, description="Measured with vLLM's async "
                                   "scheduling: the host cost hides under the kernels.")


class HostOverhead(BaseModel):
    """Per-step host cost (scheduler, input preparation, launch gaps, rank sync) in ms:
    ``base_ms + per_layer_ms * layers + per_tp_ms * (tp - 1)``."""

    model_config = _STRICT
    base_ms: float = Field(ge=0, description="Per step, any model (ms).")
    per_layer_ms: float = Field(ge=0, description="Per step and transformer block (ms).")
    per_tp_ms: float = Field(ge=0, description="Per step and tensor-parallel rank beyond the "
                             "first (ms).")
    source: str = Field(description="What it was fitted to.")
    points: list[OverheadPoint] = Field(default_factory=list,
                                        description="The measurements behind the fit.")
    eager_per_layer_ms: float = Field(
        0.0, ge=0, description="Host time to launch one dense transformer block's kernels "
        "in a step that runs without a CUDA graph (ms per block): more tokens than vLLM's "
        "max_cudagraph_capture_size, or --enforce-eager. The host launches while the GPU "
        "runs, so such a step takes max(GPU time, the blocks' launch time) plus the host "
        "cost above. Per GPU: vLLM's path (attention backend, fused kernels) differs by "
        "architecture.")
    eager_source: str = Field("", description="What eager_per_layer_ms was fitted to.")
    eager_moe_per_layer_ms: float | None = Field(
        None, ge=0, description="The same launch time for a block whose MLP is a fused-MoE "
        "layer (ms per block; unset: eager_per_layer_ms). vLLM's MoE layer launches more "
        "kernels, through more Python, than a dense MLP: the router GEMM, top-k, the "
        "block alignment, activation quantization, two grouped GEMMs and the reduction.")
    eager_moe_source: str = Field("", description="What eager_moe_per_layer_ms was chosen on.")

    def ms(self, layers: int, tp: int) -> float:
        """Host time of one step (ms) for a model of ``layers`` blocks at ``tp``."""
        return self.base_ms + self.per_layer_ms * layers + self.per_tp_ms * (tp - 1)


QUANT_GEMMS = ("fp8", "fp8_block", "nvfp4")  # weight formats with their own GEMM table


def table_key(op: str, weights: str = "", kv: str = "") -> str:
    """Key of an op's table in ``ModelFile.ops``: the op for the file's serving dtype,
    ``gemm.<format>`` for quantized weights (``fp8``: per-tensor fp8, vLLM's
    ``--quantization fp8``; ``fp8_block``: 128x128-block fp8 checkpoints such as
    DeepSeek/Qwen3-FP8/MiniMax-M2; ``nvfp4``: ModelOpt NVFP4), ``<attn>.fp8_kv`` for an fp8
    KV cache."""
    if op == "gemm" and weights in QUANT_GEMMS:
        return f"gemm.{weights}"
    if op in ("prefill_attn", "decode_attn") and kv == "fp8":
        return f"{op}.fp8_kv"
    return op


class ModelFile(BaseModel):
    model_config = _STRICT
    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["ops", "steps"] = "ops"
    gpu: str = Field(description="Catalog GPU name, or the device name when none fits.")
    framework: str = Field("", description="Serving framework the timings represent.")
    dtype: str = Field("bfloat16", description="GEMM / activation dtype timed.")
    model: str = Field("", description="Model profiled (informational; tables generalise).")
    tensor_parallel_size: int = Field(1, ge=1, description="TP of the profile (kind steps).")
    provenance: Provenance
    hardware: Hardware | None = Field(None, description="What was timed (None: not "
                                      "recorded, files from before fingerprints).")
    norm: Norm | None = None
    ops: dict[str, OpTable] = Field(default_factory=dict)
    step_overhead_ms: float = Field(0.0, ge=0, description="Fixed cost per engine step (ms).")
    step_overhead_source: str = Field("", description="Where step_overhead_ms comes from.")
    step_overhead_per_request_ms: float = Field(
        0.0, ge=0, description="Host cost per request of a step (ms per request: input "
        "building, one sampled row); added to the per-step overhead.")
    step_overhead_per_token_ms: float = Field(
        0.0, ge=0, description="Cost per token of a step outside the timed operations (ms "
        "per token: norms, RoPE, KV write, activations); added to the per-step overhead.")
    step_overhead_by_requests: OverheadByRequests | None = Field(
        None, description="Per-step cost by the step's request count (ms); replaces "
        "step_overhead_ms + step_overhead_per_request_ms x requests when set "
        "(step_overhead_per_token_ms is still added).")
    host_overhead: HostOverhead | None = Field(
        None, description="Per-step host cost by layers and tp; replaces step_overhead_ms.")
    elementwise: Elementwise | None = Field(
        None, description="Elementwise kernels' roofline; None: not priced.")
    moe: CurveTable | None = Field(
        None, description="Measured fused-MoE layer times (fields MOE_KEY, axis tokens); "
        "None: MoE models not priced.")
    mla_context: CurveTable | None = Field(
        None, description="Measured MLA attention module, prefill (fields MLA_KEY, axes "
        "batch x isl); None: MLA models not priced.")
    mla_generation: CurveTable | None = Field(
        None, description="Measured MLA attention module, decode (fields MLA_KEY, axes "
        "batch x context); None: MLA models not priced.")
    window_context: CurveTable | None = Field(
        None, description="Measured sliding-window attention, prefill (fields WINDOW_KEY, "
        "axes batch x isl); None: sliding layers priced as chunks of full attention.")
    window_generation: CurveTable | None = Field(
        None, description="Measured sliding-window attention, decode (fields WINDOW_KEY, "
        "axes batch x KV length); None: priced as full attention over the window.")
    frontend_us_per_token: float | None = Field(
        None, ge=0, description="API-server time per prompt token before the engine sees a "
        "request (us; engine.ingress_per_token_us defaults to it); None: none measured.")
    frontend_source: str = Field("", description="Where frontend_us_per_token comes from.")
    steps: StepsFit | None = None

    def overhead_ms(self, layers: int, tp: int) -> float:
        """Host time of one step (ms): the fitted host model, else the flat figure."""
        if self.host_overhead is not None:
            return self.host_overhead.ms(layers, tp)
        return self.step_overhead_ms


def save_model_file(mf: ModelFile, path: str | Path, flag: str = "--out") -> Path:
    """Write ``mf`` as YAML under the output-file policy (sim.report.outfile: a new file or
    one servesim wrote, replaced atomically); the shipped profiles are servesim's own."""
    from sim.report import outfile

    path = Path(path)
    text = yaml.safe_dump(mf.model_dump(mode="json"), sort_keys=False, width=100,
                          default_flow_style=None)  # node lists on one line each
    text = f"{HEADER}{text}"
    if _shipped(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.servesim-staging-{os.getpid():08x}")
        tmp.write_text(text)
        tmp.replace(path)
        return path
    outfile.write_text(path, flag, text, signature=HEADER.encode())
    return path


def _shipped(path: Path) -> bool:
    try:
        return Path(os.path.abspath(path)).is_relative_to(MODELS_DIR.resolve())
    except (OSError, ValueError):
        return False


@functools.lru_cache(maxsize=32)
def _load_cached(path: str, mtime_ns: int) -> ModelFile:
    text = read_utf8(Path(path), "a model file", MODEL_MAX_BYTES)
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError) as e:
        raise ModelFileError(f"{path}: invalid YAML ({e.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise ModelFileError(f"{path}: a model file must be a YAML mapping")
    try:
        return ModelFile.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ModelFileError(f"{path}: {loc}: {err['msg']}") from None


def load_model_file(path: str | Path) -> ModelFile:
    """Read and validate a model file (cached per path and modification time)."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        raise ModelFileError(f"{p}: model file not found") from None
    return _load_cached(str(p.resolve()), st.st_mtime_ns)


def shipped_profiles() -> dict[str, Path]:
    """Shipped model files by name ``<gpu>/<framework>`` (calibrate/models/<gpu>/<fw>.yaml)."""
    if not MODELS_DIR.is_dir():
        return {}
    return {f"{p.parent.name}/{p.stem}": p for p in sorted(MODELS_DIR.glob("*/*.yaml"))}


def resolve_profile(spec: str) -> Path:
    """Path of a profile given as ``<gpu>/<framework>`` (shipped) or as a file path."""
    shipped = shipped_profiles()
    if spec in shipped:
        return shipped[spec]
    p = Path(spec).expanduser()
    if p.suffix in (".yaml", ".yml") and p.is_file():
        return p
    names = ", ".join(shipped) or "none"
    raise ValueError(f"unknown profile {spec!r}: give a model YAML path or one of the shipped "
                     f"profiles: {names}")

def peak_of(key: str, norm: Norm) -> float:
    """Compute roof of a table (FLOP/s): fp8 GEMMs against the fp8 peak, fp4 against fp4."""
    if key in ("gemm.fp8", "gemm.fp8_block") and norm.fp8_peak_flops:
        return norm.fp8_peak_flops
    if key == "gemm.nvfp4" and norm.fp4_peak_flops:
        return norm.fp4_peak_flops
    return norm.peak_flops
