"""Run one scenario through both simulation cores and compare everything they report.

The fast core (sim/fast) must reproduce the general engine exactly: every per-step
column, every per-request time, the ITL samples (as a multiset of values with weights),
the token times, the plan count, the counters and how the run ended. Comparisons are
exact (``==`` on floats); a difference names the first step or request where it occurs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from hypothesis import reject

from sim.config.load import load_scenario
from sim.config.resolve import ConfigError, Resolved
from sim.engine.requests import RequestSpecs
from sim.pipeline import prepare, resolve_loaded
from sim.runner import RunResult, simulate
from sim.sched.base import Status

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
REQUEST_COLUMNS = ("first_scheduled_s", "first_token_s", "last_token_s", "finish_s",
                   "max_itl_s")
RESULT_ARRAYS = ("status", "num_preemptions", "cached_tokens", "generated")
RESULT_VALUES = ("recomputed_tokens", "counters", "run", "never_sent", "drain_cut",
                 "shortened", "kv_total_blocks", "ingress_s", "egress_s", "warnings")


def with_core(r: Resolved, core: str) -> Resolved:
    """The resolved scenario with ``core`` forced (auto, general or fast)."""
    return dataclasses.replace(r, scenario=r.scenario.model_copy(update={"core": core}))


def prepared(scenario: str | None, *overrides: str) -> tuple[Resolved, RequestSpecs]:
    """(resolved scenario, requests) of a shipped scenario by name (None: the default)
    with ``--set``-style overrides."""
    path = SCENARIOS / f"{scenario}.yaml" if scenario else None
    r, specs, _ = prepare(load_scenario(path, overrides))
    return r, specs


def run_both(r: Resolved, specs: RequestSpecs, **kw) -> tuple[RunResult, RunResult]:
    """(general, fast) results of ``specs`` under ``r``; checks which core ran."""
    general = simulate(with_core(r, "general"), specs, **kw)
    fast = simulate(with_core(r, "fast"), specs, **kw)
    assert (general.core, fast.core) == ("general", "fast")
    return general, fast


class PlanLog:
    """Every committed plan a core hands its ``on_plan`` hook (the step log's and the
    conformance comparer's view), as plain lists, order within each array included.
    ``interruptible`` is kept for decode runs only unless ``strict`` (on a one-step plan it
    changes nothing: there is no later step an arrival could cut)."""

    def __init__(self, strict: bool = False):
        self.rows: list[dict] = []
        self.strict = strict

    def __call__(self, plan, starts, durations, outcome) -> None:
        row = {f: getattr(plan, f) for f in ("req_ids", "num_tokens", "context_lens",
                                             "preempted", "num_steps", "interruptible",
                                             "swap_out_bytes", "swap_in_bytes")}
        row.update({f: getattr(outcome, f) for f in (
            "emitted", "first_tokens", "finished", "kv_blocks_used", "num_running",
            "num_waiting", "kv_tokens", "blocked")})
        row.update(starts=starts, durations=durations)
        if plan.num_steps == 1 and not self.strict:
            row["interruptible"] = None
        self.rows.append({k: v.tolist() if isinstance(v, np.ndarray) else v
                          for k, v in row.items()})


def run_both_logged(r: Resolved, specs: RequestSpecs,
                    strict: bool = False) -> tuple[RunResult, RunResult]:
    """``run_both`` with a PlanLog hook on each core; asserts the logs are equal."""
    logs = PlanLog(strict), PlanLog(strict)
    general = simulate(with_core(r, "general"), specs, on_plan=logs[0])
    fast = simulate(with_core(r, "fast"), specs, on_plan=logs[1])
    assert (general.core, fast.core) == ("general", "fast")
    assert_same_logs(*logs)
    return general, fast


def assert_same_logs(a: PlanLog, b: PlanLog) -> None:
    """Both hooks saw the same plans and outcomes; names the first differing plan."""
    for i, (x, y) in enumerate(zip(a.rows, b.rows)):
        if x != y:
            bad = [k for k in x if x[k] != y[k]]
            raise AssertionError(f"plan {i} (start {x['starts'][0]!r} s) differs in {bad}: "
                                 + "; ".join(f"{k}: general {x[k]!r}, fast {y[k]!r}"
                                             for k in bad))
    assert len(a.rows) == len(b.rows), f"plans: general {len(a.rows)}, fast {len(b.rows)}"


def same_scenario(scenario: str | None, *overrides: str) -> tuple[RunResult, RunResult]:
    """Both cores on a shipped scenario, without and with per-plan hooks; asserts identical
    results and hook logs, and returns the (general, fast) results."""
    r, specs = prepared(scenario, *overrides)
    return same_runs(r, specs)


def same_runs(r: Resolved, specs: RequestSpecs) -> tuple[RunResult, RunResult]:
    """``same_scenario`` for given requests."""
    a, b = run_both(r, specs)
    assert_same(a, b)
    _, hooked = run_both_logged(r, specs)
    assert_same(a, hooked)  # a hook changes nothing
    return a, b


def same_random(sets: tuple[str, ...], specs: RequestSpecs) -> tuple[RunResult, RunResult]:
    """``same_runs`` under the default scenario with ``sets`` (``--set`` overrides; a
    hypothesis example they do not resolve is rejected); asserts which core ran each."""
    try:
        r = resolve_loaded(load_scenario(None, sets))
    except ConfigError:  # a pool too small for one request, say
        reject()
    a, b = same_runs(r, specs)
    assert (a.core, b.core) == ("general", "fast")
    return a, b


def _first_diff(x: np.ndarray, y: np.ndarray) -> int:
    if len(x) != len(y):
        return min(len(x), len(y))
    if x.dtype.kind == "f":
        same = (x == y) | (np.isnan(x) & np.isnan(y))
    else:
        same = x == y
    return int(np.flatnonzero(~same)[0])


def _same_arrays(what: str, x: np.ndarray, y: np.ndarray, where=None) -> None:
    x, y = np.asarray(x), np.asarray(y)
    if x.shape == y.shape and (np.array_equal(x, y, equal_nan=x.dtype.kind == "f")):
        return
    i = _first_diff(x, y)
    at = where(i) if where is not None else f"index {i}"
    gx = x[i] if i < len(x) else "(none)"
    fy = y[i] if i < len(y) else "(none)"
    raise AssertionError(f"{what} differs first at {at} (lengths {len(x)} / {len(y)}): "
                         f"general {gx!r}, fast {fy!r}")


def _itl_multiset(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ITL values (ascending) with their total weights."""
    uniq, inv = np.unique(values, return_inverse=True)
    total = np.zeros(len(uniq), dtype=np.int64)
    np.add.at(total, inv.ravel(), np.asarray(weights, dtype=np.int64))
    keep = total > 0
    return uniq[keep], total[keep]


def _same_steps(a: RunResult, b: RunResult) -> None:
    ra, rb = a.recorder, b.recorder
    assert (ra.num_plans, ra.num_steps) == (rb.num_plans, rb.num_steps), (
        f"plans/steps: general {ra.num_plans}/{ra.num_steps}, "
        f"fast {rb.num_plans}/{rb.num_steps}")
    sa, sb = ra.steps(), rb.steps()
    assert list(sa) == list(sb)
    starts = sa["start_s"]

    def step(i):
        return f"step {i} (start {starts[i]!r} s)" if i < len(starts) else f"step {i}"

    for col in sa:
        _same_arrays(f"step column {col}", sa[col], sb[col], step)
    _same_arrays("plan_steps", ra.plan_steps, rb.plan_steps)


def _same_requests(a: RunResult, b: RunResult) -> None:
    def req(i):
        return f"request {i}"

    for col in REQUEST_COLUMNS:
        _same_arrays(f"recorder.{col}", getattr(a.recorder, col), getattr(b.recorder, col),
                     req)
    for col in RESULT_ARRAYS:
        _same_arrays(col, getattr(a, col), getattr(b, col), req)
    for col in RESULT_VALUES:
        x, y = getattr(a, col), getattr(b, col)
        assert x == y, f"{col}: general {x!r}, fast {y!r}"


def _same_itl(a: RunResult, b: RunResult) -> None:
    done = a.status == Status.FINISHED
    for name, mask in (("all requests", None), ("finished requests", done)):
        va, wa = _itl_multiset(*a.recorder.itl_samples(mask))
        vb, wb = _itl_multiset(*b.recorder.itl_samples(mask))
        _same_arrays(f"ITL values ({name})", va, vb)
        _same_arrays(f"ITL weights ({name})", wa, wb)


def _same_token_times(a: RunResult, b: RunResult) -> None:
    ca, cb = a.recorder.tokens.csr(), b.recorder.tokens.csr()
    assert (ca is None) == (cb is None), "token times kept by one core only"
    if ca is not None:
        _same_arrays("token time offsets", ca[0], cb[0], lambda i: f"request {i}")
        _same_arrays("token times", ca[1], cb[1])


def assert_same(a: RunResult, b: RunResult, *, itl: bool = True) -> None:
    """``a`` (general engine) and ``b`` (fast core) report the same run, exactly;
    ``itl=False`` leaves out the ITL samples (once the general recorder settled them into
    its histogram, tests/fast/test_recording.py)."""
    _same_steps(a, b)
    _same_requests(a, b)
    if itl:
        _same_itl(a, b)
    _same_token_times(a, b)
