"""Record a real vLLM engine run over a servesim trace (run with vLLM's own venv).

    python benchmarks/engine/record.py --case light-short            # a case of cases.json
    python benchmarks/engine/record.py --case all                    # every case, in rounds
    python benchmarks/engine/record.py --trace t.jsonl --out runs/x  # any trace

The engine is vLLM's in-process ``AsyncLLM`` over a config-only Llama with dummy weights
(``../shared/docs/vllm-cpu.md``). A client coroutine per request sends it at its trace time
and stamps every token as it arrives; hooks in the engine-core process (engine_hooks.py)
log every step. The run directory (``servesim compare`` and ``calibrate fit-steps`` read it;
format in README.md) holds, all times in seconds from the trace's time 0:

    run.json                  engine knobs, KV blocks the engine made, versions, priority,
                              machine load, stability (run_files.stability), counts
    trace.jsonl.gz            request_id, arrival_s (actual send), prompt_len, max_tokens
    requests.jsonl.gz         per request: send, seen by the engine core, queued, scheduled,
                              first/last token (engine clock), every token's client time (us)
    engine_steps.jsonl.gz     per step: start, end, model-execution end, tokens and context
                              per request, vLLM's iteration counts, preempted, finished
    scenario.yaml             the servesim scenario that replays the run

Never imported by servesim: it needs vLLM, which lives in its own venv.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))  # calibrate.fingerprint
import engine_hooks  # noqa: E402
import quiet  # noqa: E402
import run_files  # noqa: E402

from calibrate import fingerprint  # noqa: E402

engine_hooks.install_if_asked()  # in the spawned engine core: log its steps

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TINY_LLAMA = {  # vllm-cpu.md: 4 layers, hidden 512, 8 heads, 8 KV heads, vocab 32000
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
    "intermediate_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 32000, "hidden_act": "silu",
    "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "torch_dtype": "bfloat16", "tie_word_embeddings": False, "bos_token_id": 1,
    "eos_token_id": 2,
}
KV_TOKEN_ELEMS = 2 * 4 * 8 * 64  # K and V x layers x KV heads x head_dim, per token
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def default_dtype() -> str:
    """bfloat16 where the CPU computes it natively (AVX512-BF16 or AMX), else float32:
    without them torch emulates bf16 GEMMs about 100x slower than fp32 (measured on an
    AVX2-only EPYC: 512x512x2048 bf16 1.9 s, fp32 13 ms), which is not a serving engine."""
    text = fingerprint.read_cpuinfo()
    if not text:
        return "bfloat16"
    flags = fingerprint.parse_cpuinfo(text)[1]
    return "bfloat16" if ("avx512_bf16" in flags or "amx_bf16" in flags) else "float32"


def engine_args(model_dir: str, knobs: dict):
    from vllm.engine.arg_utils import AsyncEngineArgs

    kv_bytes = knobs["num_blocks"] * knobs["block_size"] * KV_TOKEN_ELEMS
    return AsyncEngineArgs(
        model=model_dir, load_format="dummy", skip_tokenizer_init=True, dtype=knobs["dtype"],
        block_size=knobs["block_size"], enforce_eager=True, seed=0,
        kv_cache_memory_bytes=kv_bytes * DTYPE_BYTES[knobs["dtype"]],
        max_num_seqs=knobs["max_num_seqs"],
        max_num_batched_tokens=knobs["max_num_batched_tokens"],
        max_model_len=knobs["max_model_len"], enable_chunked_prefill=True,
        enable_prefix_caching=False, disable_log_stats=False,
        enable_logging_iteration_details=True)


def sampling(max_tokens: int):
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(max_tokens=max_tokens, ignore_eos=True, detokenize=False,
                          temperature=0.0, output_kind=RequestOutputKind.DELTA)


async def one_request(llm, idx: int, req: dict, t0: float, rec: dict) -> None:
    """Send one request at its trace time; stamp every token as the client gets it."""
    from vllm.inputs import TokensPrompt

    delay = t0 + req["arrival_s"] - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    prompt = TokensPrompt(prompt_token_ids=[(idx * 7919 + k) % 31000 + 100
                                            for k in range(req["prompt_len"])])
    tokens: list[float] = []
    rec["send"] = time.monotonic()
    metrics = None
    async for out in llm.generate(prompt, sampling(req["max_tokens"]), str(idx)):
        now = time.monotonic()
        tokens.extend([now] * len(out.outputs[0].token_ids))
        metrics = out.metrics if out.finished else metrics
    rec["tokens"] = tokens
    if metrics is not None:
        rec.update(queued=metrics.queued_ts, scheduled=metrics.scheduled_ts,
                   first_token=metrics.first_token_ts, last_token=metrics.last_token_ts)


async def warm_up(llm) -> None:
    """Requests so one-time costs (allocation, first kernels, thread start-up) are not
    recorded: three alone (prefills of 32-300 tokens), then a batch of eight together."""
    for i, n in enumerate((32, 300, 64)):
        req = {"arrival_s": 0.0, "prompt_len": n, "max_tokens": 8}
        await one_request(llm, run_files.WARMUP_FROM + i, req, time.monotonic(), {})
    t0 = time.monotonic()
    await asyncio.gather(*(one_request(llm, run_files.WARMUP_FROM + 10 + i,
                                       {"arrival_s": 0.0, "prompt_len": 48, "max_tokens": 16},
                                       t0, {}) for i in range(8)))


async def record(trace: list[dict], knobs: dict, model_dir: str) -> tuple[list[dict], float]:
    from vllm.v1.engine.async_llm import AsyncLLM

    llm = AsyncLLM.from_engine_args(engine_args(model_dir, knobs))
    try:
        await warm_up(llm)
        await asyncio.sleep(1.0)
        recs = [{} for _ in trace]
        t0 = time.monotonic() + 0.5
        await asyncio.gather(*(one_request(llm, i, r, t0, recs[i])
                               for i, r in enumerate(trace)))
        await asyncio.sleep(1.0)  # the engine core writes its log when idle
    finally:
        llm.shutdown()
    return recs, t0


def raise_priority(nice: int) -> str:
    """Give the recording CPU priority over the machine's background work.

    Linux groups processes by session (``sched_autogroup``) and shares a core fairly between
    groups: another session's ``nice 19`` job takes as much of the model's core as a
    ``nice 0`` one, whatever this process's own nice value. So the recorder starts its own
    session (a new group; the engine core and worker inherit it) and sets the group's nice
    value too. Measured on the 2-core machine with ~10 busy background groups (light-short,
    fp32): group nice -5 left batch-1 decode at 18.7-19.1 ms and repeats 5-13 % apart;
    -20 gave 14.3-15.3 ms and repeats 2-8 % apart (memory-bandwidth neighbours remain).
    What was applied goes into run.json."""
    done = []
    try:
        os.setsid()  # fails for a process group leader: then leave the caller's group alone
        done.append("own session")
        Path("/proc/self/autogroup").write_text(str(nice))
        done.append(f"autogroup nice {nice}")
    except OSError:
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
        done.append(f"nice {nice}")
    except OSError:
        pass
    return ", ".join(done) or "normal priority"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", help="A case of cases.json (trace + engine knobs); several "
                    "comma-separated, or 'all': their repeats are recorded in rounds (every "
                    "case's first, then every case's second, ...), so the machine's drift over "
                    "the session shows in each case's spread instead of between cases.")
    ap.add_argument("--trace", type=Path, help="A trace: JSONL (arrival_s, prompt_len, "
                    "max_tokens; .gz ok) or CSV (arrival_s, prompt_tokens, output_tokens).")
    ap.add_argument("--out", type=Path, help="Run directory (default: runs/<case>); with "
                    "several cases, the folder of their run directories (default: runs).")
    ap.add_argument("--dtype", choices=sorted(DTYPE_BYTES), default=None,
                    help="Model and KV dtype (default: bfloat16 where the CPU has native "
                    "bf16, else float32).")
    ap.add_argument("--nice", type=int, default=-20, help="Priority of the recording's "
                    "processes and of their scheduling group (0: normal; see raise_priority).")
    ap.add_argument("--repeats", type=int, default=3, help="Record the case this many times, "
                    "each into its own run directory (OUT-r1, OUT-r2, ...; OUT itself when 1): "
                    "their spread is the engine's noise floor (servesim compare, "
                    "calibrate validate-steps).")
    ap.add_argument("--force", action="store_true", help="Record even when the machine is "
                    f"busy ({quiet.RULE.replace('%', '%%')}); run.json says it was forced.")
    ap.add_argument("--no-pin", action="store_true", help="Leave threads where the OS puts "
                    "them (to measure what pinning does to the repeat spread).")
    ap.add_argument("--wait-s", type=float, default=0.0, help="Wait up to this long for a "
                    "busy machine to go quiet before refusing (s).")
    ap.add_argument("--retries", type=int, default=2, help="Record again (up to this many "
                    "times) when a neighbour disturbed the run (run_files.stability).")
    for k, v in run_files.DEFAULT_KNOBS.items():
        ap.add_argument(f"--{k.replace('_', '-')}", type=int, default=None, help=f"default {v}")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    if (a.case is None) == (a.trace is None):
        ap.error("give exactly one of --case and --trace")
    if a.repeats < 1:
        ap.error("--repeats must be at least 1")
    dtype = a.dtype or default_dtype()
    if a.trace is not None:
        jobs = [job(a, {"name": "trace"}, run_files.read_trace(a.trace), dtype, a.out)]
    else:
        names = case_names(a.case, HERE / "cases.json")
        if not names:
            ap.error("--case: name a case of cases.json, several comma-separated, or 'all'")
        many = len(names) > 1
        jobs = [job(a, c, run_files.case_trace(c), dtype,
                    (a.out or HERE / "runs") / c["name"] if many else a.out)
                for c in (run_files.load_case(HERE / "cases.json", n) for n in names)]
    record_cases(a, jobs)
    return 0


def case_names(arg: str, path: Path) -> list[str]:
    """--case's names: one, several comma-separated, or 'all' (every case of cases.json)."""
    if arg == "all":
        return [c["name"] for c in json.loads(path.read_text())["cases"]]
    return [n.strip() for n in arg.split(",") if n.strip()]


def job(a: argparse.Namespace, case: dict, trace: list[dict], dtype: str,
        out: Path | None) -> tuple[dict, list[dict], dict, Path]:
    """One case to record: the case, its trace, its engine knobs (cases.json's, then the
    command line's) and its run directory."""
    knobs = {**run_files.DEFAULT_KNOBS, **case.get("engine", {}),
             **{k: getattr(a, k) for k in run_files.DEFAULT_KNOBS if getattr(a, k) is not None},
             "dtype": dtype}
    return case, trace, knobs, out or HERE / "runs" / case["name"]


def record_cases(a: argparse.Namespace, jobs: list[tuple[dict, list[dict], dict, Path]]) -> None:
    """Refuse a busy machine, pin, fingerprint, then record ``a.repeats`` runs of every job,
    in rounds (round i records every job's i-th repeat)."""
    state = quiet.check_quiet(a.force, a.wait_s)  # before anything heavy starts
    os.environ["VLLM_LOGGING_LEVEL"] = "WARNING"  # per-step INFO logs slow the frontend
    dtype = jobs[0][2]["dtype"]  # one model for every job
    with tempfile.TemporaryDirectory(prefix="servesim-record-") as tmp:
        model = {**TINY_LLAMA, "torch_dtype": dtype}
        (Path(tmp) / "config.json").write_text(json.dumps(model))
        base = Path(tmp) / "engine"
        os.environ[engine_hooks.ENV] = str(base)
        engine_hooks.install_if_asked()  # before the engine core is forked
        priority = raise_priority(a.nice)
        pins = quiet.apply_pins(pin_plan(a.no_pin))
        hw = fingerprint.capture(dtype, thread_info=thread_words(pins))
        fit = own_fit(hw)
        first = True
        for i in range(1, a.repeats + 1):
            for case, trace, knobs, out in jobs:
                if not first:  # the load average still holds the last recording: CPUs only
                    state = quiet.check_quiet(a.force, a.wait_s, lambda: quiet.busy_reason(
                        loadavg=lambda: (0.0, 0.0, 0.0)))
                first = False
                dest = repeat_dirs(out, a.repeats)[i - 1]
                meta = {"case": case, "engine": knobs, "model": model, "priority": priority,
                        "versions": run_files.versions(), "hardware": hw, "pinning": pins,
                        "quiet": state, "forced": state["forced"], "fit": fit,
                        "repeat": i, "repeats": a.repeats}
                steady = record_with_retries(trace, knobs, tmp, base, dest, meta, a.retries)
                print(f"recorded {len(trace)} requests -> {dest} (stability {steady})",
                      flush=True)
    if fit["profile"] is None:
        print(f"record: {fit['note']}")


def pin_plan(no_pin: bool) -> dict:
    """The pinning to apply (quiet.pin_plan over this process's CPUs), or none by choice."""
    if no_pin:
        return {"pinned": False, "why": "--no-pin"}
    return quiet.pin_plan(os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity")
                          else set())


def repeat_dirs(out: Path, repeats: int) -> list[Path]:
    """OUT for one recording; OUT-r1 ... OUT-rN for repeats."""
    return [out] if repeats == 1 else [out.with_name(f"{out.name}-r{i}")
                                       for i in range(1, repeats + 1)]


def thread_words(pins: dict) -> dict[str, str]:
    """The thread binding for the fingerprint (strings)."""
    if not pins["pinned"]:
        return {"pinned": f"no ({pins['why']})", **pins["env"]}
    return {"engine_compute_cpus": pins["engine_cpus"], "client_cpus": pins["client_cpus"],
            **pins["env"]}


def own_fit(hw: dict) -> dict:
    """The fit of this machine among benchmarks/engine/*.yaml (the scenario.yaml points at
    it), or the shipped one with a note that none exists and the command that makes one."""
    found = fingerprint.find_fit(hw, HERE)
    if found is not None:
        return {"profile": str(found.relative_to(ROOT)), "note": "fitted on this machine"}
    name = f"benchmarks/engine/cpu-tiny-llama-{fingerprint.slug(hw)}.yaml"
    return {"profile": None, "note": f"no fit of this machine ({fingerprint.describe(hw)}) "
            f"exists yet; its scenario.yaml prices steps with {run_files.SHIPPED_FIT} (another "
            f"machine's); make one: servesim calibrate fit-steps <these runs> -o {name}"}


def record_with_retries(trace, knobs, tmp, base, dest, meta, retries: int) -> dict:
    """Record into ``dest`` until the run is steady (run_files.stability) or ``retries``
    more attempts are spent; its stability."""
    for attempt in range(1, retries + 2):
        steady = record_once(trace, knobs, tmp, base, dest, {**meta, "attempt": attempt})
        if steady["stable"] or attempt > retries:
            return steady
        print(f"record: a neighbour slowed the engine (window max "
              f"{steady['window_max']:.3f}); recording again", file=sys.stderr)
    return steady


def record_once(trace: list[dict], knobs: dict, model_dir: str, base: Path, out: Path,
                meta: dict) -> dict:
    """One recording into ``out``; its stability (run_files.stability)."""
    load_before, t_start = os.getloadavg(), time.time()
    recs, t0 = asyncio.run(record(trace, knobs, model_dir))
    log = run_files.read_engine_log(base)
    run_files.clear_engine_log(base)
    meta = {**meta, "started_unix": t_start, "wall_s": time.time() - t_start,
            "loadavg_before": load_before, "loadavg_after": os.getloadavg()}
    return run_files.write_run(out, trace, recs, t0, log, meta)


if __name__ == "__main__":
    sys.exit(main())
