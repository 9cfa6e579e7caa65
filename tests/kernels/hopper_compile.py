"""Compile every kernel for Hopper (sm_90) with the real Triton compiler; no GPU needed.

Run as a script WITHOUT TRITON_INTERPRET (test_hopper_compile.py does so in a subprocess):
the interpreter accepts code the GPU compiler rejects (tl.dot tiles below 16, unsupported
ops), so this is what catches it. Each config goes through every CUDA backend stage:
source -> TTIR -> TTGIR -> LLVM IR -> PTX -> cubin. The cubin stage runs the ptxas bundled in
the triton wheel (triton/backends/nvidia/bin/ptxas): no CUDA toolkit or driver needed.

Constexprs and num_warps/num_stages come from the launchers' own *_config functions, so what
is compiled is what the launchers would launch on an H100/H200. For the 16-bit serving
configs it also checks the performance-critical properties visible without a GPU: no
register spills in the SASS, Hopper wgmma in prefill, cp.async pipelining of K/V loads.
A canary kernel with an 8-wide tl.dot must FAIL to compile (proves this really compiles).
Prints one line per config; exits 1 if anything is wrong.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import traceback
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import kernels
from kernels.kv_write import _kv_write_kernel, kv_write_config
from kernels.paged_decode import _decode_split_kernel, _reduce_kernel, decode_config
from kernels.paged_prefill import _prefill_kernel, prefill_config

HOPPER = GPUTarget("cuda", 90, 32)
TYPE = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
INDEX_PTRS = {"bt_ptr": "*i32", "lens_ptr": "*i32", "prefix_ptr": "*i32", "qsl_ptr": "*i32"}


class Config(NamedTuple):
    label: str
    kernel: object
    dtype: torch.dtype
    constexprs: dict
    options: dict
    expect: tuple = ()  # subset of {"no_spills", "wgmma", "cp.async"}
    slot_type: str = "*i64"


@triton.jit
def _canary_bad_dot(x_ptr, y_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    tile = tl.load(x_ptr + offs[:, None] * B + offs[None, :])
    tl.store(y_ptr + offs[:, None] * B + offs[None, :], tl.dot(tile, tile))


def signature(cfg: Config) -> dict:
    """Arg name -> "*fp16" / "*i32" / "*fp32" / "i32" / "fp32" / "constexpr"."""
    sig = {}
    for name in cfg.kernel.arg_names:
        if name in cfg.constexprs:
            sig[name] = "constexpr"
        elif name == "slot_ptr":
            sig[name] = cfg.slot_type
        elif name.endswith("_ptr"):
            floats = "*fp32" if name.startswith("part_") else "*" + TYPE[cfg.dtype]
            sig[name] = INDEX_PTRS.get(name, floats)
        else:
            sig[name] = "fp32" if name == "qk_scale" else "i32"
    return sig


def aligned_attrs(cfg: Config, sig: dict) -> dict:
    """Divisibility-16 hints the JIT attaches in a real launch (enables vectorised loads).

    The JIT marks every pointer (torch allocations are 16-byte aligned) and every int arg
    divisible by 16: all strides of realistic shapes (multiples of head_dim) and split_len
    (a multiple of BLOCK_N), but not the block-table row stride (any max_blocks_per_seq).
    """
    def hinted(name):
        return sig[name].startswith("*") or name == "split_len" or (
            name.startswith("stride_") and name != "stride_bts")
    return {(i,): [["tt.divisibility", 16]]
            for i, name in enumerate(cfg.kernel.arg_names) if hinted(name)}


def compile_config(cfg: Config) -> None:
    sig = signature(cfg)
    src = ASTSource(fn=cfg.kernel, signature=sig, constexprs=cfg.constexprs,
                    attrs=aligned_attrs(cfg, sig))
    compiled = triton.compile(src, target=HOPPER, options=cfg.options)
    asm = compiled.asm
    missing = [s for s in ("ttir", "ttgir", "llir", "ptx", "cubin") if not asm.get(s)]
    if missing:
        raise RuntimeError(f"stages not produced: {missing}")
    if ".target sm_90" not in asm["ptx"]:
        raise RuntimeError("PTX does not target sm_90")
    if "no_spills" in cfg.expect and "STL" in asm["sass"]:
        raise RuntimeError("register spills (STL in SASS)")
    if "wgmma" in cfg.expect and "wgmma.mma_async" not in asm["ptx"]:
        raise RuntimeError("no Hopper wgmma in PTX")
    if "cp.async" in cfg.expect and "cp.async" not in asm["ptx"]:
        raise RuntimeError("K/V loads not pipelined (no cp.async in PTX)")


def configs() -> list[Config]:
    """A representative grid: serving shapes (Llama-3 head_dim 128, GQA 4/8) plus edges."""
    out = []
    fast = ("no_spills", "cp.async")
    for dtype in (torch.float16, torch.bfloat16):
        for head_dim, block_size, group in ((128, 16, 8), (128, 32, 4), (64, 16, 1)):
            tag = f"D={head_dim} bs={block_size} G={group}"
            consts, opts = decode_config(head_dim, block_size, group, dtype, False)
            for single in (True, False) if group == 8 else (False,):
                out.append(Config(f"decode {tag} single_split={single}", _decode_split_kernel,
                                  dtype, {**consts, "SINGLE_SPLIT": single}, opts, fast))
            consts, opts = prefill_config(head_dim, block_size, group, dtype, False)
            out.append(Config(f"prefill {tag}", _prefill_kernel, dtype, consts, opts,
                              (*fast, "wgmma")))
        out.append(Config("reduce D=128 splits<=32", _reduce_kernel, dtype,
                          {"HEAD_DIM": 128, "BLOCK_D": 128, "SPLITS_PAD": 32},
                          {"num_warps": 4}, ("no_spills",)))
        consts, opts = kv_write_config(8, 128, 16)
        out.append(Config("kv_write Hkv=8 D=128 bs=16", _kv_write_kernel, dtype, consts, opts,
                          ("no_spills",)))
    # Edges: padded head_dim 80 with G=5, head_dim 256, fp32 (ieee FMA dots), int32 slots.
    for dtype, head_dim, block_size, group in ((torch.float16, 80, 16, 5),
                                               (torch.bfloat16, 256, 32, 8),
                                               (torch.float32, 128, 16, 4)):
        tag = f"D={head_dim} bs={block_size} G={group}"
        consts, opts = decode_config(head_dim, block_size, group, dtype, False)
        out.append(Config(f"decode {tag}", _decode_split_kernel, dtype,
                          {**consts, "SINGLE_SPLIT": False}, opts))
        consts, opts = prefill_config(head_dim, block_size, group, dtype, False)
        out.append(Config(f"prefill {tag}", _prefill_kernel, dtype, consts, opts))
    consts, opts = kv_write_config(1, 80, 32)
    out.append(Config("kv_write Hkv=1 D=80 bs=32 int32 slots", _kv_write_kernel,
                      torch.bfloat16, consts, opts, slot_type="*i32"))
    return out


def _run(cfg: Config) -> str:
    """Compile one config; '' on success, else the traceback."""
    try:
        compile_config(cfg)
        return ""
    except Exception:  # report every failing config, not just the first
        return traceback.format_exc(limit=3)


def canary_rejected() -> bool:
    """True if the compiler rejects an 8-wide tl.dot, i.e. we are really compiling."""
    cfg = Config("canary", _canary_bad_dot, torch.float16, {"B": 8}, {})
    try:
        compile_config(cfg)
    except Exception:
        return True
    return False


def uncovered_kernels(cfgs: list[Config]) -> list[str]:
    """Kernels (`*_kernel` JIT functions in kernels/) that no config compiles."""
    covered = {cfg.kernel for cfg in cfgs}
    missing = []
    for info in pkgutil.iter_modules(kernels.__path__):
        module = importlib.import_module(f"kernels.{info.name}")
        for name, obj in vars(module).items():
            if isinstance(obj, triton.runtime.JITFunction) and name.endswith("_kernel") \
                    and obj not in covered:
                missing.append(f"kernels.{info.name}.{name}")
    return missing


def main() -> int:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("run without TRITON_INTERPRET: the interpreter does not compile", file=sys.stderr)
        return 2
    cfgs = configs()
    errors = [_run(cfg) for cfg in cfgs]  # ~1 s each on one core (ptxas included)
    for cfg, err in zip(cfgs, errors, strict=True):
        print(f"{'FAIL' if err else 'ok':4}  {TYPE[cfg.dtype]}  {cfg.label}")
        if err:
            print(err)
    failed = sum(bool(e) for e in errors)
    for name in uncovered_kernels(cfgs):
        print(f"FAIL  {name} has no compile config in hopper_compile.configs()")
        failed += 1
    if not canary_rejected():
        print("FAIL  canary: an 8-wide tl.dot compiled, so this harness is not compiling")
        failed += 1
    print(f"{failed} failed of {len(cfgs) + 1}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
