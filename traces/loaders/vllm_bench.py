"""A workload as a `vllm bench serve` dataset (its `timed_trace` JSONL), written and read back.

vLLM's `--dataset-name timed_trace` (vllm/benchmarks/datasets/datasets.py, `TimedTrace`)
reads one JSON object per line and sends every prompt as token ids, so the server sees
EXACTLY `input_length` prompt tokens and, with EOS ignored (timed_trace sets it), generates
exactly `output_length` tokens. The `custom` dataset (prompt text) would give lengths that
depend on the tokenizer and chat template, the `random` one a single mean length: neither
keeps the mix. Each line:

    {"arrival_s": 0.25, "input_length": 812, "output_length": 96,
     "hash_ids": [0, 1], "hash_block_size": 512}

* `arrival_s`: seconds from the first request. vLLM replays these times ("self-timed",
  `--timed-trace-label-timestamp arrival_s`) or, with `--no-self-timed`, ignores them and
  draws its own gamma arrivals at `--request-rate` with `--burstiness`.
* `hash_ids`: vLLM builds the prompt as one chunk of `--timed-trace-chunk-hash-size` tokens
  per id (the last chunk partial), equal ids giving equal tokens: the workload's prefix
  chains when it has them (so shared prefixes stay shared), otherwise fresh ids that no
  other request uses. `hash_block_size` is the chunk size (vLLM ignores the field; servesim
  reads the chains back with it).

`read` turns such a file back into a Trace (arrival times, lengths and chains as written;
request_id = the 0-based line index as text).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import tempfile
from pathlib import Path

import numpy as np

from traces.errors import TraceError
from traces.hashes import blocks_for
from traces.loaders.common import row_ids
from traces.loaders.mooncake import _records
from traces.rng import Streams
from traces.schema import Trace, make_trace
from traces.validate import FileContext

NAME = "vllm-bench"
TIMED = True
OPTIONS: tuple[str, ...] = ()
DEFAULT_CHUNK = 512  # tokens per hash id for workloads without prefix chains
VLLM_CHUNK = 16  # vllm bench serve's --timed-trace-chunk-hash-size default (datasets.py)
FIELDS = {
    "arrival_s": "arrival_s",
    "prompt_tokens": "input_length",
    "output_tokens": "output_length",
    "prefix_hashes": "hash_ids",
}


def sniff(suffix: str, line: str) -> bool:
    # "arrival_s" tells it from Mooncake's (and vLLM's default) "timestamp" in milliseconds
    return (suffix in (".jsonl", ".json", ".txt", "") and line.startswith("{")
            and '"arrival_s"' in line and '"input_length"' in line)


def _block_size(records: list[dict], lines: list[int], path: Path) -> int | None:
    sizes = {r.get("hash_block_size") for r in records}
    if sizes == {None}:
        return None
    for r, line in zip(records, lines):
        b = r.get("hash_block_size")
        if b != records[0].get("hash_block_size") or isinstance(b, bool) or \
                not isinstance(b, int) or b < 1:
            raise TraceError(f"{path}: line {line}: field 'hash_block_size' is {b!r}; must be "
                             "the same integer >= 1 (tokens per hash id) on every line")
    return records[0]["hash_block_size"]


def read(path: Path, *, streams: Streams) -> Trace:
    records, lines = _records(path)
    block = _block_size(records, lines, path)
    cols = {ours: [r.get(theirs) for r in records] for ours, theirs in FIELDS.items()}
    if block is None:  # chains need their chunk size: vLLM takes it from a flag, not the file
        chained = next((line for r, line in zip(records, lines) if r.get("hash_ids")), None)
        if chained is not None:
            raise TraceError(
                f"{path}: line {chained}: field 'hash_ids' is set but no line gives "
                "'hash_block_size': add it to every line (the --timed-trace-chunk-hash-size "
                f"the file is replayed with; vLLM's default is {VLLM_CHUNK}), or drop hash_ids")
        cols["prefix_hashes"] = [None] * len(records)
    df = {"request_id": row_ids(len(records)), **cols}
    context = FileContext(rows=np.asarray(lines), names=FIELDS)
    return make_trace(df, source=str(path), hash_block_size=block, context=context)


def dataset_lines(trace: Trace) -> tuple[list[str], int]:
    """The JSONL lines for `trace` (in arrival order) and the chunk size they use."""
    block = trace.hash_block_size or DEFAULT_CHUNK
    chains = trace.df["prefix_hashes"].tolist()
    used = [max(c) for c in chains if c is not None and len(c)]
    fresh = (max(used) + 1) if used else 0  # ids no chain of the trace uses
    out = []
    rows = zip(trace.arrival_s.tolist(), trace.prompt_tokens.tolist(),
               trace.output_tokens.tolist(), chains, blocks_for(trace.prompt_tokens, block))
    for t, prompt, output, chain, n in rows:
        if chain is None:
            chain, fresh = list(range(fresh, fresh + int(n))), fresh + int(n)
        out.append(json.dumps({"arrival_s": t, "input_length": prompt, "output_length": output,
                               "hash_ids": [int(h) for h in chain], "hash_block_size": block}))
    return out, block


def write_dataset(trace: Trace, path: str | Path) -> int:
    """Write `trace` as a timed_trace dataset at `path` (all or nothing); the chunk size."""
    path = Path(path)
    lines, block = dataset_lines(trace)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return block


def bench_rate(trace: Trace) -> tuple[float, float]:
    """(requests/s, burstiness) for `vllm bench serve --no-self-timed`: the trace's mean rate
    (rows - 1) / span and vLLM's gamma shape 1 / CV^2 of its gaps (inf when evenly spaced)."""
    t = trace.arrival_s
    if len(t) < 2 or t[-1] <= t[0]:
        return math.inf, 1.0
    gaps = np.diff(t)
    cv = float(gaps.std() / gaps.mean())
    return (len(t) - 1) / float(t[-1] - t[0]), (math.inf if cv == 0 else 1.0 / cv**2)


def bench_command(path: str | Path, trace: Trace, block: int, *, rate: float, burstiness: float,
                  concurrency: int | None = None, model: str = "MODEL") -> tuple[str, str]:
    """Two `vllm bench serve` command lines for the dataset at `path`: one replaying its own
    arrival times, one with vLLM's gamma arrivals at `rate` req/s and `burstiness` (= 1/CV^2;
    1 is Poisson). `concurrency` adds `--max-concurrency` (vLLM's client-side cap)."""
    # quoted for a POSIX shell: a path with spaces, or a model name with `;`, pastes as given
    base = (f"vllm bench serve --backend vllm --model {shlex.quote(str(model))} "
            f"--dataset-name timed_trace --dataset-path {shlex.quote(str(path))} "
            f"--num-prompts {len(trace)} "
            f"--timed-trace-label-timestamp arrival_s --timed-trace-chunk-hash-size {block} "
            "--percentile-metrics ttft,tpot,itl,e2el --save-result --save-detailed")
    if concurrency is not None:
        base += f" --max-concurrency {concurrency}"
    generated = f"{base} --no-self-timed --request-rate {_num(rate)}"
    if math.isfinite(rate):
        generated += f" --burstiness {_num(burstiness)}"
    return base, generated


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.6g}"
