"""record.py's logic without vLLM: the busy-machine refusal, pinning, repeats into their own
run directories, the fingerprint in run.json and the fit scenario.yaml points at (mocks:
os.getloadavg, /proc/stat and /proc/cpuinfo readers, the recording itself)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "benchmarks" / "engine"
sys.path.insert(0, str(ENGINE))
import quiet  # noqa: E402
import record  # noqa: E402
import run_files  # noqa: E402

from calibrate import fingerprint as fp  # noqa: E402

AVX2 = "model name\t: AMD EPYC 7B13\nflags\t\t: avx avx2\n"
AMX = "model name\t: Intel Xeon 8481C\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16\n"


def stat_reader(*lines: str):
    it = iter(lines)
    return lambda: next(it)


IDLE = ("cpu  100 0 100 1000 0 0 0 0 0 0\n", "cpu  110 0 110 1580 0 0 0 0 0 0\n")  # 3 % busy
BUSY = ("cpu  100 0 100 1000 0 0 0 0 0 0\n", "cpu  500 0 200 1100 0 0 0 0 0 0\n")  # 83 %
PROCS = [{1: ("init", 10), 42: ("pytest", 100)}, {1: ("init", 10), 42: ("pytest", 580)}]


def reason(load: float, stat, procs=None):
    seq = iter(procs or [{}, {}])
    return quiet.busy_reason(1.0, loadavg=lambda: (load, 0.0, 0.0), read_stat=stat_reader(*stat),
                             procs=lambda: next(seq), sleep=lambda s: None)


def test_a_quiet_machine_has_no_reason():
    assert reason(0.2, IDLE) is None


def test_load_and_busy_cpus_are_reasons_with_their_numbers_and_the_busiest_process():
    assert reason(0.9, IDLE) == "1-min load 0.90 > 0.5"
    why = reason(0.1, BUSY, PROCS)
    assert why.startswith("CPUs 83% busy over 1 s > 25%") and "busiest: pid 42 pytest" in why


def test_check_quiet_refuses_in_one_line_unless_forced():
    with pytest.raises(SystemExit) as e:
        quiet.check_quiet(False, reason=lambda: "1-min load 5.00 > 0.5")
    msg = str(e.value)
    assert "\n" not in msg and "1-min load 5.00 > 0.5" in msg and "--force" in msg
    assert quiet.RULE in msg and "0.5" in quiet.RULE and "25%" in quiet.RULE
    forced = quiet.check_quiet(True, reason=lambda: "1-min load 5.00 > 0.5")
    assert forced == {"rule": quiet.RULE, "busy": "1-min load 5.00 > 0.5", "forced": True}
    assert quiet.check_quiet(False, reason=lambda: None)["forced"] is False


def test_check_quiet_waits_for_the_machine_to_go_quiet():
    answers = iter(["busy", "busy", None])
    clock = iter(range(100))
    state = quiet.check_quiet(False, 10.0, reason=lambda: next(answers),
                              clock=lambda: next(clock))
    assert state["busy"] is None


def test_pinning_puts_compute_on_one_core_and_the_client_on_the_others():
    plan = quiet.pin_plan({0, 1})
    assert plan["engine_cpus"] == "0" and plan["client_cpus"] == "1"
    assert plan["env"] == {"VLLM_CPU_OMP_THREADS_BIND": "0",
                           "VLLM_CPU_NUM_OF_RESERVED_CPU": "1", "OMP_NUM_THREADS": "1"}
    env, pinned = {}, []
    quiet.apply_pins(quiet.pin_plan({0, 1, 2, 3}), env, lambda pid, cpus: pinned.append(cpus))
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0" and pinned == [{1, 2, 3}]
    one = quiet.apply_pins(quiet.pin_plan({3}), env := {}, lambda *a: pytest.fail("pinned"))
    assert not one["pinned"] and "one CPU" in one["why"] and env == {"OMP_NUM_THREADS": "1"}


def test_no_pin_leaves_the_threads_alone():
    env = {}
    plan = quiet.apply_pins(record.pin_plan(True), env, lambda *a: pytest.fail("pinned"))
    assert plan == {"pinned": False, "why": "--no-pin", "env": {"OMP_NUM_THREADS": "1"}}


def test_the_cpu_ticks_of_proc_stat():
    assert quiet.cpu_ticks("cpu  10 1 5 80 4 0 0 0 0 0\ncpu0 ...") == (16, 100)


def test_default_dtype_follows_the_cpu_flags(monkeypatch):
    monkeypatch.setattr(fp, "read_cpuinfo", lambda path=fp.CPUINFO: AVX2)
    assert record.default_dtype() == "float32"
    monkeypatch.setattr(fp, "read_cpuinfo", lambda path=fp.CPUINFO: AMX)
    assert record.default_dtype() == "bfloat16"


def test_repeats_go_to_their_own_directories(tmp_path):
    assert record.repeat_dirs(tmp_path / "x", 1) == [tmp_path / "x"]
    assert record.repeat_dirs(tmp_path / "x", 3) == [tmp_path / f"x-r{i}" for i in (1, 2, 3)]


def test_own_fit_finds_this_machines_fit_or_says_how_to_make_one(tmp_path, monkeypatch):
    hw = {**fp.capture("float32", cpuinfo=AVX2, thread_info={}), "cores": 2}
    monkeypatch.setattr(record, "HERE", tmp_path)
    monkeypatch.setattr(record, "ROOT", tmp_path.parent)
    none = record.own_fit(hw)
    assert none["profile"] is None and "no fit of this machine (AMD EPYC 7B13 (avx2)" in \
        none["note"] and "servesim calibrate fit-steps" in none["note"]
    (tmp_path / "mine.yaml").write_text(json.dumps({"hardware": hw}))  # JSON is YAML
    found = record.own_fit(hw)
    assert found["profile"] == f"{tmp_path.name}/mine.yaml"
    scen = run_files.scenario_yaml({**json.loads((ENGINE / "runs/light-long-r1/run.json")
                                                 .read_text()), "fit": found})
    assert f"profile: {tmp_path.name}/mine.yaml}}" in scen and "fitted on this machine" in scen
    scen = run_files.scenario_yaml({**json.loads((ENGINE / "runs/light-long-r1/run.json")
                                                 .read_text()), "fit": none})
    assert f"profile: {run_files.SHIPPED_FIT}}}" in scen and "# make one: servesim" in scen


def test_record_case_records_each_repeat_with_fingerprint_pins_and_quiet(tmp_path, monkeypatch,
                                                                         capsys):
    calls = []
    monkeypatch.setattr(quiet, "check_quiet", lambda force, wait_s=0.0, reason=None: {
        "rule": quiet.RULE, "busy": "1-min load 3.00 > 0.5" if force else None,
        "forced": force})
    monkeypatch.setattr(quiet, "apply_pins", lambda plan: plan)
    monkeypatch.setattr(record, "raise_priority", lambda nice: "normal priority")
    monkeypatch.setattr(record.engine_hooks, "install_if_asked", lambda: None)
    for k in (record.engine_hooks.ENV, "VLLM_LOGGING_LEVEL"):  # restored after the test
        monkeypatch.setenv(k, "")
    monkeypatch.setattr(record, "record_once", lambda trace, knobs, tmp, base, out, meta:
                        calls.append((out, meta)) or {"stable": True})
    monkeypatch.setattr(fp, "read_cpuinfo", lambda path=fp.CPUINFO: AVX2)
    args = record.parser().parse_args(["--case", "light-long", "--force"])
    assert args.repeats == 3
    knobs = {**run_files.DEFAULT_KNOBS, "dtype": "float32"}
    record.record_cases(args, [({"name": "light-long"}, [], knobs, tmp_path / "ll")])
    assert [c[0].name for c in calls] == ["ll-r1", "ll-r2", "ll-r3"]
    meta = calls[0][1]
    assert meta["hardware"]["cpu"] == "AMD EPYC 7B13" and meta["hardware"]["dtype"] == "float32"
    assert meta["forced"] is True and meta["quiet"]["busy"].startswith("1-min load")
    assert [c[1]["repeat"] for c in calls] == [1, 2, 3] and meta["repeats"] == 3
    assert "pinned" in meta["pinning"] and meta["hardware"]["threads"]
    assert "no fit of this machine" in capsys.readouterr().out


def test_several_cases_are_recorded_in_rounds(tmp_path, monkeypatch):
    # round i records every case's i-th repeat: a case's repeats span the session, so the
    # machine's drift lands in each case's spread; only the first recording reads the load
    checks, calls = [], []
    monkeypatch.setattr(quiet, "check_quiet", lambda force, wait_s=0.0, reason=None:
                        checks.append(reason) or {"rule": quiet.RULE, "busy": None,
                                                  "forced": False})
    monkeypatch.setattr(quiet, "apply_pins", lambda plan: plan)
    monkeypatch.setattr(record, "raise_priority", lambda nice: "normal priority")
    monkeypatch.setattr(record.engine_hooks, "install_if_asked", lambda: None)
    for k in (record.engine_hooks.ENV, "VLLM_LOGGING_LEVEL"):
        monkeypatch.setenv(k, "")
    monkeypatch.setattr(record, "record_once", lambda trace, knobs, tmp, base, out, meta:
                        calls.append((out.name, meta["repeat"], knobs["num_blocks"])) or
                        {"stable": True})
    monkeypatch.setattr(fp, "read_cpuinfo", lambda path=fp.CPUINFO: AVX2)
    assert record.main(["--case", "light-short,kv-tight", "--repeats", "2", "--out",
                        str(tmp_path), "--dtype", "float32"]) == 0
    assert calls == [("light-short-r1", 1, 1024), ("kv-tight-r1", 1, 272),
                     ("light-short-r2", 2, 1024), ("kv-tight-r2", 2, 272)]
    assert checks[0] is None and all(callable(c) for c in checks[1:]) and len(checks) == 4
    with pytest.raises(SystemExit) as refused:  # argparse's one-line error
        record.main(["--case", ",", "--dtype", "float32"])
    assert refused.value.code == 2
    assert record.case_names("all", ENGINE / "cases.json") == [
        "light-short", "heavy-short", "light-long", "heavy-mixed", "kv-tight", "medium",
        "short-busy"]


def test_help_states_the_busy_threshold_and_repeats(capsys):
    with pytest.raises(SystemExit):
        record.parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "1-min load > 0.5" in text and "--repeats" in text and "--force" in text
