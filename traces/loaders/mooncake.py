"""Mooncake FAST'25 traces: JSONL, one object per line.

Fields: `timestamp` (int milliseconds, relative to the trace start), `input_length`,
`output_length`, `hash_ids` (one id per 512-token block of the input; optional per line).
arrival_s = timestamp / 1000 (not shifted). request_id = the 0-based record index as text.
Blank lines are skipped; row numbers in messages are line numbers. The file may be
gzip-compressed (detected from its first bytes, whatever its name), as for the jsonl format.

Option `spread_s` (seconds, default 0 = off): the conversation trace's timestamps are quantized
to ~3 s buckets (90 % of gaps are 0). With spread_s > 0, requests sharing a timestamp t get
uniform offsets in [t, t + spread_s), drawn from the seed's "arrivals" stream and sorted so that
file order is kept inside a bucket (see traces.arrivals.spread_buckets). Use spread_s=3.0.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from traces.arrivals import spread_buckets
from traces.errors import TraceError, TraceWarning
from traces.loaders.common import one_line, read_jsonl_text, row_ids
from traces.rng import Streams
from traces.schema import Trace, make_trace
from traces.validate import FileContext, to_float

NAME = "mooncake"
TIMED = True
OPTIONS = ("spread_s",)
HASH_BLOCK_SIZE = 512  # tokens per hash id, per the Mooncake release README
FIELDS = {
    "arrival_s": "timestamp",
    "prompt_tokens": "input_length",
    "output_tokens": "output_length",
    "prefix_hashes": "hash_ids",
}


def sniff(suffix: str, line: str) -> bool:
    return (
        suffix in (".jsonl", ".json", ".gz", ".txt", "")
        and line.startswith("{")
        and ('"input_length"' in line or '"hash_ids"' in line)
    )


def _records(path: Path) -> tuple[list[dict], list[int]]:
    """Parse every non-blank line; a bad line is a TraceError naming its line number."""
    records, lines = [], []
    for number, line in enumerate(read_jsonl_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise TraceError(
                f"{path}: line {number}: malformed JSON ({one_line(e)}); "
                "expected one JSON object per line"
            ) from None
        if not isinstance(record, dict):
            raise TraceError(
                f"{path}: line {number}: expected a JSON object, got {type(record).__name__}"
            )
        records.append(record)
        lines.append(number)
    if not records:
        raise TraceError(f"{path}: the file is empty; expected one JSON object per line")
    return records, lines


def _as_written(values: list) -> np.ndarray:
    """Cells for messages: a JSON NaN literal stays 'NaN' (a missing key stays None)."""
    return np.array(["NaN" if isinstance(v, float) and v != v else v for v in values],
                    dtype=object)


def read(path: Path, *, streams: Streams, spread_s: float = 0.0) -> Trace:
    records, lines = _records(path)
    cols = {ours: [r.get(theirs) for r in records] for ours, theirs in FIELDS.items()}
    stamps = pd.Series(cols["arrival_s"], dtype=object)  # 1-D even if cells are lists
    df = {
        "request_id": row_ids(len(records)),
        "arrival_s": to_float(stamps) / 1000.0,
        "prompt_tokens": cols["prompt_tokens"],
        "output_tokens": cols["output_tokens"],
        "prefix_hashes": cols["prefix_hashes"],
    }
    context = FileContext(
        rows=np.asarray(lines),
        names=FIELDS,
        raw={"arrival_s": stamps.to_numpy(), **{k: _as_written(cols[k]) for k in
                                                ("prompt_tokens", "output_tokens")}},
        rules={"arrival_s": "must be a number of milliseconds >= 0"},
    )
    trace = make_trace(df, source=str(path), hash_block_size=HASH_BLOCK_SIZE, context=context)
    _warn_unhashed(path, cols["prefix_hashes"], lines)
    if spread_s:
        trace = spread_buckets(trace, spread_s, streams.rng("arrivals"))
    return trace


def _warn_unhashed(path: Path, chains: list, lines: list[int]) -> None:
    """One line when rows carry no ``hash_ids`` (optional per line): their prompts share no
    prefix with any request, so prefix caching cannot hit them."""
    missing = [i for i, c in enumerate(chains) if c is None]
    if not missing:
        return
    which = ("no row has hash_ids" if len(missing) == len(chains) else
             f"{len(missing):,} of {len(chains):,} rows (the first at line {lines[missing[0]]}) "
             "have no hash_ids")
    warnings.warn(TraceWarning(f"{path}: {which}: their prompts share no prefix with any "
                               "other request (prefix caching cannot hit them)"),
                  stacklevel=3)
