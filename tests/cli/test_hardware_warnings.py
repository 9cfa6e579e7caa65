"""run, compare, replay-bench and fidelity say in one line when a fit is from other hardware
(calibrate/hardware_check.py); a file without a fingerprint is noted once, never fatal."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from calibrate import fingerprint as fp
from calibrate import hardware_check
from sim.cli import main
from sim.config.load import load_scenario
from sim.cost.profile.model_file import hardware_of, load_model_file, save_model_file

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "benchmarks" / "engine" / "runs" / "light-long-r1"
FIT = ROOT / "benchmarks" / "engine" / "cpu-tiny-llama.yaml"
AVX2 = "model name\t: AMD EPYC 7B13\nflags\t\t: avx avx2\n"
AMX = "model name\t: Intel Xeon 8481C\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
pytestmark = pytest.mark.xdist_group("engine-runs")


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(hardware_check, "_said", set())


def fingerprint(cpuinfo: str, dtype: str) -> dict:
    return {**fp.capture(dtype, cpuinfo=cpuinfo, thread_info={}), "cores": 2}


def fit_on(tmp_path: Path, hw: dict | None, name: str = "fit.yaml",
           dtype: str | None = None) -> Path:
    mf = load_model_file(FIT).model_copy(deep=True)  # the loaded file is cached: not changed
    mf.hardware = hardware_of(hw) if hw else None
    mf.dtype = dtype or mf.dtype
    return save_model_file(mf, tmp_path / name)


def recording(tmp_path: Path, hw: dict | None, profile: Path) -> Path:
    """A copy of a committed run with ``hw`` in run.json, its scenario priced by ``profile``."""
    run = tmp_path / "rec"
    shutil.copytree(RUN, run)
    meta = json.loads((run / "run.json").read_text())
    meta.pop("hardware", None)  # None: a recording from before fingerprints
    (run / "run.json").write_text(json.dumps({**meta, "hardware": hw} if hw else meta))
    text = (run / "scenario.yaml").read_text().replace(
        "benchmarks/engine/cpu-tiny-llama.yaml", str(profile))
    (run / "scenario.yaml").write_text(text)
    return run


def test_a_recording_priced_by_another_machines_fit_warns_in_one_line(tmp_path, capsys):
    fit = fit_on(tmp_path, fingerprint(AVX2, "float32"))
    run = recording(tmp_path, fingerprint(AMX, "bfloat16"), fit)
    assert main(["run", str(run / "scenario.yaml"), "-o", str(tmp_path / "o"), "-q",
                 "--no-plots"]) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if "hardware" in x]
    assert len(err) == 1 and err[0].startswith(f"warning: profile {fit}")
    assert "cpu_flags avx2 vs avx2+avx512f" in err[0] and "dtype float32 vs bfloat16" in err[0]


def test_the_same_hardware_says_nothing_and_a_missing_fingerprint_is_noted_once(tmp_path):
    hw = fingerprint(AVX2, "float32")
    loaded = load_scenario(recording(tmp_path, hw, fit_on(tmp_path, hw)) / "scenario.yaml")
    assert hardware_check.scenario_notes(loaded) == []
    bare = fit_on(tmp_path, None, "bare.yaml")  # a fit from before fingerprints
    (tmp_path / "rec" / "scenario.yaml").write_text(
        (tmp_path / "rec" / "scenario.yaml").read_text().replace(str(tmp_path / "fit.yaml"),
                                                                 str(bare)))
    loaded = load_scenario(tmp_path / "rec" / "scenario.yaml")
    notes = hardware_check.scenario_notes(loaded)
    assert len(notes) == 1 and notes[0].startswith(f"note: {fp.NOT_RECORDED} in profile")
    assert "AMD EPYC 7B13" in notes[0]
    assert hardware_check.scenario_notes(loaded) == []  # said once


def test_a_cpu_fit_of_another_cpu_warns_against_this_machine(tmp_path, monkeypatch):
    fit = fit_on(tmp_path, fingerprint(AMX, "float32"))
    monkeypatch.setattr(fp, "read_cpuinfo", lambda path=fp.CPUINFO: AVX2)
    monkeypatch.setattr(fp.os, "cpu_count", lambda: 2)
    lines = hardware_check.machine_notes(str(fit))
    assert len(lines) == 1 and "than this machine (cpu Intel Xeon 8481C vs AMD EPYC" in lines[0]
    monkeypatch.setattr(fp, "read_cpuinfo", lambda path=fp.CPUINFO: AMX)
    monkeypatch.setattr(hardware_check, "_said", set())
    assert hardware_check.machine_notes(str(fit)) == []


def test_gpu_tables_are_not_compared_with_the_cpu_running_the_simulator():
    assert hardware_check.machine_notes("h100-sxm/vllm") == []
    assert hardware_check.scenario_notes(load_scenario(None)) == []


def test_compare_warns_when_engine_and_fit_are_different_hardware(tmp_path, capsys):
    fit = fit_on(tmp_path, fingerprint(AVX2, "float32"))
    run = recording(tmp_path, fingerprint(AMX, "bfloat16"), fit)
    assert main(["run", str(run / "scenario.yaml"), "-o", str(tmp_path / "sim"), "-q",
                 "--no-plots"]) == 0
    capsys.readouterr()
    hardware_check._said.clear()
    assert main(["compare", str(run), str(tmp_path / "sim"), "--no-plot"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: recording {run} is from other "
                                               f"hardware than profile {fit}")


def test_compare_of_unfingerprinted_folders_notes_it_once(tmp_path, capsys):
    run = recording(tmp_path, None, fit_on(tmp_path, None))  # both from before fingerprints
    assert main(["run", str(run / "scenario.yaml"), "-o", str(tmp_path / "sim"), "-q",
                 "--no-plots"]) == 0
    capsys.readouterr()
    assert main(["compare", str(run), str(tmp_path / "sim"), "--no-plot"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"note: {fp.NOT_RECORDED} in recording")


def test_the_issues_replay_warns_a_bf16_recording_priced_by_the_shipped_fp32_fit(tmp_path):
    # issue 22: a bf16 recording on an AMX CPU replayed with the shipped fit of then (no
    # fingerprint, fitted in float32 on an AVX2 CPU) was 5-7x off with no warning
    old = fit_on(tmp_path, None, "old-shipped.yaml", dtype="float32")
    run = recording(tmp_path, fingerprint(AMX, "bfloat16"), old)
    meta = json.loads((run / "run.json").read_text())
    meta["engine"]["dtype"] = "bfloat16"
    (run / "run.json").write_text(json.dumps(meta))
    lines = hardware_check.scenario_notes(load_scenario(run / "scenario.yaml"))
    assert len(lines) == 1 and lines[0].startswith(f"warning: profile {old} is from another "
                                                   f"dtype than recording {run}")
    assert "dtype float32 vs bfloat16" in lines[0] and fp.NOT_RECORDED in lines[0]
