"""kernels/bench.py without a GPU: it exits 0, and its shape/traffic plumbing is right."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import kernels.bench as bench

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_bench_without_gpu_says_so_and_exits_0():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "kernels.bench"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "no CUDA device" in proc.stdout


def test_shape_grid_covers_the_targets():
    grid = list(bench.shapes(quick=False))
    decode = [s for k, _, _, s in grid if k == "decode"]
    assert {b for b, _ in decode} == {1, 8, 32, 64, 128, 256}
    assert {c for _, c in decode} == {128, 1024, 4096, 16384, 32768}
    assert any(b * c >= 2**20 for b, c in decode)  # the 70%-of-copy-bandwidth target
    assert ("prefill", "llama3-70b", 32, (1, 8192, 0)) in grid  # the 40%-of-bf16 target
    assert {bs for _, _, bs, _ in grid} == {16, 32}
    assert len(list(bench.shapes(quick=True))) < len(grid)


@pytest.fixture
def tiny_models(monkeypatch):
    """Llama-shaped but tiny, timed by one direct call, so the interpreter can run them."""
    monkeypatch.setattr(bench, "MODELS", {"tiny": (4, 2, 16)})
    monkeypatch.setattr(bench, "timed_ms", lambda fn: [fn(), 2.0][1])


def test_bench_traffic_and_flops(tiny_models):
    cpu, fp16 = torch.device("cpu"), torch.float16
    ms, nbytes, flops = bench.bench_decode("tiny", 16, 2, 40, fp16, cpu)
    kv = 2 * 2 * 40 * 2 * 16 * 2  # K and V, batch 2, ctx 40, 2 kv heads, dim 16, 2 bytes
    assert ms == 2.0 and nbytes == kv + 2 * (2 * 4 * 16 * 2) + 2 * 3 * 4
    assert flops == 4 * 2 * 4 * 40 * 16
    _, nbytes, flops = bench.bench_prefill("tiny", 16, 2, 5, 3, fp16, cpu)
    pairs = 2 * (5 * 3 + 15)  # per sequence: 5 queries x 3 prefix keys + causal 1+..+5
    assert flops == 4 * 4 * 16 * pairs
    assert nbytes == 2 * 2 * 8 * 2 * 16 * 2 + 2 * (10 * 4 * 16 * 2)
    _, nbytes, flops = bench.bench_kv_write("tiny", 16, 7, fp16, cpu)
    assert nbytes == 4 * 7 * 2 * 16 * 2 + 7 * 8 and flops == 0


def test_selfcheck_runs_on_small_shapes():
    bench.selfcheck(torch.device("cpu"), lens=(1, 20, 33), prefix=(0, 7, 30), heads=(4, 2),
                    dim=16)
