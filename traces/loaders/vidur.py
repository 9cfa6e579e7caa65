"""Vidur's request trace (microsoft/vidur `TraceReplayRequestGenerator`): CSV with
`arrived_at, num_prefill_tokens, num_decode_tokens`.

`arrived_at` is the arrival time in SECONDS, as Vidur reads it (its replay multiplies it by
`time_scale_factor` and uses it as the request's `arrived_at`); Vidur's
`data/processed_traces/splitwise_{code,conv}.csv` count it from the first request. The times
are kept as written (not re-zeroed), like servesim's native format. Other columns (Vidur
writes `num_total_tokens`, `pd_ratio`, ...) are ignored. Rows out of arrival order are
sorted with a TraceWarning (Vidur replays them in file order). request_id = the 0-based data
row index as text.

A length-only file (no `arrived_at` column) is the "lengths" format instead.
"""

from __future__ import annotations

from pathlib import Path

from traces.loaders.common import header_fields, read_csv_cells, require_columns, row_ids
from traces.rng import Streams
from traces.schema import Trace, make_trace
from traces.validate import FileContext

NAME = "vidur"
COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
TIMED = True
OPTIONS: tuple[str, ...] = ()


def sniff(suffix: str, line: str) -> bool:
    # the arrival column decides: without it the file is the length-only format
    return suffix in (".csv", ".txt", "") and "arrived_at" in header_fields(line)


def read(path: Path, *, streams: Streams) -> Trace:
    cells = read_csv_cells(path)
    require_columns(cells, path, COLUMNS)
    df = {
        "request_id": row_ids(len(cells)),
        "arrival_s": cells["arrived_at"].to_numpy(),
        "prompt_tokens": cells["num_prefill_tokens"].to_numpy(),
        "output_tokens": cells["num_decode_tokens"].to_numpy(),
    }
    names = {"arrival_s": COLUMNS[0], "prompt_tokens": COLUMNS[1], "output_tokens": COLUMNS[2]}
    return make_trace(df, source=str(path), context=FileContext(names=names))
