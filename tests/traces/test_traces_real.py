"""The real public traces in ../shared/traces (skipped when that folder is absent).

Expected figures are the README's / stats.json's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.shared_data import ARXIV, AZURE_CODE, AZURE_CONV, MOONCAKE, SHAREGPT
from traces import length_tables as tables
from traces import load_trace, trace_stats


def needs(path: Path):
    return pytest.mark.skipif(not path.exists(), reason=f"{path} not available")


def quantiles(stats: dict) -> list[float]:
    return [stats[k] for k in ("p50", "p90", "p99", "max")]


@needs(AZURE_CONV)
def test_azure_conv():
    trace = load_trace(AZURE_CONV)  # its speed: benchmarks/bench_sim.py, not a test
    s = trace_stats(trace)
    assert s["rows"] == 19_366
    assert s["span_s"] == pytest.approx(3501.721937, abs=1e-6)
    assert s["rate_per_s"] == pytest.approx(5.5301364152832795, rel=1e-9)
    assert s["iat_cv"] == pytest.approx(1.0941699818437756, rel=1e-9)
    assert quantiles(s["prompt_tokens"]) == [1020, 2734.5, 4142, 14050]
    assert quantiles(s["output_tokens"]) == [129, 424, 601, 1000]
    assert s["prompt_tokens"]["mean"] == pytest.approx(1154.6974078281523)


@needs(AZURE_CODE)
def test_azure_code():
    s = trace_stats(load_trace(AZURE_CODE, "azure"))
    assert s["rows"] == 8_819 and s["span_s"] == pytest.approx(3435.948056, abs=1e-6)
    assert s["iat_cv"] == pytest.approx(13.151290974387399, rel=1e-9)
    assert quantiles(s["output_tokens"])[0] == 13


@needs(MOONCAKE)
def test_mooncake():
    trace = load_trace(MOONCAKE)  # its speed: benchmarks/bench_sim.py, not a test
    s = trace_stats(trace)
    assert s["rows"] == 12_031 and trace.hash_block_size == 512
    assert s["span_s"] == pytest.approx(3536.999)
    assert s["iat_cv"] == pytest.approx(3.033737442945993, rel=1e-9)
    assert quantiles(s["prompt_tokens"]) == pytest.approx([6909, 27367, 85400.4, 126195])
    p = s["prefix"]
    assert (p["blocks"], p["unique_blocks"]) == (288_500, 182_790)
    assert p["hit_ratio"] == pytest.approx(0.3664124783362218, rel=1e-12)
    assert p["prefix_hit_ratio"] == pytest.approx(0.3664124783362218, rel=1e-12)


@needs(MOONCAKE)
def test_mooncake_spread_breaks_up_buckets():
    raw = load_trace(MOONCAKE)
    spread = load_trace(MOONCAKE, spread_s=3.0, seed=0)
    assert len(spread) == len(raw)
    assert np.mean(np.diff(raw.arrival_s) == 0) > 0.9
    assert np.mean(np.diff(spread.arrival_s) == 0) < 0.001
    assert trace_stats(spread)["rate_per_s"] == pytest.approx(3.4, rel=0.01)


@needs(SHAREGPT)
def test_sharegpt_lengths_with_poisson_arrivals():
    trace = load_trace(SHAREGPT, arrivals={"process": "poisson", "rate": 10.0}, seed=0)
    s = trace_stats(trace)
    assert s["rows"] == 30_731
    assert s["rate_per_s"] == pytest.approx(10.0, rel=0.03)
    assert quantiles(s["prompt_tokens"]) == pytest.approx([1730, 5696, 7433.7, 8141])
    assert quantiles(s["output_tokens"]) == [415, 834, 998, 1024]


@needs(ARXIV)
def test_arxiv_lengths():
    s = trace_stats(load_trace(ARXIV, arrivals={"process": "constant", "rate": 1.0}))
    assert s["rows"] == 28_257
    assert quantiles(s["output_tokens"])[:2] == [167, 372]


@pytest.mark.parametrize(
    ("path", "fmt", "prompt_table", "output_table"),
    [
        pytest.param(
            SHAREGPT,
            "lengths",
            tables.SHAREGPT_PROMPT,
            tables.SHAREGPT_OUTPUT,
            marks=needs(SHAREGPT),
        ),
        pytest.param(
            AZURE_CONV,
            "azure",
            tables.AZURE_CONV_PROMPT,
            tables.AZURE_CONV_OUTPUT,
            marks=needs(AZURE_CONV),
        ),
    ],
)
def test_embedded_tables_match_their_source(path, fmt, prompt_table, output_table):
    trace = load_trace(path, fmt, arrivals={"process": "constant", "rate": 1.0})
    for values, table in ((trace.prompt_tokens, prompt_table), (trace.output_tokens, output_table)):
        got = np.percentile(values, tables.PERCENTILES)
        assert np.round(got).astype(int).tolist() == list(table)
