"""benchmarks/silicon: NVIDIA's measured vLLM deployments replayed as they were measured.

Runs on the committed subset (benchmarks/silicon/subset.csv.gz: 17 rows of
aiconfigurator-core 0.12.0's silicon_sample.csv, unchanged), so it needs neither the
aiconfigurator extra nor a GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.silicon.__main__ import main
from benchmarks.silicon.replay import lengths, scenario
from benchmarks.silicon.rows import protocol, read_rows, unrepresentable

SUBSET = Path(__file__).resolve().parents[2] / "benchmarks" / "silicon" / "subset.csv.gz"


@pytest.fixture(scope="module")
def rows():
    return {r.id: r for r in read_rows(SUBSET)}


def test_subset_rows_and_reasons(rows):
    assert len(rows) == 17
    reasons = sorted(filter(None, (unrepresentable(r) for r in rows.values())))
    assert len(reasons) == 3
    assert any(r.startswith("system b300_sxm") for r in reasons)
    assert any("fp4 weights" in r for r in reasons)
    assert any("gpt-oss-120b: mixture-of-experts" in r for r in reasons)


def test_inferencemax_rows_are_replayed_as_measured(rows):
    h100 = rows["2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_1024x1024_c4_tp4_ep1_653"]
    b200 = rows["2026_04_06_llama_3_1_70b_b200_sxm_vllm_fp8_agg_1024x1024_c8_tp4_ep1_259"]
    p = protocol(h100)
    assert (p.name, p.num_prompts, p.concurrency, p.range_ratio, p.range_below) == (
        "inferencemax", 40, 4, 0.8, True)
    # H100's scripts set no --kv-cache-dtype (bf16 KV then); H200's and B200's set fp8
    assert not p.kv_fp8 and protocol(b200).kv_fp8
    assert p.async_scheduling and p.max_num_batched_tokens == 8192
    assert p.max_num_seqs == 4 and protocol(b200).max_num_seqs == 512
    prompt, output = lengths(h100, p)
    assert len(prompt) == len(output) == 40
    assert prompt.min() >= 819 and prompt.max() <= 1024 and output.min() >= 819
    # the client's draws: numpy's legacy stream seeded 0, all inputs before all outputs
    rs = np.random.RandomState(0)
    np.testing.assert_array_equal(prompt, rs.randint(819, 1025, size=40))
    np.testing.assert_array_equal(output, rs.randint(819, 1025, size=40))
    sc = scenario(h100, p, Path("t.csv"))
    assert sc["model"]["dtype_bytes"] == 1 and sc["model"]["kv_dtype_bytes"] is None
    assert sc["engine"]["async_scheduling"] is True
    assert sc["engine"]["enable_prefix_caching"] is False
    assert sc["workload"]["arrival"] == {"process": "replay", "concurrency": 4}


def test_gap_analysis_rows_use_fixed_lengths_and_vllm_defaults(rows):
    q = rows["qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_vllm_agg_1024x128_c8_tp4_epnone_2"]
    p = protocol(q)
    prompt, output = lengths(q, p)
    assert (prompt == 1024).all() and (output == 128).all() and len(prompt) == 80
    assert not p.kv_fp8 and not p.async_scheduling and p.max_num_seqs is None
    fp8 = rows["qwen3_32b_qwen3_32b_h100_sxm_vllm_agg_4000x1000_c_tp8_0_epnone_1"]
    assert fp8.concurrency == 144  # no silicon_concurrency: its batch_size is the clients


def test_replay_writes_the_table_and_meets_the_bar_on_h100(tmp_path, capsys):
    out = tmp_path / "silicon"
    assert main(["--csv", str(SUBSET), "--out", str(out), "--match", "h100_sxm_vllm_fp8"]) == 0
    printed = capsys.readouterr().out
    assert "system h100_sxm" in printed and f"results: {out}" in printed
    for name in ("rows.csv", "errors.csv", "unrepresentable.csv", "scatter.png"):
        assert (out / name).stat().st_size > 0
    df = pd.read_csv(out / "rows.csv")
    assert len(df) == 3 and set(df["protocol"]) == {"inferencemax"}
    # measured on H100 (NVIDIA, 2025-10-29): TTFT and TPOT within 10 % on each row
    assert (df["ttft_err_pct"].abs() < 10).all(), df[["id", "ttft_err_pct"]]
    assert (df["tpot_err_pct"].abs() < 10).all(), df[["id", "tpot_err_pct"]]
    table = pd.read_csv(out / "errors.csv")
    assert table.loc[table.group == "all", "rows"].item() == 3
