"""Record vLLM's real v1 ``Scheduler`` over conformance cases (runs in the vLLM venv only).

    python benchmarks/conformance/record.py CASE.json [...] --out DIR

Never imported by servesim (it imports vLLM). Each CASE.json is written by
``python -m benchmarks.conformance export`` from a servesim scenario; this
script drives vLLM's scheduler without a model (a folder holding only a tiny
Llama ``config.json``, ``load_format="dummy"``, a ``KVCacheConfig`` of the case's
``num_gpu_blocks``) under a simulated clock kept as integer nanoseconds:

    now = 0
    loop: add every request arriving at or before now (the server's length rules
          first), schedule(), price the step with the case's step-time function,
          now += duration, update_from_output() with one sampled token for every
          scheduled request whose prefill is complete

and writes DIR/NAME.jsonl.gz: a header line (the case, vLLM's version, requests
rejected and max_tokens as served) and one line per executed step
(``t_ns``, ``dur_ns``, ``tokens`` {request index: tokens}, ``preempted``,
``finished``, ``kv_blocks_used``, ``running``, ``waiting``).

Driver choices (each mirrors what the engine or API server would do):

* Lengths: the OpenAI server's ``get_max_tokens`` (shortens max_tokens to
  max_model_len - prompt, rejects prompt > max_model_len) and the input
  processor's ``_validate_prompt_len`` (rejects prompt == max_model_len), both
  called from vLLM itself.
* Request ids are the zero-padded request index, so vLLM's tie-break on equal
  (priority, arrival) (``Request.__lt__`` compares ids as strings) is index order.
* Token ids: prompts are built from the trace's prefix hash ids (hash block j with
  id h holds tokens f(h, 0..hbs-1), so equal ids at equal chain positions mean
  equal tokens, as the Mooncake convention says); tokens past the chain and every
  sampled token are unique to the request. vLLM's own block hasher then decides
  what is shared.
* A schedule() that scheduled nothing (a request preempted itself under
  policy=priority) executes nothing: the engine steps again at once, so its
  preemptions are reported with the next executed step.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

VOCAB = 32000
TINY_LLAMA = {  # the model-less config: only the scheduler reads it
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
    "intermediate_size": 2048, "num_attention_heads": 8, "num_key_value_heads": 8,
    "num_hidden_layers": 4, "vocab_size": VOCAB, "max_position_embeddings": 1 << 17,
    "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5, "hidden_act": "silu",
}


def _mix(x: int) -> int:
    """splitmix64 finalizer: a deterministic token stream from integers."""
    x &= (1 << 64) - 1
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & ((1 << 64) - 1)
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & ((1 << 64) - 1)
    return x ^ (x >> 31)


def _token(*key: int) -> int:
    h = 0x9E3779B97F4A7C15
    for k in key:
        h = _mix(h ^ (k + 0x632BE59BD9B4E019))
    return h % VOCAB


def prompt_tokens(index: int, prompt: int, chain, hash_block: int | None) -> list[int]:
    """Token ids of request ``index``: shared by hash id where the chain covers, else own."""
    out = []
    for pos in range(prompt):
        j = pos // hash_block if hash_block else -1
        if chain is not None and 0 <= j < len(chain):
            out.append(_token(1, int(chain[j]), pos - j * hash_block))
        else:
            out.append(_token(2, index, pos))
    return out


def sampled_token(index: int, position: int) -> int:
    return _token(3, index, position)


# ---- speculative decoding's acceptance (the same function as sim/sched/spec.py) -----------
def _uniform(seed: int, req: int, step: int, pos: int) -> float:
    m = (1 << 64) - 1
    h = _mix(seed ^ 0x5EC0DE)
    for k in (req, step, pos):
        h = _mix((h ^ (k + 0x632BE59BD9B4E019)) & m)
    return (h >> 11) * (1.0 / (1 << 53))


def accepted(seed: int, rates, req: int, step: int, drafts: int) -> int:
    """Drafts accepted of ``drafts`` at request ``req``'s verify step ``step``: the leading
    positions whose keyed uniform is below the position's conditional rate."""
    a = 0
    while a < drafts and _uniform(seed, req, step, a) < rates[a]:
        a += 1
    return a


# ---- vLLM objects -------------------------------------------------------------------------
def vllm_config(case: dict, model_dir: str):
    from vllm.engine.arg_utils import EngineArgs

    e = case["engine"]
    args = EngineArgs(
        model=model_dir, load_format="dummy", skip_tokenizer_init=True,
        block_size=e["block_size"], max_num_seqs=e["max_num_seqs"],
        max_num_batched_tokens=e["max_num_batched_tokens"], max_model_len=e["max_model_len"],
        enable_chunked_prefill=e["enable_chunked_prefill"],
        long_prefill_token_threshold=e["long_prefill_token_threshold"],
        long_prefill_token_threshold_adaptive=e["long_prefill_token_threshold_adaptive"],
        scheduler_reserve_full_isl=e["scheduler_reserve_full_isl"],
        enable_prefix_caching=e["enable_prefix_caching"], scheduling_policy=e["policy"],
        num_gpu_blocks_override=e["num_gpu_blocks"], async_scheduling=False,
        speculative_config=_spec_args(e.get("speculative_config")),
    )
    cfg = args.create_engine_config()
    cfg.cache_config.num_gpu_blocks = e["num_gpu_blocks"]  # the profiling run would set it
    spec = e.get("speculative_config")
    if spec and spec["method"] != "ngram":
        # built as ngram (no drafter weights to load), then given the case's method: the
        # scheduler and KV manager read only the method, K and what derives from them
        # (use_eagle, num_lookahead_tokens, num_prefill_lookahead_tokens, draft slots)
        cfg.speculative_config.method = spec["method"]
    return cfg


def _spec_args(spec: dict | None) -> dict | None:
    if not spec:
        return None
    return {"method": "ngram", "num_speculative_tokens": spec["num_speculative_tokens"],
            "prompt_lookup_max": 3, "prompt_lookup_min": 1}


def build_scheduler(case: dict, cfg):
    import torch
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    e = case["engine"]
    bs = e["block_size"]
    spec = FullAttentionSpec(block_size=bs, num_kv_heads=8, head_size=64, dtype=torch.bfloat16)
    layers = [f"model.layers.{i}.self_attn.attn" for i in range(TINY_LLAMA["num_hidden_layers"])]
    kv = KVCacheConfig(num_blocks=e["num_gpu_blocks"], kv_cache_tensors=[],
                       kv_cache_groups=[KVCacheGroupSpec(layers, spec)])
    # the engine refuses to start when one max_model_len request cannot fit the pool
    need = -(-e["max_model_len"] // bs)
    if need > e["num_gpu_blocks"] - 1:
        raise SystemExit(f"{case['name']}: max_model_len needs {need} blocks, pool has "
                         f"{e['num_gpu_blocks'] - 1}")
    if e.get("async_scheduling"):  # what EngineCore builds under --async-scheduling
        from vllm.v1.core.sched.async_scheduler import AsyncScheduler as Scheduler
    sched = Scheduler(vllm_config=cfg, kv_cache_config=kv,
                      structured_output_manager=StructuredOutputManager(cfg), block_size=bs,
                      hash_block_size=bs, log_stats=False)
    return sched


def block_hasher(cfg):
    if not cfg.cache_config.enable_prefix_caching:
        return None
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash

    fn = get_hash_fn_by_name(cfg.cache_config.prefix_caching_hash_algo)
    init_none_hash(fn)
    return get_request_block_hasher(cfg.cache_config.block_size, fn)


def served_max_tokens(max_model_len: int, prompt: int, max_tokens: int) -> int | None:
    """What the OpenAI server and input processor make of a request (None: rejected)."""
    from vllm.entrypoints.serve.utils.api_utils import get_max_tokens
    from vllm.exceptions import VLLMValidationError
    from vllm.v1.engine.input_processor import InputProcessor

    model_config = SimpleNamespace(max_model_len=max_model_len, runner_type="generate")
    checker = SimpleNamespace(skip_prompt_length_check=False, model_config=model_config,
                              supports_mm_inputs=False, mm_encoder_cache_size=0)
    try:
        served = get_max_tokens(max_model_len, max_tokens, prompt, {})
        InputProcessor._validate_prompt_len(checker, prompt, "decoder")
    except (ValueError, VLLMValidationError):  # the server answers 400
        return None
    return served


# ---- the driver -----------------------------------------------------------------------
class Driver:
    def __init__(self, case: dict, model_dir: str):
        from vllm.sampling_params import SamplingParams
        from vllm.v1.request import Request

        self.case = case
        self.cfg = vllm_config(case, model_dir)
        self.sched = build_scheduler(case, self.cfg)
        self.hasher = block_hasher(self.cfg)
        self.Request, self.SamplingParams = Request, SamplingParams
        r = case["requests"]
        self.arrival = r["arrival_ns"]
        self.n = len(self.arrival)
        self.cost = case["step_time_ns"]
        self.usable = case["engine"]["num_gpu_blocks"] - 1
        spec = case["engine"].get("speculative_config")
        self.k = spec["num_speculative_tokens"] if spec else 0
        self.acceptance = case.get("acceptance")  # {seed, rates}: per-position conditional
        self.verifies: dict[str, int] = {}  # request id -> verify steps so far
        self.rejected: list[int] = []
        self.max_tokens: list[int] = []
        self.steps: list[dict] = []

    def rid(self, i: int) -> str:
        return f"{i:07d}"

    def add(self, i: int) -> None:
        r = self.case["requests"]
        prompt, max_len = r["prompt_tokens"][i], self.case["engine"]["max_model_len"]
        served = served_max_tokens(max_len, prompt, r["max_tokens"][i])
        self.max_tokens.append(-1 if served is None else served)
        if served is None:
            self.rejected.append(i)
            return
        chain = r["prefix_hashes"][i] if r["prefix_hashes"] else None
        tokens = prompt_tokens(i, prompt, chain, r["hash_block_size"])
        params = self.SamplingParams(max_tokens=served, ignore_eos=True)
        req = self.Request(self.rid(i), tokens, params, None,
                           arrival_time=self.arrival[i] / 1e9, priority=r["priority"][i],
                           block_hasher=self.hasher)
        self.sched.add_request(req)

    def step_ns(self, out) -> int:
        c, prefill, decode, ctx = self.cost, 0, 0, 0
        for rid, n in out.num_scheduled_tokens.items():
            if n == 1:  # decode-shaped: one query token against its context
                decode += 1
                ctx += self.sched.requests[rid].num_computed_tokens - 1
            else:
                prefill += n
        return (c["base"] + c["prefill_token"] * prefill + c["decode_seq"] * decode
                + c["context_token"] * ctx)

    @staticmethod
    def admitted(out) -> set:
        """Request ids this schedule admitted from the waiting queue (new or resumed)."""
        return ({r.req_id for r in out.scheduled_new_reqs}
                | set(out.scheduled_cached_reqs.resumed_req_ids))

    def samples(self, out) -> dict:
        """Request id -> whether the step samples a token for it, as the schedule left it
        (mid-prefill chunks sample nothing: the engine discards their token)."""
        return {rid: not self.sched.requests[rid].is_prefill_chunk
                for rid in out.num_scheduled_tokens}

    def model_output(self, out, samples: dict | None = None, admitted: set | None = None):
        from vllm.v1.outputs import ModelRunnerOutput

        samples = samples if samples is not None else self.samples(out)
        ids = list(out.num_scheduled_tokens)
        sampled = []
        for rid in ids:
            req = self.sched.requests.get(rid)
            pos = req.num_tokens if req is not None else 0
            n = 1 + self.accept(rid, out.scheduled_spec_decode_tokens.get(rid), admitted)
            sampled.append([sampled_token(int(rid), pos + j) for j in range(n)]
                           if samples[rid] else [])
        return ModelRunnerOutput(req_ids=ids, req_id_to_index={r: k for k, r in enumerate(ids)},
                                 sampled_token_ids=sampled)

    def accept(self, rid: str, drafts, admitted: set | None = None) -> int:
        """How many of a request's scheduled drafts the target model accepts: the case's
        seeded process over real drafts; placeholders (-1, a padded resumed decode) never.
        Async scheduling (``admitted`` given): every scheduled draft is a placeholder the
        worker fills from its drafter, except for a request admitted by this very schedule
        (new or resumed: the worker has no drafts for it, they are the padding)."""
        if not drafts:
            return 0
        if admitted is not None:
            if rid in admitted:
                return 0
        elif all(t < 0 for t in drafts):
            return 0
        j = self.verifies.get(rid, 0)
        self.verifies[rid] = j + 1
        acc = self.acceptance
        return accepted(acc["seed"], acc["rates"], int(rid), j, len(drafts))

    def propose(self, out) -> None:
        """The drafter after a step (EngineCore.post_step, sync): K drafts for every
        request of the step; vLLM ignores those of mid-prefill chunks and finished ones."""
        if not self.k:
            return
        from vllm.v1.outputs import DraftTokenIds

        ids = list(out.num_scheduled_tokens)
        drafts = [[_token(4, int(rid), j) for j in range(self.k)] for rid in ids]
        self.sched.update_draft_token_ids(DraftTokenIds(ids, drafts))

    def run(self) -> None:
        if self.case["engine"].get("async_scheduling"):
            return self.run_async()
        return self.run_sync()

    def run_async(self) -> None:
        """EngineCore.step_with_batch_queue (vllm/v1/engine/core.py) with a batch queue of
        two under the simulated clock: schedule while the queue has room (the new batch
        runs on the GPU after the one before it), else block until the oldest batch ends
        and update the scheduler from its output; arrivals are added before each call, as
        the busy loop drains its input queue between steps. A batch that scheduled nothing
        takes the queue slot and no GPU time."""
        from collections import deque

        from vllm.v1.outputs import EMPTY_MODEL_RUNNER_OUTPUT

        now, nxt, carried, gpu_free = 0, 0, [], 0
        queue: deque = deque()  # (scheduler output, samples, step record or None, end)
        while True:
            while nxt < self.n and self.arrival[nxt] <= now:
                self.add(nxt)
                nxt += 1
            if self.sched.has_requests() and len(queue) < 2:
                out = self.sched.schedule()
                preempted = sorted(int(r) for r in out.preempted_req_ids)
                executed = out.total_num_scheduled_tokens > 0
                rec = None
                start = max(now, gpu_free)
                if executed:
                    dur = self.step_ns(out)
                    used = (self.usable
                            - self.sched.kv_cache_manager.block_pool.get_num_free_blocks())
                    n_run, n_wait = self.sched.get_request_counts()
                    rec = {"t_ns": start, "dur_ns": dur,
                           "tokens": {int(r): n for r, n in out.num_scheduled_tokens.items()},
                           "preempted": sorted(carried + preempted), "finished": [],
                           "kv_blocks_used": used, "running": n_run, "waiting": n_wait}
                    self.steps.append(rec)
                    carried = []
                    gpu_free = start + dur
                else:
                    carried += preempted
                queue.appendleft((out, (self.samples(out), self.admitted(out))
                                  if executed else None, rec, gpu_free if executed else start))
                if len(queue) < 2 and (executed or self.sched.has_requests()):
                    continue  # fill the queue before blocking
            elif not queue:
                if nxt >= self.n:
                    return
                now = self.arrival[nxt]  # idle until the next arrival
                continue
            out, samples, rec, end = queue.pop()
            if rec is None and not queue and nxt < self.n and not out.preempted_req_ids \
                    and not self.sched.get_request_counts()[0]:
                # nothing runs and nothing could be scheduled: wait for the next arrival
                now = max(now, self.arrival[nxt])
            now = max(now, end)
            model_out = self.model_output(out, *samples) if rec is not None \
                else EMPTY_MODEL_RUNNER_OUTPUT
            engine_out = self.sched.update_from_output(out, model_out)
            if rec is not None:
                rec["finished"] = sorted(int(o.request_id) for eo in engine_out.values()
                                         for o in eo.outputs if o.finished)
                if self.k:
                    rec["drafts"] = {int(r): len(d) for r, d in
                                     out.scheduled_spec_decode_tokens.items()}

    def run_sync(self) -> None:
        from vllm.v1.outputs import EMPTY_MODEL_RUNNER_OUTPUT

        now, nxt, carried = 0, 0, []
        while True:
            while nxt < self.n and self.arrival[nxt] <= now:
                self.add(nxt)
                nxt += 1
            if not self.sched.has_unfinished_requests():
                if nxt >= self.n:
                    return
                now = self.arrival[nxt]
                continue
            out = self.sched.schedule()
            preempted = sorted(int(r) for r in out.preempted_req_ids)
            if out.total_num_scheduled_tokens == 0:
                self.sched.update_from_output(out, EMPTY_MODEL_RUNNER_OUTPUT)
                if not preempted:
                    raise SystemExit(f"{self.case['name']}: nothing schedulable at {now} ns")
                carried += preempted
                continue
            dur = self.step_ns(out)
            used = self.usable - self.sched.kv_cache_manager.block_pool.get_num_free_blocks()
            n_run, n_wait = self.sched.get_request_counts()
            tokens = {int(r): n for r, n in out.num_scheduled_tokens.items()}
            engine_out = self.sched.update_from_output(out, self.model_output(out))
            self.propose(out)
            finished = sorted(int(o.request_id) for eo in engine_out.values()
                              for o in eo.outputs if o.finished)
            self.steps.append({"t_ns": now, "dur_ns": dur, "tokens": tokens,
                               "preempted": sorted(carried + preempted), "finished": finished,
                               "kv_blocks_used": used, "running": n_run, "waiting": n_wait,
                               **({"drafts": {int(r): len(d) for r, d in
                                              out.scheduled_spec_decode_tokens.items()}}
                                  if self.k else {})})
            carried = []
            now += dur

    def header(self, vllm_version: str) -> dict:
        return {"case": self.case["name"], "vllm_version": vllm_version, "input": self.case,
                "rejected": self.rejected, "max_tokens_served": self.max_tokens,
                "num_steps": len(self.steps)}


def record(case_path: Path, out_dir: Path, model_dir: str) -> None:
    import vllm

    case = json.loads(case_path.read_text())
    t0 = time.perf_counter()
    driver = Driver(case, model_dir)
    driver.run()
    out = out_dir / f"{case['name']}.jsonl.gz"
    tmp = out.with_suffix(".tmp")
    # mtime=0: the same recording gives byte-identical files
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        lines = [driver.header(vllm.__version__)] + driver.steps
        f.write("".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines).encode())
    os.replace(tmp, out)
    pre = sum(len(s["preempted"]) for s in driver.steps)
    print(f"{case['name']}: {len(driver.steps)} steps, {pre} preemptions, "
          f"{len(driver.rejected)} rejected, {time.perf_counter() - t0:.1f} s", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+", type=Path, help="case JSON files (export writes them)")
    ap.add_argument("--out", type=Path, required=True, help="folder for NAME.jsonl.gz")
    args = ap.parse_args(argv)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as model_dir:
        Path(model_dir, "config.json").write_text(json.dumps(TINY_LLAMA))
        for path in args.cases:
            record(path, args.out, model_dir)


if __name__ == "__main__":
    sys.exit(main())
