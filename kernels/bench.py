"""Time the kernels on a CUDA GPU over Llama-3 serving shapes; print a Markdown report.

    python -m kernels.bench [--quick] [--dtype bf16|fp16] > kernels/RESULTS.md

Each kernel call is timed with triton.testing.do_bench (L2 flushed between calls, warm-up
calls dropped, median of the timed calls). Reported per shape: ms, achieved GB/s (ideal
traffic: every K/V byte of the contexts read once, q/out/K/V rows read or written once),
TFLOP/s (QK^T and PV, causal work only), and these as fractions of two probes measured here
on the same device: device-to-device copy bandwidth and dense bf16 matmul rate.
Targets (H100/H200): decode with batch x context >= 1M tokens >= 70% of copy bandwidth;
prefill of an 8k-token chunk >= 40% of the dense bf16 rate.
A small correctness check against the float64 references runs first, on the GPU.
Without a CUDA device it says so and exits 0.
"""

from __future__ import annotations

import argparse
import itertools
import sys

import torch

MODELS = {"llama3-8b": (32, 8, 128), "llama3-70b": (64, 8, 128)}  # heads, kv heads, head_dim
BLOCK_SIZES = (16, 32)
DECODE_BATCH = (1, 8, 32, 64, 128, 256)
DECODE_CTX = (128, 1024, 4096, 16384, 32768)
PREFILL = ((1, 256, 0), (1, 1024, 0), (1, 2048, 0), (1, 4096, 0), (1, 8192, 0),
           (1, 2048, 8192), (4, 2048, 1024))  # (sequences, chunk, prefix) per sequence
KV_WRITE_TOKENS = (256, 2048, 8192)
MEMORY_FRACTION = 0.4  # skip shapes whose cache exceeds this share of device memory


def timed_ms(fn) -> float:
    from triton.testing import do_bench  # needs a GPU driver: import only when timing
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def probe_copy_gbs(device) -> float:
    """Device-to-device copy bandwidth, GB/s (bytes read + written), 1 GiB buffers."""
    src = torch.empty(2**30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return 2 * src.numel() / timed_ms(lambda: dst.copy_(src)) / 1e6


def probe_bf16_tflops(device, n: int = 8192) -> float:
    """Dense bf16 matmul rate, TFLOP/s, n x n x n."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b, c = torch.randn_like(a), torch.empty_like(a)
    return 2 * n**3 / timed_ms(lambda: torch.mm(a, b, out=c)) / 1e9


def paged_setup(lens, block_size, num_kv_heads, head_dim, dtype, device):
    """Random caches and a shuffled block table holding contexts of `lens` tokens."""
    from kernels import layout
    pages = [-(-n // block_size) for n in lens]
    perm = torch.randperm(sum(pages)).tolist()
    starts = list(itertools.accumulate(pages, initial=0))
    blocks = [perm[starts[i]:starts[i + 1]] for i in range(len(lens))]
    k_cache, v_cache = layout.make_cache(sum(pages), block_size, num_kv_heads, head_dim,
                                         dtype, device)
    k_cache.normal_()
    v_cache.normal_()
    return k_cache, v_cache, layout.block_table(blocks, device=device), blocks


def fits(num_tokens, num_kv_heads, head_dim, dtype, device) -> bool:
    kv_bytes = 2 * num_tokens * num_kv_heads * head_dim * dtype.itemsize
    return kv_bytes < MEMORY_FRACTION * torch.cuda.get_device_properties(device).total_memory


def bench_decode(model, block_size, batch, ctx, dtype, device):
    from kernels import paged_decode
    heads, kv_heads, dim = MODELS[model]
    k_cache, v_cache, table, _ = paged_setup([ctx] * batch, block_size, kv_heads, dim, dtype,
                                             device)
    q = torch.randn(batch, heads, dim, device=device, dtype=dtype)
    lens = torch.full((batch,), ctx, dtype=torch.int32, device=device)
    out = paged_decode(q, k_cache, v_cache, table, lens)  # validated once, then timed raw
    ms = timed_ms(lambda: paged_decode(q, k_cache, v_cache, table, lens, out=out,
                                       max_seq_len=ctx, validate=False))
    kv_bytes = 2 * batch * ctx * kv_heads * dim * dtype.itemsize
    io_bytes = 2 * q.numel() * dtype.itemsize + table.numel() * 4
    return ms, kv_bytes + io_bytes, 4 * batch * heads * ctx * dim


def bench_prefill(model, block_size, seqs, chunk, prefix, dtype, device):
    from kernels import paged_prefill
    heads, kv_heads, dim = MODELS[model]
    k_cache, v_cache, table, _ = paged_setup([prefix + chunk] * seqs, block_size, kv_heads,
                                             dim, dtype, device)
    q = torch.randn(seqs * chunk, heads, dim, device=device, dtype=dtype)
    prefix_lens = torch.full((seqs,), prefix, dtype=torch.int32, device=device)
    qsl = torch.arange(0, seqs * chunk + 1, chunk, dtype=torch.int32, device=device)
    out = paged_prefill(q, k_cache, v_cache, table, prefix_lens, qsl)
    ms = timed_ms(lambda: paged_prefill(q, k_cache, v_cache, table, prefix_lens, qsl, out=out,
                                        max_query_len=chunk, validate=False))
    keys_seen = seqs * (chunk * prefix + chunk * (chunk + 1) // 2)  # causal (query, key) pairs
    kv_bytes = 2 * seqs * (prefix + chunk) * kv_heads * dim * dtype.itemsize
    return ms, kv_bytes + 2 * q.numel() * dtype.itemsize, 4 * heads * dim * keys_seen


def bench_kv_write(model, block_size, tokens, dtype, device):
    from kernels import kv_write
    _, kv_heads, dim = MODELS[model]
    k_cache, v_cache, _, _ = paged_setup([tokens], block_size, kv_heads, dim, dtype, device)
    k = torch.randn(tokens, kv_heads, dim, device=device, dtype=dtype)
    v = torch.randn_like(k)
    slots = torch.randperm(k_cache.shape[0] * block_size, device=device)[:tokens]
    kv_write(k, v, k_cache, v_cache, slots)
    ms = timed_ms(lambda: kv_write(k, v, k_cache, v_cache, slots, validate=False))
    return ms, 4 * k.numel() * dtype.itemsize + slots.numel() * 8, 0


def selfcheck(device, lens=(1, 77, 1000, 4097), prefix=(0, 40, 900, 3000), heads=(32, 8),
              dim=128) -> None:
    """Kernels vs float64 references on the GPU (real bf16 dots, unlike the CPU tests)."""
    from kernels import paged_decode, paged_decode_ref, paged_prefill, paged_prefill_ref
    tol = {torch.float16: 5e-3, torch.bfloat16: 3e-2}
    for dtype, block_size in itertools.product(tol, BLOCK_SIZES):
        k_cache, v_cache, table, _ = paged_setup(lens, block_size, heads[1], dim, dtype, device)
        q = torch.randn(len(lens), heads[0], dim, device=device, dtype=dtype)
        seq_lens = torch.tensor(lens, dtype=torch.int32, device=device)
        err = _rel(paged_decode(q, k_cache, v_cache, table, seq_lens),
                   paged_decode_ref(q, k_cache, v_cache, table, seq_lens))
        prefix_lens = torch.tensor(prefix, dtype=torch.int32, device=device)
        chunks = [n - p for n, p in zip(lens, prefix, strict=True)]
        qsl = torch.tensor([0, *itertools.accumulate(chunks)], dtype=torch.int32, device=device)
        qp = torch.randn(int(qsl[-1]), heads[0], dim, device=device, dtype=dtype)
        err = max(err, _rel(paged_prefill(qp, k_cache, v_cache, table, prefix_lens, qsl),
                            paged_prefill_ref(qp, k_cache, v_cache, table, prefix_lens, qsl)))
        if not err <= tol[dtype]:
            raise AssertionError(f"selfcheck {dtype} block {block_size}: rel err {err:.3g}")


def _rel(out, ref) -> float:
    return ((out.double() - ref).abs().max() / ref.abs().max()).item()


def shapes(quick: bool):
    """(kernel, model, block_size, shape tuple) in report order."""
    models = ["llama3-8b"] if quick else list(MODELS)
    blocks = BLOCK_SIZES[:1] if quick else BLOCK_SIZES
    batches, ctxs = ((1, 64, 256), (1024, 32768)) if quick else (DECODE_BATCH, DECODE_CTX)
    for model, bs in itertools.product(models, blocks):
        for batch, ctx in itertools.product(batches, ctxs):
            yield "decode", model, bs, (batch, ctx)
        for shape in PREFILL[1::2] if quick else PREFILL:
            yield "prefill", model, bs, shape
        for tokens in KV_WRITE_TOKENS:
            yield "kv_write", model, bs, (tokens,)


def run(args) -> int:
    device = torch.device("cuda")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    selfcheck(device)
    copy_gbs, bf16_tflops = probe_copy_gbs(device), probe_bf16_tflops(device)
    print(f"# kernels/bench.py on {torch.cuda.get_device_name(device)}\n")
    print(f"{args.dtype}; torch {torch.__version__}; triton {_triton_version()}; selfcheck ok; "
          f"copy {copy_gbs:.0f} GB/s; dense bf16 {bf16_tflops:.0f} TFLOP/s\n")
    print("| kernel | model | block | shape | ms | GB/s | TFLOP/s | % copy BW | % bf16 |")
    print("|---|---|---|---|---|---|---|---|---|")
    fns = {"decode": bench_decode, "prefill": bench_prefill, "kv_write": bench_kv_write}
    verdicts = []
    for kernel, model, bs, shape in shapes(args.quick):
        tokens = shape[0] * sum(shape[1:]) if kernel != "kv_write" else shape[0]
        if not fits(tokens, MODELS[model][1], MODELS[model][2], dtype, device):
            continue
        ms, nbytes, flops = fns[kernel](model, bs, *shape, dtype, device)
        torch.cuda.empty_cache()  # next shape may need most of the memory: no fragmentation
        gbs, tflops = nbytes / ms / 1e6, flops / ms / 1e9
        bw, mm = gbs / copy_gbs, tflops / bf16_tflops
        print(f"| {kernel} | {model} | {bs} | {_label(kernel, shape)} | {ms:.4f} | {gbs:.0f} "
              f"| {tflops:.1f} | {100 * bw:.0f}% | {100 * mm:.0f}% |", flush=True)
        if kernel == "decode" and shape[0] * shape[1] >= 2**20:
            verdicts.append((f"decode {model} bs{bs} {_label(kernel, shape)}", bw, 0.70))
        if kernel == "prefill" and shape == (1, 8192, 0):
            verdicts.append((f"prefill {model} bs{bs} 8k chunk", mm, 0.40))
    print("\n## Targets\n")
    for name, got, want in verdicts:
        print(f"- {'PASS' if got >= want else 'MISS'} {name}: {100 * got:.0f}% "
              f"(target {100 * want:.0f}%)")
    return 0


def _label(kernel, shape) -> str:
    if kernel == "decode":
        return f"batch {shape[0]} x ctx {shape[1]}"
    if kernel == "prefill":
        return f"{shape[0]} x chunk {shape[1]} + prefix {shape[2]}"
    return f"{shape[0]} tokens"


def _triton_version() -> str:
    import triton
    return triton.__version__


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few shapes only")
    parser.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("kernels.bench: no CUDA device available; nothing to time "
              "(the kernels are tested on the CPU through Triton's interpreter).")
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
