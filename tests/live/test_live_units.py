"""Live mode's pieces: announced free blocks, token ids, the memory check, layer scaling,
CLI errors, the engine's run limit, and the Triton path under the interpreter."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from sim.cli import main
from sim.engine.requests import RequestSpecs
from sim.kv.paged import PagedKV
from sim.kv.prefix_cache import PrefixCachingKV
from sim.live.cache import CacheShape, fits
from sim.live.tokens import TokenBook
from tests.live.helpers import run_checked, write_scenario
from traces.errors import InputError


def _kv(cls, n_blocks=40, n_req=6):
    specs = RequestSpecs.from_arrays(np.zeros(n_req), np.full(n_req, 40), np.full(n_req, 40))
    return cls(num_blocks=n_blocks, block_size=4, num_requests=n_req, max_model_len=200,
               prompt_tokens=specs.prompt_tokens, output_tokens=specs.output_tokens,
               specs=specs)


@pytest.mark.parametrize("cls", [PagedKV, PrefixCachingKV], ids=["stack", "lru"])
def test_next_free_blocks_are_the_blocks_allocations_take(cls):
    kv = _kv(cls)
    for r in range(3):
        assert kv.allocate(r, 4 * (r + 2))
    kv.free(1)  # a freed table goes back to the free list
    announced = kv.next_free_blocks(7)
    ids = np.array([0, 2, 3])
    kv.grow(ids, np.array([3, 1, 3]))  # 7 blocks, in three takes
    new = kv.block_table(0)[2:] + kv.block_table(2)[4:] + kv.block_table(3)
    assert sorted(new) == sorted(announced) and len(set(announced)) == 7
    assert 0 not in announced
    kv.check_integrity()


def test_prompt_ids_follow_the_prefix_chain():
    """Blocks covered by equal hash chains hold equal ids (a cache hit holds the KV the
    hitting request would compute); everything else differs; ids are reproducible."""
    chain_a, chain_b = np.array([11, 12]), np.array([11, 99])
    specs = RequestSpecs.from_arrays(np.zeros(3), [40, 40, 40], [5, 5, 5],
                                     prefix_hashes=[chain_a, chain_b, None], hash_block_size=16)
    a, b, c = (TokenBook(specs, 8, 32000, seed=1).prompt_ids(r) for r in range(3))
    assert np.array_equal(a[:16], b[:16]) and not np.array_equal(a[16:32], b[16:32])
    assert (a[32:] != b[32:]).any() and (a[:16] != c[:16]).any()
    assert np.array_equal(a, TokenBook(specs, 8, 32000, seed=1).prompt_ids(0))
    assert not np.array_equal(a, TokenBook(specs, 8, 32000, seed=2).prompt_ids(0))
    assert a.min() >= 0 and a.max() < 32000


def test_a_pool_that_does_not_fit_names_the_largest_that_does():
    shape = CacheShape(2, 1000, 16, 2, 64, torch.float32)
    block = 2 * 2 * 16 * 2 * 64 * 4  # K and V, 2 layers, 16 slots, 2 heads x 64, fp32
    assert shape.block_bytes == block
    fits(shape, 0, "cpu", free=2 * 1000 * block)
    with pytest.raises(InputError) as e:
        fits(shape, 10 * block, "cpu", free=200 * block)
    largest = (int(200 * block * 0.95) - 10 * block) // block - 1
    assert f"at most {largest} usable blocks fit (engine.num_gpu_blocks_override: " \
           f"{largest + 1})" in str(e.value)


def test_cli_refuses_a_pool_larger_than_memory(tmp_path, capsys):
    path = write_scenario(tmp_path, n=5, blocks=8_000_000)  # 0.5 TB of KV
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "usable blocks fit (engine.num_gpu_blocks_override:" in err[0]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args, message", [
    (["--device", "cuda"], "--device applies to live runs: add --live"),
    (["--live", "--device", "tpu"], "expected cpu or cuda"),
    (["--live", "--set", "tensor_parallel_size=2"], "runs one device"),
])
def test_cli_errors(tmp_path, capsys, args, message):
    path = write_scenario(tmp_path, n=5, cost="linear")
    code = main(["run", str(path), *args, "-q", "--out", str(tmp_path / "o")])
    assert code == 2 and message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_without_a_gpu_is_refused(tmp_path, capsys):
    path = write_scenario(tmp_path, n=5)
    assert main(["run", str(path), "--live", "--device", "cuda", "-q",
                 "--out", str(tmp_path / "o")]) == 2
    assert "no CUDA device is visible" in capsys.readouterr().err


def test_fewer_layers_scale_the_measured_layer_time(tmp_path):
    """--live turns a priced scenario live; --set then reaches the live knobs."""
    path, out = write_scenario(tmp_path, n=8, cost="linear"), tmp_path / "o"
    assert main(["run", str(path), "--live", "--set", "cost.layers=1", "-q", "--no-plots",
                 "--out", str(out)]) == 0
    live = json.loads((out / "summary.json").read_text())["live"]
    assert (live["layers_executed"], live["model_layers"], live["layer_scale"]) == (1, 2, 2.0)
    steps = pd.read_parquet(out / "live_steps.parquet")
    assert np.allclose(steps["duration_s"], steps["measured_s"] + steps["layers_s"])


def test_an_executor_stopping_at_the_run_limit_changes_nothing():
    """An executor may return fewer durations than a decode run has steps: it stopped at
    Engine.run_limit, as live mode does. The engine keeps exactly those steps, and every
    result equals the run that priced whole plans and let the engine cut them."""
    from sim.engine.clock import to_ns
    from tests.sim.helpers import assert_same_results, build

    args = ([0.0, 0.005, 0.0301, 0.2], [30, 10, 50, 5], [40, 30, 20, 10])
    priced = build(*args)
    priced.engine.run()
    stopping = build(*args)
    engine, price = stopping.engine, stopping.engine.executor
    cut = []

    def executor(plan):
        d, limit = price(plan), engine.run_limit(plan)  # ns, the engine's clock
        starts = engine.clock + np.concatenate(([0], np.cumsum(to_ns(d))[:-1]))
        keep = max(1, int((starts < limit).sum()))
        cut.append(keep < plan.num_steps)
        return d[:keep]

    engine.executor = executor
    engine.run()
    assert any(cut), "no decode run was cut: the case does not test anything"
    assert_same_results(priced, stopping)


@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0")
def test_triton_kernels_run_live_under_the_interpreter(tmp_path):
    """The CUDA path's kernel calls (Triton, validate=False) on CPU tensors: the cache holds
    the same K/V as the contiguous recomputation."""
    path = write_scenario(tmp_path, n=2, rate=100)
    res, chk = run_checked(path, "cost={name: live, attention: triton, layers: 1, "
                           "warmup_steps: 0}",
                           "workload.lengths={dist: fixed, prompt: 20, output: 3}",
                           per_plan=2)
    assert chk.executor.runner.attn.name == "triton"
    assert (res.generated == 3).all() and chk.checks >= 3 and chk.worst < 1e-5


def test_progress_bar_shows_steps_tokens_and_time_left():
    import io

    from rich.console import Console

    from sim.cli.live import live_bar

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=160)
    with live_bar(console, False, "live") as bar:
        bar(3, 50, 200)
        task = bar.p.tasks[0]
        assert (task.completed, task.total, task.fields["steps"]) == (50, 200, "3 steps")
    out = buf.getvalue()
    assert "50/200 tokens" in out and "3 steps" in out and "ETA" in out
