"""Read a scenario: YAML file (or the embedded default) + ``--set`` overrides -> Scenario.

Every failure is an ``InputError`` whose message is one line naming the file (or the
``--set`` that caused it) and the field: ``default.yaml: engine.max_num_seqs: must be > 0
requests (got 0)``. Files are read through ``sim.config.yamlsafe`` (size, encoding and
alias-expansion limits).

``--set KEY=VALUE`` reaches every field: ``engine.max_num_seqs=64``, list items by index
(``workload.mix.0.arrival.rate=4``), and the fields of a catalog model or GPU
(``model.dtype_bytes=1`` turns ``model: llama-3-8b`` into that catalog spec, spelled out,
with the field overridden). ``model: {hf_config: PATH}`` reads a Hugging Face config.json
(``sim.catalog.hf_config``; PATH relative to the scenario's folder, other keys of the mapping
override what it gives); ``--set model.hf_config=PATH`` replaces the model with one.

A result's config.json and capacity's chosen.yaml are scenarios too: the keys servesim
writes beside the scenario (``sim.config.runnable.ANNOTATIONS``) are skipped.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sim.catalog import CatalogError, get_gpu, get_model
from sim.config import yamlsafe
from sim.config.errors import describe, first_loc
from sim.config.runnable import ANNOTATIONS
from sim.config.scenario import Scenario
from traces.arrival_spec import PROCESS_FIELDS
from traces.errors import InputError, clip, clip_repr
from traces.spec import LENGTH_FIELDS

MAX_SET_BYTES = 64 * 1024  # one --set value
_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*|[0-9]+)$")
_CATALOG = {"model": get_model, "gpu": get_gpu}
#: sections that are registry choices (sim.config.choice): a bare name there is
#: ``{name: <it>}``, so ``--set scheduler=sarathi --set scheduler.chunk_size=256`` works
_CHOICES = frozenset({"scheduler", "kv", "admission", "cost", "router"})
#: model keys that spell the same value (ModelSpec: dtype_bytes is legacy for dtype_bits)
_ALIASES = {"dtype_bytes": "dtype_bits", "dtype_bits": "dtype_bytes"}


@dataclass(frozen=True)
class LoadedScenario:
    scenario: Scenario
    source: str  # file name for messages
    base_dir: Path  # relative trace paths resolve against this folder
    overrides: tuple[str, ...] = ()  # the --set lines applied: a message blames the one at fault

    def origin(self, message: str) -> str:
        """The --set whose key the ``message`` names (the last such), else the file."""
        for o in reversed(self.overrides):
            key = o.partition("=")[0].strip()
            if re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", message):
                return f"--set {clip(o)!r}"
        return self.source


def default_scenario_path() -> Path:
    """The embedded default scenario shipped in the ``scenarios`` package."""
    return Path(str(resources.files("scenarios") / "default.yaml"))


def _read_yaml(path: Path) -> dict:
    data = yamlsafe.parse(yamlsafe.read_text(path, "scenario"), path.name)
    if not isinstance(data, dict):
        raise InputError(f"{path.name}: a scenario must be a YAML mapping of keys to values")
    return data


def _bad_set(assignment: str, why: str) -> InputError:
    return InputError(f"--set {clip(assignment)!r}: {why}")


def _parse_value(raw: str, assignment: str):
    if len(raw.encode("utf-8", "surrogateescape")) > MAX_SET_BYTES:
        raise _bad_set(assignment, f"the value is longer than {MAX_SET_BYTES // 1024} KiB")
    if not raw.strip():
        return None
    try:
        return yamlsafe.parse(raw, f"--set {clip(assignment)!r}")
    except InputError as e:
        if "expands to" in str(e) or "nested" in str(e):
            raise
        bad = next((c for c in raw if not c.isprintable() and c not in "\t\n\r"), None)
        if bad is not None:  # why YAML refused it: the text would carry it into names
            raise _bad_set(assignment, f"a control character ({bad!r}); values are "
                           "printable text") from None
        return raw  # not YAML: the text itself (e.g. a description with a colon)


def _child(node: Any, part: str, path: list[str], assignment: str):
    """The section ``part`` of ``node``, created when absent; a catalog name at ``model`` or
    ``gpu`` is spelled out so its fields can be set."""
    where = ".".join(path)
    if isinstance(node, list):
        if not part.isdigit() or int(part) >= len(node):
            raise _bad_set(assignment, f"{where}: a list of {len(node)} item(s); use an index "
                           f"0..{len(node) - 1}")
        child = node[int(part)]
    else:
        if part.isdigit():
            raise _bad_set(assignment, f"{where}: {'.'.join(path[:-1]) or 'the scenario'} "
                           "is not a list")
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif isinstance(child, str) and len(path) == 1 and part in _CATALOG:
            try:
                child = node[part] = _CATALOG[part](child).model_dump(mode="json")
            except CatalogError as e:
                raise _bad_set(assignment, f"{part}: {e}") from None
        elif isinstance(child, str) and part in _CHOICES:
            child = node[part] = {"name": child}  # the bare name, as RegistryChoice reads it
    if not isinstance(child, dict | list):
        raise _bad_set(assignment, f"{where} is not a section (it is {clip_repr(child)})")
    return child


def apply_override(data: dict, assignment: str) -> None:
    """Apply ``a.b.c=value`` (value parsed as YAML) to nested ``data`` in place."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise _bad_set(assignment, "expected KEY=VALUE, e.g. engine.max_num_seqs=64")
    parts = key.strip().split(".")
    if not all(_KEY.match(p) for p in parts):
        raise _bad_set(assignment, f"{clip(key.strip())!r} is not a dotted key such as "
                       "engine.max_num_seqs")
    if parts == ["model", "hf_config"]:  # a config.json replaces the whole model
        data["model"] = {"hf_config": _parse_value(raw, assignment)}
        return
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        node = _child(node, part, parts[: i + 1], assignment)
    last = parts[-1]
    value = _parse_value(raw, assignment)
    if isinstance(node, dict) and parts[0] == "model" and last in _ALIASES:
        node.pop(_ALIASES[last], None)  # the legacy key and its successor: the --set wins
    if isinstance(node, list):
        if not last.isdigit() or int(last) >= len(node):
            raise _bad_set(assignment, f"{'.'.join(parts[:-1])}: a list of {len(node)} "
                           "item(s)")
        node[int(last)] = value
    else:
        node[last] = value


#: (section, key) -> value -> the fields that section keeps when ``key`` is switched to it
_SWITCHES = {("arrival", "process"): PROCESS_FIELDS, ("lengths", "dist"): LENGTH_FIELDS}


def drop_stale(data: dict, overrides: tuple[str, ...]) -> None:
    """After ``--set workload.arrival.process=closed`` (or ``lengths.dist=fixed``), drop the
    section's fields the new choice does not take (the scenario's ``rate``), unless a --set
    gave them too: switching by --set works as writing the section anew would."""
    keys = [o.partition("=")[0].strip() for o in overrides]
    for key in (k for k in keys if k.count(".") >= 1):
        *path, section, field = key.split(".")
        keep = _SWITCHES.get((section, field))
        node = _section(data, [*path, section])
        if keep is None or not isinstance(node, dict) or node.get(field) not in keep:
            continue
        given = {k.split(".")[-1] for k in keys if k.startswith(f"{'.'.join(path + [section])}.")}
        for stale in set(node) - keep[node[field]] - {field} - given:
            del node[stale]


def _section(data, path: list[str]):
    for part in path:
        if isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict):
            data = data.get(part)
        else:
            return None
    return data


def validate(data: dict, source: str, overrides: tuple[str, ...] = ()) -> Scenario:
    """Validate; the message names ``source`` or the ``--set`` that set the failing field."""
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        message = describe(e, Scenario)
        raise InputError(f"{_origin(e, message, source, overrides)}: {message}") from None
    except RecursionError:
        raise InputError(f"{source}: nested too deeply") from None


def _origin(e: ValidationError, message: str, source: str, overrides: tuple[str, ...]) -> str:
    """The --set that set the failing field (the last one at or above it), else ``source``.
    A check of a whole section (``workload``) fails at the section, below which several
    --set may lie: the last whose own field the message names, else the last of them (for
    the whole scenario, ``source``)."""
    path = [str(p) for p in first_loc(e)]
    below, above = [], None  # --set lines under the failing field (last first); the last at
    for o in reversed(overrides):  # or above it, which set everything after it
        key = o.partition("=")[0].strip().split(".")
        if len(key) > len(path) and key[: len(path)] == path:
            below.append((o, key[-1]))
        elif path[: len(key)] == key:
            above = o
            break
    named = [o for o, leaf in below if re.search(rf"(?<!\w){re.escape(leaf)}(?!\w)", message)]
    if not named and not path:  # a check of the whole scenario: every --set lies below it,
        return source  # and the last is no likelier than the file (the message names fields)
    pick = named[0] if named else below[0][0] if below else above
    return f"--set {clip(pick)!r}" if pick is not None else source


def format_sets(fmt: str | None) -> tuple[str, ...]:
    """The ``--set`` a command's ``--format`` option stands for, checked as the option (a
    bad value was blamed on a ``--set workload.format=...`` the user never wrote)."""
    if fmt is None:
        return ()
    from traces.loaders import FORMATS

    if fmt != "auto" and fmt not in FORMATS:
        raise InputError(f"--format {clip(fmt)!r}: one of auto, {', '.join(FORMATS)}")
    return (f"workload.format={fmt}",)


#: what a workload may set besides its file that applies to any replay too
_REPLAY_KEYS = ("max_requests", "shared_prefix", "lane", "priority", "tenant", "prompt_scale",
                "output_scale")


def replay_workload(workload, trace: str) -> dict:
    """The workload ``--trace`` makes: a replayed trace keeps all but its file and format
    (rate_scale, window_s, arrival, lengths...); a generated one keeps its tags and cap (its
    arrivals and lengths become the file's); a mix is replaced, with a warning."""
    workload = workload if isinstance(workload, dict) else {}
    if workload.get("mix") is not None:
        n = len(workload["mix"]) if isinstance(workload["mix"], list) else "several"
        warnings.warn(f"--trace replaces the scenario's mix of {n} workloads with one replay "
                      f"of {Path(trace).name}", stacklevel=2)
        return {"trace": trace}
    if workload.get("trace") is not None:
        kept = {k: v for k, v in workload.items() if k not in ("trace", "format")}
        return {**kept, "trace": trace}
    kept = {k: workload[k] for k in _REPLAY_KEYS if k in workload}
    arrival = workload.get("arrival")
    if isinstance(arrival, dict) and arrival.get("concurrency") is not None:
        kept["arrival"] = {k: arrival[k] for k in ("concurrency", "think_s") if k in arrival}
        if arrival.get("process") == "closed":
            kept["arrival"]["process"] = "closed"
    return {**kept, "trace": trace}


def expand_hf_config(data: dict, base_dir: Path, source: str) -> None:
    """``model: {hf_config: PATH, ...}`` -> the ModelSpec fields of that config.json (PATH
    relative to the scenario's folder), the mapping's other keys overriding them."""
    model = data.get("model")
    if not isinstance(model, dict) or "hf_config" not in model:
        return
    from sim.catalog.hf_config import import_hf_config

    rest = {k: v for k, v in model.items() if k != "hf_config"}
    ref = model["hf_config"]
    if not isinstance(ref, str) or not ref.strip() or "\0" in ref:
        raise InputError(f"{source}: model.hf_config: a path to a config.json (got "
                         f"{clip_repr(ref)})")
    try:
        spec = import_hf_config(base_dir / ref, name=rest.get("name"))
    except InputError as e:
        raise InputError(f"{source}: model.hf_config: {e}") from None
    fields = spec.model_dump(mode="json")
    for key in set(rest) & set(_ALIASES):
        fields.pop(_ALIASES[key], None)
    data["model"] = {**fields, **rest}


def load_scenario(path: str | Path | None = None, overrides: tuple[str, ...] = (),
                  trace: str | None = None) -> LoadedScenario:
    """Load, override and validate a scenario. ``trace`` replays that file instead."""
    p = Path(path) if path is not None else default_scenario_path()
    data = _read_yaml(p)
    for key in ANNOTATIONS:  # a config.json or chosen.yaml servesim wrote runs again
        data.pop(key, None)
    if trace is not None:  # replay this file; --set workload.* still applies on top
        if "\0" in trace:
            raise InputError(f"--trace {clip(trace)!r}: the path contains a NUL character")
        data["workload"] = replay_workload(data.get("workload"), str(Path(trace).resolve()))
    for o in overrides:
        apply_override(data, o)
    drop_stale(data, overrides)
    expand_hf_config(data, p.parent, p.name)
    return LoadedScenario(validate(data, p.name, overrides), p.name, p.parent, tuple(overrides))
