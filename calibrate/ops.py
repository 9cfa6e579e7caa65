"""The timed operations: build the tensors of one shape once, return a call to time.

On ``cuda`` the operations are what a vLLM-style step runs: ``torch.matmul`` GEMMs in the
model dtype, the Triton PagedAttention kernels of ``kernels/`` (prefill over a paged prefix,
flash-decoding), ``torch.distributed.all_reduce``. On ``cpu`` the same shapes run through
plain torch in float32 (CPU bf16 matmul is an emulation, not a kernel anyone serves with):
``torch.matmul`` and the paged kernels' torch paths (kernels/torch_paged.py: each
sequence's pages gathered, then ``scaled_dot_product_attention``), which is what live mode
executes on the CPU. The CPU path exists so the whole pipeline (profile, fit, validate,
simulate, live) runs in CI; its timings describe the CPU, not a GPU.

Each builder returns ``(fn, wall)``: ``fn()`` runs the operation once; ``wall`` says the
operation is host work and must be timed by wall clock (the empty step).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

from calibrate.shapes import Shape

BLOCK_SIZE = 16  # KV page size (tokens) for the paged kernels, vLLM's default

_TORCH_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}


def _dtype(shape: Shape, device: str):
    import torch

    if device == "cpu":
        return torch.float32
    return getattr(torch, _TORCH_DTYPES[shape.dtype])


def _gemm(shape: Shape, device: str):
    import torch

    dt = _dtype(shape, device)
    x = torch.randn(shape.m, shape.k, dtype=dt, device=device)
    w = torch.randn(shape.k, shape.n, dtype=dt, device=device)
    out = torch.empty(shape.m, shape.n, dtype=dt, device=device)
    return lambda: torch.matmul(x, w, out=out)


def _paged_cache(batch: int, kv_len: int, shape: Shape, dt, device: str):
    """Random paged K/V caches holding ``batch`` sequences of ``kv_len`` tokens each,
    with each sequence's pages contiguous (page 0 unused), and the [batch, pages] table."""
    from kernels import block_table, make_cache

    pages = -(-kv_len // BLOCK_SIZE)
    k, v = make_cache(batch * pages + 1, BLOCK_SIZE, shape.num_kv_heads, shape.head_dim, dt,
                      device=device)
    k.normal_()
    v.normal_()
    table = block_table([range(1 + s * pages, 1 + (s + 1) * pages) for s in range(batch)],
                        device=device)
    return k, v, table


def _prefill_kernel(shape: Shape, device: str, torch_path: bool = False):
    import torch

    from kernels import paged_prefill
    from kernels.torch_paged import paged_prefill_torch

    dt = _dtype(shape, device)
    b, q, p = shape.batch, shape.q_len, shape.ctx_len
    k, v, table = _paged_cache(b, p + q, shape, dt, device)
    query = torch.randn(b * q, shape.num_heads, shape.head_dim, dtype=dt, device=device)
    prefix = torch.full((b,), p, dtype=torch.int32, device=device)
    starts = torch.arange(0, (b + 1) * q, q, dtype=torch.int32, device=device)
    out = torch.empty_like(query)
    if torch_path:
        return lambda: paged_prefill_torch(query, k, v, table, prefix, starts, out=out)
    paged_prefill(query, k, v, table, prefix, starts, out=out, max_query_len=q)  # validates
    return lambda: paged_prefill(query, k, v, table, prefix, starts, out=out, max_query_len=q,
                                 validate=False)


def _decode_kernel(shape: Shape, device: str, torch_path: bool = False):
    import torch

    from kernels import paged_decode
    from kernels.torch_paged import paged_decode_torch

    dt = _dtype(shape, device)
    b, s = shape.batch, shape.ctx_len + 1
    k, v, table = _paged_cache(b, s, shape, dt, device)
    query = torch.randn(b, shape.num_heads, shape.head_dim, dtype=dt, device=device)
    lens = torch.full((b,), s, dtype=torch.int32, device=device)
    out = torch.empty_like(query)
    if torch_path:
        return lambda: paged_decode_torch(query, k, v, table, lens, out=out)
    paged_decode(query, k, v, table, lens, out=out, max_seq_len=s)  # validates once
    return lambda: paged_decode(query, k, v, table, lens, out=out, max_seq_len=s,
                                validate=False)


def _allreduce(shape: Shape, device: str):
    import torch
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("all-reduce needs torch.distributed initialised (run under torchrun)")
    if dist.get_world_size() != shape.num_gpus:
        raise RuntimeError(f"world size {dist.get_world_size()} != tp {shape.num_gpus}")
    x = torch.randn(shape.message_bytes // 2, dtype=torch.bfloat16, device=device)
    return lambda: dist.all_reduce(x)


def _empty_step(shape: Shape, device: str, vocab: int = 32000):
    """What a step costs with no model: inputs to the device, argmax of one row of logits,
    the token back to the host. A floor for the engine's per-step cost, not its value."""
    import torch

    logits = torch.randn(shape.batch, vocab, device=device)

    def step():
        ids = torch.arange(shape.batch, dtype=torch.int64).to(device, non_blocking=True)
        return (logits.argmax(dim=-1) + ids * 0).cpu()

    return step


def build(shape: Shape, device: str, attention: str | None = None
          ) -> tuple[Callable[[], object], bool]:
    """(callable running ``shape`` once on ``device``, time-by-wall-clock flag).

    ``attention``: ``kernels`` (the Triton kernels; the default on cuda, and on cpu under
    TRITON_INTERPRET=1, which the tests use to exercise the cuda path) or ``torch``
    (their torch paths, kernels/torch_paged.py; the default on cpu)."""
    if shape.op == "gemm":
        return _gemm(shape, device), False
    if shape.op in ("prefill_attn", "decode_attn"):
        torch_path = (attention or ("kernels" if device == "cuda" else "torch")) == "torch"
        kernel = _prefill_kernel if shape.op == "prefill_attn" else _decode_kernel
        return kernel(shape, device, torch_path), False
    if shape.op == "allreduce":
        return _allreduce(shape, device), False
    if shape.op == "step_overhead":
        return _empty_step(shape, device), True
    raise ValueError(f"unknown operation {shape.op!r}")


@contextmanager
def cpu_threads(device: str, threads: int = 1):
    """On cpu, run torch single-threaded while profiling: on a shared machine a multi-thread
    op waits for its slowest thread, and one descheduled thread turns a 20 us GEMM into a
    scheduler quantum (milliseconds). No-op on cuda."""
    if device != "cpu":
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def device_name(device: str) -> str:
    """The device as the profile records it, e.g. 'NVIDIA H100 80GB HBM3' or 'cpu:x86_64'."""
    import platform

    if device == "cuda":
        import torch

        return torch.cuda.get_device_name()
    return f"cpu:{platform.machine()}:{platform.processor() or 'unknown'}"


def versions(device: str) -> dict[str, str]:
    """Library versions the timings depend on."""
    import platform

    import torch

    out = {"python": platform.python_version(), "torch": torch.__version__}
    if device == "cuda":
        import triton

        out["triton"] = triton.__version__
        out["cuda"] = str(torch.version.cuda)
    else:
        out["torch_threads"] = str(torch.get_num_threads())
    return out
