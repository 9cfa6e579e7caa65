"""Is the step-time fit from the hardware it is asked to predict? One line when it is not.

`run`, `compare`, `replay-bench` and `fidelity` print these lines (to stderr) and go on:

* a recording's scenario (a run.json beside scenario.yaml) priced by a fit: the recording's
  hardware against the fit's (calibrate/fingerprint.py identity);
* any other scenario priced by a CPU or live fit: the fit's hardware against this machine's
  (a CPU fit predicts the CPU it was measured on; GPU tables are not compared with the CPU
  that happens to run the simulator);
* `compare A B`: a recording against the fit that priced the other side, or two recordings
  against each other.

A file without a fingerprint (fitted before them) is "hardware not recorded": said once per
file and process, never an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from calibrate import fingerprint as fp
from traces.errors import InputError
from traces.files import read_utf8

JSON_MAX_BYTES = 64 << 20  # a run.json or config.json is kilobytes

_said: set[str] = set()
_AUTO = "auto"


@dataclass(frozen=True)
class Side:
    """One side of a check: what it is (in words), its fingerprint (None: not recorded),
    and its dtype, known even without a fingerprint (run.json engine knobs, a file's dtype)."""

    what: str
    hw: dict | None
    dtype: str | None = None
    cpu_fit: bool = False  # a CPU or live fit (compared with this machine)


def once(lines: list[str | None]) -> list[str]:
    """The lines not yet said in this process (each note once, however many runs)."""
    new = [x for x in dict.fromkeys(lines) if x and x not in _said]
    _said.update(new)
    return new


def _text(path: Path) -> str:
    """A result's small JSON file as text: a regular file only (a FIFO would block)."""
    return read_utf8(path, path.name, JSON_MAX_BYTES)


def recording(folder: Path) -> Side | None:
    """A recorded engine run's side (its run.json), or None when ``folder`` is not one."""
    from sim.report.recorded import is_recorded_run

    if not is_recorded_run(folder):
        return None
    try:
        meta = json.loads(_text(Path(folder) / "run.json"))
    except (InputError, ValueError):
        return Side(f"recording {folder}", None)
    hw = meta.get("hardware") if isinstance(meta.get("hardware"), dict) else None
    dtype = (meta.get("engine") or {}).get("dtype") or (hw or {}).get("dtype")
    return Side(f"recording {folder}", hw, dtype)


def profile(spec: str | None, what: str = "profile {path}") -> Side | None:
    """A ``cost.profile``'s side; None when it names no readable file (the cost model
    reports that) or is the automatic GPU choice."""
    from sim.cost.profile.model_file import ModelFileError, load_model_file, resolve_profile

    if not spec or spec == _AUTO:
        return None
    try:
        path = resolve_profile(spec)
        mf = load_model_file(path)
    except (ValueError, ModelFileError):
        return None
    hw = mf.hardware.model_dump() if mf.hardware is not None else None
    cpu = hw["gpu"] is None and "aiconfigurator" not in hw["source"] if hw else \
        mf.gpu in ("cpu", "unknown") or "cpu" in mf.provenance.device
    return Side(what.format(path=path), hw, mf.dtype, cpu)


def _cost_profile(cost) -> str | None:
    if getattr(cost, "name", None) != "fitted":
        return None
    params = getattr(cost, "params", None)
    return getattr(params, "profile", None) if params is not None else None


def scenario_notes(loaded) -> list[str]:
    """The hardware lines for a loaded scenario (sim.config.load.LoadedScenario)."""
    spec = _cost_profile(loaded.scenario.cost)
    rec = recording(loaded.base_dir)
    if rec is None:
        return machine_notes(spec)
    prof = profile(spec)
    return once([pair_line(prof, rec)]) if prof is not None else []


def machine_notes(spec: str | None) -> list[str]:
    """A CPU or live fit (``cost.profile`` spec) against this machine."""
    prof = profile(spec, "CPU fit {path}")
    if prof is None or not prof.cpu_fit:
        return []
    if prof.hw is None:
        return once([f"note: {prof.what}: {fp.NOT_RECORDED}; cannot check that it was "
                     "fitted on this machine"])
    here = fp.capture(prof.hw.get("dtype") or "")
    return once([fp.mismatch(prof.what, prof.hw, "this machine", here)])


def pair_line(a: Side, b: Side) -> str | None:
    """A warning when ``a`` and ``b`` are different hardware (or, unrecorded, different
    dtypes); a note when either is not recorded; None when they match."""
    fix = "" if a.what.startswith("recording") and b.what.startswith("recording") else fp.FIX
    if a.hw is not None and b.hw is not None:
        return fp.mismatch(a.what, a.hw, b.what, b.hw, fix)
    missing = " nor ".join(s.what for s in (a, b) if s.hw is None)
    if a.dtype and b.dtype and a.dtype != b.dtype:
        return (f"warning: {a.what} is from another dtype than {b.what} (dtype {a.dtype} vs "
                f"{b.dtype}; {fp.NOT_RECORDED} in {missing}): step times do not carry over"
                + (f"; {fix}" if fix else ""))
    if a.hw is None and b.hw is None:
        return (f"note: {fp.NOT_RECORDED} in {missing}: cannot check that they are the same "
                "hardware")
    known = a if a.hw is not None else b
    return (f"note: {fp.NOT_RECORDED} in {missing}: cannot check that it matches "
            f"{known.what} ({fp.describe(known.hw)})")


def result_side(folder: Path) -> Side | None:
    """A result folder's side: a recording's own, a simulated result's fit's; None when
    neither applies (a live run, a fit that is not a file here)."""
    rec = recording(folder)
    if rec is not None:
        return rec
    try:
        cost = json.loads(_text(Path(folder) / "config.json")).get("cost") or {}
    except (InputError, ValueError, AttributeError):
        return None
    if not isinstance(cost, dict) or cost.get("name") != "fitted":
        return None
    return profile(cost.get("profile"), f"profile {{path}} (priced {folder})")


def compare_notes(folders: list[Path]) -> list[str]:
    """The hardware lines for `compare`, at most two: one note naming every folder whose
    hardware is not recorded (when their dtypes agree), one warning for the first folder
    that differs from the first."""
    sides = [s for s in map(result_side, folders) if s is not None]
    lines = [pair_line(sides[0], s) for s in sides[1:]]
    warning = next((x for x in lines if x and x.startswith("warning")), None)
    missing = [s.what for s in sides if s.hw is None]
    note = (f"note: {fp.NOT_RECORDED} in {', '.join(missing)}: cannot check that the "
            "folders compared are from the same hardware") if missing and len(sides) > 1 \
        else None
    return once([note, warning])
