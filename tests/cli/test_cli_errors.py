"""Bad input: one clear line on stderr, exit status 2, no traceback, nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sim.cli import main

GOOD = """\
name: t
model: llama-3-8b
gpu: h100-sxm
workload:
  arrival: {process: poisson, rate: 2.0}
  lengths: {dist: fixed, prompt: 100, output: 10}
  num_requests: 20
"""


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def run_cli(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_one_line_error(code, err, *needles):
    assert code == 2
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("servesim: error: ")
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.mark.parametrize("text,needles", [
    (GOOD + "bogus: 1\n", ["s.yaml", "bogus", "unknown key"]),
    (GOOD + "engine: {max_num_seqs: many}\n", ["s.yaml", "engine.max_num_seqs", "integer"]),
    (GOOD + "engine: {max_num_seqs: 0}\n", ["engine.max_num_seqs", "must be > 0"]),
    (GOOD + "engine: {block_size: -16}\n", ["engine.block_size", "must be > 0"]),
    (GOOD + "engine: {gpu_memory_utilization: 1.5}\n", ["gpu_memory_utilization"]),
    (GOOD.replace("llama-3-8b", "llama-9b"), ["model", "unknown model 'llama-9b'"]),
    (GOOD + "scheduler: {name: nope}\n", ["scheduler", "unknown scheduler 'nope'"]),
    (GOOD + "cost: {name: linear, base_ms: -1}\n", ["cost", "base_ms"]),
    (GOOD + "cost: {name: linear, speed: 3}\n", ["cost", "speed", "allowed keys"]),
    ("model: [unclosed\n", ["s.yaml", "line"]),
    ("- just a list\n", ["s.yaml", "mapping"]),
    (GOOD + "description: a\x01b\n", ["s.yaml", "control character", "printable"]),
])
def test_bad_scenarios(tmp_path, capsys, text, needles):
    out = tmp_path / "out"
    code, _, err = run_cli(["run", write(tmp_path, text), "--out", out, "-q"], capsys)
    assert_one_line_error(code, err, *needles)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_model_that_does_not_fit(tmp_path, capsys):
    text = GOOD.replace("llama-3-8b", "llama-3-70b")
    code, _, err = run_cli(["run", write(tmp_path, text), "-q", "--out", tmp_path / "o"], capsys)
    assert_one_line_error(code, err, "s.yaml", "does not fit", "h100-sxm", "GiB",
                          "tensor_parallel_size")


def test_max_model_len_beyond_kv(tmp_path, capsys):
    text = GOOD + "engine: {num_gpu_blocks_override: 10}\n"
    code, _, err = run_cli(["scenario", "validate", write(tmp_path, text)], capsys)
    assert_one_line_error(code, err, "max_model_len", "KV blocks")


def test_bad_override(tmp_path, capsys):
    code, _, err = run_cli(["scenario", "validate", write(tmp_path, GOOD), "--set", "engine"],
                           capsys)
    assert_one_line_error(code, err, "--set", "KEY=VALUE")
    code, _, err = run_cli(["scenario", "validate", write(tmp_path, GOOD), "--set",
                            "engine.max_num_seqs=-3"], capsys)
    assert_one_line_error(code, err, "engine.max_num_seqs")


def test_a_control_character_in_a_set_value_is_refused(tmp_path, capsys):
    # not YAML, and not taken as the text either: it would reach file names and plots
    out = tmp_path / "o"
    code, _, err = run_cli(["run", write(tmp_path, GOOD), "-q", "--out", out, "--set",
                            "name=a\x01b"], capsys)
    assert_one_line_error(code, err, "--set", "name=", "control character")
    assert not out.exists()


def test_missing_scenario_file(tmp_path, capsys):
    code, _, err = run_cli(["run", tmp_path / "nope.yaml", "-q"], capsys)
    assert_one_line_error(code, err, "nope.yaml", "cannot read")


TRACE_CASES = [
    ("missing column", "arrival_s,prompt_tokens\n0,5\n", ["output_tokens"]),
    ("negative", "arrival_s,prompt_tokens,output_tokens\n0,5,3\n1,-4,3\n",
     ["row", "prompt_tokens"]),
    ("non-numeric", "arrival_s,prompt_tokens,output_tokens\n0,five,3\n", ["row", "prompt_tokens"]),
    ("nan", "arrival_s,prompt_tokens,output_tokens\n0,5,\n", ["row", "output_tokens"]),
    ("empty", "", ["empty"]),
]


@pytest.mark.parametrize("label,text,needles", TRACE_CASES, ids=[c[0] for c in TRACE_CASES])
def test_bad_traces(tmp_path, capsys, label, text, needles):
    trace = write(tmp_path, text, "trace.csv")
    out = tmp_path / "out"
    code, _, err = run_cli(["run", "--trace", trace, "--out", out, "-q"], capsys)
    assert_one_line_error(code, err, "trace.csv", *needles)
    assert not out.exists()
    code, _, err = run_cli(["trace", "stats", trace], capsys)
    assert_one_line_error(code, err, "trace.csv", *needles)


def test_unsorted_trace_is_sorted_with_a_warning(tmp_path, capsys):
    trace = write(tmp_path, "arrival_s,prompt_tokens,output_tokens\n1,5,3\n0,6,2\n", "t.csv")
    code, out, err = run_cli(["run", "--trace", trace, "--out", tmp_path / "o", "-q"], capsys)
    assert code == 0, err
    assert "t.csv" in err and "order" in err


def test_console_script_exit_code(tmp_path):
    bad = write(tmp_path, GOOD + "bogus: 1\n")
    p = subprocess.run([sys.executable, "-m", "sim.cli", "run", str(bad), "-q"],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


@pytest.mark.parametrize("args,needles", [
    (["run", "s.yaml", "--nosuch"], ["servesim run:", "No such option: --nosuch",
                                     "'servesim run --help'"]),
    (["run", "s.yaml", "s.yaml"], ["servesim run:", "unexpected extra argument"]),
    (["sweep", "s.yaml", "--seeds", "abc"], ["servesim sweep:", "'--seeds'"]),
    (["nosuchcommand"], ["No such command 'nosuchcommand'"]),
    (["trace"], ["servesim trace:", "Missing command"]),
])
def test_usage_errors_are_one_line(tmp_path, capsys, monkeypatch, args, needles):
    """Click's own errors (an unknown option or command, a value its type refuses, an extra
    argument) in the same one-line form as every other bad input, exit 2."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text("name: s\nmodel: llama-3-8b\ngpu: h100-sxm\n")
    code = main(args)
    assert_one_line_error(code, capsys.readouterr().err, *needles)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_help_and_version_still_exit_0(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("servesim ")
    assert main(["run", "--help"]) == 0
    assert "Usage: servesim run" in capsys.readouterr().out


@pytest.mark.parametrize("args,needles", [
    (["sweep", "--seeds", "0"], ["--seeds 0"]),
    (["capacity", "--spread", "1"], ["--spread 1"]),
    (["capacity", "--tol", "abc"], ["--tol 'abc'"]),
    (["sweep", "--grid", "engine.max_num_seqs=0,4"], ["--grid engine.max_num_seqs=0:"]),
    (["capacity", "--grid", "engine.max_num_seqs=abc"], ["--grid engine.max_num_seqs=abc:"]),
])
def test_bad_sweep_flags_are_one_line_before_any_warning(tmp_path, capsys, args, needles):
    """The stand-in warning (generated arrivals for a bursty trace) is said with the results,
    once every input was checked: bad input stays one line."""
    sc = write(tmp_path, "name: s\nmodel: llama-3-8b\ngpu: h100-sxm\nworkload:\n"
               "  arrival: {process: poisson, rate: 2.0}\n  lengths: {dist: azure_conv_like}\n"
               "  num_requests: 20\n")
    code = main([args[0], str(sc), *args[1:], "-o", str(tmp_path / "out"), "-q"])
    assert_one_line_error(code, capsys.readouterr().err, *needles)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args,needles", [
    (["capacity", "--slo", "ttft_p95=1e30ms"], ["--slo 'ttft_p95=1e30ms'", "at most"]),
    (["capacity", "--gpu-hour-price", "-1"], ["--gpu-hour-price -1.0"]),
    (["capacity", "--gpu-hour-price", "inf"], ["--gpu-hour-price inf"]),
    (["capacity", "--target-rate", "inf"], ["--target-rate inf"]),
    (["capacity", "--target-rate", "1e30"], ["--target-rate 1e+30"]),
    (["capacity", "--max-replicas", "4"], ["--max-replicas 4", "give --target-rate"]),
    (["capacity", "--slo", "ttft_p95=1s,,tpot_p95=50ms"], ["an empty budget"]),
])
def test_capacity_flags_are_named_as_given(tmp_path, capsys, args, needles):
    """A bad flag is named as the user gave it, not as the --set or scenario field it
    becomes."""
    sc = write(tmp_path, GOOD)
    code = main([args[0], str(sc), *args[1:], "-o", str(tmp_path / "out"), "-q"])
    err = capsys.readouterr().err
    assert_one_line_error(code, err, *needles)
    assert "--set" not in err and "s.yaml" not in err
    assert not (tmp_path / "out").exists()


def test_a_bad_grid_value_names_the_grid(tmp_path, capsys):
    sc = write(tmp_path, GOOD)
    code = main(["sweep", str(sc), "--grid", "engine.max_num_seqs=0,4", "-o",
                 str(tmp_path / "out"), "-q", "-j", "1"])
    assert_one_line_error(code, capsys.readouterr().err, "--grid engine.max_num_seqs=0:",
                          "must be > 0")
    assert not (tmp_path / "out").exists()
    # the value as given (true, not Python's True), the grid blamed (not the file)
    code = main(["sweep", str(sc), "--grid", "engine.max_num_seqs=true,4", "-o",
                 str(tmp_path / "out"), "-q", "-j", "1"])
    err = capsys.readouterr().err
    assert_one_line_error(code, err, "--grid engine.max_num_seqs=true: engine.max_num_seqs: ")
    assert "s.yaml" not in err
    code = main(["sweep", str(sc), "--grid", "engine.enable_prefix_caching=true,false,yes",
                 "-o", str(tmp_path / "out"), "-q", "-j", "1"])
    assert_one_line_error(code, capsys.readouterr().err, "a value appears twice (YAML reads "
                          "yes / no / on / off as true / false)")
    # a number by its value: 64 and 64.0 are one point (both ran before)
    code = main(["sweep", str(sc), "--grid", "engine.max_num_seqs=64,64.0", "-o",
                 str(tmp_path / "out"), "-q", "-j", "1"])
    assert_one_line_error(code, capsys.readouterr().err, "a value appears twice")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("sets,needles", [
    (["engine.max_num_seqs=true"], ["engine.max_num_seqs: expected a number, not a boolean"]),
    (["workload.arrival.rate=false"], ["workload.arrival.rate: expected a number"]),
    (["engine.gpu_memory_utilization=true"], ["engine.gpu_memory_utilization: expected"]),
])
def test_a_boolean_is_not_taken_for_a_number(tmp_path, capsys, sets, needles):
    """YAML's true / false for a number field is refused (Pydantic would run true as 1)."""
    sc = write(tmp_path, GOOD)
    args = ["run", str(sc), "-o", str(tmp_path / "out"), "-q"]
    for s in sets:
        args += ["--set", s]
    assert_one_line_error(main(args), capsys.readouterr().err, *needles)
    assert not (tmp_path / "out").exists()


def test_booleans_still_set_boolean_fields(tmp_path, capsys):
    sc = write(tmp_path, GOOD)
    assert main(["run", str(sc), "-o", str(tmp_path / "out"), "-q", "--no-plots",
                 "--set", "engine.async_scheduling=false",
                 "--set", "engine.enable_prefix_caching=true"]) == 0


def test_an_empty_slo_is_refused_not_the_scenarios(tmp_path, capsys):
    sc = write(tmp_path, GOOD)
    code = main(["capacity", str(sc), "--slo", "", "-o", str(tmp_path / "out"), "-q"])
    assert_one_line_error(code, capsys.readouterr().err, "--slo", "at least one budget")


def test_resume_with_nothing_to_resume_says_so(tmp_path, capsys):
    sc = write(tmp_path, GOOD)
    assert main(["sweep", str(sc), "--rate", "1,2", "-j", "1", "--resume", "-q",
                 "--no-plots", "-o", str(tmp_path / "out")]) == 0
    assert "--resume: no sweep in" in capsys.readouterr().err
