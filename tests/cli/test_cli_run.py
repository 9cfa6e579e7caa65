"""`servesim run`, `scenario`, `policies` on small scenarios: outputs, determinism, step log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from sim.cli import app, main
from tests.cli.test_cli_errors import GOOD, write

SMALL = GOOD + "seed: 7\n"


def test_run_writes_every_output(tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["run", str(write(tmp_path, SMALL)), "--out", str(out), "--step-log"]) == 0
    printed = capsys.readouterr().out
    assert "TTFT" in printed and "TPOT" in printed and f"results: {out}" in printed
    names = {p.name for p in out.iterdir()}
    assert names == {"summary.json", "config.json", "requests.parquet", "steps.parquet",
                     "ttft_cdf.png", "kv_vs_waiting.png", "steps.jsonl", ".servesim-result"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"] == {"total": 20, "finished": 20, "rejected": 0, "shortened": 0,
                                   "unfinished": 0, "aborted": 0, "never_sent": 0}
    req = pd.read_parquet(out / "requests.parquet")
    assert len(req) == 20 and (req["status"] == "finished").all()
    assert (req["generated_tokens"] == 10).all()
    steps = pd.read_parquet(out / "steps.parquet")
    lines = (out / "steps.jsonl").read_text().splitlines()
    assert len(lines) == len(steps) == summary["steps"]["count"]
    first = json.loads(lines[0])
    assert set(first) == {"step", "start_s", "duration_s", "tokens", "preempted", "finished",
                          "kv_blocks_used"}
    assert first["tokens"] == {"0": 100} and first["step"] == 0
    # every request's output tokens appear in the log: one prefill step + 9 decode steps each
    per_req = {}
    for ln in lines:
        for rid, n in json.loads(ln)["tokens"].items():
            per_req.setdefault(rid, []).append(n)
    assert all(v == [100] + [1] * 9 for v in per_req.values())
    config = json.loads((out / "config.json").read_text())
    assert config["derived"]["usable_kv_blocks"] > 0
    # unset, it stays null (vLLM's choice per attention backend); the run's is derived
    assert config["engine"]["block_size"] is None and config["derived"]["block_size"] == 16


def without_wall_times(path) -> bytes:
    """summary.json's bytes minus its one non-deterministic block, ``sim.wall_s``."""
    text = path.read_text()
    assert len(re.findall(r'\n *"wall_s": \{[^{}]*\}', text)) == 1
    return re.sub(r'\n *"wall_s": \{[^{}]*\}', "", text).encode()


def test_same_seed_gives_byte_identical_summary(tmp_path):
    sc = write(tmp_path, SMALL.replace("num_requests: 20", "num_requests: 200"))
    for name in ("a", "b"):
        assert main(["run", str(sc), "--out", str(tmp_path / name), "-q", "--no-plots"]) == 0
    a = without_wall_times(tmp_path / "a" / "summary.json")
    assert a == without_wall_times(tmp_path / "b" / "summary.json")
    sc2 = write(tmp_path, SMALL.replace("num_requests: 20", "num_requests: 200")
                .replace("seed: 7", "seed: 8"), "s2.yaml")
    assert main(["run", str(sc2), "--out", str(tmp_path / "c"), "-q", "--no-plots"]) == 0
    assert a != without_wall_times(tmp_path / "c" / "summary.json")


def test_wall_time_per_phase_is_recorded_and_printed_with_v(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["run", str(write(tmp_path, SMALL)), "--out", str(out), "-q", "--no-plots",
                 "-v"]) == 0
    wall = json.loads((out / "summary.json").read_text())["sim"]["wall_s"]
    assert list(wall) == ["core", "load", "simulate", "summarize", "total", "write"]  # sorted
    assert wall.pop("core") == "fast"  # the scenario is one the fast core runs (sim/fast)
    assert all(v >= 0 for v in wall.values())
    parts = wall["load"] + wall["simulate"] + wall["summarize"] + wall["write"]
    assert abs(wall["total"] - parts) <= 5e-6  # each phase is rounded to the microsecond
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("wall time")]
    assert len(line) == 1 and line[0].startswith("wall time (s): load ")
    assert line[0].split(", ")[-1] == f"total {wall['total']:.3f} (fast core)"


def test_version():
    from sim import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    declared = re.search(r'^version = "([^"]+)"', pyproject, re.M)[1]
    assert result.output == f"servesim {declared}\n" and version() == declared


def test_set_override_changes_the_run(tmp_path):
    sc = write(tmp_path, SMALL)
    assert main(["run", str(sc), "--out", str(tmp_path / "a"), "-q", "--no-plots",
                 "--set", "engine.max_num_seqs=1"]) == 0
    cfg = json.loads((tmp_path / "a" / "config.json").read_text())
    assert cfg["engine"]["max_num_seqs"] == 1
    assert cfg["derived"]["max_num_seqs"] == 1


def test_scenario_validate_and_show(tmp_path, capsys):
    sc = write(tmp_path, SMALL)
    assert main(["scenario", "validate", str(sc)]) == 0
    assert "ok" in capsys.readouterr().out
    assert main(["scenario", "show", str(sc)]) == 0
    shown = capsys.readouterr().out
    assert "usable_kv_blocks" in shown and "max_num_batched_tokens: 8192" in shown


@pytest.mark.parametrize("sets,on", [
    ((), True),  # unset: vLLM v1's default for paged KV with the vllm scheduler
    (("scheduler=sarathi",), False),  # unset: off for the v0-era schedulers
    (("kv=contiguous-max",), False),
    (("engine.enable_prefix_caching=false",), False),
])
def test_scenario_show_says_whether_prefix_caching_is_on(sets, on, tmp_path, capsys):
    # engine.enable_prefix_caching stays null when unset; derived says what the run uses
    # (it said nothing, so `show` left a planner guessing)
    import yaml

    args = [x for s in sets for x in ("--set", s)]
    assert main(["scenario", "show", str(write(tmp_path, SMALL)), *args]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["derived"]["enable_prefix_caching"] is on


def test_default_scenario_validates(capsys):
    assert main(["scenario", "validate"]) == 0
    assert "default.yaml: ok" in capsys.readouterr().out


def test_policies_lists_every_registry(capsys):
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    for name in ("vllm", "paged", "linear", "roofline"):
        assert name in out


def test_an_engine_that_stops_says_so_and_counts_no_waiting_after_it(tmp_path, capsys):
    # vLLM v0 stops its engine when a swap victim finds no swap space; the requests that
    # arrive afterwards are aborted unseen: they wait in no queue (the mean was negative)
    out = tmp_path / "o"
    sc = Path(__file__).resolve().parents[2] / "scenarios" / "swap-preemption.yaml"
    assert main(["run", str(sc), "-q", "--no-plots", "-o", str(out),
                 "--set", "engine.swap_space=0", "--set", "workload.num_requests=200"]) == 0
    err = capsys.readouterr().err
    assert "the engine stopped (Aborted due to the lack of CPU swap space" in err
    assert "200 of 200 requests aborted" in err
    s = json.loads((out / "summary.json").read_text())
    assert s["requests"]["aborted"] == 200
    assert 0 <= s["waiting"]["mean_waiting_on_kv_memory"] <= s["waiting"]["mean_waiting"]
