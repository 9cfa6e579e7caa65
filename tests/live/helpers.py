"""Small live-mode scenarios (tiny-2l on the CPU) and a duration replay executor."""

from __future__ import annotations

import numpy as np

from sim import pipeline
from sim.config.load import load_scenario
from sim.live.check import kv_error
from sim.runner import build_cost, simulate
from sim.sched.base import Status

TINY = """\
name: live-tiny
description: tiny live run
seed: 3
model: tiny-2l
gpu: h100-sxm
engine: {{max_num_batched_tokens: 256, max_num_seqs: 16, max_model_len: 512,
          num_gpu_blocks_override: {blocks}}}
cost: {{name: {cost}}}
workload:
  arrival: {{process: poisson, rate: {rate}}}
  lengths: {{dist: lognormal, prompt_p50: 24, prompt_p90: 96, output_p50: 6, output_p90: 24,
             prompt_max: 256, output_max: 64}}
  num_requests: {n}
"""


def write_scenario(tmp_path, n=200, rate=40.0, blocks=257, name="s.yaml", cost="live"):
    path = tmp_path / name
    path.write_text(TINY.format(n=n, rate=rate, blocks=blocks, cost=cost))
    return path


def prepared(path, *sets):
    loaded = load_scenario(path, tuple(sets))
    return loaded, pipeline.prepare(loaded)


class Replay:
    """An executor returning recorded step durations: the plan's next ``num_steps`` of them
    (the engine cuts a decode run where they cross an arrival); ``advance`` is the on_plan
    hook that moves past the steps the engine kept."""

    def __init__(self, durations):
        self.d = np.asarray(durations, dtype=np.float64)
        self.i = 0

    def __call__(self, plan):
        return self.d[self.i: self.i + plan.num_steps]

    def advance(self, plan, starts, durations, outcome):
        self.i += plan.num_steps


class KVChecker:
    """on_plan hook: after each committed plan, compare the live cache with a contiguous
    recomputation for up to ``per_plan`` running requests of the plan."""

    def __init__(self, cost, per_plan=3, every=1):
        self.cost, self.per_plan, self.every = cost, per_plan, every
        self.checks, self.worst, self.runs, self.calls = 0, 0.0, 0, 0
        self.after_preemption = 0  # checks of requests preempted (and resumed) before
        self.checked: set[int] = set()
        self.executor = None

    def __call__(self, plan, starts, durations, outcome):
        ex = self.executor = self.cost.executor
        self.calls += 1
        self.runs += plan.num_steps > 1
        if self.calls % self.every:
            return
        sched = ex.engine.scheduler
        running = [r for r in plan.req_ids.tolist() if sched.status[r] == Status.RUNNING]
        for r in running[: self.per_plan]:
            self.worst = max(self.worst, kv_error(ex, r, int(sched.computed[r])))
            self.checks += 1
            self.after_preemption += int(sched.num_preemptions[r] > 0)
            self.checked.add(r)


def run_checked(path, *sets, per_plan=3, every=1):
    """Simulate a live scenario with KV checks; (RunResult, KVChecker)."""
    loaded, (r, specs, _) = prepared(path, *sets)
    cost = build_cost(r)
    checker = KVChecker(cost, per_plan, every)
    return simulate(r, specs, executor=cost, on_plan=checker), checker
