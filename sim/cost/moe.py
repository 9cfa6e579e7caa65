"""Fused-MoE layer time from a profile's measured curves (sim/cost/profile CurveTable).

One curve per expert configuration (weight format, hidden size, expert intermediate size,
experts, experts per token, MoE TP and EP sizes, routing distribution) over the step's
token count, measured on the GPU by aiconfigurator-core (calibrate/aiconfigurator_curves.py).
A model is priced from the curve of its own shape; between measured token counts the time
is interpolated linearly in log-log, beyond the largest it grows in proportion to tokens
(the kernel is compute-bound there). A shape, format or split the profile did not measure
is refused in one line naming what is missing and what the profile has.

Routing distribution: ``auto`` starts from aiconfigurator's default skew,
``power_law_1.01`` for DeepSeek-style models (shared experts or dense first layers: MLA
families) and ``power_law_1.2`` for the others (Qwen3-MoE, MiniMax-M2, gpt-oss, Mixtral):
aiconfigurator-core 0.12.0 sdk/models/deepseek.py and moe.py ``_power_law_alpha``, and adds
``cost.moe_reach`` of the experts independently routed tokens reach beyond that draw
(sim/cost/moe_routing.py: below n x top-k = experts the collector's draw reaches far fewer
experts than a decode batch of unrelated requests does). ``balanced`` spreads every token's
top-k evenly over the experts (the most experts reached); a named distribution is priced
from its measured curve as it is.

Backend (``engine.moe_backend``, vLLM's ``--moe-backend``): ``auto`` prices the curve of the
kernel aiconfigurator measured most for the shape (standing in for vLLM's own choice);
a named backend prices the profile's ``key@backend`` curve, imported from the newest
aiconfigurator table that timed it (calibrate/aiconfigurator_curves.py). The kernel
matters: MiniMax-M2.5's block-fp8 experts at 8,192 tokens, MoE TP 4 on B200 take 0.90 ms
per layer in FlashInfer TRT-LLM (vLLM 0.24.0 table) and 1.64 ms in Triton (0.22.0). A
backend the profile has no timing of is said once and priced with the default curve.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from sim.cost.profile.model_file import CurveTable
from traces.errors import InputError

DISTRIBUTIONS = ("auto", "balanced", "power_law_1.01", "power_law_1.2")
# vLLM's --moe-backend values (vllm/config/kernel.py MoEBackend) a profile can hold timings
# of; "auto" prices the kernel aiconfigurator measured most for the shape
BACKENDS = ("auto", "triton", "flashinfer_trtllm", "flashinfer_cutlass", "marlin",
            "deep_gemm", "cutlass")


def backend_of(kernel_source: str) -> str | None:
    """The vLLM MoE backend an aiconfigurator ``kernel_source`` timed, or None when the
    name does not say (e.g. 0.19's ``vllm_mxfp4_moe``). ``vllm_fused_moe`` is vLLM's Triton
    fused_moe (aiconfigurator's collector for vLLM <= 0.22)."""
    k = kernel_source.lower()
    for name in ("flashinfer_trtllm", "flashinfer_cutlass", "deep_gemm", "marlin"):
        if name in k:
            return name
    if k == "vllm_fused_moe" or "triton" in k:
        return "triton"
    if "cutlass" in k:
        return "cutlass"
    return None


class MoeCurve:
    """Seconds of one fused-MoE layer at a token count (vectorised over counts)."""

    def __init__(self, table: CurveTable, key: str, what: str, backend: str = "auto",
                 toward: tuple[str, Callable[..., np.ndarray]] | None = None):
        """TOWARD: (another distribution's key, combine(tokens, ms, other_ms) -> ms): the
        curve priced combines this key's measured times with the other's at each token
        node (``cost.moe_reach`` from the power-law and balanced curves,
        sim/cost/moe_routing.py)."""
        idx = table.index()
        key, ms = _measured(table, idx, key, backend, what)
        if toward is not None:
            _, far = _measured(table, idx, toward[0], backend, what)
            ms = toward[1](tuple(int(t) for t in table.tokens), ms, far)
        ok = np.isfinite(ms)
        if ok.sum() < 2:
            raise InputError(f"{what}: fused-MoE curve {_show(key)} has fewer than two "
                             "measured points")
        self.kernel = table.kernels[idx[key]]
        self._x = np.log2(np.asarray(table.tokens, dtype=np.float64)[ok])
        self._y = np.log2(ms[ok] * 1e-3)
        self._last = (float(np.exp2(self._x[-1])), float(np.exp2(self._y[-1])))

    def seconds(self, tokens) -> np.ndarray:
        t = np.maximum(np.asarray(tokens, dtype=np.float64), 1.0)
        out = np.exp2(np.interp(np.log2(t), self._x, self._y))
        big = t > self._last[0]
        if big.any():  # beyond the measured range: in proportion to tokens
            out = np.where(big, self._last[1] * t / self._last[0], out)
        return out


def _measured(table: CurveTable, idx: dict, key: str, backend: str, what: str):
    """(the curve's key, its ms per token node) of KEY at BACKEND, refused when unmeasured."""
    key = _backend_key(table, idx, key, backend, what)
    if key not in idx:
        raise InputError(f"{what}: the profile has no fused-MoE timing for {_show(key)}; "
                         f"it has {_near(table, key)}")
    return key, table.ms()[idx[key]]


def _backend_key(table: CurveTable, idx: dict, key: str, backend: str, what: str) -> str:
    """The curve of ``backend`` for KEY: the default curve when it timed that backend, else
    ``key@backend`` (an older table's timing, maybe the only one of the shape), else the
    default curve, said once."""
    alt = f"{key}@{backend}"
    if backend == "auto" or (key in idx and backend_of(table.kernels[idx[key]]) == backend):
        return key
    if alt in idx:
        return alt
    if key in idx:
        have = sorted({backend_of(table.kernels[i]) or table.kernels[i]
                       for c, i in idx.items() if c.split("@")[0] == key})
        warnings.warn(f"{what}: no {backend} fused-MoE timing for {_show(key)} (measured: "
                      f"{', '.join(have)}); priced with {table.kernels[idx[key]]}",
                      UserWarning, stacklevel=6)
    return key


def _show(key: str) -> str:
    d, h, i, e, k, tp, ep, dist = key.split("@")[0].split("|")
    return (f"{d} experts, hidden {h}, expert intermediate {i}, {e} experts top-{k}, "
            f"MoE TP {tp} x EP {ep}, routing {dist}")


def _near(table: CurveTable, key: str) -> str:
    """What the profile measured for this model's format and shape (or for its format)."""
    parts = key.split("|")
    same = sorted({"|".join(c.split("|")[5:7]) for c in table.curves
                   if c.split("|")[:5] == parts[:5] and "@" not in c})
    if same:
        return "this shape and format at MoE TP|EP " + ", ".join(same)
    shapes = sorted({"x".join(c.split("|")[1:5]) for c in table.curves
                     if c.split("|")[0] == parts[0]})
    if shapes:
        return (f"{parts[0]} curves of hidden x intermediate x experts x top-k "
                + ", ".join(shapes[:12]) + ("..." if len(shapes) > 12 else ""))
    formats = sorted({c.split("|")[0] for c in table.curves})
    return "expert formats " + ", ".join(formats) + "; choose one of them or cost roofline"


def auto_distribution(deepseek_style: bool) -> str:
    """aiconfigurator's default routing skew for the model family (module docstring)."""
    return "power_law_1.01" if deepseek_style else "power_law_1.2"
