"""The fitted step-time model: measured per-operation tables composed into a step.

Reads a model file written by ``servesim calibrate fit`` / ``import-aiconfigurator`` /
``fit-steps`` (schema: sim/cost/profile/model_file.py). For an ``ops`` file, one step on one GPU
of the tensor-parallel group costs

    step = host(L, tp) + L * (GEMMs(T) + prefill_attn + decode_attn + 2 all-reduce(T))
                       + all-reduce(T) [embedding, tp > 1] + LM-head GEMM(R)
                       + elementwise(T, R)

with T tokens computed, R requests (logit rows), L layers; ``host`` is the file's
per-step host cost (base + per layer + per extra rank). A step of more tokens than vLLM's
CUDA graphs hold (Resolved.cuda_graph_max_tokens) runs eager: the host launches every
block's kernels while the GPU runs them, so it costs max(the above less host, dense blocks x
eager_per_layer_ms + MoE blocks x eager_moe_per_layer_ms) + host. Under async scheduling
(engine.async_scheduling) the host schedules and prepares a step while the GPU runs the
one before, so a step costs max(the above less host, host [+ the eager launches]); the
silicon replay's async rows (vLLM >= 0.14's default) moved from TPOT 10.8 % median / 39.9 %
p90 to 8.4 / 32.8 with it (NOTES). Each operation is ``roofline * 2^table(coords)``
(sim/cost/profile/work.py); the tables are restricted to this model's shapes once, at
construction, so pricing a step is a few 1-D/2-D interpolations:

* GEMMs: QKV, O, gate+up, down at m = T from the table of the model's weight dtype
  (``gemm`` or ``gemm.fp8``; the LM head, never quantized, from ``gemm`` at m = R),
  memoised per (T, R);
* prefill attention: per prefill-shaped request (q, p), at the step's count of such
  requests (they share one kernel launch); times add up FLOP-for-FLOP;
* decode attention: the decode requests as one batch at their mean context (vectorised
  over the steps of a decode run);
* attention from the tables of the model's KV dtype (``*_attn`` or ``*_attn.fp8_kv``);
  a sliding-window layer (gpt-oss) from the measured windowed kernel of its window and
  heads (the file's ``window_context`` / ``window_generation``), where the file has it;
* all-reduce: the file's table for this tp, else the GPU's roofline interconnect figures;
* elementwise kernels (sim/cost/elementwise.py) at the file's stated efficiency and floor.

A model whose weight or KV dtype has no table in the file is refused (one line naming
both); fp8 is never priced with bf16 tables.

A ``steps`` file (fit-steps) is priced by sim/cost/stepfit.py. Never imports torch or triton.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field, field_validator

from sim.cost.base import COST_MODELS, CostModel, decode_contexts
from sim.cost.curve_grid import MeasuredAttention
from sim.cost.elementwise import QK_VARIANCE_BYTES, ElementwiseWork
from sim.cost.layer_plan import dense_format, expert_format, plan_layers
from sim.cost.mla import MlaModule
from sim.cost.moe import MoeCurve, auto_distribution
from sim.cost.moe_routing import MOE_REACH, priced
from sim.cost.profile import grid, work
from sim.cost.profile.gemms import ELEM_BYTES
from sim.cost.profile.model_file import (
    BAR,
    ModelFile,
    load_model_file,
    moe_key,
    peak_of,
    resolve_profile,
    shipped_profiles,
    table_key,
    window_key,
)
from sim.cost.scalar import ScalarPricing
from sim.cost.stepfit import StepFitPricer
from traces.errors import InputError
from traces.validated import Validated

# vLLM's VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD default: the largest step (tokens) whose
# shared experts run on the second stream
SHARED_STREAM_TOKENS = 256

AUTO = "auto"
_EMPTY = np.zeros(0, dtype=np.int64)
MEMO_MAX = 1 << 18  # memoised prices kept at most per memo (entries, ~50 MB)


def default_profile(gpu_name: str, framework: str = "vllm") -> str | None:
    """The shipped profile ``<gpu>/<framework>`` for a catalog GPU, or None."""
    name = f"{gpu_name.strip().lower().replace('_', '-')}/{framework}"
    return name if name in shipped_profiles() else None


class FittedParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str = Field(
        AUTO, description="Shipped '<gpu>/<framework>' profile (calibrate/models), a path to "
        "a model YAML, or 'auto': the shipped '<gpu>/vllm' of the scenario's GPU.")
    moe_distribution: Literal["auto", "balanced", "power_law_1.01", "power_law_1.2"] = Field(
        "auto", description="How tokens spread over the experts in the measured fused-MoE "
        "curve used: 'auto' (aiconfigurator's default skew, power_law_1.01 for DeepSeek-style "
        "models and power_law_1.2 otherwise, with moe_reach of the experts independent "
        "routing reaches beyond it), 'balanced', 'power_law_1.01', 'power_law_1.2' (the "
        "measured curve as it is).")
    moe_reach: float = Field(
        MOE_REACH, ge=0, le=1, description="Under moe_distribution 'auto': the fraction of "
        "the experts that independently routed tokens reach beyond aiconfigurator's "
        "power-law draw whose weights a step reads (0: the measured power-law curve; 1: "
        "independent uniform routing), each priced at the time per expert the measured "
        "balanced and power-law curves show (sim/cost/moe_routing.py; chosen on NVIDIA's "
        "measured deployments, benchmarks/silicon --loso).")
    step_overhead_ms: float | None = Field(
        None, ge=0, description="Override the file's per-step host cost (ms; replaces its "
        "base + per-layer + per-TP model and its measured per-request, per-token and "
        "by-request-count terms).")

    eager_per_layer_ms: float | None = Field(
        None, ge=0, le=1000, description="Override the file's host launch time per dense "
        "transformer block of a step run without a CUDA graph (ms; see engine."
        "max_cudagraph_capture_size and enforce_eager): such a step takes max(GPU time, "
        "the blocks' launch time) plus the per-step host cost.")
    eager_moe_per_layer_ms: float | None = Field(
        None, ge=0, le=1000, description="Override the file's host launch time per block "
        "with a fused-MoE layer of a step run without a CUDA graph (ms; as "
        "eager_per_layer_ms, for the blocks of a mixture-of-experts model that route).")

    @field_validator("profile")
    @classmethod
    def _known(cls, v: str) -> str:
        if v != AUTO:
            resolve_profile(v)  # ValueError listing the shipped profiles
        return v


def _ratio_1d(table, fixed: dict[int, float]):
    """(x nodes, log2-ratio values) of a table restricted to one free axis."""
    vals, nodes = grid.restrict(table.grid(), table.nodes(), fixed)
    return nodes[0], vals


def _bilinear(table: tuple[np.ndarray, list[np.ndarray]], x0: np.ndarray,
              x1: np.ndarray) -> np.ndarray:
    """A 2-D table (values, [nodes0, nodes1]) at points (x0, x1), clamped at the edges;
    a one-node axis is constant along it. A fast path of sim.cost.profile.grid.evaluate."""
    vals, (n0, n1) = table
    if len(n1) == 1:
        return np.interp(x0, n0, vals[:, 0])
    if len(n0) == 1:
        return np.interp(x1, n1, vals[0])
    i = np.clip(np.searchsorted(n0, x0, side="right") - 1, 0, len(n0) - 2)
    j = np.clip(np.searchsorted(n1, x1, side="right") - 1, 0, len(n1) - 2)
    a = np.clip((x0 - n0[i]) / (n0[i + 1] - n0[i]), 0.0, 1.0)
    b = np.clip((x1 - n1[j]) / (n1[j + 1] - n1[j]), 0.0, 1.0)
    return ((1 - a) * ((1 - b) * vals[i, j] + b * vals[i, j + 1])
            + a * ((1 - b) * vals[i + 1, j] + b * vals[i + 1, j + 1]))


@COST_MODELS.register("fitted")
class FittedCost(ScalarPricing, CostModel):
    description = "per-op tables fitted to measured kernel timings (servesim calibrate)"
    Params = FittedParams

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        # vLLM's --enable-expert-parallel: experts on EP = TP x DP ranks, not TP-sharded
        # vLLM --data-parallel-size D: D engines step together through the MoE layers, which
        # see every rank's tokens (this engine prices one rank, the others as loaded as it)
        r = kw.get("resolved")
        self.dp, self.ep = (r.dp, r.ep) if r is not None else (1, 1)  # sim/config/resolve.py
        spec = self.params.profile
        if spec == AUTO:
            spec = default_profile(self.gpu.name)
            if spec is None:
                raise InputError(f"cost fitted: no shipped profile for GPU {self.gpu.name!r}; "
                                 f"shipped: {', '.join(shipped_profiles()) or 'none'}")
        self.spec = spec
        self.file: ModelFile = load_model_file(resolve_profile(spec))
        self.layers = self.model.num_layers
        ms = self.params.step_overhead_ms
        self.overhead = (self.file.overhead_ms(self.layers, self.tp) if ms is None else ms) * 1e-3
        # per request and per token of a step (s), or by request count: 0 / None unless
        # measured (servesim fidelity); an override replaces these too
        f = self.file
        self.over_req = (f.step_overhead_per_request_ms if ms is None else 0.0) * 1e-3
        self.over_tok = (f.step_overhead_per_token_ms if ms is None else 0.0) * 1e-3
        self.over_by_req = f.step_overhead_by_requests if ms is None else None
        self._memo: dict[tuple[int, int], float] = {}
        self._pure_memo: dict[int, tuple[float, float, bool]] = {}  # sim/cost/scalar.py
        # a step of more tokens than the CUDA graphs hold runs eager: the host launches
        # every block's kernels while the GPU runs them (seconds for all blocks)
        self.graph_max = r.cuda_graph_max_tokens if r is not None else 512
        dense_ms, moe_ms = self._eager_ms()
        m = self.model
        self.eager_s = (dense_ms * m.num_dense_layers + moe_ms * m.num_moe_layers) * 1e-3
        # async scheduling (engine.async_scheduling): the host schedules and prepares step
        # N + 1 while the GPU runs step N, so a step lasts the longer of the two
        self.async_host = bool(r is not None and r.scenario.engine.async_scheduling)
        # vLLM's --moe-backend: which measured fused-MoE curve prices the experts
        self.moe_backend = r.scenario.engine.moe_backend if r is not None else "auto"
        self.moe_activation = r.scenario.engine.moe_activation if r is not None else "auto"
        if self.file.kind == "ops":
            missing = [op for op in ("gemm", "prefill_attn", "decode_attn")
                       if op not in self.file.ops]
            if missing:
                raise InputError(f"cost fitted: {spec}: no table for {', '.join(missing)}")
            self._setup_ops()
        elif self.file.steps is None:
            raise InputError(f"cost fitted: {spec}: kind steps without a steps section")
        else:
            self._stepfit = StepFitPricer(self.file.steps, str(spec), ms)

    # -- set-up: restrict every table to this model's shapes ---------------------------
    def _variant(self, what: str, nbytes: int, key: str) -> str:
        """The table key serving the model's ``what`` dtype of ``nbytes`` bytes; InputError
        when the profile has none (never a silent stand-in from another dtype)."""
        base = ELEM_BYTES.get(self.file.dtype.split(",")[0], 2)  # the profile's serving dtype
        if nbytes in (2, base) or (nbytes == 1 and key in self.file.ops):
            return key if nbytes == 1 else key.split(".")[0]
        have = ", ".join(k for k in self.file.ops if k.split(".")[0] == key.split(".")[0])
        name = {1: "fp8", 2: "16-bit", 4: "float32"}.get(nbytes, f"{nbytes}-byte")
        raise InputError(f"cost fitted: profile {self.spec} has no {name} {what} table for "
                         f"{self.model.name} (tables: {have}); choose a dtype it has, another "
                         "profile, or cost roofline")

    def _warn_over_bar(self, *keys: str) -> None:
        """One warning naming each table used whose held-out error misses the bar (kept in
        the profile because aiconfigurator ships it: calibrate/aiconfigurator.py)."""
        over = [f"{k} {h.median_ape:.1f} / {h.p90_ape:.1f} %" for k in keys
                if (h := self.file.ops[k].heldout) is not None and h.over_bar()]
        if over:
            warnings.warn(f"cost fitted: profile {self.spec} prices {self.model.name} with "
                          f"tables whose held-out median / p90 error misses the "
                          f"{BAR['median_ape']:g} / {BAR['p90_ape']:g} % bar: "
                          f"{', '.join(over)}", UserWarning, stacklevel=4)

    def _gemm_key(self, fmt: str) -> str:
        """The GEMM table of weight format ``fmt`` (sim/cost/layer_plan.py); InputError when
        the profile has none. One stated stand-in: block-scaled fp8 is priced from the
        per-tensor fp8 table (same fp8 tensor-core math; aiconfigurator's block-scaled rows
        are not imported: calibrate/aiconfigurator.py GEMM_DTYPES says why)."""
        if fmt == "fp8_block" and "gemm.fp8_block" not in self.file.ops:
            fmt = "fp8"
        if fmt == "bfloat16" or fmt == self.file.dtype.split(",")[0]:
            return "gemm"
        key = table_key("gemm", fmt)
        if key != "gemm" and key in self.file.ops:
            return key
        have = ", ".join(k for k in self.file.ops if k.split(".")[0] == "gemm")
        raise InputError(f"cost fitted: profile {self.spec} has no {fmt} weight GEMM table "
                         f"for {self.model.name} (tables: {have}); choose a dtype it has, "
                         "another profile, or cost roofline")

    def _setup_ops(self) -> None:
        f, m, tp = self.file, self.model, self.tp
        self.norm = f.norm
        base = ELEM_BYTES.get(f.dtype.split(",")[0], 2)  # the profile's element size
        plan = self.plan = plan_layers(m, tp)
        gkey = self._gemm_key(dense_format(m))
        akey, pkey = (self._variant("KV-cache (kv_dtype_bytes)", m.kv_bytes,
                                    table_key(op, kv="fp8"))
                      for op in ("decode_attn", "prefill_attn"))
        fp8_kv = akey.endswith("fp8_kv")
        self._warn_over_bar(gkey, akey, pkey)
        # element sizes the tables were normalised with (calibrate/aiconfigurator.py)
        self.base_e = base
        self.e = base if gkey == "gemm" else 2  # activations
        self.w_e = base if gkey == "gemm" else ELEM_BYTES[gkey.split(".")[1]]  # weights
        self.kv_e, self.attn_e = (1, 2) if fp8_kv else (base, base)
        self.peak = peak_of(gkey, f.norm)
        self.heads, self.kv_heads = m.num_attention_heads // tp, m.kv_heads_per_gpu(tp)
        self.head_dim = m.head_dim
        self.mla = self._mla_module() if m.is_mla else None
        self.attn_layers, self.slide_layers = plan.full_attn_layers, plan.sliding_layers
        self.window = plan.window
        self.swa = self._window_module(fp8_kv) if self.slide_layers else None
        group = self.heads / self.kv_heads
        lg = np.log2
        self.gemms = {}
        for name, (n, k, blocks, kind) in plan.gemms.items():
            if self.mla is not None and name.startswith("attn_"):
                continue  # the measured MLA module includes its projections
            table = f.ops["gemm" if kind == "bf16" else gkey]
            self.gemms[name] = (n, k, *_ratio_1d(table, {1: lg(n), 2: lg(k)}), blocks,
                                kind == "bf16")
        self.moe = self._moe_curve(plan) if plan.moe_layers else None
        if self.mla is None:
            pre = f.ops[pkey]
            self.pre_grid, self.pre_nodes = grid.restrict(
                pre.grid(), pre.nodes(), {3: lg(self.heads), 4: lg(group),
                                          5: lg(self.head_dim)})
            dec = f.ops[akey]
            self.dec_grid, self.dec_nodes = grid.restrict(
                dec.grid(), dec.nodes(), {2: lg(self.kv_heads), 3: lg(group),
                                          4: lg(self.head_dim)})
        self._pre_memo: dict[int, tuple[np.ndarray, list[np.ndarray]]] = {}
        self._one_prefill: dict[tuple[int, int], float] = {}
        # the last batched prefill attention priced (key, seconds per layer), shared with a
        # drafter whose layers attend alike (``share_attention``): it prices the same plan
        self._last_attn: list = [None, None]
        self._layer, self._head = np.zeros(0), np.zeros(0)
        self._dec_memo: dict[int, np.ndarray] = {}
        self._dec_lists: dict[int, tuple] = {}  # sim/cost/scalar.py
        self._dec_slope_memo: dict[int, list[float]] = {}
        self._pre_lists: dict[int, tuple] = {}
        self._slide_memo: dict[int, float] = {}
        ar = f.ops.get("allreduce")
        self.ar = _ratio_1d(ar, {1: lg(tp)}) if ar is not None and tp > 1 else None
        self.elem = ElementwiseWork.of(m, tp) if f.elementwise is not None else None

    def _mla_module(self) -> MlaModule:
        """The measured MLA attention module of this model's split (sim/cost/mla.py): the
        tables are DeepSeek-V3's MLA (hidden 7168, latent 512 + rope 64, q rank 1536),
        which Kimi-K2 shares; other MLA dims are refused."""
        m, f = self.model, self.file
        dims = (m.hidden_size, m.kv_lora_rank, m.qk_rope_head_dim, m.q_lora_rank)
        what = f"cost fitted: profile {self.spec}, {m.name}"
        if f.mla_context is None or f.mla_generation is None:
            raise InputError(f"{what}: the profile has no MLA timings; re-import it (servesim "
                             "calibrate import-aiconfigurator) or use cost roofline")
        if dims != (7168, 512, 64, 1536):
            raise InputError(f"{what}: MLA timings exist for DeepSeek-V3's dims (hidden 7168, "
                             f"kv_lora_rank 512, qk_rope_head_dim 64, q_lora_rank 1536), not "
                             f"{dims}; use cost roofline")
        kv = "fp8" if m.kv_bytes == 1 else "bfloat16"
        key = f"DeepseekV3ForCausalLM|{kv}|{dense_format(m)}|{m.num_attention_heads // self.tp}"
        return MlaModule(f.mla_context, f.mla_generation, key, what)

    def _window_module(self, fp8_kv: bool) -> MeasuredAttention | None:
        """The measured sliding-window attention of this model's window and heads per GPU
        (aiconfigurator's windowed FlashAttention / FlashInfer rows), or None: the sliding
        layers are then priced as chunks of full attention (_sliding), said once."""
        f, m = self.file, self.model
        key = window_key(self.window, "fp8" if fp8_kv else "bfloat16", self.heads,
                         self.kv_heads, self.head_dim)
        what = f"cost fitted: profile {self.spec}, {m.name}"
        tables = (f.window_context, f.window_generation)
        if all(t is not None and key in t.index() for t in tables):
            return MeasuredAttention(*tables, key, what, "sliding-window attention")
        warnings.warn(f"{what}: no measured sliding-window attention for window "
                      f"{self.window}, {self.heads} heads / {self.kv_heads} KV heads of "
                      f"{self.head_dim} per GPU; its {self.slide_layers} sliding layers are "
                      "priced as window-long chunks of full attention (an over-estimate)",
                      UserWarning, stacklevel=5)
        return None

    def _moe_curve(self, plan) -> MoeCurve:
        """The measured fused-MoE curve of this model's experts at this TP / EP split."""
        if self.file.moe is None:
            raise InputError(f"cost fitted: profile {self.spec} has no fused-MoE timings for "
                             f"{self.model.name}; re-import it (servesim calibrate "
                             "import-aiconfigurator) or use cost roofline")
        hidden, inter, experts, topk = plan.moe_shape
        m = self.model
        skew = auto_distribution(bool(m.first_dense_layers or m.num_shared_experts))
        dist = skew if self.params.moe_distribution == "auto" else self.params.moe_distribution
        tp, ep = (1, self.ep) if self.ep > 1 else (self.tp * self.dp, 1)
        fmt = expert_format(self.model)
        what = f"cost fitted: profile {self.spec}, {self.model.name}"
        if self.moe_activation == "mxfp8":
            if fmt != "w4a16_mxfp4":
                raise InputError(f"{what}: engine.moe_activation mxfp8 applies to mxfp4 "
                                 f"experts; this model's are {fmt}")
            fmt = "w4a8_mxfp4_mxfp8"  # FlashInfer TRT-LLM, mxfp8 activations
        shape = (fmt, hidden, inter, experts, topk)
        split = (tp, ep)
        idx = self.file.moe.index()
        if moe_key(*shape, tp, ep, dist) not in idx and moe_key(*shape, ep, tp, dist) in idx:
            # aiconfigurator measured this shape on these GPUs with the experts split the
            # other way (e.g. block-fp8 experts at MoE TP 8 leave 192-wide shards it did not
            # time): the same bytes and FLOPs per GPU on average, said once
            warnings.warn(f"{what}: no fused-MoE timing at MoE TP {tp} x EP {ep}; priced from "
                          f"MoE TP {ep} x EP {tp} on the same {tp * ep} GPUs", UserWarning,
                          stacklevel=4)
            split = (ep, tp)
        key = moe_key(*shape, *split, dist)
        if self.params.moe_distribution != "auto" or self.params.moe_reach == 0:
            return MoeCurve(self.file.moe, key, what, self.moe_backend)
        # the skewed curve plus MOE_REACH of the experts independent routing reaches beyond
        # it, priced from the balanced curve (sim/cost/moe_routing.py)
        combine = partial(priced, experts=experts, topk=topk, ep=split[1],
                          alpha=float(skew.removeprefix("power_law_")),
                          reach=self.params.moe_reach)
        return MoeCurve(self.file.moe, key, what, self.moe_backend,
                        toward=(moe_key(*shape, *split, "balanced"), combine))

    # -- pieces --------------------------------------------------------------------------
    def _roof(self, flops, nbytes, peak=None):
        """Roofline time without the floor (seconds)."""
        return np.maximum(flops / (peak or self.norm.peak_flops), nbytes / self.norm.mem_bandwidth)

    def _gemm(self, name: str, rows: np.ndarray) -> np.ndarray:
        n, k, xs, ys, _, bf16 = self.gemms[name]
        if bf16:  # LM head, router: bf16 even for quantized models (vLLM quantizes the rest)
            flops, nbytes = work.gemm_work(rows, n, k, self.base_e)
            r = self._roof(flops, nbytes)
        else:
            flops, nbytes = work.gemm_work(rows, n, k, self.e, self.w_e)
            r = self._roof(flops, nbytes, self.peak)
        return (r + self.norm.floor_s) * np.exp2(np.interp(np.log2(rows), xs, ys))

    def _elementwise(self, tokens: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(per-token-count, per-request-count) elementwise seconds; zeros if unpriced."""
        if self.elem is None:
            return np.zeros_like(tokens), np.zeros_like(rows)
        ew, bw = self.file.elementwise, self.norm.mem_bandwidth
        return (self.elem.token_seconds(self.layers, tokens, bw, ew.mem_efficiency,
                                        ew.gather_efficiency, ew.kernel_floor_s),
                self.elem.request_seconds(rows, bw, ew.mem_efficiency))

    def _allreduce(self, tokens: np.ndarray) -> np.ndarray:
        """One all-reduce of ``tokens`` activations."""
        return self._allreduce_bytes(tokens * float(self.model.hidden_size
                                                    * self.model.act_bytes))

    def _allreduce_bytes(self, msg: np.ndarray) -> np.ndarray:
        """One all-reduce of ``msg`` bytes."""
        wire = work.allreduce_wire_bytes(msg, self.tp)
        if self.ar is None:  # no measured table for this tp: the GPU's roofline figures
            g = self.gpu
            return wire / (g.interconnect_bandwidth * g.allreduce_efficiency) + \
                g.allreduce_latency_s
        xs, ys = self.ar
        r = wire / self.norm.link_bandwidth + self.norm.floor_s
        return r * np.exp2(np.interp(np.log2(msg), xs, ys))

    def _dp_exchange(self, tokens: np.ndarray) -> np.ndarray:
        """Per MoE layer with data parallelism: every rank's tokens gathered to the experts
        and their outputs scattered back (vLLM's all-gather / reduce-scatter all2all
        backend), priced as two ring transfers of the DP group's activations over the
        GPU's interconnect (no measured table for this collective). 0 without DP."""
        if self.dp == 1:
            return np.zeros_like(tokens)
        g = self.gpu
        msg = self.dp * tokens * float(self.model.hidden_size * self.model.act_bytes)
        wire = work.allreduce_wire_bytes(msg, self.tp * self.dp) / 2  # one gather's share
        return 2 * (wire / (g.interconnect_bandwidth * g.allreduce_efficiency)
                    + g.allreduce_latency_s)

    @staticmethod
    def _moe_side(gemm: str) -> bool:
        """A GEMM _moe_block prices (the router, the shared experts' GEMMs)."""
        return gemm == "router" or gemm.startswith("shared_")

    def _moe_block(self, t: np.ndarray) -> np.ndarray:
        """One MoE block's router, routed experts (with DP's exchange) and shared experts
        (s per token count). vLLM runs the shared experts on a second CUDA stream beside
        the router and the routed experts for steps of up to SHARED_STREAM_TOKENS tokens
        (vllm/model_executor/layers/fused_moe/runner/shared_experts.py, MULTI_STREAM_
        OVERLAPPED; off on the cpu platform), so there the block takes the longer of the
        two. With data parallelism (the exchange's modular kernels order them
        differently) they are summed."""
        routed = self.moe.seconds(self.dp * t) + self._dp_exchange(t) + self._gemm("router", t)
        shared = sum((self._gemm(g, t) for g in self.gemms if g.startswith("shared_")),
                     np.zeros_like(t))
        if self.dp == 1 and self.gpu.platform == "cuda":
            both = np.maximum(routed, shared)
            return np.where(t <= SHARED_STREAM_TOKENS, both, routed + shared)
        return routed + shared

    def _grow(self, tokens: int, rows: int) -> None:
        """Tabulate layer time per token count and LM-head time per row count (vectorised)
        up to at least ``tokens`` / ``rows``; index 0 is unused."""
        if tokens >= len(self._layer):
            t = np.arange(1, max(2 * len(self._layer), tokens + 1, 256), dtype=np.float64)
            blocks = sum(self.gemms[g][4] * self._gemm(g, t) for g in self.gemms
                         if g != "lm_head" and (self.moe is None or not self._moe_side(g)))
            if self.moe is not None:
                blocks = blocks + self.plan.moe_layers * self._moe_block(t)
            step = self._elementwise(t, t)[0]
            if self.tp > 1:  # two per block, one after the vocab-parallel embedding
                blocks = blocks + 2 * self.layers * self._allreduce(t)
                step = step + self._allreduce(t)
                if self.model.qk_norm_layerwise:  # and the q/k norm's variances (MiniMax)
                    blocks = blocks + self.layers * self._allreduce_bytes(t * QK_VARIANCE_BYTES)
            self._layer = np.concatenate(([0.0], blocks + step))
        if rows >= len(self._head):
            r = np.arange(1, max(2 * len(self._head), rows + 1, 256), dtype=np.float64)
            self._head = np.concatenate(([0.0], self._gemm("lm_head", r)
                                         + self._elementwise(r, r)[1]))

    def _per_token_count(self, tokens: int, rows: int) -> float:
        """All layers' GEMMs + all-reduces for ``tokens`` and the LM head for ``rows``."""
        key = (tokens, rows)
        t = self._memo.get(key)
        if t is None:
            if len(self._memo) >= MEMO_MAX:
                self._memo.clear()
            if tokens >= len(self._layer) or rows >= len(self._head):
                self._grow(tokens, rows)
            t = self._memo[key] = float(self._layer[tokens] + self._head[rows])
        return t

    def _prefill(self, q, p) -> float:
        """One layer's prefill attention of requests (q, p) sharing one launch (seconds);
        q, p: arrays or lists of ints."""
        if self.mla is not None:
            return self.mla.prefill(q, p)
        k = len(q)
        if k == 1:  # one prefill request (the common case): memoised per (q, p)
            key = (int(q[0]), int(p[0]))
            t = self._one_prefill.get(key)
            if t is None:
                if len(self._one_prefill) >= MEMO_MAX:
                    self._one_prefill.clear()
                t = self._one_prefill[key] = self._prefill_few((key[0],), (key[1],))
            return t
        if k < 8:
            return self._prefill_few(q, p)
        return self._prefill_batch(q, p)

    def _prefill_batch(self, q, p) -> float:
        key = (tuple(q), tuple(p))
        last = self._last_attn
        if last[0] != key:
            q, p = np.asarray(q, dtype=np.float64), np.asarray(p, dtype=np.float64)
            last[:] = key, float(self._prefill_terms(q, p).sum())
        return last[1]

    def attention_key(self) -> tuple | None:
        """What one attention layer's price depends on (None: MLA or sliding layers, whose
        modules this does not cover): two cost models with equal keys price it alike."""
        if self.mla is not None or self.slide_layers:
            return None
        return (self.heads, self.kv_heads, self.head_dim, self.attn_e, self.kv_e, self.norm,
                self.pre_grid.tobytes(), tuple(x.tobytes() for x in self.pre_nodes))

    def share_attention(self, other: FittedCost) -> bool:
        """Price batched prefill attention once for both (a drafter beside its target, which
        prices each plan just before it), where the two attend alike."""
        key = self.attention_key()
        if key is None or key != other.attention_key():
            return False
        self._last_attn = other._last_attn
        return True

    def _prefill_terms(self, qf: np.ndarray, pf: np.ndarray) -> np.ndarray:
        """Each request's share of one layer's prefill attention (seconds; float arrays of
        the requests' new and cached tokens, the requests along the last axis)."""
        k = qf.shape[-1]
        sub = self._pre_memo.get(k)
        if sub is None:  # restrict to this many sequences: a (q, prefix ratio) table
            sub = self._pre_memo[k] = grid.restrict(self.pre_grid, self.pre_nodes,
                                                    {0: np.log2(k)})
        flops, nbytes = work.prefill_work(1, qf, pf, self.heads, self.kv_heads, self.head_dim,
                                          self.attn_e, self.kv_e)
        r = self._roof(flops, nbytes) + self.norm.floor_s / k
        return r * np.exp2(_bilinear(sub, np.log2(qf), np.log2(1 + pf / qf)))

    def verify_run_times(self, plan) -> np.ndarray | None:
        """Step times (s) of a speculative verify run (``plan.step_contexts``: every request
        computes the same tokens over its context of each step), all steps at once: each the
        value ``step_times`` gives that step alone (the same operations on [steps, batch]
        arrays; numpy sums each row as it sums one step's). None where a step's price needs
        more than its prefill-shaped attention (MLA, sliding-window layers, a steps fit, swap
        traffic): the caller prices the steps one by one."""
        tok = plan.num_tokens
        if self.file.kind == "steps" or self.mla is not None or self.slide_layers or \
                plan.swap_in_bytes or plan.swap_out_bytes or not len(tok):
            return None
        q, n = int(tok[0]), len(tok)
        if q == 1 or (tok != q).any():
            return None
        total = q * n
        sc = plan.step_contexts
        key = (q, sc.shape, sc.tobytes())
        last = self._last_attn
        if last[0] != key:
            ctx = sc.astype(np.float64)
            last[:] = key, self._prefill_terms(np.full(ctx.shape, float(q)), ctx).sum(axis=1)
        pre = last[1]
        return self._with_host(self._fixed_base(total, n) + self.attn_layers * pre, total, n)

    def _decode(self, n: int, ctx: np.ndarray) -> np.ndarray:
        """One layer's decode attention of ``n`` requests whose contexts sum to ``ctx``
        (an array: one entry per step of a run). Seconds per step."""
        if self.mla is not None:
            return np.array([self.mla.decode(n, c / n) for c in np.atleast_1d(ctx)])
        ys = self._dec_memo.get(n)
        if ys is None:
            ys = self._dec_memo[n] = grid.restrict(self.dec_grid, self.dec_nodes,
                                                   {0: np.log2(n)})[0]
        kv_len = ctx / n + 1.0  # mean context + the token just written
        flops, nbytes = work.decode_work(n, kv_len, self.heads, self.kv_heads, self.head_dim,
                                         self.attn_e, self.kv_e)
        r = self._roof(flops, nbytes) + self.norm.floor_s
        return r * np.exp2(np.interp(np.log2(kv_len), self.dec_nodes[1], ys))

    def _overhead(self, requests: int) -> float:
        """Per-step cost outside the timed operations, but its per-token part (seconds)."""
        if self.over_by_req is not None:
            return float(self.over_by_req.at(requests)) * 1e-3
        return self.overhead + self.over_req * requests

    # -- kind steps: sim/cost/stepfit.py --------------------------------------------------
    def fitted_delays_s(self):
        st = self.file.steps if self.file.kind == "steps" else None
        if st is None or (st.ingress_ms is None and st.egress_ms is None):
            return None
        return (st.ingress_ms or 0.0) * 1e-3, (st.egress_ms or 0.0) * 1e-3

    def fitted_ingress_per_token_s(self) -> float:
        return (self.file.frontend_us_per_token or 0.0) * 1e-6

    def observe(self, plan):
        if self.file.kind == "steps":
            self._stepfit.observe(plan)

    def run_warnings(self):
        return self._stepfit.warnings() if self.file.kind == "steps" else []

    @property
    def prices_shapes(self) -> bool:  # a steps file watches every plan (observe)
        return self.file.kind == "ops"

    def step_times(self, plan):
        if self.file.kind == "steps":
            out = self._stepfit.step_times(plan)
            out[0] += self.swap_time(plan)
            return out
        tok, ctx, k = plan.num_tokens, plan.context_lens, plan.num_steps
        if k == 1:  # one step: the scalar twin of the same operations (sim/cost/scalar.py)
            out = np.array([self._plan_time1(tok.tolist(), ctx.tolist())])
            if plan.swap_in_bytes or plan.swap_out_bytes:
                out[0] += self.swap_time(plan)
            return out
        total, n = int(tok.sum()), len(tok)
        if total == n:  # every request decode-shaped: the hot path, without masks
            out = self.shape_times(total, n, _EMPTY, _EMPTY, n, int(ctx.sum()), k)
        else:
            dec = tok == 1
            out = self.shape_times(total, n, tok[~dec], ctx[~dec], int(dec.sum()),
                                   int(ctx[dec].sum()), k)
        if plan.swap_in_bytes or plan.swap_out_bytes:
            out[0] += self.swap_time(plan)
        return out

    def _plan_time1(self, tok: list[int], ctx: list[int]) -> float:
        """``shape_times`` of a one-step plan's requests (tokens, contexts), in floats."""
        if 1 not in tok:  # every request prefill-shaped (a verify step, prefill chunks)
            return self.shape_time1(sum(tok), len(tok), tok, ctx, 0, 0)
        pq, pc, n1, c1 = [], [], 0, 0
        for t, c in zip(tok, ctx):
            if t == 1:
                n1 += 1
                c1 += c
            else:
                pq.append(t)
                pc.append(c)
        return self.shape_time1(sum(tok), len(tok), pq, pc, n1, c1)

    def _fixed_base(self, total: int, reqs: int) -> float:
        """A step's GEMMs, all-reduces, LM head and host time by its token and request
        counts (s): ``_fixed`` before attention."""
        return self._per_token_count(total, reqs) + self._overhead(reqs) + self.over_tok * total

    def _fixed(self, total, reqs, prefill_q, prefill_ctx) -> float:
        fixed = self._fixed_base(total, reqs)
        if len(prefill_q):
            fixed += self.attn_layers * self._prefill(prefill_q, prefill_ctx)
        if self.slide_layers:
            fixed += self.slide_layers * self._sliding(prefill_q, prefill_ctx,
                                                       reqs - len(prefill_q))
        return fixed

    def _sliding(self, prefill_q, prefill_ctx, num_decode: int) -> float:
        """One sliding-window layer's attention (seconds): each query attends to at most
        ``window`` keys. From the profile's measured windowed kernel where it has this shape
        (sim/cost/curve_grid.py MeasuredAttention); else a chunk of q > W tokens costs q / W
        chunks of W over a W prefix (each priced, floor included, as a full-attention
        launch: an over-estimate, 4-40x on gpt-oss at 8k tokens). A decoding request costs
        a decode over min(context, W) -- taken as W (a request past its first W tokens;
        shorter ones are over-priced by at most one window)."""
        w = self.window
        if self.swa is not None:  # measured: prefill and decode of the window (module doc)
            t = self.swa.prefill(prefill_q, prefill_ctx) if len(prefill_q) else 0.0
            if num_decode:
                d = self._slide_memo.get(num_decode)
                if d is None:
                    d = self._slide_memo[num_decode] = self.swa.decode(num_decode, w)
                t += d
            return t
        t = 0.0
        for q, p in zip(prefill_q, prefill_ctx):
            q, p = int(q), int(p)
            t += (q / w) * self._prefill((w,), (w,)) if q > w else \
                self._prefill((q,), (min(p, w),))
        if num_decode:
            d = self._slide_memo.get(num_decode)
            if d is None:
                d = self._slide_memo[num_decode] = self._decode_one(num_decode,
                                                                    num_decode * w)
            t += d
        return t

    def host_times(self, total, reqs):
        """The file's per-step host cost (base + per layer + per TP rank, or the measured
        per-request / per-token / by-request-count terms); a steps-kind fit: None."""
        if self.file.kind == "steps":
            return None
        reqs = np.asarray(reqs)
        if self.over_by_req is not None:
            return self.over_by_req.at(reqs) * 1e-3
        return self.overhead + self.over_req * reqs + self.over_tok * np.asarray(total)

    def _eager_ms(self) -> tuple[float, float]:
        """The launch time (ms) of a dense block and of a fused-MoE block run eager: each
        override, else the file's (a MoE block's unset: a dense block's)."""
        h, p = self.file.host_overhead, self.params
        dense = p.eager_per_layer_ms
        if dense is None:
            dense = h.eager_per_layer_ms if h is not None else 0.0
        moe = p.eager_moe_per_layer_ms
        if moe is None:
            moe = h.eager_moe_per_layer_ms if h is not None else None
        return dense, dense if moe is None else moe

    def _eager(self, total: int) -> bool:
        """A step of ``total`` tokens runs without a CUDA graph and its launches are priced."""
        return total > self.graph_max and self.eager_s > 0.0

    def _host_s(self, total: int, reqs: int) -> float:
        """The step's host cost outside the kernels (s): what _fixed adds to them."""
        return self._overhead(reqs) + self.over_tok * total

    def shape_times(self, total, reqs, prefill_q, prefill_ctx, num_decode, decode_ctx0,
                    num_steps):
        return self._with_host(self._kernel_times(total, reqs, prefill_q, prefill_ctx,
                                                  num_decode, decode_ctx0, num_steps),
                               total, reqs)

    def _with_host(self, kernels, total: int, reqs: int):
        """A step's time from its kernels' (s; an array or a float) where the host's work
        or eager launches overlap them (``_overlap``); the kernels' time otherwise."""
        eager = self._eager(total)
        if eager or self.async_host:
            host = self._host_s(total, reqs)
            return self._overlap(kernels - host, host, eager)
        return kernels

    def _overlap(self, kernels, host: float, eager: bool):
        """A step's time from its kernels' and the host's (s; arrays or floats). Eager: the
        launches (eager_s) overlap the kernels, the longer of the two, then the host's
        schedule; with async scheduling the host's schedule (and eager launches) overlap
        the previous step's kernels: the longer of kernels and host work. Assumption: the
        whole host cost overlaps (no published CUDA figure isolates what stays serial)."""
        e = self.eager_s if eager else 0.0
        if self.async_host:
            return np.maximum(kernels, host + e) if isinstance(kernels, np.ndarray) else (
                kernels if kernels > host + e else host + e)
        if isinstance(kernels, np.ndarray):
            return np.maximum(kernels, e) + host
        return (kernels if kernels > e else e) + host

    def _kernel_times(self, total, reqs, prefill_q, prefill_ctx, num_decode, decode_ctx0,
                      num_steps):
        """shape_times as if the step ran from a CUDA graph."""
        fixed = self._fixed(total, reqs, prefill_q, prefill_ctx)
        if not num_decode:
            return np.full(num_steps, fixed)
        if num_steps == 1:
            return np.array([self.attn_layers * self._decode_one(num_decode, decode_ctx0)
                             + fixed])
        ctx = decode_contexts(decode_ctx0, num_decode, num_steps)
        return self.attn_layers * self._decode(num_decode, ctx) + fixed
