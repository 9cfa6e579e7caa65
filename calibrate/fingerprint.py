"""The hardware a timing was measured on: a fingerprint, its identity, and the mismatch line.

Standard library only: the engine recorder (benchmarks/engine/record.py, run in vLLM's own
venv) imports it too. A fingerprint is a plain dict, stored in run.json and, as
``hardware``, in every fitted model file (sim/cost/profile/model_file.py ``Hardware``):

    source      where it was taken: "this machine" (at fit or record time), "recorded runs"
                (their run.json), "aiconfigurator tables" (another device's tables)
    cpu         CPU model name (/proc/cpuinfo "model name"; platform.processor() elsewhere)
    cpu_flags   the flags that change step speed (SPEED_FLAGS) the CPU has
    cores       logical CPUs online (count)
    gpu         GPU name, or None (torch.cuda when torch is already imported or asked for;
                else the NVIDIA driver's /proc entry; nvidia-smi is not needed)
    dtype       the model / activation dtype timed
    threads     thread binding and counts (affinity, OMP/vLLM settings), in words
    loadavg     1, 5, 15-minute load average when captured (a condition, not identity)
    captured    when (ISO 8601, UTC)

Two fingerprints describe the same hardware when their ``identity`` agrees: on a GPU the
GPU name and dtype; on a CPU the model name, speed flags, core count and dtype (a fit from an
AVX2-only CPU predicted an AMX CPU's steps 3-5x wrong; bf16 is emulated without
AVX512-BF16/AMX). Thread binding and load are conditions of a measurement, recorded beside.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import sys
from pathlib import Path

SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile",
               "amx_int8")
CPUINFO = Path("/proc/cpuinfo")
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "VLLM_CPU_OMP_THREADS_BIND",
              "VLLM_CPU_NUM_OF_RESERVED_CPU")
NOT_RECORDED = "hardware not recorded"


def read_cpuinfo(path: Path = CPUINFO) -> str:
    """The text of /proc/cpuinfo ('' where there is none: not Linux)."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def parse_cpuinfo(text: str) -> tuple[str, list[str]]:
    """(CPU model name, the SPEED_FLAGS it has) from /proc/cpuinfo text."""
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", text, re.M)
    have = set(flags.group(1).split()) if flags else set()
    name = model.group(1).strip() if model else (platform.processor() or "unknown")
    return name, [f for f in SPEED_FLAGS if f in have]


def gpu_name(probe_torch: bool = False) -> str | None:
    """The first GPU's name, or None. torch is asked only when it is already imported (or
    ``probe_torch``): importing it costs seconds and the core install has none."""
    if probe_torch or "torch" in sys.modules:
        try:
            import torch

            if torch.cuda.is_available():
                return str(torch.cuda.get_device_name(0))
        except Exception:  # a broken CUDA setup is "no GPU" for a fingerprint
            pass
    for info in sorted(NVIDIA_GPUS.glob("*/information")) if NVIDIA_GPUS.is_dir() else ():
        m = re.search(r"^Model:\s*(.+)$", info.read_text(errors="replace"), re.M)
        if m:
            return m.group(1).strip()
    return None


def threads() -> dict[str, str]:
    """Thread binding and counts of this process, in words (values are strings)."""
    out = {}
    if hasattr(os, "sched_getaffinity"):
        out["affinity"] = cpu_list(os.sched_getaffinity(0))
    for k in THREAD_ENV:
        if os.environ.get(k):
            out[k] = os.environ[k]
    if "torch" in sys.modules:
        out["torch_threads"] = str(sys.modules["torch"].get_num_threads())
    return out


def cpu_list(cpus) -> str:
    """'0-3,6' for {0, 1, 2, 3, 6}."""
    cpus, parts = sorted(cpus), []
    for c in cpus:
        if parts and parts[-1][1] == c - 1:
            parts[-1][1] = c
        else:
            parts.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def capture(dtype: str, *, probe_torch: bool = False, cpuinfo: str | None = None,
            thread_info: dict[str, str] | None = None, source: str = "this machine") -> dict:
    """This machine's fingerprint for a measurement in ``dtype``."""
    name, flags = parse_cpuinfo(read_cpuinfo() if cpuinfo is None else cpuinfo)
    return {"source": source, "cpu": name, "cpu_flags": flags, "cores": os.cpu_count() or 0,
            "gpu": gpu_name(probe_torch), "dtype": dtype,
            "threads": threads() if thread_info is None else thread_info,
            "loadavg": load_average(),
            "captured": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def identity(hw: dict) -> dict:
    """The fields that decide whether timings carry over (see the module docstring)."""
    if hw.get("gpu"):
        return {"gpu": _gpu_key(hw["gpu"]), "dtype": hw.get("dtype")}
    return {"cpu": hw.get("cpu"), "cpu_flags": sorted(hw.get("cpu_flags") or []),
            "cores": hw.get("cores"), "dtype": hw.get("dtype")}


def _gpu_key(name: str) -> str:
    """'NVIDIA H200' and 'h200-sxm' alike: lower case, letters and digits, no vendor or form
    factor (the catalog names GPUs by part and form factor, torch by part)."""
    key = re.sub(r"[^a-z0-9]", "", name.lower()).replace("nvidia", "")
    return re.sub(r"(sxm\d*|pcie|nvl)", "", key.replace("80gb", "").replace("40gb", ""))


def differences(a: dict, b: dict) -> list[str]:
    """The identity fields in which ``a`` and ``b`` differ, in words ('' list: the same)."""
    ia, ib = identity(a), identity(b)
    if ia.keys() != ib.keys():
        return [f"gpu {a.get('gpu') or 'none'} vs {b.get('gpu') or 'none'}"]
    out = []
    for k in ia:
        if ia[k] != ib[k]:
            va, vb = (_word(x.get(k)) for x in (a, b))
            out.append(f"{k} {va} vs {vb}")
    return out


def _word(v) -> str:
    if isinstance(v, list):
        return "+".join(v) or "none"
    return "none" if v in (None, "") else str(v)


def describe(hw: dict | None) -> str:
    """One short phrase: 'AMD EPYC (avx2), 2 cores, float32' or 'NVIDIA H200, bfloat16'."""
    if not hw:
        return NOT_RECORDED
    if hw.get("gpu"):
        return f"{hw['gpu']}, {hw.get('dtype')}"
    flags = "+".join(hw.get("cpu_flags") or []) or "no AVX2"
    return f"{hw.get('cpu')} ({flags}), {hw.get('cores')} cores, {hw.get('dtype')}"


FIX = "fit one there (servesim calibrate fit-steps RUN..., or servesim fidelity)"


def mismatch(what_a: str, a: dict, what_b: str, b: dict, fix: str = FIX) -> str | None:
    """One warning line when ``a`` and ``b`` are different hardware, else None."""
    diff = differences(a, b)
    if not diff:
        return None
    return (f"warning: {what_a} is from other hardware than {what_b} ({'; '.join(diff)}): "
            f"step times do not carry over{'; ' + fix if fix else ''}")


def slug(hw: dict) -> str:
    """A short file-name part naming the hardware: 'amd-epyc-avx2-float32',
    'intel-xeon-amx-bfloat16' (the CPU's words, its fastest SPEED_FLAGS family, the dtype);
    the dtype is never cut off."""
    if hw.get("gpu"):
        base = str(hw["gpu"])
    else:
        words = re.sub(r"\((r|tm)\)|\b(processor|cpu|\d+-core)\b", " ",
                       str(hw.get("cpu") or "cpu"), flags=re.I)
        flags = hw.get("cpu_flags") or []
        best = next((name for name, fam in (("amx", "amx_"), ("avx512", "avx512"),
                                            ("avx2", "avx2")) if any(f.startswith(fam)
                                                                     for f in flags)), "")
        base = f"{words} {best}"
    part = re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-")[:60].strip("-")
    return "-".join(p for p in (part, re.sub(r"[^a-z0-9]+", "-",
                                             str(hw.get("dtype") or "").lower()).strip("-")) if p)


def model_file_hardware(path: Path) -> dict | None:
    """The ``hardware`` of a model file read as plain YAML (no schema: the recorder's venv
    has no servesim); None when it has none or cannot be read."""
    try:
        import yaml

        doc = yaml.safe_load(path.read_text())
    except Exception:  # no yaml, unreadable, not YAML: treated as "no fingerprint"
        return None
    hw = doc.get("hardware") if isinstance(doc, dict) else None
    return hw if isinstance(hw, dict) else None


def find_fit(hw: dict, folder: Path) -> Path | None:
    """The first model file in ``folder`` fitted on hardware with ``hw``'s identity."""
    for p in sorted(folder.glob("*.yaml")):
        other = model_file_hardware(p)
        if other is not None and not differences(hw, other):
            return p
    return None
