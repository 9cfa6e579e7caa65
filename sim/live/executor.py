"""The live step executor: runs each plan's steps for real and returns their measured times.

Per plan (``run_plan``), per step: read each request's block table from the KV manager
(the scheduler already allocated this step's blocks), build the inputs, run the model,
sample one token for every request that emits one (greedy, as ``vllm bench serve``'s
default temperature 0), stop the clock. The engine advances the simulated clock by the
returned durations; ``committed`` runs after the scheduler committed the plan.

Decode runs. A plan may stand for k identical decode steps (sim/engine/plan.py). They run
one by one, each real, and stop where the engine will cut the run (``Engine.run_limit``:
no step starts at or after the next arrival), so no step is executed that the scheduler
does not commit, and the scheduler sees the plans it would see with any cost model. The
scheduler allocates the blocks of steps 1..k-1 only when it commits the run, so during
the run those steps write into the blocks the pool will hand out next
(``next_free_blocks``, the same set whatever the order); ``committed`` then moves each
request's staged blocks to the blocks it actually got (a permutation of the same set):

    step j of the run: position ctx + j needs block (ctx + j) // bs
      held by the table already -> write there
      not yet allocated         -> the next announced free block (staged)
    commit: staged blocks -> the request's new table entries (same set, maybe reordered)

Swap preemption (vLLM v0): a swapped-out request's blocks are copied to host memory
before the step that follows its eviction, and copied into its new blocks in the step
that resumes it, inside that step's timed region (the simulator charges the transfer to
that step too).
"""

from __future__ import annotations

import numpy as np

from sim.cost.base import RunExtras
from sim.engine.clock import ns
from sim.live.runner import StepRunner


class LiveExecutor:
    def __init__(self, r, params, kv, engine, progress=None):
        self.kv, self.engine, self.progress = kv, engine, progress
        self.runner = StepRunner(r, params, engine.specs, kv.num_blocks)
        if self.runner.block_size != kv.block_size:
            raise RuntimeError("live: the KV manager's block size differs from the scenario's")
        self.cache, self.book = self.runner.cache, self.runner.book
        self.model, self.device = self.runner.model, self.runner.device  # for checks
        specs = engine.specs  # progress: tokens computed of all there are to compute
        self.tokens_total = int((specs.prompt_tokens + specs.output_tokens - 1).sum())
        self.tokens_done = 0
        self._pending = None  # what run_plan did, for committed: (steps, staged, base lens)
        self._swap = kv.host is not None
        self._last: dict[int, list[int]] = {}  # swap mode: tables after the last commit
        self._host: dict = {}  # swap mode: swapped-out KV (host tensors) by request

    # ---- one plan ------------------------------------------------------------------------
    def run_plan(self, plan) -> np.ndarray:
        """Run the plan's steps (a decode run up to the engine's cut); their durations (s)."""
        ids = plan.req_ids
        tables = {r: self.kv.block_table(r) for r in ids.tolist()}
        base = {r: len(t) for r, t in tables.items()}
        staged: dict[int, list[int]] = {}
        announced = self._announced(plan, tables)
        # the engine's integer-ns clock, advanced by each duration rounded as the engine does
        limit = self.engine.run_limit(plan) if plan.num_steps > 1 else None
        t, out = self.engine.clock, []
        for j in range(plan.num_steps):
            if j and t >= limit:
                break
            if j:
                self._stage(ids, plan.context_lens + j, tables, announced, staged)
            swap = self._swap_work(plan, tables) if j == 0 and self._swap else None
            d = self._step(ids, plan.num_tokens, plan.context_lens + j, tables, swap)
            out.append(d)
            t += ns(d)
        self._pending = (len(out), staged, base)
        return np.array(out, dtype=np.float64)

    def _announced(self, plan, tables) -> list[int]:
        """The free blocks a decode run's steps 1.. will take (in take order)."""
        if plan.num_steps == 1:
            return []
        bs = self.kv.block_size
        need = sum(max(0, -(-(int(c) + plan.num_steps) // bs) - len(tables[int(r)]))
                   for r, c in zip(plan.req_ids, plan.context_lens))
        return self.kv.next_free_blocks(need)[::-1] if need else []  # pop() takes in order

    def _stage(self, ids, ctx, tables, announced, staged) -> None:
        """Give each request whose position ctx crosses into a block it does not hold yet
        the next announced free block."""
        bs = self.kv.block_size
        lens = np.fromiter((len(tables[r]) for r in ids.tolist()), np.int64, len(ids))
        for i in np.flatnonzero(ctx // bs >= lens).tolist():
            r = int(ids[i])
            b = announced.pop()
            tables[r].append(b)
            staged.setdefault(r, []).append(b)

    def _step(self, ids, num_tokens, ctx, tables, swap=None) -> float:
        duration, _ = self.runner.step(ids, num_tokens, ctx, tables, before=swap)
        self.tokens_done += int(num_tokens.sum())
        if self.progress is not None:
            self.progress(len(self.runner.records), min(self.tokens_done, self.tokens_total),
                          self.tokens_total)
        return duration

    # ---- after the scheduler committed the plan ------------------------------------------
    def committed(self, plan, outcome) -> None:
        """Move staged blocks to their owners' new blocks; forget finished requests."""
        steps, staged, base = self._pending
        self._pending = None
        if plan.num_steps != steps:
            raise RuntimeError(f"live: the engine kept {plan.num_steps} steps of a decode run "
                               f"the executor ran {steps} of (Engine.run_limit disagrees)")
        if staged:
            self._settle(staged, base)
        for r in outcome.finished.tolist():
            self.book.drop(r)
            self._last.pop(r, None)
        if self._swap:
            for r in plan.req_ids.tolist():
                table = self.kv.block_table(r)
                if table:
                    self._last[r] = table

    def _settle(self, staged: dict, base: dict) -> None:
        pool = {b for blocks in staged.values() for b in blocks}
        src, dst = [], []
        for r, blocks in staged.items():
            got = self.kv.block_table(r)[base[r]: base[r] + len(blocks)]
            if not got:  # finished with the run: its blocks are free again
                continue
            if len(got) != len(blocks) or not pool.issuperset(got):
                raise RuntimeError(f"live: request {r} was given blocks {got}, not among the "
                                   f"announced free blocks {sorted(pool)}")
            src += blocks
            dst += got
        self.cache.move(src, dst)

    # ---- swap preemption -------------------------------------------------------------------
    def _swap_work(self, plan, tables):
        """Save evicted requests' KV now (nothing wrote their old blocks since); return the
        copies to run inside the step's timed region (swap-out, then swap-in)."""
        outs, ins = [], []
        if plan.swap_out_bytes:
            for r in [r for r in self._last if self.kv.is_swapped(r)]:
                outs.append((r, self._last.pop(r)))
        if plan.swap_in_bytes:
            ins = [r for r in plan.req_ids.tolist() if r in self._host]
        for r in [r for r in self._last if not self.kv.block_table(r)]:
            del self._last[r]  # recompute-preempted: its KV is gone
        if not outs and not ins:
            return None

        def copies():
            for r, blocks in outs:
                self._host[r] = self.cache.save(blocks)
            for r in ins:
                saved = self._host.pop(r)
                self.cache.restore(saved, tables[r][: saved.shape[2]])

        return copies

    # ---- end -------------------------------------------------------------------------------
    def finish(self) -> RunExtras:
        self.runner.close()
        return RunExtras("live", self.runner.summary(),
                         {"live_steps.parquet": self.runner.records.table()})
