"""servesim's own trace format: the schema columns as CSV or Parquet, plus `write_trace`.

CSV: an optional first comment line `# hash_block_size=512`, a header with the schema columns
(arrival_s, prompt_tokens, output_tokens required; request_id, lane, priority, tenant,
prefix_hashes optional; unknown columns ignored), prefix_hashes as space-separated ids, blank
cells meaning the default. Parquet: the same columns with prefix_hashes as list<int64>, and the
block size in the schema metadata key `servesim.hash_block_size`. Arrival times are kept as
written (not shifted). `write_trace` then `load_trace` gives back an identical trace.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from traces.errors import TraceError, clip
from traces.limits import MAX_TOKENS
from traces.loaders.common import header_fields, not_utf8, one_line, read_csv_cells
from traces.rng import Streams
from traces.schema import Trace, make_trace
from traces.validate import FileContext

NAME = "native"
TIMED = True
OPTIONS: tuple[str, ...] = ()
PARQUET = (".parquet", ".pq")
META_KEY = b"servesim.hash_block_size"
CHAIN_RULE = "must be space-separated integer hash ids >= 0, one per hash block of the prompt"
SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("arrival_s", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("lane", pa.string()),
        ("priority", pa.int64()),
        ("tenant", pa.string()),
        ("prefix_hashes", pa.list_(pa.int64())),
    ]
)


def sniff(suffix: str, line: str) -> bool:
    if suffix in PARQUET:
        return True
    if suffix not in (".csv", ".txt", ""):
        return False
    if line.startswith("#"):
        return "hash_block_size" in line
    # any one schema column: a file missing the others then gets a "missing column" error
    return bool({"request_id", "arrival_s", "prompt_tokens", "output_tokens"} & header_fields(line))


def _block_size(text: str, where: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_TOKENS:
        raise TraceError(f"{where}: hash_block_size is {clip(text.strip())!r}; must be an "
                         f"integer from 1 to {MAX_TOKENS:,} (tokens)")
    return value


def _comments(path: Path) -> tuple[int, int | None]:
    """Count the leading '#' lines and read `hash_block_size=N` from them."""
    count, block = 0, None
    try:
        with open(path, encoding="utf-8-sig") as f:
            for line in f:
                if not line.startswith("#"):
                    break
                count += 1
                key, _, value = line[1:].partition("=")
                if key.strip() == "hash_block_size":
                    block = _block_size(value, f"{path}: line {count}")
    except UnicodeDecodeError as e:
        raise not_utf8(path, e) from None
    return count, block


def _chain(cell: str) -> list[int] | str | None:
    """'1 2 3' -> [1, 2, 3]; blank -> None; anything else is kept for the validator to report."""
    if not cell.strip():
        return None
    try:
        return [int(x) for x in cell.split()]
    except ValueError:
        return cell


def _read_csv(path: Path) -> Trace:
    skip, block = _comments(path)
    cells = read_csv_cells(path, skiprows=skip)
    if "prefix_hashes" in cells:
        cells["prefix_hashes"] = [_chain(c) for c in cells["prefix_hashes"]]
    context = FileContext(rules={"prefix_hashes": CHAIN_RULE})
    return make_trace(cells, source=str(path), hash_block_size=block, context=context)


def _read_parquet(path: Path) -> Trace:
    try:
        table = pq.read_table(path)
        df = table.to_pandas()
    except (pa.ArrowException, OSError, ValueError) as e:
        raise TraceError(f"{path}: not a readable Parquet file ({one_line(e)})") from None
    raw = (table.schema.metadata or {}).get(META_KEY)
    block = None if raw is None else _block_size(raw.decode(errors="replace"), str(path))
    return make_trace(df, source=str(path), hash_block_size=block)


def read(path: Path, *, streams: Streams) -> Trace:
    return _read_parquet(path) if path.suffix.lower() in PARQUET else _read_csv(path)


def write_trace(trace: Trace, path: str | Path) -> Path:
    """Write `trace` as native CSV (.csv) or Parquet (.parquet/.pq); returns the path."""
    path = Path(path)
    suffix = path.suffix.lower()
    chains = trace.df["prefix_hashes"].tolist()
    if suffix == ".csv":
        text = ["" if c is None else " ".join(map(str, c)) for c in chains]
        with open(path, "w", encoding="utf-8", newline="") as f:
            if trace.hash_block_size is not None:
                f.write(f"# hash_block_size={trace.hash_block_size}\n")
            # Quote every text cell so that any character (comma, CR, '#') round-trips.
            trace.df.assign(prefix_hashes=text).to_csv(
                f, index=False, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC
            )
    elif suffix in PARQUET:
        arrays = [
            pa.array(chains if f.name == "prefix_hashes" else trace.df[f.name].tolist(), f.type)
            for f in SCHEMA
        ]
        meta = {} if trace.hash_block_size is None else {META_KEY: str(trace.hash_block_size)}
        pq.write_table(pa.Table.from_arrays(arrays, schema=SCHEMA.with_metadata(meta)), path)
    else:
        raise TraceError(f"{path}: cannot write suffix {suffix!r}; use .csv or .parquet")
    return path
