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

import platform
import time

import numpy as np
import torch

from sim.cost.base import RunExtras
from sim.live import attention, inputs
from sim.live.cache import CacheShape, PagedCache, fits
from sim.live.model import RandomTransformer
from sim.live.records import StepRecords
from sim.live.timer import make_clock
from sim.live.tokens import TokenBook
from traces.errors import InputError


def _activation_bytes(r, elt: int) -> int:
    """A bound on one step's activations (bytes): the vLLM profile-run estimate (hidden,
    QKV and MLP rows for the token budget; fp32 logits for every sequence)."""
    m, lim = r.model, r.limits
    per_token = m.hidden_size * 4 + m.q_size + 2 * m.kv_size + 2 * m.intermediate_size
    return lim.max_num_batched_tokens * per_token * elt + lim.max_num_seqs * m.vocab_size * 4


def memory_plan(r, params) -> tuple[CacheShape, int]:
    """(the cache's shape, bytes of everything else) of a live run; InputError when the
    device is missing, the configuration unsupported, or the pool does not fit."""
    m, device = r.model, params.device
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("cost live: device cuda, but no CUDA device is visible")
    if m.kv_bytes != m.dtype_bytes:
        raise InputError(f"cost live: the kernels keep KV in the model dtype; "
                         f"model.kv_dtype_bytes {m.kv_bytes} is not supported")
    layers = params.layers or m.num_layers
    if layers > m.num_layers:
        raise InputError(f"cost live: layers {layers} > the model's {m.num_layers}")
    # CPU: float32, as the CPU calibration profile (CPU bf16 matmul is an emulation)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    elt = torch.empty((), dtype=dtype).element_size()
    shape = CacheShape(layers, r.memory.usable_blocks, r.block_size, m.num_kv_heads,
                       m.head_dim, dtype)
    other = RandomTransformer.weight_bytes(m, layers, elt) + _activation_bytes(r, elt)
    fits(shape, other, device)
    return shape, other


class LiveExecutor:
    def __init__(self, r, params, kv, engine, progress=None):
        self.r, self.p, self.kv, self.engine, self.progress = r, params, kv, engine, progress
        self.device = params.device
        m = r.model
        self.shape, self.other_bytes = memory_plan(r, params)
        if self.shape.num_blocks != kv.num_blocks or self.shape.block_size != kv.block_size:
            raise RuntimeError("live: the KV manager's pool differs from the scenario's")
        self.layers, self.scale = self.shape.layers, m.num_layers / self.shape.layers
        self.dtype = self.shape.dtype
        self.attn = attention.make_attention(params.attention, self.device)
        self.t0 = time.perf_counter()
        self.book = TokenBook(engine.specs, kv.block_size, m.vocab_size, r.scenario.seed)
        self.records = StepRecords()
        specs = engine.specs  # progress: tokens computed of all there are to compute
        self.tokens_total = int((specs.prompt_tokens + specs.output_tokens - 1).sum())
        self.tokens_done = 0
        self._pending = None  # what run_plan did, for committed: (steps, staged, base lens)
        self._swap = kv.host is not None
        self._last: dict[int, list[int]] = {}  # swap mode: tables after the last commit
        self._host: dict[int, torch.Tensor] = {}  # swap mode: swapped-out KV, on the host
        self.clock = make_clock(self.device, params.clock, params.threads, params.cpu_core)
        self.clock.__enter__()  # pins this thread (the one running the engine) on the CPU
        try:
            self.model = RandomTransformer(m, self.layers, self.dtype, self.device,
                                           r.scenario.seed)
            self.cache = PagedCache(self.shape, self.device)
            self._warmup(r.limits.max_model_len)
        except BaseException:
            self.clock.__exit__(None, None, None)
            raise
        self.setup_s = time.perf_counter() - self.t0

    # ---- one plan ------------------------------------------------------------------------
    def run_plan(self, plan) -> np.ndarray:
        """Run the plan's steps (a decode run up to the engine's cut); their durations (s)."""
        ids = plan.req_ids
        tables = {r: self.kv.block_table(r) for r in ids.tolist()}
        base = {r: len(t) for r, t in tables.items()}
        staged: dict[int, list[int]] = {}
        announced = self._announced(plan, tables)
        limit = self.engine.run_limit(plan) if plan.num_steps > 1 else np.inf
        t, out = self.engine.clock, []
        for j in range(plan.num_steps):
            if j and t >= limit:
                break
            if j:
                self._stage(ids, plan.context_lens + j, tables, announced, staged)
            swap = self._swap_work(plan, tables) if j == 0 and self._swap else None
            d = self._step(ids, plan.num_tokens, plan.context_lens + j, tables, swap)
            out.append(d)
            t += d
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
        clock = self.clock
        clock.start()
        if swap is not None:
            swap()
        inp = inputs.build(ids, num_tokens, ctx, tables, self.book, self.kv.block_size,
                           self.device)
        logits = self.model.forward(inp, self.cache, self.attn, marks=clock.mark)
        sampled = logits.argmax(dim=-1).tolist()  # greedy; the host read syncs the device
        timing = clock.stop()
        for r, tok, emits in zip(inp.order.tolist(), sampled, inp.emit.tolist()):
            if emits:
                self.book.append(r, tok)
        duration = timing.step_s + (self.scale - 1.0) * timing.layers_s
        self.records.add(num_tokens, duration, timing)
        self.tokens_done += int(num_tokens.sum())
        if self.progress is not None:
            self.progress(len(self.records), min(self.tokens_done, self.tokens_total),
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

    # ---- set-up and end ------------------------------------------------------------------
    def _warmup(self, max_len: int) -> None:
        k, v = self.cache.layer(0)
        attention.warmup(self.attn, k, v, self.r.model.num_attention_heads, max_len)
        self.model.rope_tables(max_len + 1)
        for _ in range(self.p.warmup_steps):
            self._dummy_step()

    def _dummy_step(self) -> None:
        """A 16-token prefill over the null block: slots -1, so nothing is written."""
        dev, n = self.device, 16
        i32 = lambda v: torch.tensor(v, dtype=torch.int32, device=dev)  # noqa: E731
        table = torch.zeros((1, -(-n // self.kv.block_size)), dtype=torch.int32, device=dev)
        inp = inputs.StepInputs(
            token_ids=torch.zeros(n, dtype=torch.int64, device=dev),
            positions=torch.arange(n, device=dev), slots=torch.full((n,), -1, device=dev),
            num_prefill_tokens=n,
            prefill=inputs.PagedBatch(table, i32([0]), i32([0, n]), n), decode=None,
            logit_rows=torch.tensor([n - 1], device=dev), order=np.zeros(1, np.int64),
            emit=np.zeros(1, bool))
        self.model.forward(inp, self.cache, self.attn).argmax(-1).tolist()

    def finish(self) -> RunExtras:
        self.clock.__exit__(None, None, None)
        return RunExtras("live", self.summary(), {"live_steps.parquet": self.records.table()})

    def summary(self) -> dict:
        m = self.r.model
        name = (torch.cuda.get_device_name() if self.device == "cuda"
                else f"cpu:{platform.machine()}:{platform.processor() or 'unknown'}")
        return {
            "device": self.device, "device_name": name, "dtype": str(self.dtype)[6:],
            "attention": self.attn.name, "clock": self.clock.name,
            "torch_threads": self.p.threads if self.device == "cpu" else None,
            "cpu_core": getattr(self.clock, "core", None),
            "layers_executed": self.layers, "model_layers": m.num_layers,
            "layer_scale": self.scale, "sampling": "greedy (temperature 0)",
            "kv_cache_gib": self.shape.total_bytes / (1 << 30),
            "weights_and_activations_gib": self.other_bytes / (1 << 30),
            "setup_s": self.setup_s, "run_wall_s": time.perf_counter() - self.t0,
            "torch": torch.__version__, **self.records.totals(),
        }
