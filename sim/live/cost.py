"""``cost: {name: live}``: the live executor behind the cost-model seam.

Registered like any cost model so a scenario (or ``servesim run --live``) selects it by
name, but it prices nothing: ``step_times`` runs the plan. The executor itself (torch) is
built in ``start_run``, when the run's KV manager and engine exist, so importing this
module (done by ``sim.cost``) costs no torch import.
"""

from __future__ import annotations

from sim.cost.base import COST_MODELS, CostModel, RunExtras
from sim.live.params import LiveParams
from traces.errors import InputError


@COST_MODELS.register("live")
class LiveCost(CostModel):
    description = ("executes every step for real: a random-weight model of the scenario's "
                   "shapes over a paged KV cache that mirrors the block tables; measured times")
    Params = LiveParams

    def __init__(self, *args, resolved=None, progress=None, **kw):
        super().__init__(*args, **kw)
        if self.tp != 1:
            raise InputError(f"cost live: runs one device; tensor_parallel_size is {self.tp} "
                             "(set it to 1 or use a pricing cost model)")
        if resolved is None:
            raise InputError("cost live: needs the resolved scenario")
        from sim.live.runner import memory_plan

        memory_plan(resolved, self.params)  # refuse before the simulator builds its pool
        self.resolved = resolved
        self.progress = progress  # progress(steps, tokens_done, tokens_total) or None
        self.executor = None

    def start_run(self, kv, engine) -> None:
        from sim.live.executor import LiveExecutor

        self.executor = LiveExecutor(self.resolved, self.params, kv, engine,
                                     progress=self.progress)

    def step_times(self, plan):
        if self.executor is None:
            raise RuntimeError("cost live: a plan arrived before start_run")
        return self.executor.run_plan(plan)

    def after_plan(self, plan, starts, durations, outcome) -> None:
        self.executor.committed(plan, outcome)

    def end_run(self) -> RunExtras | None:
        if self.executor is None:
            return None
        extras = self.executor.finish()
        self.executor = None  # frees the weights and the cache
        return extras
