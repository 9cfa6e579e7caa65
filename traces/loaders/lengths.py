"""Length-only CSV (the ShareGPT / arXiv mixes used by Vidur and Sarathi-Serve).

Columns `num_prefill_tokens` (prompt) and `num_decode_tokens` (output); `num_total_tokens` and
`pd_ratio` may be present and are ignored. The file has NO arrival times: `read` returns every
arrival at 0 and `load_trace` requires an `arrivals` spec to retime the rows (in file order).
request_id = the 0-based data row index as text.

Option `shuffle` (default False): use the rows in a random order drawn from the seed's
"lengths" stream instead of file order (request ids keep their file row index).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from traces.loaders.common import header_fields, read_csv_cells, require_columns, row_ids
from traces.rng import Streams
from traces.schema import Trace, make_trace
from traces.validate import FileContext

NAME = "lengths"
COLUMNS = ("num_prefill_tokens", "num_decode_tokens")
TIMED = False
OPTIONS = ("shuffle",)


def sniff(suffix: str, line: str) -> bool:
    # any one of the columns: a file missing the other then gets a "missing column" error
    return suffix in (".csv", ".txt", "") and bool(set(COLUMNS) & header_fields(line))


def read(path: Path, *, streams: Streams, shuffle: bool = False) -> Trace:
    cells = read_csv_cells(path)
    require_columns(cells, path, COLUMNS)
    df = {
        "request_id": row_ids(len(cells)),
        "arrival_s": np.zeros(len(cells)),
        "prompt_tokens": cells["num_prefill_tokens"].to_numpy(),
        "output_tokens": cells["num_decode_tokens"].to_numpy(),
    }
    names = {"prompt_tokens": COLUMNS[0], "output_tokens": COLUMNS[1]}
    trace = make_trace(df, source=str(path), context=FileContext(names=names))
    return trace.shuffled(streams.rng("lengths")) if shuffle else trace
