"""What binds at a failing capacity probe: the engine's failure or the budget furthest
over, after its cause when one thing held the requests back (the KV cache, the
max_num_seqs cap, the token budget), read from a probe's flattened summary metrics.
"""

from __future__ import annotations

import math

from sim.plan.slo import Budget

KV_WAIT_SHARE = 0.5  # queue mostly waiting on KV memory: the KV cache is what binds


def kv_bound(m: dict) -> bool:
    waiting = m.get("waiting.mean_waiting") or 0.0
    on_kv = m.get("waiting.mean_waiting_on_kv_memory") or 0.0
    preempted = (m.get("preemption.count") or 0) > 0
    return preempted or (waiting > 0 and on_kv >= KV_WAIT_SHARE * waiting)


def seqs_bound(m: dict) -> bool:
    """The queue mostly waited because max_num_seqs requests were already running."""
    waiting = m.get("waiting.mean_waiting") or 0.0
    on_seqs = m.get("waiting.mean_waiting_on_max_num_seqs") or 0.0
    return waiting > 0 and on_seqs >= KV_WAIT_SHARE * waiting


def _share(m: dict, limit: str) -> float:
    v = m.get(f"batch_limits.{limit}")
    return 0.0 if v is None or math.isnan(float(v)) else float(v)


def _busy(m: dict, limit: str) -> str:
    """' in 16% of busy time' from the step records (sim.metrics.batch_limits)."""
    return f" in {_share(m, limit):.0%} of busy time" if f"batch_limits.{limit}" in m else ""


def _capped(m: dict) -> str | None:
    """The limit the running batch sat at for most of the busy time, when one did."""
    name, share = max((("kv_cache_full", _share(m, "kv_cache_full")),
                       ("at_max_num_seqs", _share(m, "at_max_num_seqs")),
                       ("token_budget_full", _share(m, "token_budget_full"))),
                      key=lambda x: x[1])
    if share < KV_WAIT_SHARE:
        return None
    if name == "kv_cache_full":
        return f"KV cache (full{_busy(m, name)})"
    if name == "at_max_num_seqs":
        return f"max_num_seqs (batch at {_limit(m, 'max_num_seqs')}{_busy(m, name)})"
    return (f"token budget (max_num_batched_tokens {_limit(m, 'max_num_batched_tokens')} "
            f"full{_busy(m, name)})")


def _limit(m: dict, key: str) -> str:
    v = m.get(f"batch_limits.{key}")
    return "the cap" if v is None else f"{int(v):,}"


def cause(m: dict) -> str | None:
    """What held the requests back at a failing point, when one thing did: the KV cache
    (waiting on memory, or preempting), else the max_num_seqs cap (waiting for a seat),
    else the limit the running batch sat at for most of the busy time (the step records:
    max_num_seqs, KV full or the token budget full). The step share is said beside it
    (``max_num_seqs (32 running at the cap in 16% of busy time)``)."""
    if kv_bound(m):
        busy = _busy(m, "kv_cache_full")
        return f"KV cache (full{busy})" if busy else "KV cache"
    if seqs_bound(m):
        peak = m.get("kv_cache.peak_concurrent_seqs")
        at = f"{int(peak)} running" if peak is not None and not math.isnan(float(peak)) \
            else "running"
        return f"max_num_seqs ({at} at the cap{_busy(m, 'at_max_num_seqs')})"
    return _capped(m)


def verdict(m: dict, budgets: tuple[Budget, ...]) -> tuple[bool, str] | None:
    """None when the point is sustainable, else (the engine failed, what binds): the
    engine's failure (``KV cache``, ``max_num_seqs (N running at the cap)`` or
    ``saturation``), else the budget furthest over its limit, after its cause when one
    held the queue back (``max_num_seqs (32 running at the cap; TTFT p95 over)``).
    Budgets count rejected and unfinished requests as failures, as the run's SLO verdict
    does; ``rejected`` when the finished requests were within a budget and the rejected
    ones broke it."""
    why = cause(m)
    if not m["engine_sustains"]:
        return True, why or "saturation"
    rejected = (m.get("slo.rejected_as_failures") or 0) > 0
    over = [(b.judged(m) / b.ms, "rejected" if rejected and b.lost_to_failures(m) else b.label)
            for b in budgets if not b.holds(m)]
    if not over:
        return None
    label = max(over)[1]
    if label == "rejected" or why is None:
        return False, label
    return False, (f"{why[:-1]}; {label} over)" if why.endswith(")")
                   else f"{why} ({label} over)")


def judge(m: dict, budgets: tuple[Budget, ...]) -> str | None:
    """None when the point is sustainable, else what binds (``verdict``)."""
    v = verdict(m, budgets)
    return v[1] if v else None
