"""The `vllm serve` command(s) that deploy what a results folder simulated.

capacity's chosen.yaml stores them (``locked.vllm_serve``, per pool for a fleet, and the
notes on what vLLM has no flag for). A run stores only its resolved scenario (config.json),
so its flags are emitted from that, as chosen.yaml's are (sim.plan.emit): the scenario is
loaded and resolved, never simulated.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from traces.errors import InputError


@dataclass(frozen=True)
class Serve:
    lines: tuple[str, ...]  # one command per server kind (a fleet: one per pool)
    notes: tuple[str, ...]  # what the scenario models that vLLM has no flag for
    missing: str = ""  # why no command could be derived (then ``lines`` is empty)


def _pool_line(p: dict) -> str:
    """One pool of a fleet: its command, run once per replica."""
    return f"# pool {p['pool']}: {p['replicas']} replica(s)\n{p['vllm_serve']}"


def from_chosen(doc: dict) -> Serve:
    locked = doc["locked"]
    pools = locked.get("pools") or []
    lines = [_pool_line(p) for p in pools] or [str(locked.get("vllm_serve", ""))]
    return Serve(tuple(lines), tuple(str(n) for n in locked.get("notes") or ()))


def from_config(config_file: Path) -> Serve:
    """Resolve the run's config.json and emit its flags; a config that no longer resolves
    (a catalog changed, a file moved) says why instead of failing the report."""
    from pydantic import ValidationError

    from sim.config.choice import first_error
    from sim.config.load import load_scenario
    from sim.config.resolve import resolve
    from sim.plan.emit import deployment, vllm_flags, vllm_serve

    try:
        r = resolve(load_scenario(config_file).scenario)
        pools, fleet_notes = deployment(r)
    except (InputError, ValidationError) as e:
        why = first_error(e) if isinstance(e, ValidationError) else str(e)
        return Serve((), (), f"not derived from {config_file.name}: {why}")
    if pools:
        return Serve(tuple(_pool_line(p) for p in pools),
                     tuple(n for p in pools for n in p["notes"]) + tuple(fleet_notes))
    return Serve((vllm_serve(r),), tuple(vllm_flags(r)[1]))
