"""Compare servesim's steps with a recorded vLLM reference, step by step (no vLLM needed).

A step is identical when both sides agree on its start time (ns), the tokens
each request computes, the requests preempted before it, the requests finished
by it and the KV blocks in use. The report gives the identical steps, the
length of the identical prefix and, at the first divergence, both sides of that
step and the one before it.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from dataclasses import dataclass
from pathlib import Path

from benchmarks.conformance.cases import REFS_DIR, Case, vllm_input
from sim.runner import simulate
from sim.sched.base import Status

FIELDS = ("t_ns", "tokens", "preempted", "finished", "kv_blocks_used")


@dataclass(frozen=True)
class Step:
    t_ns: int  # step start (ns)
    dur_ns: int  # step duration (ns)
    tokens: dict  # request index -> tokens computed
    preempted: tuple  # request indices preempted before the step (sorted)
    finished: tuple  # request indices finished by the step (sorted)
    kv_blocks_used: int  # blocks in use during the step (null block excluded)

    def key(self) -> tuple:
        return (self.t_ns, self.tokens, self.preempted, self.finished, self.kv_blocks_used)

    @staticmethod
    def from_json(d: dict) -> Step:
        return Step(d["t_ns"], d["dur_ns"], {int(k): v for k, v in d["tokens"].items()},
                    tuple(d["preempted"]), tuple(d["finished"]), d["kv_blocks_used"])


@dataclass(frozen=True)
class Run:
    steps: list
    rejected: list  # request indices refused at arrival
    max_tokens: list  # output tokens each request is served with (-1: rejected)
    core: str = ""  # the simulation core that ran (sim.runner.RunResult.core)


@dataclass(frozen=True)
class Result:
    name: str
    ref_steps: int
    our_steps: int
    identical: int  # positions where both steps are identical
    prefix: int  # identical steps before the first divergence
    preemptions: int  # in the reference
    problems: list  # input, rejection or length mismatches (empty when they agree)
    divergence: str  # the first divergent step, both sides ('' when none)
    core: str = ""  # the simulation core that replayed the case

    @property
    def ok(self) -> bool:
        return (not self.problems and self.identical == self.ref_steps == self.our_steps)


def read_ref(path: Path) -> tuple[dict, Run]:
    with gzip.open(path, "rt") as f:
        header = json.loads(f.readline())
        steps = [Step.from_json(json.loads(line)) for line in f]
    return header, Run(steps, header["rejected"], header["max_tokens_served"])


def servesim_run(case: Case, core: str | None = None) -> Run:
    """Replay the case through servesim's pipeline, every step expanded (decode runs too);
    ``core`` (auto, general or fast) overrides the scenario's simulation core."""
    steps = []

    def collect(plan, starts, durations, outcome):
        tokens = dict(zip(plan.req_ids.tolist(), plan.num_tokens.tolist()))
        for j in range(plan.num_steps):
            last = j == plan.num_steps - 1
            steps.append(Step(
                round(float(starts[j]) * 1e9), round(float(durations[j]) * 1e9), tokens,
                tuple(sorted(plan.preempted.tolist())) if j == 0 else (),
                tuple(sorted(outcome.finished.tolist())) if last else (),
                int(outcome.kv_blocks_used[j])))

    r = case.resolved
    if core is not None:
        r = dataclasses.replace(r, scenario=r.scenario.model_copy(update={"core": core}))
    res = simulate(r, case.specs, on_plan=collect)
    rejected = (res.status == Status.REJECTED).tolist()
    served = [-1 if rej else int(o) for rej, o in zip(rejected, res.specs.output_tokens)]
    return Run(steps, [i for i, rej in enumerate(rejected) if rej], served, res.core)


def compare_case(case: Case, ref_path: Path | None = None, core: str | None = None) -> Result:
    header, ref = read_ref(ref_path or REFS_DIR / f"{case.name}.jsonl.gz")
    ours = servesim_run(case, core)
    problems = []
    if header["input"] != vllm_input(case):
        problems.append("the case changed since it was recorded: re-record (make conformance)")
    if ref.rejected != ours.rejected:
        problems.append(f"rejected: vLLM {ref.rejected}, servesim {ours.rejected}")
    if ref.max_tokens != ours.max_tokens:
        diff = [i for i, (a, b) in enumerate(zip(ref.max_tokens, ours.max_tokens)) if a != b]
        problems.append(f"served max_tokens differ for requests {diff[:10]}")
    same = [a.key() == b.key() for a, b in zip(ref.steps, ours.steps)]
    prefix = same.index(False) if False in same else len(same)
    divergence = ""
    if prefix < max(len(ref.steps), len(ours.steps)):
        divergence = describe(ref.steps, ours.steps, prefix)
    return Result(case.name, len(ref.steps), len(ours.steps), sum(same), prefix,
                  sum(len(s.preempted) for s in ref.steps), problems, divergence, ours.core)


def _show(step: Step | None) -> str:
    if step is None:
        return "(none)"
    return (f"t={step.t_ns} ns dur={step.dur_ns} ns kv={step.kv_blocks_used} "
            f"preempted={list(step.preempted)} finished={list(step.finished)}\n"
            f"      tokens={step.tokens}")


def describe(ref: list, ours: list, i: int) -> str:
    """Both sides of step ``i`` (and ``i - 1``), and what differs."""
    a = ref[i] if i < len(ref) else None
    b = ours[i] if i < len(ours) else None
    lines = [f"first divergence at step {i}"]
    if i:
        lines.append(f"  step {i - 1} (identical): {_show(ref[i - 1])}")
    lines += [f"  vLLM:     {_show(a)}", f"  servesim: {_show(b)}"]
    if a is not None and b is not None:
        for field in FIELDS:
            x, y = getattr(a, field), getattr(b, field)
            if x != y:
                lines.append(f"  {field} differs" + (_token_diff(x, y) if field == "tokens"
                                                      else f": vLLM {x}, servesim {y}"))
    return "\n".join(lines)


def _token_diff(x: dict, y: dict) -> str:
    keys = sorted(set(x) | set(y))
    parts = [f"r{k}: vLLM {x.get(k, '-')} servesim {y.get(k, '-')}"
             for k in keys if x.get(k) != y.get(k)]
    return ": " + "; ".join(parts)
