"""import-aiconfigurator: NVIDIA's measured tables fitted within 5% median / 15% p90 held out."""

from __future__ import annotations

import pytest

from sim.cli import main
from sim.cost.profile.model_file import load_model_file, shipped_profiles

BAR = {"median_ape": 5.0, "p90_ape": 15.0}
OPS = ("gemm", "prefill_attn", "decode_attn")


@pytest.mark.parametrize("name", sorted(shipped_profiles()))
def test_shipped_models_meet_the_bar_and_say_where_they_come_from(name):
    mf = load_model_file(shipped_profiles()[name])
    assert mf.kind == "ops" and mf.provenance.source.startswith("aiconfigurator-core 0.12.0")
    assert mf.provenance.profile_sha256 and mf.provenance.rows > 10_000
    h = mf.host_overhead  # fitted to published vLLM figures, said so
    assert h is not None and "latency benchmark" in h.source and "silicon_sample" in h.source
    assert mf.elementwise is not None and "mem_bw_empirical_scaling_factor" in mf.elementwise.source
    for op in OPS:
        held = mf.ops[op].heldout
        assert held.rows > 500, (name, op)
        assert held.median_ape <= BAR["median_ape"] and held.p90_ape <= BAR["p90_ape"], (
            name, op, held)


@pytest.mark.parametrize("system", ["h100_sxm"])  # h200 is checked through its shipped file
def test_import_meets_the_bar(system, tmp_path, capsys):
    pytest.importorskip("aiconfigurator_core")
    out = tmp_path / "m.yaml"
    assert main(["calibrate", "import-aiconfigurator", "--system", system, "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "held-out rows" in printed
    mf = load_model_file(out)
    for op in OPS:
        held = mf.ops[op].heldout
        assert held.median_ape <= BAR["median_ape"] and held.p90_ape <= BAR["p90_ape"], (op, held)
    # the hardware is the tables' GPU, not this machine
    assert mf.hardware.gpu == "h100-sxm" and "aiconfigurator" in mf.hardware.source
    assert mf.hardware.cpu == "" and mf.hardware.dtype == mf.dtype
    # the converted profile validates to the same numbers
    capsys.readouterr()
    assert main(["calibrate", "validate", str(out), str(out.with_suffix(".parquet"))]) == 0
    table = capsys.readouterr().out
    for op in OPS:
        line = next(ln for ln in table.splitlines() if f" {op} " in ln and " all " in ln)
        assert f"{mf.ops[op].heldout.median_ape:.2f}" in line, (op, line)


def test_conversion_maps_the_table_semantics():
    pytest.importorskip("aiconfigurator_core")
    from calibrate.aiconfigurator import import_profile

    df, norm, notes = import_profile("h200_sxm")
    assert norm.peak_flops == 989e12 and norm.mem_bandwidth == 4.8e12
    dec = df[df["op"] == "decode_attn"]
    assert dec["ctx_len"].min() == 1 and (dec["q_len"] == 1).all()  # KV length = isl + step
    pre = df[df["op"] == "prefill_attn"]
    assert (pre["ctx_len"] == 0).all() and pre["q_len"].max() == 16384
    # Hopper: per-tensor fp8 beside bf16 (no fp4 tensor cores; block fp8: GEMM_DTYPES)
    assert set(df["dtype"]) == {"bfloat16", "fp8"} and df["key"].is_unique
    assert set(df["kv_dtype"]) == {"bfloat16", "fp8"}  # fp8 KV attention rows beside bf16
    assert norm.fp8_peak_flops == 1978e12 and norm.fp4_peak_flops is None
    assert any("vllm_flash_attn_fa3" in n for n in notes)


def test_moe_curves_keep_one_kernel_per_shape_and_the_measured_times():
    pytest.importorskip("aiconfigurator_core")
    import pandas as pd

    from calibrate.aiconfigurator import moe_of, newest_table, package_root
    from sim.cost.profile.model_file import moe_key

    table = moe_of("h200_sxm")
    assert table is not None and len(table.curves) == len(set(table.curves))
    # every kept split fits one node
    assert all(int(c.split("|")[5]) * int(c.split("|")[6]) <= 8 for c in table.curves)
    # Qwen3-235B-A22B-FP8's experts (hidden 4096, 1536 per expert, 128 x top-8, fp8 blocks)
    key = moe_key("fp8_block", 4096, 1536, 128, 8, 1, 1, "power_law_1.2")
    ms = table.ms()[table.index()[key]]
    root, _ = package_root()
    raw = pd.read_parquet(newest_table(root, "h200_sxm", "moe", "vllm", "moe_perf"))
    kernel = table.kernels[table.index()[key]]
    rows = raw[(raw.moe_dtype == "fp8_block") & (raw.hidden_size == 4096)
               & (raw.inter_size == 1536) & (raw.num_experts == 128) & (raw.topk == 8)
               & (raw.moe_tp_size == 1) & (raw.moe_ep_size == 1)
               & (raw.distribution == "power_law_1.2") & (raw.kernel_source == kernel)]
    got = dict(zip(table.tokens, ms))
    for n, lat in zip(rows.num_tokens, rows.latency):  # int16 log2 coding: < 0.01 %
        assert got[int(n)] == pytest.approx(lat, rel=1e-4)


def test_moe_curves_of_other_backends_come_from_the_newest_table_that_timed_them():
    pytest.importorskip("aiconfigurator_core")
    import pandas as pd

    from calibrate.aiconfigurator import moe_of, package_root
    from sim.cost.moe import backend_of
    from sim.cost.profile.model_file import moe_key

    table = moe_of("b200_sxm")
    idx = table.index()
    # MiniMax-M2.5's block-fp8 experts at MoE TP 4: FlashInfer TRT-LLM in 0.24.0 (the
    # default curve), Triton fused_moe only in the 0.19.0 / 0.22.0 tables (0.22.0 kept)
    key = moe_key("fp8_block", 3072, 1536, 256, 8, 4, 1, "power_law_1.2")
    assert backend_of(table.kernels[idx[key]]) == "flashinfer_trtllm"
    assert table.kernels[idx[key + "@triton"]] == "vllm_fused_moe"
    assert "moe/vllm/0.22.0/moe_perf.parquet" in table.source
    root, _ = package_root()
    raw = pd.read_parquet(root / "data/b200_sxm/moe/vllm/0.22.0/moe_perf.parquet")
    rows = raw[(raw.moe_dtype == "fp8_block") & (raw.hidden_size == 3072)
               & (raw.inter_size == 1536) & (raw.num_experts == 256) & (raw.topk == 8)
               & (raw.moe_tp_size == 4) & (raw.moe_ep_size == 1)
               & (raw.distribution == "power_law_1.2")]
    got = dict(zip(table.tokens, table.ms()[idx[key + "@triton"]]))
    assert len(rows) > 10
    for n, lat in zip(rows.num_tokens, rows.latency):
        assert got[int(n)] == pytest.approx(lat, rel=2e-4)
    # one curve per (key, backend), never a second curve of the default's backend (a
    # shape only older tables timed has other-backend curves and no default)
    for c, i in idx.items():
        if "@" in c:
            base, backend = c.split("@")
            assert backend == backend_of(table.kernels[i])
            assert base not in idx or backend_of(table.kernels[idx[base]]) != backend


def test_unknown_system_is_an_input_error(capsys):
    code = main(["calibrate", "import-aiconfigurator", "--system", "tpu_v9"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("servesim: error: ") and "\n" not in err


def test_default_outputs_never_replace_a_users_files(tmp_path, monkeypatch, capsys):
    pytest.importorskip("aiconfigurator_core")
    monkeypatch.chdir(tmp_path)
    for name in ("h100-sxm-vllm.yaml", "h100-sxm-vllm.parquet"):
        (tmp_path / name).write_text("mine")
    assert main(["calibrate", "import-aiconfigurator", "--system", "h100_sxm"]) == 0
    assert {p.name for p in tmp_path.iterdir()} == {
        "h100-sxm-vllm.yaml", "h100-sxm-vllm.parquet", "h100-sxm-vllm-2.yaml",
        "h100-sxm-vllm-2.parquet"}
    assert all((tmp_path / n).read_text() == "mine"
               for n in ("h100-sxm-vllm.yaml", "h100-sxm-vllm.parquet"))


def test_a_gemm_row_far_above_a_larger_shape_is_the_collectors_spike():
    """calibrate.aiconfigurator.without_spikes: a row more than 1.5x the fastest shape with
    at least its m, n and k takes that time (a larger GEMM with padding could run it); rows
    within 1.5x keep their measured time (a tile that fits a shape better)."""
    import pandas as pd

    from calibrate.aiconfigurator import dominance_envelope, without_spikes

    # m 4, k 8192: n 1536 at 30 us between n 1024 (10.7) and n 2048 (11.7); n 3072 at 13.2
    # is 1.13x n 4096's 11.7: kept
    t = pd.DataFrame({"m": [4, 4, 4, 4, 4, 16], "n": [1024, 1536, 2048, 3072, 4096, 4096],
                      "k": [8192] * 6, "latency": [10.7, 30.1, 11.7, 13.2, 11.7, 34.2]})
    assert dominance_envelope(t).tolist() == [10.7, 11.7, 11.7, 11.7, 11.7, 34.2]
    assert without_spikes(t).tolist() == [10.7, 11.7, 11.7, 13.2, 11.7, 34.2]
    # the shipped B200 profile's fp8 GEMMs, fitted without the spikes, meet the bar that
    # missed it before (held-out p90 31.9 %)
    held = load_model_file(shipped_profiles()["b200/vllm"]).ops["gemm.fp8"].heldout
    assert held.median_ape <= BAR["median_ape"] and held.p90_ape <= BAR["p90_ape"], held


def _mla_ms(table, key: str, batch: int, length: int) -> float:
    i = table.index()[key]
    b, n = (ax.nodes.index(v) for ax, v in zip(table.axes, (batch, length)))
    return float(table.ms()[i, b, n])


def test_mla_modules_of_the_earlier_collector_are_corrected():
    """aiconfigurator-core re-collected vLLM's MLA module tables on B200 only (its
    collection_meta.yaml names norm_dispatch); B300 takes B200's rows x the TensorRT-LLM
    ratio, Hopper's own rows are divided per shape by the earlier collector's excess
    measured on Blackwell (calibrate/aiconfigurator_mla.py MLA_RECOLLECTED, MLA_EXCESS)."""
    pytest.importorskip("aiconfigurator_core")
    import pandas as pd

    from calibrate.aiconfigurator import mla_of, newest_table, package_root
    from calibrate.aiconfigurator_mla import mla_excess, mla_recollected, mla_scale

    root, _ = package_root()
    name = "mla_generation_module_perf"
    assert mla_recollected(root, "b200_sxm", "vllm", name)
    assert not mla_recollected(root, "b300_sxm", "vllm", name)
    assert not mla_recollected(root, "h200_sxm", "vllm", name)
    # the ratio of two tables one collector timed on both GPUs: B300 a few % under B200
    scale = mla_scale(root, "b300_sxm", "b200_sxm", name, "generation")
    assert 0.9 < scale < 1.0

    def raw(system, heads=16, batch=4, step=2048):
        t = pd.read_parquet(newest_table(root, system, "mla", "vllm", name))
        t = t[(t.tp_size == 1) & (t.kv_cache_dtype == "bfloat16") & (t.gemm_type == "bfloat16")
              & (t.num_heads == heads) & (t.batch_size == batch) & (t.step == step)]
        return float(t.latency.median())

    key = "DeepseekV3ForCausalLM|bfloat16|bfloat16|16"
    b200, b300, h200 = (mla_of(s, "generation") for s in ("b200_sxm", "b300_sxm", "h200_sxm"))
    # B200: its own re-collected rows, as measured (int16 log2 coding: < 0.01 %)
    assert _mla_ms(b200, key, 4, 2048) == pytest.approx(raw("b200_sxm"), rel=1e-4)
    # B300: B200's rows x the ratio, not its own earlier rows (1.6-2.2x B200's)
    assert raw("b300_sxm") > 1.5 * raw("b200_sxm")
    assert _mla_ms(b300, key, 4, 2048) == pytest.approx(raw("b200_sxm") * scale, rel=1e-4)
    assert "b200_sxm/mla/vllm" in b300.source and "MLA_RECOLLECTED" in b300.source
    # H200: its own rows / (B300 earlier / (B200 re-collected x ratio)) of the same shape
    excess = raw("b300_sxm") / (raw("b200_sxm") * scale)
    assert 1.3 < excess < 2.5
    assert _mla_ms(h200, key, 4, 2048) == pytest.approx(raw("h200_sxm") / excess, rel=1e-4)
    assert "ASSUMPTION" in h200.source and "MLA_EXCESS" in h200.source
    factor = mla_excess(root, "b300_sxm", "b200_sxm", name, "generation")
    assert factor.loc[("bfloat16", "bfloat16", 16, 4, 2048)] == pytest.approx(excess)
