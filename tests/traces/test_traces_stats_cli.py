"""trace_stats definitions, the rich table and the `stats` CLI command."""

from __future__ import annotations

import json

import pytest
from rich.table import Table
from typer.testing import CliRunner

from tests.traces.trace_fixtures import LENGTHS_CSV, MOONCAKE_JSONL
from traces import TraceError, format_stats, make_trace, trace_stats
from traces.cli import app


def small():
    # block size 1: chains are one id per token; r1 reuses 0, 1 then diverges; r2 reuses 1
    # at position 1 only, which an infinite cache hits but a prefix cache cannot.
    return make_trace(
        {
            "arrival_s": [0.0, 1.0, 3.0],
            "prompt_tokens": [3, 3, 2],
            "output_tokens": [10, 20, 30],
            "lane": ["a", "b", "a"],
            "prefix_hashes": [[0, 1, 2], [0, 1, 5], [9, 1]],
        },
        source="small",
        hash_block_size=1,
    )


def test_trace_stats_definitions():
    s = trace_stats(small())
    assert s["rows"] == 3 and s["span_s"] == 3.0
    assert s["rate_per_s"] == pytest.approx(2 / 3)
    assert s["iat_mean_s"] == 1.5
    assert s["iat_cv"] == pytest.approx(1 / 3)  # gaps 1, 2: population std 0.5 / mean 1.5
    assert s["prompt_tokens"]["p50"] == 3.0 and s["output_tokens"]["mean"] == 20.0
    assert s["output_tokens"]["p90"] == pytest.approx(28.0)  # numpy linear
    assert s["lanes"] == {"a": 2, "b": 1}
    p = s["prefix"]
    assert p["blocks"] == 8 and p["unique_blocks"] == 5
    assert p["hit_ratio"] == 3 / 8 and p["prefix_hit_ratio"] == 2 / 8
    json.dumps(s)  # JSON-serialisable


def test_trace_stats_single_row_and_untimed():
    one = make_trace({"arrival_s": [5.0], "prompt_tokens": [1], "output_tokens": [1]}, source="1")
    s = trace_stats(one)
    assert s["span_s"] == 0.0 and s["rate_per_s"] is None and s["iat_cv"] is None
    assert s["prefix"] is None
    assert trace_stats(small(), arrivals=False)["span_s"] is None


def test_format_stats_table():
    table = format_stats(trace_stats(small()))
    assert isinstance(table, Table) and table.row_count >= 10


runner = CliRunner()


def test_cli_stats_table_and_json(write):
    path = write("m.jsonl", MOONCAKE_JSONL)
    result = runner.invoke(app, ["stats", str(path)])
    assert result.exit_code == 0, result.output
    assert "infinite-cache hit ratio" in result.output and "512" in result.output
    result = runner.invoke(app, ["stats", str(path), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.output)["rows"] == 4


def test_cli_untimed_format_reports_na(write):
    path = write("s.csv", LENGTHS_CSV)
    result = runner.invoke(app, ["stats", str(path), "--format", "lengths", "--json"])
    data = json.loads(result.output)
    assert data["rows"] == 3 and data["rate_per_s"] is None


def test_cli_leaves_input_errors_to_the_main_cli(write):
    path = write("bad.csv", "a,b\n1,2\n")
    result = runner.invoke(app, ["stats", str(path)])
    assert isinstance(result.exception, TraceError)
    assert str(result.exception).startswith(f"{path}: cannot detect the trace format")


def test_cli_stats_says_when_run_would_refuse_the_span(write):
    path = write("far.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,10\n1e30,10,10\n")
    result = CliRunner().invoke(app, ["stats", str(path), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["rows"] == 2
    assert result.stderr.startswith("warning: servesim run refuses this trace: ")
    assert "arrivals reach 1e+30 s, after 1e+09 s" in result.stderr
    near = write("near.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,10\n5,10,10\n")
    assert CliRunner().invoke(app, ["stats", str(near)]).stderr == ""
