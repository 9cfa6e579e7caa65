"""Per-plan hooks on the fast core: the general engine's StepPlan and StepOutcome, built
only when a caller asks for them (a step log, the conformance comparer). O(running) per
plan, so a hooked run is slower; the plan itself is the same either way."""

from __future__ import annotations

import numpy as np

from sim.engine.clock import NS_PER_S
from sim.engine.plan import StepOutcome, StepPlan


def batch_view(s, p) -> tuple[list[int], list[int], list[int], list[int]]:
    """(requests, tokens, contexts, emitting requests) of planned step ``p`` in batch order
    (``s.batch_order()``), before it is committed."""
    grant = {r: (t, c) for r, t, c in p.entries}
    skipped = set(p.skipped)
    ids, tok, ctx, emit = [], [], [], []
    for r in s.batch_order():
        if s.dec[r]:
            if r in skipped:
                continue
            t, c = 1, s.base[r] + s.g
        elif r in grant:
            t, c = grant[r]
        else:
            continue  # a prefilling request the token budget left out
        ids.append(r)
        tok.append(t)
        ctx.append(c)
        if c + t >= s.known_of(r):
            emit.append(r)
    return ids, tok, ctx, emit


def plan(view, p, steps: int, interruptible: bool) -> StepPlan:
    """The general engine's StepPlan of planned step ``p`` (``view``: its batch_view) as a
    plan of ``steps`` steps."""
    ids, tok, ctx, _ = view
    return StepPlan.build(ids, tok, ctx, p.preempted, num_steps=steps,
                          interruptible=interruptible, swap_out_bytes=p.swap_out,
                          swap_in_bytes=p.swap_in)


def call(hook, view, p, *, steps: int, interruptible: bool, starts: list[int],
         durs: list[int], kv_used: list[int], kv_tokens: list[int], running: int,
         waiting: int, first: list[int], finished: list[int]) -> None:
    ids, tok, ctx, emit = view
    if len(finished) > 1 or len(first) > 1:  # in batch order, as the general engine has them
        pos = {r: i for i, r in enumerate(ids)}
        finished = sorted(finished, key=pos.__getitem__)
        first = sorted(first, key=pos.__getitem__)
    step_plan = plan(view, p, steps, interruptible)
    arr = np.asarray
    outcome = StepOutcome(
        emitted=arr(emit, dtype=np.int64), first_tokens=arr(first, dtype=np.int64),
        finished=arr(finished, dtype=np.int64), kv_blocks_used=arr(kv_used, dtype=np.int64),
        num_running=running, num_waiting=waiting, kv_tokens=arr(kv_tokens, dtype=np.int64),
        blocked=p.blocked)
    hook(step_plan, arr(starts, dtype=np.int64) / NS_PER_S, arr(durs, dtype=np.int64) / NS_PER_S,
         outcome)
