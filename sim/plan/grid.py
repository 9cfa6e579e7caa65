"""What a sweep or a capacity search runs: configurations x loads x seeds, as points.

    --grid engine.max_num_seqs=64,256 --grid engine.max_num_batched_tokens=2048,8192
    --rate 4:40:4          (workload.arrival.rate, generated arrivals)
    --rate-scale 0.5:2:0.5 (workload.rate_scale, a replayed trace)
    --seeds 3              (scenario seed, seed + 1, seed + 2)

A *configuration* is one combination of grid values; a *point* is a configuration at
one load with one seed. Every point has a stable id (a hash of its overrides), so a
result file names the point it holds whatever order points ran in.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml

from sim.config import yamlsafe
from sim.config.scenario import Scenario
from traces.arrival_spec import MAX_RATE, MIN_RATE
from traces.errors import InputError, clip

RATE_KEY = "workload.arrival.rate"
SCALE_KEY = "workload.rate_scale"
CONC_KEY = "workload.arrival.concurrency"  # a closed loop's load: clients (an integer)
LOAD_UNITS = {RATE_KEY: "req/s", SCALE_KEY: "rate_scale", CONC_KEY: "clients"}
MAX_POINTS = 100_000  # a typo in a range must not queue a billion simulations

Override = tuple[str, Any]  # (dotted scenario key, value)


def canonical(overrides) -> str:
    """Overrides as text, in key order: the same point whatever order the grid named keys in."""
    pairs = sorted([k, v] for k, v in overrides)
    return json.dumps(pairs, sort_keys=True, separators=(",", ":"))


def digest(overrides) -> str:
    """A 16-hex-digit id for a list of overrides (stable across runs and machines)."""
    return hashlib.sha1(canonical(overrides).encode()).hexdigest()[:16]


def short_key(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def config_label(config: tuple[Override, ...]) -> str:
    """`max_num_seqs=64 max_num_batched_tokens=2048`, or `base` for no overrides."""
    return " ".join(f"{short_key(k)}={v}" for k, v in config) or "base"


@dataclass(frozen=True)
class Point:
    """One simulation: a configuration at one load with one seed."""

    config: tuple[Override, ...]  # grid overrides, in grid order
    load_key: str | None  # RATE_KEY, SCALE_KEY or CONC_KEY; None: the scenario's own load
    load: float | None
    seed: int

    @property
    def overrides(self) -> tuple[Override, ...]:
        v = int(self.load) if self.load_key == CONC_KEY else self.load
        load = ((self.load_key, v),) if self.load_key else ()
        return (*self.config, *load, ("seed", self.seed))

    @property
    def id(self) -> str:
        return digest(self.overrides)

    @property
    def config_id(self) -> str:
        return digest(self.config)

    @property
    def label(self) -> str:
        return config_label(self.config)


def parse_value(raw: str) -> Any:
    raw = raw.strip()
    try:
        return yaml.load(raw, Loader=yamlsafe.Loader) if raw else None  # a SafeLoader
    except yaml.YAMLError:
        return raw


def _pieces(raw: str, what: str) -> list[str]:
    """The values of a comma-separated list (none for a blank one); an empty value between
    commas is refused, not dropped."""
    pieces = raw.split(",")
    if raw.strip() and not all(v.strip() for v in pieces):
        raise InputError(f"{what}: an empty value between commas")
    return [v for v in pieces if v.strip()]


def _same(value) -> object:
    """What makes two grid values the same point: a number by its value (64 and 64.0 set
    one integer knob alike), anything else as written."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ("number", float(value))
    return repr(value)


def parse_grid(specs: list[str] | None) -> list[tuple[str, list]]:
    """`KEY=V1,V2,...` (or a YAML list, `KEY=[{name: vllm}, {name: lanes}]`, for values
    that hold commas) -> [(key, [values])], in the order given."""
    out: list[tuple[str, list]] = []
    for spec in specs or ():
        key, sep, raw = spec.partition("=")
        key = key.strip()
        listed = parse_value(raw) if raw.strip().startswith("[") else None
        if raw.strip().startswith("[") and not isinstance(listed, list):
            raise InputError(f"--grid {clip(spec)!r}: a value list in brackets must be a YAML "
                             "list, e.g. --grid 'scheduler=[{name: vllm}, {name: lanes}]'")
        values = (listed if isinstance(listed, list) else
                  [parse_value(v) for v in _pieces(raw, f"--grid {clip(spec)!r}")])
        if not sep or not key or not values:
            raise InputError(f"--grid {spec!r}: expected KEY=V1,V2,..., "
                             "e.g. --grid engine.max_num_seqs=64,256")
        if key in dict(out):
            raise InputError(f"--grid {key}: given twice; put every value in one --grid")
        if len(set(map(_same, values))) != len(values):
            why = (" (YAML reads yes / no / on / off as true / false)"
                   if any(isinstance(v, bool) for v in values) else "")
            raise InputError(f"--grid {spec!r}: a value appears twice{why}")
        out.append((key, values))
    return out


def _decimal(text: str, opt: str) -> Decimal:
    try:
        d = Decimal(text.strip())
    except InvalidOperation:
        raise InputError(f"{opt}: {text!r} is not a number") from None
    if not d.is_finite() or d <= 0 or not math.isfinite(float(d)):
        raise InputError(f"{opt}: {text!r} must be a positive number")
    return d


def parse_loads(raw: str, opt: str) -> list[float]:
    """`A:B:STEP` (both ends included) or `V1,V2,...`; every load positive."""
    if ":" in raw:
        parts = raw.split(":")
        if len(parts) != 3:
            raise InputError(f"{opt} {raw!r}: expected START:STOP:STEP, e.g. {opt} 4:40:4")
        a, b, step = (_decimal(p, opt) for p in parts)
        if b < a:
            raise InputError(f"{opt} {raw!r}: STOP is below START")
        n = int((b - a) / step) + 1
        if n > MAX_POINTS:
            raise InputError(f"{opt} {raw!r}: {n:,} loads; at most {MAX_POINTS:,}")
        return [float(a + i * step) for i in range(n)]  # Decimal steps: 0.1 + 0.2 is 0.3
    values = [float(_decimal(v, opt)) for v in _pieces(raw, f"{opt} {raw!r}")]
    if not values:
        raise InputError(f"{opt} {raw!r}: give loads as START:STOP:STEP or V1,V2,...")
    if len(set(values)) != len(values):
        raise InputError(f"{opt} {raw!r}: a load appears twice")
    return values


def load_axis(sc: Scenario) -> tuple[str, float]:
    """The scenario's load knob and its value: arrival rate, a replay's rate_scale, or a
    closed loop's clients (``vllm bench serve --max-concurrency``)."""
    w = sc.workload
    if w.mix is not None:
        raise InputError("workload.mix: a load axis needs one arrival process and a mix has "
                         "several; vary each sub-workload's rate with --grid instead")
    if w.arrival.process == "replay":
        return SCALE_KEY, w.rate_scale
    if w.arrival.process == "closed":
        return CONC_KEY, float(w.arrival.concurrency)
    return RATE_KEY, float(w.arrival.rate)


def deterministic_workload(sc: Scenario) -> bool:
    """True when the seed changes nothing: a trace replayed as recorded, rows in order."""
    w = sc.workload
    return (w.mix is None and w.arrival.process == "replay" and w.lengths.dist == "trace"
            and not w.lengths.shuffle and w.shared_prefix is None)


@dataclass(frozen=True)
class Plan:
    """The cross product a sweep runs: configurations x loads x seeds."""

    grid: tuple[tuple[str, tuple], ...]
    load_key: str | None
    loads: tuple[float, ...]
    seeds: tuple[int, ...]

    def configs(self) -> list[tuple[Override, ...]]:
        keys = [k for k, _ in self.grid]
        return [tuple(zip(keys, combo)) for combo in itertools.product(*(v for _, v in self.grid))]

    def points(self) -> list[Point]:
        loads = self.loads if self.load_key else (None,)
        return [Point(c, self.load_key, x, s)
                for c in self.configs() for x in loads for s in self.seeds]

    def to_json(self) -> dict:
        return {"grid": [[k, list(v)] for k, v in self.grid], "load_key": self.load_key,
                "loads": list(self.loads), "seeds": list(self.seeds)}


def make_plan(sc: Scenario, grid: list[str] | None, rate: str | None, rate_scale: str | None,
              seeds: int) -> Plan:
    """Check the options against the scenario and build the plan."""
    if rate and rate_scale:
        raise InputError("give --rate or --rate-scale, not both")
    if seeds < 1:
        raise InputError(f"--seeds {seeds}: must be at least 1")
    parsed = parse_grid(grid)
    if "seed" in dict(parsed):
        raise InputError("--grid seed: use --seeds N (the scenario seed, seed + 1, ...)")
    for opt, given in (("--rate", rate), ("--rate-scale", rate_scale)):
        if given is not None and not given.strip():
            raise InputError(f"{opt}: empty; give loads as START:STOP:STEP or V1,V2,...")
    key = load_axis(sc)[0] if sc.workload.mix is None or rate or rate_scale else None
    loads: list[float] = []
    if rate or rate_scale:
        opt, want = ("--rate", RATE_KEY) if rate else ("--rate-scale", SCALE_KEY)
        if want != key:
            hint = ("the workload replays a trace: use --rate-scale" if key == SCALE_KEY else
                    "a closed loop's load is its clients: use --grid "
                    f"{CONC_KEY}=4,8,16" if key == CONC_KEY else
                    "the workload generates arrivals: use --rate")
            raise InputError(f"{opt}: {hint}")
        loads = parse_loads(rate or rate_scale, opt)
        out = [x for x in loads if not MIN_RATE <= x <= MAX_RATE] if rate else []
        if out:  # the option, not the scenario's field, is at fault
            raise InputError(f"--rate {clip(rate)!r}: {out[0]:g} req/s; rates run from "
                             f"{MIN_RATE:g} to {MAX_RATE:g} req/s")
    if key in dict(parsed):
        if loads:
            raise InputError(f"--grid {key}: the load is already set by --rate/--rate-scale")
        loads = [float(v) for v in dict(parsed)[key]]
        if key == CONC_KEY and any(not (x >= 1 and x == int(x)) for x in loads):
            raise InputError(f"--grid {key}: clients are whole numbers, at least 1")
        parsed = [(k, v) for k, v in parsed if k != key]
    plan = Plan(tuple((k, tuple(v)) for k, v in parsed), key if loads else None, tuple(loads),
                tuple(sc.seed + i for i in range(seeds)))
    n = len(plan.configs()) * max(len(loads), 1) * seeds
    if n > MAX_POINTS:
        raise InputError(f"the grid makes {n:,} points; at most {MAX_POINTS:,}")
    return plan
