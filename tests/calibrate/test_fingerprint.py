"""The hardware fingerprint (calibrate/fingerprint.py) and the model files that carry it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from calibrate import fingerprint as fp
from calibrate.fit_steps import fit_logs
from calibrate.steplog import StepsError
from sim.cost.profile.model_file import (
    Hardware,
    ModelFileError,
    hardware_of,
    load_model_file,
    save_model_file,
    shipped_profiles,
)

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "benchmarks" / "engine" / "runs"
AVX2 = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse avx avx2 fma\n"
AMX = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8481C\nflags\t\t: avx avx2 "
       "avx512f avx512_bf16 amx_bf16 amx_tile avx512_vnni\n")
pytestmark = pytest.mark.xdist_group("engine-runs")


def cpu_print(cpuinfo: str, dtype: str, **over) -> dict:
    return {**fp.capture(dtype, cpuinfo=cpuinfo, thread_info={}), "cores": 2, **over}


def test_cpuinfo_gives_the_model_and_the_speed_flags_it_has():
    assert fp.parse_cpuinfo(AVX2) == ("AMD EPYC 7B13", ["avx2"])
    name, flags = fp.parse_cpuinfo(AMX)
    assert name.startswith("Intel") and flags == ["avx2", "avx512f", "avx512_bf16",
                                                  "avx512_vnni", "amx_bf16", "amx_tile"]


def test_capture_records_load_threads_and_no_gpu(monkeypatch, tmp_path):
    monkeypatch.setattr(fp.os, "getloadavg", lambda: (0.123, 0.5, 2.0))
    monkeypatch.setattr(fp, "NVIDIA_GPUS", tmp_path / "none")
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0")
    hw = fp.capture("float32", cpuinfo=AVX2)
    assert hw["cpu"] == "AMD EPYC 7B13" and hw["cpu_flags"] == ["avx2"] and hw["gpu"] is None
    assert hw["loadavg"] == [0.12, 0.5, 2.0] and hw["dtype"] == "float32"
    assert hw["threads"]["VLLM_CPU_OMP_THREADS_BIND"] == "0"
    assert hardware_of(hw).cpu == "AMD EPYC 7B13"  # the schema takes it as it is


def test_gpu_name_from_the_driver_without_torch(monkeypatch, tmp_path):
    gpus = tmp_path / "gpus"
    (gpus / "0000:01:00.0").mkdir(parents=True)
    (gpus / "0000:01:00.0" / "information").write_text("Model: \t NVIDIA H200\nIRQ: 1\n")
    monkeypatch.setattr(fp, "NVIDIA_GPUS", gpus)
    monkeypatch.delitem(fp.sys.modules, "torch", raising=False)
    assert fp.gpu_name() == "NVIDIA H200"


def test_identity_ignores_load_and_threads_and_names_what_differs():
    a = cpu_print(AVX2, "float32", loadavg=[5.0, 5.0, 5.0])
    assert fp.differences(a, cpu_print(AVX2, "float32", threads={"x": "1"})) == []
    diff = fp.differences(a, cpu_print(AMX, "bfloat16"))
    assert [d.split()[0] for d in diff] == ["cpu", "cpu_flags", "dtype"]
    assert "avx2 vs avx2+avx512f" in diff[1] and "float32 vs bfloat16" in diff[2]
    line = fp.mismatch("profile p.yaml", a, "recording r", cpu_print(AMX, "bfloat16"))
    assert line.startswith("warning: profile p.yaml is from other hardware than recording r")
    assert "\n" not in line and "fit-steps" in line


def test_gpu_names_match_across_catalog_and_torch_spellings():
    a = {"gpu": "h200-sxm", "dtype": "bfloat16", "cpu": "x"}
    assert fp.differences(a, {"gpu": "NVIDIA H200", "dtype": "bfloat16", "cpu": "y"}) == []
    assert fp.differences(a, {"gpu": "NVIDIA H100 80GB HBM3", "dtype": "bfloat16"})
    assert fp.differences(a, cpu_print(AVX2, "bfloat16")) == ["gpu h200-sxm vs none"]


def test_shipped_files_load_without_a_fingerprint():
    for path in [*shipped_profiles().values(), ROOT / "benchmarks/engine/cpu-tiny-llama.yaml"]:
        mf = load_model_file(path)
        assert mf.hardware is None or mf.hardware.dtype, path


def test_a_fingerprint_round_trips_and_a_bad_one_is_one_line(tmp_path):
    mf = load_model_file(ROOT / "benchmarks/engine/cpu-tiny-llama.yaml").model_copy(deep=True)
    mf.hardware = hardware_of(cpu_print(AVX2, "float32"), "recorded runs (run.json)")
    path = save_model_file(mf, tmp_path / "m.yaml")
    assert load_model_file(path).hardware == mf.hardware
    doc = yaml.safe_load(path.read_text())
    doc["hardware"]["cores"] = -1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(ModelFileError, match=r"hardware\.cores"):
        load_model_file(bad)
    assert fp.model_file_hardware(path)["cpu"] == "AMD EPYC 7B13"
    assert fp.find_fit(cpu_print(AVX2, "float32"), tmp_path) == path
    assert fp.find_fit(cpu_print(AMX, "float32"), tmp_path) is None


def run_copy(tmp_path: Path, name: str, hw: dict | None) -> Path:
    """A committed run (repeat 1 of case ``name``) with ``hw`` as its fingerprint (None: a
    recording from before fingerprints)."""
    dst = tmp_path / name
    shutil.copytree(RUNS / f"{name}-r1", dst)
    meta = json.loads((dst / "run.json").read_text())
    meta.pop("hardware", None)
    (dst / "run.json").write_text(json.dumps({**meta, "hardware": hw} if hw else meta))
    return dst


def test_fit_steps_takes_the_runs_dtype_and_says_hardware_not_recorded(tmp_path):
    rep = fit_logs([run_copy(tmp_path, "light-long", None), run_copy(tmp_path, "kv-tight", None)])
    dtype = json.loads((RUNS / "light-long-r1" / "run.json").read_text())["engine"]["dtype"]
    assert rep.model.dtype == dtype and rep.model.hardware is None
    assert any(fp.NOT_RECORDED in n for n in rep.model.provenance.notes)


def test_fit_steps_records_the_runs_fingerprint_and_refuses_mixed_hardware(tmp_path):
    avx2 = cpu_print(AVX2, "float32")
    runs = [run_copy(tmp_path, "light-long", avx2), run_copy(tmp_path, "kv-tight", avx2)]
    hw = fit_logs(runs).model.hardware
    assert isinstance(hw, Hardware) and hw.cpu == "AMD EPYC 7B13"
    assert hw.source == "recorded runs (run.json)"
    other = run_copy(tmp_path, "light-short", cpu_print(AMX, "float32"))
    with pytest.raises(StepsError, match="different hardware.*cpu AMD EPYC 7B13 vs Intel"):
        fit_logs([*runs, other])


def test_a_slug_is_short_and_keeps_the_dtype():
    amx = {"cpu": "Intel(R) Xeon(R) Processor", "dtype": "bfloat16",
           "cpu_flags": ["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16",
                         "amx_tile", "amx_int8"]}
    assert fp.slug(amx) == "intel-xeon-amx-bfloat16"
    assert fp.slug({"cpu": "AMD EPYC 7B13", "cpu_flags": ["avx2"], "dtype": "float32"}) == \
        "amd-epyc-7b13-avx2-float32"
    assert fp.slug({"gpu": "NVIDIA H200", "dtype": "bfloat16"}) == "nvidia-h200-bfloat16"
    long = fp.slug({"cpu": "x" * 200, "cpu_flags": ["avx2"], "dtype": "float32"})
    assert long.endswith("-float32") and len(long) <= 70 and "--" not in long
