"""Table maths (fit, evaluate, restrict), the model-file schema, the shape grid."""

from __future__ import annotations

import numpy as np
import pytest

from calibrate.shapes import GridSpec, derive_shapes, log_grid
from sim.catalog import get_model
from sim.cost.profile import grid
from sim.cost.profile.gemms import model_gemms
from sim.cost.profile.model_file import (
    ModelFileError,
    OpTable,
    load_model_file,
    resolve_profile,
    save_model_file,
    shipped_profiles,
)


def test_fit_reproduces_a_multilinear_function_and_fills_holes():
    nodes = [np.arange(6.0), np.arange(5.0), np.array([0.0, 2.0])]
    mesh = np.stack(np.meshgrid(*nodes, indexing="ij"), axis=-1).reshape(-1, 3)
    f = 1.0 + 0.5 * mesh[:, 0] - 0.25 * mesh[:, 1] + 0.1 * mesh[:, 0] * mesh[:, 2]
    keep = np.random.default_rng(0).random(len(f)) > 0.2  # holes at 20% of the nodes
    values = grid.fit_grid(nodes, mesh[keep], f[keep])
    np.testing.assert_allclose(grid.evaluate(values, nodes, mesh), f, atol=1e-2)
    # between nodes it is multilinear, beyond the range it clamps to the edge
    assert grid.evaluate(values, nodes, [[2.5, 1.0, 0.0]])[0] == pytest.approx(2.0, abs=1e-2)
    assert grid.evaluate(values, nodes, [[9.0, 1.0, 0.0]]) == pytest.approx(
        grid.evaluate(values, nodes, [[5.0, 1.0, 0.0]]))


def test_restrict_is_exact():
    rng = np.random.default_rng(1)
    nodes = [np.sort(rng.random(4)), np.sort(rng.random(3)), np.sort(rng.random(5))]
    values = rng.random((4, 3, 5))
    sub, sub_nodes = grid.restrict(values, nodes, {1: 0.37})
    pts = rng.random((50, 2))
    full = np.column_stack([pts[:, 0], np.full(50, 0.37), pts[:, 1]])
    np.testing.assert_allclose(grid.evaluate(sub, sub_nodes, pts),
                               grid.evaluate(values, nodes, full))


def test_table_encoding_round_trips():
    v = np.random.default_rng(2).normal(size=(7, 9)) * 4
    enc, offset, scale = OpTable.encode(v)
    t = OpTable(axes=[{"name": "a", "nodes": list(range(7))}, {"name": "b",
                "nodes": list(range(9))}], offset=offset, scale=scale, values=enc,
                train={"rows": 1, "median_ape": 0, "p90_ape": 0, "max_ape": 0})
    np.testing.assert_allclose(t.grid(), v, atol=scale)


def test_model_file_errors_and_profile_names(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: ops\n")
    with pytest.raises(ModelFileError, match="bad.yaml"):
        load_model_file(bad)
    bad.write_text("{[")
    with pytest.raises(ModelFileError, match="invalid YAML"):
        load_model_file(bad)
    with pytest.raises(ValueError, match="shipped profiles: .*h200-sxm/vllm"):
        resolve_profile("h999/vllm")
    name = "h200-sxm/vllm"
    mf = load_model_file(resolve_profile(name))
    copy = save_model_file(mf, tmp_path / "copy.yaml")
    for table in mf.ops.values():  # decoded once and kept: equality is still the tables'
        assert not table.grid().flags.writeable and table.grid() is table.grid()
    assert load_model_file(copy) == mf
    assert resolve_profile(str(copy)) == copy and name in shipped_profiles()


def test_shape_grid_follows_the_model_and_engine_limits():
    m = get_model("llama-3-8b")
    assert model_gemms(m, 1) == {"qkv": (6144, 4096), "o": (4096, 4096),
                                 "gate_up": (28672, 4096), "down": (4096, 14336),
                                 "lm_head": (128256, 4096)}
    assert model_gemms(m, 2)["qkv"] == (3072, 4096)
    assert log_grid(8192, 2)[:6] == [1, 2, 3, 4, 6, 8] and log_grid(8192, 2)[-1] == 8192
    shapes = derive_shapes(m, 1, max_num_batched_tokens=8192, max_num_seqs=256)
    ops = {s.op for s in shapes}
    assert ops == {"step_overhead", "gemm", "prefill_attn", "decode_attn"}
    assert 150 < len(shapes) < 400  # the default budget: minutes on one GPU
    assert max(s.m for s in shapes if s.name == "lm_head") == 256
    assert all(s.q_len + s.ctx_len <= 8192 for s in shapes if s.op == "prefill_attn")
    assert all(s.batch * (s.ctx_len + 1) <= GridSpec().decode_max_kv_tokens
               for s in shapes if s.op == "decode_attn")
    tp2 = derive_shapes(m, 2, max_num_batched_tokens=1024)
    assert any(s.op == "allreduce" and s.num_gpus == 2 for s in tp2)
    assert len({s.key() for s in shapes}) == len(shapes)
