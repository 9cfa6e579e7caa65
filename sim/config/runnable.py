"""The scenario as run, written so that `servesim run` takes it back and simulates the same.

config.json (next to every result) and capacity's chosen.yaml hold this tree: every field
with its default filled in, the model and GPU spelled out (a later catalog cannot change
them), the cost model resolved, the engine's resolved limits written as values, and the
workload's trace paths made to resolve from the folder the file is written to. What
servesim adds next to the scenario (``ANNOTATIONS``) is skipped when such a file is read.
"""

from __future__ import annotations

import os
from pathlib import Path

from sim.config.resolve import Resolved

#: top-level keys servesim writes beside the scenario: config.json's derived values and
#: workload source, chosen.yaml's locked deployment (flags, capacity, length mix)
ANNOTATIONS = ("derived", "workload_source", "locked")


def scenario_as_run(r: Resolved, base_dir: Path | str, dest: Path | str | None) -> dict:
    """``r``'s scenario as plain data; trace paths (relative to ``base_dir``) are rewritten
    relative to ``dest`` (the folder the file goes to), or left as given when None."""
    data = r.scenario.model_dump(mode="json")
    data["model"] = r.model.model_dump(mode="json")
    data["gpu"] = r.gpu.model_dump(mode="json")
    if r.scenario.cluster is None or not r.scenario.cluster.pools:
        # pools merge their engine over this one: an explicit value would hide their defaults
        lim = r.limits
        data["engine"].update(max_num_seqs=lim.max_num_seqs, max_model_len=lim.max_model_len,
                              max_num_batched_tokens=lim.max_num_batched_tokens)
    if dest is not None:
        _move_traces(data["workload"], Path(base_dir), Path(dest))
    return data


def _move_traces(workload: dict, base_dir: Path, dest: Path) -> None:
    if workload.get("trace"):
        path, dest = (base_dir / workload["trace"]).resolve(), dest.resolve()
        # relative inside one tree (a checkout: results/ next to scenarios/), else absolute
        near = len(Path(os.path.commonpath([path, dest])).parts) > 2
        workload["trace"] = os.path.relpath(path, dest) if near else str(path)
    for part in workload.get("mix") or ():
        _move_traces(part, base_dir, dest)
