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
from pathlib import Path

from calibrate import fingerprint as fp

_said: set[str] = set()
_AUTO = "auto"


def once(lines: list[str | None]) -> list[str]:
    """The lines not yet said in this process (each note once, however many runs)."""
    new = [x for x in dict.fromkeys(lines) if x and x not in _said]
    _said.update(new)
    return new


def recording_hardware(folder: Path) -> tuple[bool, dict | None]:
    """(is a recorded engine run, its run.json ``hardware`` or None)."""
    from sim.report.recorded import is_recorded_run

    if not is_recorded_run(folder):
        return False, None
    try:
        hw = json.loads((Path(folder) / "run.json").read_text()).get("hardware")
    except (OSError, ValueError):
        return True, None
    return True, hw if isinstance(hw, dict) else None


def profile_hardware(spec: str | None) -> tuple[Path | None, dict | None, bool]:
    """(profile path, its hardware or None, looks like a CPU fit) of a ``cost.profile``;
    (None, None, False) when it names no readable file (the cost model reports that)."""
    from calibrate.model_file import ModelFileError, load_model_file, resolve_profile

    if not spec or spec == _AUTO:
        return None, None, False
    try:
        path = resolve_profile(spec)
        mf = load_model_file(path)
    except (ValueError, ModelFileError):
        return None, None, False
    hw = mf.hardware.model_dump() if mf.hardware is not None else None
    cpu = hw["gpu"] is None and "aiconfigurator" not in hw["source"] if hw else \
        mf.gpu in ("cpu", "unknown") or "cpu" in mf.provenance.device
    return path, hw, cpu


def _cost_profile(cost) -> str | None:
    if getattr(cost, "name", None) != "fitted":
        return None
    params = getattr(cost, "params", None)
    return getattr(params, "profile", None) if params is not None else None


def scenario_notes(loaded) -> list[str]:
    """The hardware lines for a loaded scenario (sim.config.load.LoadedScenario)."""
    spec = _cost_profile(loaded.scenario.cost)
    is_rec, rec = recording_hardware(loaded.base_dir)
    if not is_rec:
        return machine_notes(spec)
    path, prof, _ = profile_hardware(spec)
    if path is None:
        return []
    return once([pair_line(f"profile {path}", prof, f"recording {loaded.base_dir}", rec)])


def machine_notes(spec: str | None) -> list[str]:
    """A CPU or live fit (``cost.profile`` spec) against this machine."""
    path, prof, cpu = profile_hardware(spec)
    if path is None or not cpu:
        return []
    if prof is None:
        return once([f"note: profile {path}: {fp.NOT_RECORDED}; cannot check that it was "
                     "fitted on this machine"])
    here = fp.capture(prof.get("dtype") or "")
    return once([fp.mismatch(f"CPU fit {path}", prof, "this machine", here)])


def pair_line(what_a: str, a: dict | None, what_b: str, b: dict | None) -> str | None:
    """A warning when ``a`` and ``b`` are different hardware; a note when either is not
    recorded; None when they match."""
    if a is None and b is None:
        return (f"note: {fp.NOT_RECORDED} in {what_a} nor {what_b}: cannot check that they "
                "are the same hardware")
    if a is None or b is None:
        (w_none, _), (w_hw, hw) = sorted(((what_a, a), (what_b, b)), key=lambda x: x[1] is not None)
        return (f"note: {fp.NOT_RECORDED} in {w_none}: cannot check that it matches {w_hw} "
                f"({fp.describe(hw)})")
    both_runs = what_a.startswith("recording") and what_b.startswith("recording")
    return fp.mismatch(what_a, a, what_b, b, "" if both_runs else fp.FIX)


def result_hardware(folder: Path) -> tuple[str, dict | None] | None:
    """(what, hardware) of a result folder: a recording's own, a simulated result's fit's;
    None when neither applies (a live run, a fit that is not a file here)."""
    is_rec, rec = recording_hardware(folder)
    if is_rec:
        return f"recording {folder}", rec
    try:
        cost = json.loads((Path(folder) / "config.json").read_text()).get("cost") or {}
    except (OSError, ValueError, AttributeError):
        return None
    if cost.get("name") != "fitted":
        return None
    path, prof, _ = profile_hardware(cost.get("profile"))
    return (f"profile {path} (priced {folder})", prof) if path is not None else None


def compare_notes(folders: list[Path]) -> list[str]:
    """The hardware lines for `compare`, at most two: one note naming every folder whose
    hardware is not recorded, one warning for the first that differs from the first known."""
    sides = [h for h in map(result_hardware, folders) if h is not None]
    missing = [w for w, hw in sides if hw is None]
    known = [(w, hw) for w, hw in sides if hw is not None]
    lines = []
    if missing and len(sides) > 1:
        lines.append(f"note: {fp.NOT_RECORDED} in {', '.join(missing)}: cannot check that "
                     "the folders compared are from the same hardware")
    for w, hw in known[1:]:
        line = pair_line(known[0][0], known[0][1], w, hw)
        if line:
            lines.append(line)
            break
    return once(lines)
