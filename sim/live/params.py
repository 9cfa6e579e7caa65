"""The knobs of live mode: ``cost: {name: live, device: cuda, layers: 4, ...}``."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from traces.validated import Validated


class LiveParams(Validated):
    model_config = ConfigDict(extra="forbid", frozen=True)

    device: Literal["cpu", "cuda"] = Field(
        "cpu", description="Where steps run: cuda (the Triton kernels, bf16, CUDA events) or "
        "cpu (the kernels' torch paths, float32, the step's CPU clock).")
    layers: int | None = Field(
        None, ge=1, description="Transformer blocks to execute (count; default: all). Each "
        "step's time is then the measured time outside the blocks plus the blocks' measured "
        "time x (model layers / layers); the summary reports the scale.")
    attention: Literal["auto", "torch", "triton"] = Field(
        "auto", description="Paged attention and KV write: triton (kernels/), torch "
        "(kernels/torch_paged.py) or auto: triton on cuda, torch on cpu.")
    clock: Literal["auto", "thread", "wall"] = Field(
        "auto", description="CPU step clock: thread (CPU time of the executing thread, "
        "robust to other processes on a shared machine), wall (monotonic wall clock) or auto "
        "(thread). CUDA always times with events.")
    threads: int = Field(
        1, ge=1, description="torch CPU threads while live steps run (count; 1 keeps the "
        "step in the timed thread, as the CPU calibration profile does).")
    cpu_core: int | None = Field(
        None, ge=0, description="CPU core the executing thread is pinned to (default: the "
        "highest core this process may use).")
    warmup_steps: int = Field(
        3, ge=0, description="Untimed dummy steps before the run (count): allocator, "
        "library and Triton JIT warm-up; they write no KV block.")
