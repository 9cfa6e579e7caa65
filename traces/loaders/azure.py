"""Azure LLM inference trace 2023 (Splitwise): CSV `TIMESTAMP, ContextTokens, GeneratedTokens`.

TIMESTAMP is an absolute wall-clock time with 7 fractional digits (100 ns), e.g.
`2023-11-16 18:17:03.9799600`; `datetime.strptime` rejects 7 digits, pandas parses them (ISO
8601). arrival_s = seconds since the EARLIEST timestamp (the first row in a sorted file). Files
use CRLF line endings and lack a trailing newline; pandas handles both. request_id = the 0-based
data row index as text.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from traces.loaders.common import header_fields, read_csv_cells, require_columns, row_ids
from traces.rng import Streams
from traces.schema import Trace, make_trace
from traces.validate import FileContext

NAME = "azure"
COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
TIMED = True
OPTIONS: tuple[str, ...] = ()


def sniff(suffix: str, line: str) -> bool:
    # any one of the columns: a file missing the others then gets a "missing column" error
    return suffix in (".csv", ".txt", "") and bool(set(COLUMNS) & header_fields(line))


def _seconds(stamps: pd.Series) -> pd.Series:
    """Seconds since the earliest parseable timestamp; NaN where a cell is not a date-time."""
    try:
        ts = pd.to_datetime(stamps, format="ISO8601", errors="coerce")
    except (ValueError, TypeError, OverflowError):  # e.g. mixed time zones
        ts = pd.Series([pd.to_datetime(s, errors="coerce", utc=True) for s in stamps])
        ts = pd.to_datetime(ts, errors="coerce", utc=True)
    return (ts - ts.min()).dt.total_seconds()


def read(path: Path, *, streams: Streams) -> Trace:
    cells = read_csv_cells(path)
    require_columns(cells, path, COLUMNS)
    df = {
        "request_id": row_ids(len(cells)),
        "arrival_s": _seconds(cells["TIMESTAMP"]).to_numpy(),
        "prompt_tokens": cells["ContextTokens"].to_numpy(),
        "output_tokens": cells["GeneratedTokens"].to_numpy(),
    }
    context = FileContext(
        names={
            "arrival_s": "TIMESTAMP",
            "prompt_tokens": "ContextTokens",
            "output_tokens": "GeneratedTokens",
        },
        raw={"arrival_s": cells["TIMESTAMP"].to_numpy(dtype=object)},
        rules={"arrival_s": "must be a date-time like 2023-11-16 18:15:46.6805900"},
    )
    return make_trace(df, source=str(path), context=context)
