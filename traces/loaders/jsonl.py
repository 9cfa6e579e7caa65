"""JSONL request traces: one object per line with `arrival_s`, `prompt_len`, `max_tokens`.

The shape benchmark clients and recorders write (servesim's vLLM recorder among them):

    {"arrival_s": 0.0, "prompt_len": 512, "max_tokens": 128}
    {"request_id": "r1", "arrival_s": 0.25, "prompt_len": 96, "max_tokens": 32, "lane": "batch"}

`arrival_s` is seconds from the trace's zero (kept as written); `prompt_len` and `max_tokens`
are tokens (generation runs to `max_tokens`, as `ignore_eos` does). Optional: `request_id`
(default: the 0-based record index as text), `lane`, `priority`; other keys are ignored. The file
may be gzip-compressed (detected from its first bytes, whatever its name). Blank lines are
skipped; row numbers in messages are line numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from traces.errors import TraceError
from traces.loaders.common import one_line, read_jsonl_text, row_ids
from traces.rng import Streams
from traces.schema import Trace, make_trace
from traces.validate import FileContext

NAME = "jsonl"
TIMED = True
OPTIONS: tuple[str, ...] = ()
FIELDS = {"arrival_s": "arrival_s", "prompt_tokens": "prompt_len",
          "output_tokens": "max_tokens"}
OPTIONAL = ("request_id", "lane", "priority")


def sniff(suffix: str, line: str) -> bool:
    return (suffix in (".jsonl", ".json", ".gz", ".txt", "") and line.startswith("{")
            and '"prompt_len"' in line)


def _records(path: Path) -> tuple[list[dict], list[int]]:
    records, lines = [], []
    for number, line in enumerate(read_jsonl_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise TraceError(f"{path}: line {number}: malformed JSON ({one_line(e)}); expected "
                             "one JSON object per line") from None
        if not isinstance(record, dict):
            raise TraceError(f"{path}: line {number}: expected a JSON object, got "
                             f"{type(record).__name__}")
        for theirs in FIELDS.values():
            if theirs not in record:
                raise TraceError(f"{path}: line {number}: missing field {theirs!r}; each line "
                                 "needs arrival_s, prompt_len, max_tokens")
        records.append(record)
        lines.append(number)
    if not records:
        raise TraceError(f"{path}: the file is empty; expected one JSON object per line")
    return records, lines


def read(path: Path, *, streams: Streams) -> Trace:
    records, lines = _records(path)
    df = {ours: [r[theirs] for r in records] for ours, theirs in FIELDS.items()}
    index = row_ids(len(records))  # a record without an id is named by its index
    df["request_id"] = [index[n] if r.get("request_id") is None else str(r["request_id"])
                        for n, r in enumerate(records)]
    for key in ("lane", "priority"):
        if any(key in r for r in records):
            df[key] = [r.get(key) for r in records]
    context = FileContext(rows=np.asarray(lines), names=FIELDS,
                          rules={"arrival_s": "must be a number of seconds >= 0"})
    return make_trace(df, source=str(path), context=context)
