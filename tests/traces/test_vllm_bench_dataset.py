"""`servesim trace export --format vllm-bench`: the dataset `vllm bench serve` replays, and
reading it back (round trip of lengths, arrival times, rate and prefix chains)."""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from tests.cli.test_cli_errors import assert_one_line_error, write
from traces import TraceError, build_workload, detect_format, load_trace, trace_stats
from traces.loaders.vllm_bench import bench_rate, write_dataset

POISSON = {"arrival": {"process": "poisson", "rate": 5.0}, "num_requests": 300,
           "lengths": {"dist": "lognormal", "prompt_p50": 400, "prompt_p90": 1500,
                       "output_p50": 60, "output_p90": 300}}
SCENARIO = """\
name: t
model: llama-3-8b
gpu: h100-sxm
seed: 3
workload:
  arrival: {process: gamma, rate: 4.0, cv: 2.0}
  lengths: {dist: lognormal, prompt_p50: 400, prompt_p90: 1500, output_p50: 60, output_p90: 300}
  num_requests: 50
"""


def vllm_prompt_len(entry: dict, chunk: int) -> int:
    """The prompt length vLLM's TimedTrace builds from a line (vllm/benchmarks/datasets/
    datasets.py, `_expand_prompt`): one chunk per hash id, the last one cut to what is left."""
    left, total = entry["input_length"], 0
    for _ in entry["hash_ids"]:
        size = chunk if left >= chunk else left
        total, left = total + size, left - size
        if left <= 0:
            break
    return total


def test_round_trip_gives_the_same_lengths_times_and_rate(tmp_path):
    trace = build_workload(POISSON, seed=11, base_dir=tmp_path)
    path = tmp_path / "w.jsonl"
    assert write_dataset(trace, path) == 512
    assert detect_format(path) == "vllm-bench"
    back = load_trace(path)
    assert back.prompt_tokens.tolist() == trace.prompt_tokens.tolist()
    assert back.output_tokens.tolist() == trace.output_tokens.tolist()
    assert back.arrival_s.tolist() == trace.arrival_s.tolist()  # exact: floats written by repr
    assert trace_stats(back)["rate_per_s"] == trace_stats(trace)["rate_per_s"]
    assert bench_rate(back) == bench_rate(trace)


def test_every_line_gives_vllm_its_exact_prompt_and_unique_tokens(tmp_path):
    trace = build_workload(POISSON, seed=11, base_dir=tmp_path)
    write_dataset(trace, tmp_path / "w.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "w.jsonl").read_text().splitlines()]
    assert len(lines) == 300
    for entry, p, o in zip(lines, trace.prompt_tokens, trace.output_tokens):
        assert vllm_prompt_len(entry, entry["hash_block_size"]) == entry["input_length"] == p
        assert entry["output_length"] == o
    ids = [h for e in lines for h in e["hash_ids"]]
    assert len(ids) == len(set(ids))  # no prefix is shared by accident


def test_shared_prefixes_stay_shared(tmp_path):
    spec = {**POISSON, "num_requests": 40,
            "shared_prefix": {"tokens": 1000, "num_prefixes": 2, "hash_block_size": 64}}
    trace = build_workload(spec, seed=2, base_dir=tmp_path)
    assert write_dataset(trace, tmp_path / "p.jsonl") == 64
    back = load_trace(tmp_path / "p.jsonl")
    assert back.hash_block_size == 64
    assert [list(c) for c in back.prefix_hashes] == [list(c) for c in trace.prefix_hashes]
    assert trace_stats(back)["prefix"] == trace_stats(trace)["prefix"]
    assert trace_stats(back)["prefix"]["prefix_hit_ratio"] > 0.3


def test_export_cli_prints_the_commands_with_the_workload_rate(tmp_path, capsys):
    out = tmp_path / "mix.jsonl"
    assert main(["trace", "export", str(write(tmp_path, SCENARIO)), "-o", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"wrote 50 requests to {out} (prompt mean ")
    assert printed[0].endswith(", 4 req/s)")
    own, generated = printed[2].strip(), printed[4].strip()
    assert own.startswith("vllm bench serve --backend vllm --model MODEL --dataset-name "
                          f"timed_trace --dataset-path {out} --num-prompts 50 ")
    assert "--timed-trace-label-timestamp arrival_s --timed-trace-chunk-hash-size 512" in own
    assert generated == own + " --no-self-timed --request-rate 4 --burstiness 0.25"
    sc = build_workload({"arrival": {"process": "gamma", "rate": 4.0, "cv": 2.0},
                         "num_requests": 50, "lengths": POISSON["lengths"]},
                        seed=3, base_dir=tmp_path)
    back = load_trace(out)
    assert back.prompt_tokens.tolist() == sc.prompt_tokens.tolist()
    assert back.arrival_s.tolist() == sc.arrival_s.tolist()


def test_a_replayed_trace_exports_its_measured_rate(tmp_path, capsys):
    trace_file = tmp_path / "t.csv"
    trace_file.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n"
                          "0,10,2\n1,20,3\n2,30,4\n4,40,5\n")
    assert main(["trace", "export", "--trace", str(trace_file), "-o",
                 str(tmp_path / "o.jsonl")]) == 0
    printed = capsys.readouterr().out
    assert "0.75 req/s)" in printed  # (4 - 1) requests / 4 s
    assert "--request-rate 0.75 --burstiness 8" in printed  # gaps 1, 1, 2: CV^2 = 1/8


def test_a_closed_loop_exports_its_concurrency(tmp_path, capsys):
    sc = write(tmp_path, SCENARIO.replace("{process: gamma, rate: 4.0, cv: 2.0}",
                                          "{process: closed, concurrency: 3}"))
    assert main(["trace", "export", str(sc), "-o", str(tmp_path / "c.jsonl")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].endswith(", inf req/s)")
    assert printed[2].strip().endswith("--save-result --save-detailed --max-concurrency 3")
    assert printed[4].strip().endswith("--max-concurrency 3 --no-self-timed --request-rate inf")
    assert load_trace(tmp_path / "c.jsonl").arrival_s.tolist() == [0.0] * 50


def test_bad_export_requests_fail_in_one_line(tmp_path, capsys):
    sc = write(tmp_path, SCENARIO)
    code = main(["trace", "export", str(sc), "-o", str(tmp_path / "a.jsonl"), "-f", "csv"])
    assert_one_line_error(code, capsys.readouterr().err, "--format 'csv'", "vllm-bench")
    code = main(["trace", "export", str(sc), "-o", str(tmp_path / "no" / "a.jsonl")])
    assert_one_line_error(code, capsys.readouterr().err, "does not exist")
    assert not (tmp_path / "a.jsonl").exists()


def test_inconsistent_chunk_sizes_name_the_line(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_text('{"arrival_s": 0, "input_length": 4, "output_length": 1, "hash_ids": [0], '
                    '"hash_block_size": 16}\n'
                    '{"arrival_s": 1, "input_length": 4, "output_length": 1, "hash_ids": [1], '
                    '"hash_block_size": 8}\n')
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert str(info.value) == (f"{path}: line 2: field 'hash_block_size' is 8; must be the "
                               "same integer >= 1 (tokens per hash id) on every line")


def test_hash_ids_without_a_chunk_size_are_refused_with_the_fix(tmp_path):
    """vLLM sizes a hash id by a flag (--timed-trace-chunk-hash-size, default 16), so a
    file of chains without hash_block_size cannot say how long its prefixes are: refused,
    naming the line and the fix, rather than replayed with the prefixes dropped."""
    path = tmp_path / "c.jsonl"
    path.write_text('{"arrival_s": 0, "input_length": 4, "output_length": 1}\n'
                    '{"arrival_s": 1, "input_length": 40, "output_length": 1, '
                    '"hash_ids": [1, 2, 3]}\n')
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert str(info.value) == (
        f"{path}: line 2: field 'hash_ids' is set but no line gives 'hash_block_size': add it "
        "to every line (the --timed-trace-chunk-hash-size the file is replayed with; vLLM's "
        "default is 16), or drop hash_ids")
    path.write_text('{"arrival_s": 0, "input_length": 4, "output_length": 1, "hash_ids": []}\n')
    assert load_trace(path).hash_block_size is None  # no chain: nothing to size


def test_the_printed_commands_are_shell_quoted(tmp_path, capsys):
    """Pasted into a shell, the printed command runs with the path and model as given: a
    space stays inside the path, a `;` in the model name runs nothing."""
    import shlex

    out = tmp_path / "my data" / "w.jsonl"
    out.parent.mkdir()
    assert main(["trace", "export", str(write(tmp_path, SCENARIO)), "-o", str(out),
                 "--model", "x; rm -rf /"]) == 0
    own = capsys.readouterr().out.splitlines()[2].strip()
    argv = shlex.split(own)
    assert argv[argv.index("--dataset-path") + 1] == str(out)
    assert argv[argv.index("--model") + 1] == "x; rm -rf /"
