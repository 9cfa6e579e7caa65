"""Azure LLM inference trace 2023 (Splitwise): CSV `TIMESTAMP, ContextTokens, GeneratedTokens`.

TIMESTAMP is an absolute wall-clock time with 7 fractional digits (100 ns), e.g.
`2023-11-16 18:17:03.9799600`; `datetime.strptime` rejects 7 digits, pandas parses them (ISO
8601). arrival_s = seconds since the EARLIEST timestamp (the first row in a sorted file). Files
use CRLF line endings and lack a trailing newline; pandas handles both. request_id = the 0-based
data row index as text.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from traces.errors import TraceError, clip
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


TZ = r"(?:Z|[+-]\d{2}:?\d{2})\s*$"  # a UTC offset at the end of an ISO 8601 date-time


def _same_zone_form(stamps: pd.Series, path: Path) -> None:
    """Every timestamp with a UTC offset, or none: a naive one among zoned ones has no
    defined instant (pandas would read it as UTC, hours off)."""
    text = stamps.astype(str).str.strip()
    rows = np.flatnonzero(text.to_numpy() != "")  # blank cells: the validator names them
    zoned = text.iloc[rows].str.contains(TZ, regex=True).to_numpy()
    if zoned.any() and not zoned.all():
        odd = int(np.flatnonzero(zoned != zoned[0])[0])
        row, ref = rows[odd], rows[0]
        kind = "has a UTC offset" if zoned[odd] else "has no UTC offset"
        raise TraceError(f"{path}: row {row + 1}: TIMESTAMP {clip(text.iloc[row])!r} {kind}, "
                         f"unlike row {ref + 1} ({clip(text.iloc[ref])!r}); write every "
                         "timestamp with an offset (+05:00, Z) or none")


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
    _same_zone_form(cells["TIMESTAMP"], path)
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
