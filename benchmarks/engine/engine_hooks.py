"""Per-step and per-arrival logging inside vLLM's engine-core process (recording only).

``record.py`` calls :func:`install_if_asked` before it starts the engine (a forked engine
core inherits the wrapped classes) and at import time (a spawned child re-imports the main
script as ``__mp_main__``, with ``SERVESIM_ENGINE_LOG`` inherited). It wraps

* ``Scheduler.schedule``: the step starts just before it (``start``); the scheduler output
  gives each request's tokens this step and its context (computed tokens) before it;
* ``Scheduler.update_from_output``: the model output is back (``exec_end``); the step ends
  when the update returns (``end``), with the requests that got no token (prefill chunks),
  those it finished, and whether the engine has work left (else it idles after the step);
* ``EngineCoreProc.preprocess_add_request`` (the input thread): when a request reaches the
  engine core, i.e. when the scheduler could first see it.

Records are kept as tuples and written (JSON lines, ``time.monotonic`` seconds, the clock
the client uses too) when the engine goes idle or the buffer fills, so the logging adds a
few microseconds per step. Nothing here is imported by servesim.
"""

from __future__ import annotations

import json
import os
import threading
import time

ENV = "SERVESIM_ENGINE_LOG"
_installed = False
FLUSH_EVERY = 4096  # records buffered before a write (a write while busy costs ~1 ms)


class _Log:
    def __init__(self, path: str):
        self.steps = open(path + ".steps", "a", buffering=1 << 20)
        self.seen = open(path + ".seen", "a", buffering=1 << 16)
        self.buf: list[tuple] = []
        self.lock = threading.Lock()
        self.pending: dict | None = None
        self.path, self.meta_written = path, False

    def write_meta(self, meta: dict) -> None:
        with open(self.path + ".meta", "w") as f:
            f.write(json.dumps(meta))
        self.meta_written = True

    def flush(self) -> None:
        for rec in self.buf:
            self.steps.write(json.dumps(_step_record(*rec)) + "\n")
        self.buf.clear()
        self.steps.flush()

    def arrived(self, req_id: str, t: float) -> None:
        with self.lock:
            self.seen.write(f'{{"id": {json.dumps(req_id)}, "t": {t!r}}}\n')
            self.seen.flush()


def _step_record(start, sched_end, exec_end, end, out, ctx, finished, no_token, waiting,
                 running, kv, idle_after):
    from vllm.v1.utils import compute_iteration_details

    d = compute_iteration_details(out)
    return {
        "start": start, "scheduled": sched_end, "exec_end": exec_end, "end": end,
        "num_ctx_requests": d.num_ctx_requests, "num_ctx_tokens": d.num_ctx_tokens,
        "num_generation_requests": d.num_generation_requests,
        "num_generation_tokens": d.num_generation_tokens,
        "tokens": dict(out.num_scheduled_tokens), "context": ctx,
        "preempted": sorted(out.preempted_req_ids or ()), "finished": finished,
        "no_token": no_token, "num_waiting": waiting, "num_running": running, "kv_usage": kv,
        "idle_after": idle_after,
    }


def _contexts(out) -> dict[str, int]:
    """Tokens each scheduled request had computed (in KV) before this step."""
    ctx = {r.req_id: r.num_computed_tokens for r in out.scheduled_new_reqs}
    cached = out.scheduled_cached_reqs
    ctx.update(zip(cached.req_ids, cached.num_computed_tokens))
    return ctx


def _wrap_scheduler(log: _Log) -> None:
    from vllm.v1.core.sched.scheduler import Scheduler

    schedule, update = Scheduler.schedule, Scheduler.update_from_output

    def logged_schedule(self, *args, **kw):
        start = time.monotonic()
        out = schedule(self, *args, **kw)
        if not log.meta_written:
            log.write_meta({"num_gpu_blocks": self.kv_cache_manager.block_pool.num_gpu_blocks,
                            "block_size": self.block_size})
        if not out.total_num_scheduled_tokens:
            if log.buf:  # an empty step: the engine is about to idle
                log.flush()
        else:
            log.pending = {"start": start, "sched_end": time.monotonic(), "out": out,
                           "ctx": _contexts(out), "waiting": len(self.waiting),
                           "running": len(self.running)}
        return out

    def logged_update(self, scheduler_output, model_output):
        exec_end = time.monotonic()
        outputs = update(self, scheduler_output, model_output)
        end = time.monotonic()
        p, log.pending = log.pending, None
        if p is not None and p["out"] is scheduler_output:
            outs = [o for eco in outputs.values() for o in eco.outputs]
            finished = [o.request_id for o in outs if o.finish_reason is not None]
            emitted = {o.request_id for o in outs if o.new_token_ids}
            no_token = [r for r in scheduler_output.num_scheduled_tokens if r not in emitted]
            log.buf.append((p["start"], p["sched_end"], exec_end, end, scheduler_output,
                            p["ctx"], finished, no_token, p["waiting"], p["running"],
                            self.kv_cache_manager.usage, not self.has_unfinished_requests()))
            if not self.has_requests() or len(log.buf) >= FLUSH_EVERY:
                log.flush()
        return outputs

    Scheduler.schedule, Scheduler.update_from_output = logged_schedule, logged_update


def _wrap_input(log: _Log) -> None:
    from vllm.v1.engine.core import EngineCoreProc

    pre = EngineCoreProc.preprocess_add_request

    def logged_pre(self, request):
        log.arrived(request.request_id, time.monotonic())
        return pre(self, request)

    EngineCoreProc.preprocess_add_request = logged_pre


def install_if_asked() -> None:
    """Install the hooks when this process is the engine core of a recording."""
    global _installed
    path = os.environ.get(ENV)
    if not path or _installed:
        return
    _installed = True
    log = _Log(path)
    _wrap_scheduler(log)
    _wrap_input(log)
