"""The error band beside every answer (sim/cost/validation.py, calibrate/models/
validation.yaml written by `python -m benchmarks.silicon --record`)."""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.config.load import load_scenario
from sim.config.resolve import resolve
from sim.cost.validation import _bands, band, describe, model_class


def resolved(*sets: str):
    return resolve(load_scenario(None, sets).scenario)


def test_the_shipped_bands_cover_the_replayed_systems():
    bands = _bands()["bands"]
    assert set(bands) == {"h100-sxm", "h200-sxm", "b200", "b300"}
    h100 = bands["h100-sxm"]["dense fp8"]
    assert h100["rows"] == 48 and "meta-llama/Llama-3.1-70B" in h100["models"]
    # the 2026 models: MiniMax-M2.5's block-fp8 MoE, Kimi-K2.5's MLA with int4 experts
    assert "MiniMaxAI/MiniMax-M2.5" in bands["h200-sxm"]["moe fp8"]["models"]
    assert bands["h200-sxm"]["moe mla 16/4-bit"]["models"] == ["moonshotai/Kimi-K2.5"]
    # nvidia/MiniMax-M2.5-NVFP4 keeps its attention in bf16: a 16/4-bit MoE, as gpt-oss
    assert set(bands["b300"]) == {"moe fp8", "moe 16/4-bit", "moe mla 16/4-bit"}
    for entry in (e for gpu in bands.values() for e in gpu.values()):
        for m in ("ttft", "tpot"):
            assert 0 <= entry[m]["median_abs"] <= entry[m]["p90_abs"]


def test_fitted_without_a_profile_is_the_shipped_one():
    b = band(resolved("cost={name: fitted}"))
    assert b["validated"] and b["gpu"] == "h100-sxm"


def test_a_shipped_fitted_profile_reads_its_band():
    b = band(resolved())  # the default scenario: llama-3-8b bf16, fitted h100-sxm/vllm
    assert b["validated"] and (b["gpu"], b["model_class"]) == ("h100-sxm", "dense bf16")
    assert b["rows"] == _bands()["bands"]["h100-sxm"]["dense bf16"]["rows"]
    line = describe(b)
    assert line.startswith("cost model error on h100-sxm (dense bf16: ")
    assert f"TTFT +/- {b['ttft']['median_abs']:.1f} % median" in line and "\n" not in line


@pytest.mark.parametrize(("sets", "why"), [
    (("cost.name=roofline",), "cost roofline: only the shipped"),
    (("gpu=a100-80gb",), "no measured deployment of a dense bf16 model on a100-80gb"),
    (("model={name: llama-3-8b, num_layers: 32, hidden_size: 4096, num_attention_heads: 32, "
      "num_kv_heads: 8, head_dim: 128, intermediate_size: 14336, vocab_size: 128256, "
      "max_position_embeddings: 8192, dtype_bytes: 4}",), "dense fp32 model on h100-sxm"),
])
def test_outside_what_was_measured_says_so(sets, why):
    b = band(resolved(*sets))
    assert not b["validated"] and why in b["why"], b
    assert describe(b).startswith("cost model error: not validated for ")


def test_model_class_names_the_weight_dtype():
    r = resolved()
    assert model_class(r.model) == "dense bf16"
    assert model_class(r.model.model_copy(update={"dtype_bytes": 1})) == "dense fp8"


def test_run_prints_and_writes_the_band(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["run", "--out", str(out), "--set", "workload.num_requests=50",
                 "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "cost model error on h100-sxm (dense bf16: " in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cost_error"]["validated"] is True
    assert summary["cost_error"]["model_class"] == "dense bf16"


def test_the_published_latency_points_come_along():
    b = band(resolved("gpu=a100-80gb"))  # no serving rows on A100, two published points
    assert not b["validated"] and [p["name"] for p in b["published"]] == [
        "latency llama-3-8b tp1 a100-80gb", "latency llama-3-70b tp4 a100-80gb"]
    for p in b["published"]:
        assert p["error_pct"] == round(100 * (p["simulated_ms"] / p["measured_ms"] - 1), 1)
    assert describe(b).endswith("vLLM's latency benchmark on a100-80gb (batch of 8, 32 in / "
                                f"128 out): {b['published'][0]['error_pct']:+.1f} %, "
                                f"{b['published'][1]['error_pct']:+.1f} %")


def test_a_speculative_run_says_its_drafter_is_outside_the_rows():
    # no measured deployment speculates: the band says so, and what checks the drafter
    b = band(resolved("engine.speculative_config={method: eagle3, num_speculative_tokens: 3}"))
    assert b["validated"] and b["speculative"] == "eagle3"
    assert describe(b).endswith("speculative decoding (eagle3) is in none of those rows: only "
                                "SpecDecode-Bench's published EAGLE speedup on one H100 checks "
                                "it (benchmarks/speculative)")
    assert "speculative" not in band(resolved())
