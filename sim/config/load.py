"""Read a scenario: YAML file (or the embedded default) + ``--set`` overrides -> Scenario.

Every failure is an ``InputError`` whose message is one line naming the file and
the field (``default.yaml: engine.max_num_seqs: Input should be greater than 0``).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sim.config.choice import first_error
from sim.config.scenario import Scenario
from traces.errors import InputError


@dataclass(frozen=True)
class LoadedScenario:
    scenario: Scenario
    source: str  # file name for messages
    base_dir: Path  # relative trace paths resolve against this folder


def default_scenario_path() -> Path:
    """The embedded default scenario shipped in the ``scenarios`` package."""
    return Path(str(resources.files("scenarios") / "default.yaml"))


def _read_yaml(path: Path) -> dict:
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError(f"{path}: cannot read scenario ({e.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or "invalid YAML"
        raise InputError(f"{path.name}: {where}{problem}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path.name}: a scenario must be a YAML mapping of keys to values")
    return data


def apply_override(data: dict, assignment: str) -> None:
    """Apply ``a.b.c=value`` (value parsed as YAML) to nested ``data`` in place."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise InputError(f"--set {assignment!r}: expected KEY=VALUE, e.g. engine.max_num_seqs=64")
    parts = key.strip().split(".")
    node: Any = data
    for p in parts[:-1]:
        if not isinstance(node.get(p, {}), dict):
            raise InputError(f"--set {assignment!r}: {p} is not a section")
        node = node.setdefault(p, {})
    try:
        node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        node[parts[-1]] = raw


def validate(data: dict, source: str) -> Scenario:
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{source}: {first_error(e)}") from None


def load_scenario(path: str | Path | None = None, overrides: tuple[str, ...] = (),
                  trace: str | None = None) -> LoadedScenario:
    """Load, override and validate a scenario. ``trace`` replays that file instead."""
    p = Path(path) if path is not None else default_scenario_path()
    data = _read_yaml(p)
    if trace is not None:  # replay this file; --set workload.* still applies on top
        data["workload"] = {"trace": str(Path(trace).resolve())}
    for o in overrides:
        apply_override(data, o)
    base = p.parent
    return LoadedScenario(validate(data, p.name), p.name, base)
