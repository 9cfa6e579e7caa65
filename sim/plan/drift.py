"""Drift check: does a locked config (``chosen.yaml``) still hold for new traffic?

``check`` replays the new trace through the chosen scenario (its workload replaced by the
trace as recorded: its own times and lengths, at rate_scale 1, only the lane / priority /
tenant tags kept; ``--set workload.*`` applies on top, e.g. ``workload.prompt_scale=4``),
judges the run against the locked SLOs exactly as capacity search judged its probes
(``sim.plan.capacity.judge``: the engine keeps up and every budget holds, rejected and
unfinished requests counted as failures), and compares the new traffic with the locked
one: mean rate (requests/s, (n - 1) / span; the locked side is the capacity the config was
locked at), burstiness (CV of the inter-arrival gaps) and prompt / output token p50, p90,
p99 (``sim.plan.emit.length_mix``, the numbers chosen.yaml stores).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from sim.config.load import (
    LoadedScenario,
    _read_yaml,
    apply_override,
    drop_stale,
    validate,
)
from sim.config.runnable import ANNOTATIONS
from sim.metrics.summary import summarize
from sim.pipeline import prepare
from sim.plan.capacity import judge
from sim.plan.emit import length_mix
from sim.plan.point import derived, flatten
from sim.plan.slo import STATS, Budget
from sim.runner import simulate
from traces.errors import InputError, clip, clip_path

#: tags of the locked workload the new traffic keeps (lanes route and schedule requests)
KEPT_TAGS = ("lane", "priority", "tenant")
#: a measure moved when new / locked is outside [1 / MOVED, MOVED]
MOVED = 1.1


@dataclass(frozen=True)
class Measure:
    name: str  # e.g. "prompt p50"
    unit: str  # "tokens", "req/s", ""
    locked: float | None
    new: float | None

    @property
    def ratio(self) -> float | None:
        ok = all(v is not None and math.isfinite(v) for v in (self.locked, self.new))
        return self.new / self.locked if ok and self.locked > 0 else None

    def moved(self) -> float:
        """|log(new / locked)|; 0 when either side is unknown."""
        r = self.ratio
        return abs(math.log(r)) if r else 0.0

    def text(self) -> str:
        return (f"{self.name} {self.ratio:.2f}x ({_num(self.locked)} -> {_num(self.new)}"
                f"{' ' + self.unit if self.unit else ''})")


@dataclass(frozen=True)
class Check:
    chosen: str
    trace: str
    holds: bool
    binding: str | None  # None when it holds; KV, saturation, a budget's label or rejected
    measures: tuple[Measure, ...]
    budgets: tuple[tuple[Budget, float, float], ...]  # budget, finished-only value, judged
    metrics: dict
    line: str
    capacity: dict | None = None  # with a capacity search on the new traffic (``capacity``)

    def as_dict(self) -> dict:
        m = self.metrics
        return _strict({
            "chosen": self.chosen, "trace": self.trace, "holds": self.holds,
            "binding": self.binding, "line": self.line,
            "traffic": [{"measure": x.name, "unit": x.unit, "locked": x.locked, "new": x.new,
                         "ratio": x.ratio} for x in self.measures],
            "budgets": [{"budget": b.name, "limit_ms": b.ms, "value_ms": v, "judged_ms": j,
                         "holds": b.holds(m)} for b, v, j in self.budgets],
            "engine_sustains": bool(m.get("engine_sustains")),
            "stability": m.get("stability.verdict"),
            "requests": m.get("requests.total"),
            "rejected_fraction": m.get("slo.rejected_fraction"),
            "capacity": self.capacity,
        })


def _strict(obj):
    """``obj`` with NaN and infinities as None (strict JSON)."""
    if isinstance(obj, dict):
        return {k: _strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj.item() if hasattr(obj, "item") else obj


def _finite(v: float) -> float:
    return v if math.isfinite(v) else 0.0


def _num(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def locked_budgets(slo: object, source: str) -> tuple[Budget, ...]:
    """``locked.slo`` ({ttft_p95_ms: 500, ...}) as budgets."""
    if not isinstance(slo, dict) or not slo:
        raise InputError(f"{source}: locked.slo must map budgets to limits, e.g. "
                         "{ttft_p95_ms: 500}")
    out = []
    for key, ms in slo.items():
        metric, _, stat = str(key).removesuffix("_ms").partition("_")
        ok = isinstance(ms, (int, float)) and not isinstance(ms, bool) and 0 < ms < math.inf
        if metric not in ("ttft", "tpot", "itl", "e2el") or stat not in STATS or not ok:
            raise InputError(f"{source}: locked.slo {clip(str(key))}: {clip(str(ms))} is not a "
                             "budget (METRIC_STAT_ms: limit in ms, e.g. ttft_p95_ms: 500)")
        out.append(Budget(metric, STATS[stat], float(ms)))
    return tuple(out)


def load_check(chosen: Path, trace: Path, sets: tuple[str, ...] = ()) -> tuple[
        LoadedScenario, dict]:
    """The chosen scenario with its workload replaced by ``trace`` (see the module
    docstring), and its ``locked`` section."""
    chosen = Path(chosen)
    if not chosen.is_file():
        why = "not a regular file" if chosen.exists() else "no such file"
        raise InputError(f"{clip_path(chosen)}: {why} (check takes the chosen.yaml servesim "
                         "capacity writes)")
    data = _read_yaml(chosen)
    locked = data.get("locked")
    if not isinstance(locked, dict) or not isinstance(locked.get("length_mix"), dict):
        raise InputError(f"{chosen.name}: no locked section with a length_mix; check takes "
                         "the chosen.yaml servesim capacity writes")
    _check_locked(locked, chosen.name)
    for key in ANNOTATIONS:
        data.pop(key, None)
    if "\0" in str(trace):
        raise InputError(f"--trace {clip_path(trace)!r}: the path contains a NUL character")
    old = data.get("workload") if isinstance(data.get("workload"), dict) else {}
    data["workload"] = {**{k: old[k] for k in KEPT_TAGS if old.get(k) is not None},
                        "trace": str(Path(trace).resolve())}
    for o in sets:
        apply_override(data, o)
    drop_stale(data, sets)
    return LoadedScenario(validate(data, chosen.name, sets), chosen.name, chosen.parent,
                          tuple(sets)), locked


# the locked figures ``measures`` compares (a missing one is shown as unknown)
_LOCKED = (("capacity", "rate_mean_req_s"), ("length_mix", "arrivals", "rate_mean_req_s"),
           ("length_mix", "arrivals", "interarrival_cv"),
           *(("length_mix", part, p) for part in ("prompt_tokens", "output_tokens")
             for p in ("p50", "p90", "p99")))


def _check_locked(locked: dict, name: str) -> None:
    """Each locked figure present is a finite number >= 0, as capacity writes them."""
    for path in _LOCKED:
        node = locked
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            continue
        if isinstance(node, bool) or not isinstance(node, (int, float)) or not (
                math.isfinite(node) and node >= 0):
            raise InputError(f"{name}: locked.{'.'.join(path)}: {clip(repr(node))} is not a "
                             "finite number >= 0 (as servesim capacity writes it)")


def _simulate(loaded: LoadedScenario):
    r, specs, _ = prepare(loaded)
    if r.scenario.cluster is not None:  # a fleet: its GPUs, its clients' view
        from sim.fleet.plan import plan_fleet
        from sim.fleet.run import fleet_outputs, run_fleet

        summary, gpus = fleet_outputs(run_fleet(r, specs))[1], plan_fleet(r.scenario, r).gpus
    else:
        summary, gpus = summarize(simulate(r, specs)), r.tp
    return {**flatten(summary), **derived(summary, gpus, specs.arrival_s)}, specs


def measures(locked: dict, new_mix: dict) -> tuple[Measure, ...]:
    """The new traffic against the locked one (the rate: the capacity it was locked at)."""
    old = locked["length_mix"]
    cap = locked.get("capacity") if isinstance(locked.get("capacity"), dict) else {}
    old_arr = old.get("arrivals") if isinstance(old.get("arrivals"), dict) else {}
    new_arr = new_mix["arrivals"]

    def num(v):
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    out = [Measure("rate", "req/s", num(cap.get("rate_mean_req_s",
                                                old_arr.get("rate_mean_req_s"))),
                   num(new_arr["rate_mean_req_s"])),
           Measure("inter-arrival CV", "", num(old_arr.get("interarrival_cv")),
                   num(new_arr["interarrival_cv"]))]
    for part, label in (("prompt_tokens", "prompts"), ("output_tokens", "outputs")):
        before = old.get(part) if isinstance(old.get(part), dict) else {}
        for p in ("p50", "p90", "p99"):
            out.append(Measure(f"{label} {p}", "tokens", num(before.get(p)),
                               num(new_mix[part][p])))
    return tuple(out)


def _count(m: dict, key: str) -> int:
    v = m.get(key)
    return int(v) if isinstance(v, (int, float)) and math.isfinite(v) else 0


def _budget_text(b: Budget, m: dict) -> str:
    judged = b.judged(m)
    if not math.isinf(judged):
        return f"{b.label} {judged:.0f} ms {'<=' if judged <= b.ms else '>'} {b.ms:g} ms budget"
    value, failed = b.value(m), []
    for key, what in (("slo.rejected_as_failures", "rejected (prompt >= max_model_len)"),
                      ("slo.unfinished_as_failures", "unfinished")):
        if _count(m, key):
            failed.append(f"{_count(m, key)} {what}")
    finished = (f"{value:.0f} ms over the finished requests, " if math.isfinite(value)
                else "")
    return (f"{b.label} over its {b.ms:g} ms budget ({finished}{' and '.join(failed)} "
            "counted as failures)")


def summary_line(holds: bool, binding: str | None, ms: tuple[Measure, ...],
                 budgets: tuple[Budget, ...], m: dict) -> str:
    # stable on ratios equal to 1 %: of prompts 4x longer throughout, p50 is named
    moved = sorted((x for x in ms if x.moved() > math.log(MOVED)),
                   key=lambda x: -round(x.moved(), 2))
    # one length measure (the one that moved most) and the rate, when they moved
    lengths = [x for x in moved if x.unit == "tokens"][:1]
    rest = [x for x in moved if x.unit != "tokens"]
    shown = [*lengths, *rest][:3]
    traffic = ", ".join(x.text() for x in shown) or (
        f"traffic within {MOVED - 1:.0%} of the locked mix")
    # the budget furthest over (or closest to) its limit; among budgets failures decide,
    # the finished requests' statistic furthest over
    judged = [(b.judged(m) / b.ms, _finite(b.value(m)) / b.ms, -i) for i, b in
              enumerate(budgets) if not math.isnan(b.judged(m))]
    worst = budgets[-max(judged)[2]] if judged else None
    parts = [traffic]
    if binding in ("KV", "saturation"):
        parts.append(f"the engine does not keep up ({'KV cache' if binding == 'KV' else binding}"
                     f", {m.get('stability.verdict') or 'not stable'})")
    if worst is not None:
        parts.append(_budget_text(worst, m))
    return f"{'holds' if holds else 'does not hold'}: {'; '.join(parts)}"


def capacity(loaded: LoadedScenario, budgets: tuple[Budget, ...], locked: dict, out: Path,
             executor, tol: str = "2%") -> dict:
    """The locked config's capacity on the new traffic (a capacity search of the check's
    scenario, one seed for a trace replayed as recorded, else the scenario's seed and the
    next two, as ``servesim capacity`` does), against the capacity it was locked at."""
    from sim.plan.capacity import Tolerance, run_capacity
    from sim.plan.frontier import frontier
    from sim.plan.grid import deterministic_workload

    sc = loaded.scenario
    seeds = (sc.seed,) if deterministic_workload(sc) else (sc.seed, sc.seed + 1, sc.seed + 2)
    res = run_capacity(loaded, [], budgets, seeds, Tolerance.parse(tol), out, executor,
                       quiet=True, sets=loaded.overrides)
    row = frontier(res).loc[0]
    cap = locked.get("capacity") if isinstance(locked.get("capacity"), dict) else {}
    before = cap.get("rate_mean_req_s")
    before = float(before) if isinstance(before, (int, float)) else None
    found = row["status"] != "none"
    now = float(row["rate_mean_req_s"]) if found else 0.0
    failed = row["next_load_failed"]
    return _strict({
        "load_key": res.load_key, "status": str(row["status"]),
        "max_load": float(row["max_load"]) if found else None,
        "rate_mean_req_s": now, "locked_rate_mean_req_s": before,
        "ratio": now / before if before else None, "binding": str(row["binding"]),
        "next_load_failed": None if failed is None else float(failed),
        "tolerance": str(res.tol), "seeds": list(seeds)})


def _capacity_text(c: dict) -> str:
    if c["status"] == "none":
        return f"capacity: no load sustainable on the new traffic (limited by {c['binding']})"
    before, now = c["locked_rate_mean_req_s"], c["rate_mean_req_s"]
    moved = f"{c['ratio']:.2f}x ({_num(before)} -> {_num(now)} req/s)" if c["ratio"] else (
        f"{_num(now)} req/s")
    limit = ("" if c["next_load_failed"] is None else f", limited by {c['binding']}")
    return f"capacity {moved}{limit}"


def check(chosen: Path, trace: Path, sets: tuple[str, ...] = (), *,
          capacity_out: Path | None = None, executor=None) -> Check:
    """Re-simulate the locked config on ``trace`` and judge it against the locked SLOs;
    with ``capacity_out`` (and an executor), also search its capacity on the new traffic."""
    loaded, locked = load_check(chosen, trace, sets)
    budgets = locked_budgets(locked.get("slo"), Path(chosen).name)
    m, specs = _simulate(loaded)
    binding = judge(m, budgets)
    ms = measures(locked, length_mix(specs))
    line = summary_line(binding is None, binding, ms, budgets, m)
    cap = None
    if capacity_out is not None:
        cap = capacity(loaded, budgets, locked, capacity_out, executor)
        line += f"; {_capacity_text(cap)}"
    return Check(str(chosen), str(trace), binding is None, binding, ms,
                 tuple((b, b.value(m), b.judged(m)) for b in budgets), m, line, cap)
