"""One live step, given block tables: the model, the paged cache, the attention backend,
the clock and the token ids, with nothing of the simulator in it.

``StepRunner.step`` builds the inputs, runs the model, samples one token greedily
(temperature 0, ``vllm bench serve``'s default) for each request that emits one and
records the timing. The live executor drives it from the scheduler's plans and the KV
manager's tables; the fidelity profile drives it with synthetic steps.
"""

from __future__ import annotations

import platform
import time

import numpy as np
import torch

from sim.live import attention, inputs
from sim.live.cache import CacheShape, PagedCache, fits
from sim.live.model import RandomTransformer
from sim.live.records import StepRecords
from sim.live.timer import StepTiming, make_clock
from sim.live.tokens import TokenBook
from traces.errors import InputError


def _activation_bytes(r, elt: int) -> int:
    """A bound on one step's activations (bytes): the vLLM profile-run estimate (hidden,
    QKV and MLP rows for the token budget; fp32 logits for every sequence)."""
    m, lim = r.model, r.limits
    per_token = m.hidden_size * 4 + m.q_size + 2 * m.kv_size + 2 * m.intermediate_size
    return lim.max_num_batched_tokens * per_token * elt + lim.max_num_seqs * m.vocab_size * 4


def memory_plan(r, params, num_blocks: int | None = None) -> tuple[CacheShape, int]:
    """(the cache's shape, bytes of everything else) of a live run; InputError when the
    device is missing, the configuration unsupported, or the pool does not fit."""
    m, device = r.model, params.device
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("cost live: device cuda, but no CUDA device is visible")
    if m.is_moe or m.is_mla or m.sliding_window:
        raise InputError(f"cost live: the random-weight model is a dense GQA Llama; "
                         f"{m.name} is mixture-of-experts, MLA or sliding-window")
    if m.kv_bytes != m.dtype_bytes:
        raise InputError(f"cost live: the kernels keep KV in the model dtype; "
                         f"model.kv_dtype_bytes {m.kv_bytes} is not supported")
    layers = params.layers or m.num_layers
    if layers > m.num_layers:
        raise InputError(f"cost live: layers {layers} > the model's {m.num_layers}")
    # CPU: float32, as the CPU calibration profile (CPU bf16 matmul is an emulation)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    elt = torch.empty((), dtype=dtype).element_size()
    blocks = r.memory.usable_blocks if num_blocks is None else num_blocks
    shape = CacheShape(layers, blocks, r.block_size, m.num_kv_heads, m.head_dim, dtype)
    other = RandomTransformer.weight_bytes(m, layers, elt) + _activation_bytes(r, elt)
    fits(shape, other, device)
    return shape, other


class StepRunner:
    def __init__(self, r, params, specs, num_blocks: int | None = None):
        self.r, self.p, self.device = r, params, params.device
        m = r.model
        self.shape, self.other_bytes = memory_plan(r, params, num_blocks)
        self.layers, self.scale = self.shape.layers, m.num_layers / self.shape.layers
        self.dtype, self.block_size = self.shape.dtype, self.shape.block_size
        self.attn = attention.make_attention(params.attention, self.device)
        self.book = TokenBook(specs, self.block_size, m.vocab_size, r.scenario.seed)
        self.records = StepRecords()
        self.t0 = time.perf_counter()
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

    def step(self, ids: np.ndarray, num_tokens: np.ndarray, ctx: np.ndarray, tables: dict,
             before=None) -> tuple[float, StepTiming]:
        """Run one step (``before``: work timed with it, e.g. swap copies); its duration
        (layers scaled) and timing. ``tables[r]`` covers r's context and this step."""
        clock = self.clock
        clock.start()
        if before is not None:
            before()
        inp = inputs.build(ids, num_tokens, ctx, tables, self.book, self.block_size,
                           self.device)
        logits = self.model.forward(inp, self.cache, self.attn, marks=clock.mark)
        sampled = logits.argmax(dim=-1).tolist()  # greedy; the host read syncs the device
        timing = clock.stop()
        for r, tok, emits in zip(inp.order.tolist(), sampled, inp.emit.tolist()):
            if emits:
                self.book.append(r, tok)
        duration = timing.step_s + (self.scale - 1.0) * timing.layers_s
        self.records.add(num_tokens, duration, timing)
        return duration, timing

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
        table = torch.zeros((1, -(-n // self.block_size)), dtype=torch.int32, device=dev)
        inp = inputs.StepInputs(
            token_ids=torch.zeros(n, dtype=torch.int64, device=dev),
            positions=torch.arange(n, device=dev), slots=torch.full((n,), -1, device=dev),
            num_prefill_tokens=n,
            prefill=inputs.PagedBatch(table, i32([0]), i32([0, n]), n), decode=None,
            logit_rows=torch.tensor([n - 1], device=dev), order=np.zeros(1, np.int64),
            emit=np.zeros(1, bool))
        self.model.forward(inp, self.cache, self.attn).argmax(-1).tolist()

    def close(self) -> None:
        """Unpin the thread and restore torch's thread count."""
        self.clock.__exit__(None, None, None)

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
