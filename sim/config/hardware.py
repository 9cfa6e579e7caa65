"""Model and GPU descriptions: the physical facts a cost model and the KV sizing need.

Both are frozen pydantic models (``ModelSpec`` lives in ``sim.config.model_spec``). Catalog
entries (``sim/catalog``) are instances of these;
a scenario may name a catalog entry or spell a model/GPU out field by field.
Units are in every field's description; derived quantities are properties.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, PositiveFloat, PositiveInt

from sim.config.limits import why
from sim.config.model_spec import ModelSpec
from traces.validated import Validated

__all__ = ["GpuSpec", "ModelSpec"]

_FROZEN = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
_SLOW = "slower than any accelerator: steps would outlast any simulated horizon"
_FAST = "faster than any device built"


class GpuSpec(Validated):
    """One accelerator: capacities from its datasheet, efficiencies from public measurements."""

    model_config = _FROZEN

    name: str = Field(description="Display name, e.g. 'h100-sxm'.")
    platform: Literal["cuda", "cpu"] = Field(
        "cuda", description="What vLLM runs on: cuda (every catalog GPU) or cpu (vLLM's CPU "
        "build, as the engine recordings of benchmarks/engine). Sets vLLM's defaults that "
        "differ by platform: async scheduling is on for cuda, off for cpu.")
    compute_capability: float | None = Field(
        None, ge=1.0, le=20.0, json_schema_extra=why("CUDA's compute capabilities run 1.0 to "
                                                    "12.x", "major.minor"),
        description="CUDA compute capability (8.0 A100, 9.0 Hopper, 10.0 B200, 10.3 B300): "
        "vLLM's defaults that differ by it (a CUDA-graph capture ceiling of 1,024 tokens on "
        "data-center Blackwell, 10.x, else 512). None: not a 10.x GPU.")
    hbm_bytes: PositiveInt = Field(
        ge=1 << 30, le=1 << 42, json_schema_extra=why("1 GiB to 4 TiB per device", "bytes"),
        description="Device memory (bytes) as the driver reports it.")
    mem_bandwidth: PositiveFloat = Field(
        ge=1e9, le=1e15, json_schema_extra=why(f"1 GB/s to 1 PB/s: {_SLOW}; {_FAST}",
                                               "bytes/s"),
        description="Peak HBM bandwidth (bytes/s).")
    bf16_flops: PositiveFloat = Field(
        ge=1e9, le=1e18, json_schema_extra=why(f"1 GFLOP/s to 1 EFLOP/s: {_SLOW}; {_FAST}",
                                               "FLOP/s"),
        description="Peak dense bf16 tensor-core rate (FLOP/s).")
    fp8_flops: PositiveFloat | None = Field(
        None, ge=1e9, le=1e18, json_schema_extra=why(f"1 GFLOP/s to 1 EFLOP/s: {_SLOW}",
                                                     "FLOP/s"),
        description="Peak dense fp8 tensor-core rate (FLOP/s); None if unsupported."
    )
    interconnect_bandwidth: PositiveFloat = Field(
        ge=1e6, le=1e15, json_schema_extra=why(f"1 MB/s to 1 PB/s: {_SLOW}", "bytes/s"),
        description="GPU-to-GPU bandwidth per GPU, one direction (bytes/s): NVLink or PCIe."
    )
    host_bandwidth: PositiveFloat = Field(
        ge=1e6, le=1e15, json_schema_extra=why(f"1 MB/s to 1 PB/s: {_SLOW}", "bytes/s"),
        description="GPU-to-host link bandwidth, one direction (bytes/s): KV swap traffic."
    )
    gemm_efficiency: float = Field(
        0.7, gt=0, le=1, description="Achieved / peak FLOP/s for large bf16 GEMMs (fraction)."
    )
    attention_efficiency: float = Field(
        0.5, gt=0, le=1, description="Achieved / peak FLOP/s for prefill attention (fraction)."
    )
    mem_efficiency: float = Field(
        0.8, gt=0, le=1, description="Achieved / peak HBM bandwidth for streaming reads (fraction)."
    )
    allreduce_efficiency: float = Field(
        0.7, gt=0, le=1, description="Achieved / peak interconnect bandwidth in all-reduce."
    )
    allreduce_latency_s: float = Field(
        10e-6, ge=0, le=1.0, json_schema_extra=why("a second per all-reduce is no GPU link"),
        description="Fixed latency of one all-reduce (seconds)."
    )
    step_overhead_s: float = Field(
        2e-3, ge=0, le=10.0, json_schema_extra=why("ten seconds of host time per step is no "
                                                   "serving engine"),
        description="Fixed CPU + launch cost of one engine step (seconds)."
    )
    source: str = Field("", description="Where the figures come from.")

    @property
    def datacenter_blackwell(self) -> bool:
        """Compute capability 10.x (B200, B300): vLLM's ``is_device_capability_family(100)``,
        where its defaults differ (CUDA-graph ceiling, MLA attention backend)."""
        return self.compute_capability is not None and int(self.compute_capability) == 10

    @property
    def hopper(self) -> bool:
        """Compute capability 9.x (H100, H200), where vLLM's MLA backends are FlashAttention
        MLA, then FlashMLA (vllm/platforms/cuda.py _get_backend_priorities)."""
        return self.compute_capability is not None and int(self.compute_capability) == 9

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity at which compute and bandwidth limits meet (FLOP/byte)."""
        return self.bf16_flops / self.mem_bandwidth
