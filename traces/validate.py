"""The one place where trace rows are checked and normalized (every loader goes through here).

`normalize(df, ...)` turns a loosely typed frame (cells may be strings from a CSV, JSON values,
or numbers) into the canonical schema, or raises a one-line `TraceError` for the FIRST bad row:
``trace.csv: row 17: field 'output_tokens' is -3; must be an integer >= 1``.

Row numbers are 1-based data rows as in the file (header and comment lines not counted; for
JSONL the line number). Field names are the file's own column names (a loader passes them in a
`FileContext`), so a user can find the cell.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traces.errors import TraceError
from traces.hashes import blocks_for, check_chains
from traces.limits import MAX_TOKENS

# Integers travel through float64 while parsing, so they must be exactly representable.
MAX_INT = 2**53
REQUIRED = ("arrival_s", "prompt_tokens", "output_tokens")
DEFAULT_LANE = "default"
RULES = {
    "request_id": "must be a non-empty string, unique in the trace",
    "arrival_s": "must be a finite number of seconds >= 0",
    "prompt_tokens": "must be an integer >= 1",
    "output_tokens": "must be an integer >= 1",
    "priority": "must be an integer (lower = more urgent)",
    "prefix_hashes": "must be a list of integer hash ids >= 0, one per hash block of the prompt",
}


@dataclass(frozen=True)
class FileContext:
    """How a loader's file maps onto the schema, so that messages point into the file."""

    rows: np.ndarray | None = None  # 1-based file row number of each input row (default 1..n)
    names: Mapping[str, str] = field(default_factory=dict)  # schema column -> file column
    raw: Mapping[str, Sequence] = field(default_factory=dict)  # schema column -> cells as read
    rules: Mapping[str, str] = field(default_factory=dict)  # schema column -> "must be ..." text


class _Report:
    """Collects the first problem of each column; the earliest row wins (ties: column order)."""

    def __init__(self, source: str, ctx: FileContext, n: int):
        self.source, self.ctx = source, ctx
        self.rows = ctx.rows if ctx.rows is not None else np.arange(1, n + 1)
        self.best: tuple[int, str] | None = None

    def name(self, col: str) -> str:
        return self.ctx.names.get(col, col)

    def add(self, col: str, bad: np.ndarray, cells: Sequence, rule: str | None = None) -> None:
        """Record the first True of `bad` (a boolean mask over rows) for column `col`."""
        if not bad.any():
            return
        i = int(np.argmax(bad))
        if self.best is not None and self.best[0] <= i:
            return
        shown = self.ctx.raw[col][i] if col in self.ctx.raw else cells[i]
        text = rule or self.ctx.rules.get(col) or RULES[col]
        self.best = (i, f"field '{self.name(col)}' is {show(shown)}; {text}")

    def add_text(self, i: int, message: str) -> None:
        if self.best is None or i < self.best[0]:
            self.best = (i, message)

    def raise_first(self) -> None:
        if self.best is not None:
            i, message = self.best
            raise TraceError(f"{self.source}: row {int(self.rows[i])}: {message}")


def show(value: object) -> str:
    """A cell as it should appear in a message: numbers bare, text quoted, blanks 'missing'."""
    if is_missing(value):  # a blank CSV cell reads as NaN too: say both
        return "missing or NaN" if isinstance(value, (float, np.floating)) else "missing"
    if isinstance(value, str):
        try:
            float(value)
            return value if value == value.strip() else repr(value)
        except ValueError:
            pass
    elif isinstance(value, (bool, int, float, np.integer, np.floating)):
        return repr(value.item() if isinstance(value, np.generic) else value)
    text = repr(value.tolist() if isinstance(value, np.ndarray) else value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_missing(value: object) -> bool:
    """None, NaN/NA and the empty string count as a blank cell."""
    if value is None or value is pd.NA or (isinstance(value, str) and value == ""):
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


NESTED = (list, tuple, dict, set, np.ndarray)  # Parquet list and struct cells


def to_float(values: pd.Series) -> np.ndarray:
    """Parse cells to float64; NaN where a cell is blank or not a number (never raises)."""
    if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values):
        return values.to_numpy(dtype=np.float64, na_value=np.nan)
    cells = values.to_numpy(dtype=object)
    nested = np.fromiter((isinstance(v, NESTED) for v in cells), bool, len(cells))
    if nested.any():  # a list cell is no number (numpy would take [5] for 5, with a warning)
        cells = np.where(nested, None, cells)
    try:  # fast path: float() on every cell, which is exact for decimal strings
        x = cells.astype(np.float64)
    except (ValueError, TypeError, OverflowError):
        return np.array([_float_or_nan(v) for v in cells], dtype=np.float64)
    flags = np.fromiter((isinstance(v, (bool, np.bool_)) for v in cells), bool, len(cells))
    return np.where(flags, np.nan, x)  # true/false are not numbers here


def _float_or_nan(value: object) -> float:
    if isinstance(value, (bool, np.bool_, *NESTED)):
        return math.nan
    try:
        return float(value)  # type: ignore[arg-type]
    except (ValueError, TypeError, OverflowError):
        return math.nan


def _int_column(
    rep: _Report, df: pd.DataFrame, col: str, low: int | None, default: int | None = None,
    high: int = MAX_INT,
) -> np.ndarray:
    """Parse an integer column; blanks become `default` when one is given; values above
    ``high`` (magnitude) are refused."""
    if col not in df:
        return np.full(len(df), default, dtype=np.int64)
    values = df[col]
    numeric = pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(
        values)
    # the cells as objects only where a message may quote them (a number column: on a bad row)
    cells = None if numeric else values.to_numpy(dtype=object)
    x = to_float(values)
    if default is not None:
        blank = np.isnan(x) if numeric else [is_missing(v) for v in cells]
        x = np.where(blank, float(default), x)
    finite = np.isfinite(x)
    safe = np.where(finite, x, 0.0)
    not_int = ~finite | (safe != np.floor(safe))
    if low is not None:
        not_int |= safe < low
    too_big = ~not_int & (np.abs(safe) > high)
    if cells is None and (not_int.any() or too_big.any()):
        cells = values.to_numpy(dtype=object)
    rep.add(col, not_int, cells)
    rep.add(col, too_big, cells, f"must be an integer of magnitude at most {high}"
            if low is None else f"must be an integer from {low} to {high:,}")
    return np.where(not_int | too_big, 0, safe).astype(np.int64)


# From this many rows on, a column the input lacks is built as text directly (Arrow), not
# as one Python string per row: a 10-million-request workload's ids and tags in ~0.2 GB.
COMPACT_ROWS = 1 << 20


def _text(values) -> pd.Series:
    """Arrow-backed text (pandas' ``str`` dtype) from an Arrow string array."""
    dtype = pd.Series(np.zeros(0, dtype=object), dtype=object).astype(str).dtype
    return pd.Series(pd.array(values, dtype=dtype))


def _default_text(n: int, value: str) -> pd.Series:
    import pyarrow as pa

    return _text(pa.repeat(pa.scalar(value, pa.string()), n))


def _str_column(df: pd.DataFrame, col: str, default: str) -> np.ndarray | pd.Series:
    """A text column with blanks replaced by `default` (so CSV empty cells mean default)."""
    if col not in df:
        if len(df) >= COMPACT_ROWS:
            return _default_text(len(df), default)
        return np.full(len(df), default, dtype=object)
    cells = df[col].to_numpy(dtype=object)
    return np.array([default if is_missing(v) else str(v) for v in cells], dtype=object)


def _request_ids(rep: _Report, df: pd.DataFrame) -> np.ndarray:
    """Given ids as text, or the 0-based input position when the column is absent."""
    if "request_id" not in df:
        if len(df) >= COMPACT_ROWS:
            import pyarrow as pa

            return _text(pa.array(np.arange(len(df)), pa.int64()).cast(pa.string()))
        return np.arange(len(df)).astype(str).astype(object)
    cells = df["request_id"].to_numpy(dtype=object)
    missing = np.array([is_missing(v) for v in cells], dtype=bool)
    rep.add("request_id", missing, cells)
    ids = np.array([str(v) for v in cells], dtype=object)
    dup = pd.Series(ids).duplicated().to_numpy() & ~missing
    if dup.any():
        i = int(np.argmax(dup))
        j = int(np.argmax(ids == ids[i]))
        rule = f"it repeats row {int(rep.rows[j])}; request ids must be unique"
        rep.add("request_id", dup, cells, rule)
    return ids


def _arrivals(rep: _Report, df: pd.DataFrame) -> np.ndarray:
    x = to_float(df["arrival_s"])
    bad = ~np.isfinite(x) | (x < 0)
    if bad.any():  # the cells as objects only to quote a bad one
        rep.add("arrival_s", bad, df["arrival_s"].to_numpy(dtype=object))
    return np.where(bad, 0.0, x)


def _prefix_hashes(rep: _Report, df: pd.DataFrame, prompt: np.ndarray, block: int | None) -> list:
    if "prefix_hashes" not in df:
        return [None] * len(df) if len(df) < COMPACT_ROWS else np.full(len(df), None, object)
    cells = df["prefix_hashes"].to_numpy(dtype=object)
    chains, i, kind = check_chains(cells, prompt, block)
    if i < 0:
        return chains
    name = rep.name("prefix_hashes")
    if kind == "block":
        rep.add_text(i, f"field '{name}' is set but the trace has no hash_block_size")
    elif kind == "length":
        n, want = len(chains[i]), int(blocks_for(prompt[i : i + 1], block)[0])
        rep.add_text(
            i,
            f"field '{name}' has {n} id{'' if n == 1 else 's'}; must have "
            f"ceil({prompt[i]} / {block}) = {want}, one per {block}-token block of the prompt",
        )
    else:
        bad = np.zeros(len(cells), dtype=bool)
        bad[i] = True
        rep.add("prefix_hashes", bad, cells)
    return chains


def _check_columns(df: pd.DataFrame, source: str, ctx: FileContext) -> None:
    for col in REQUIRED:
        if col not in df:
            want = ", ".join(ctx.names.get(c, c) for c in REQUIRED)
            name = ctx.names.get(col, col)
            raise TraceError(f"{source}: missing column '{name}'; required columns: {want}")


def _check_block(block: object, source: str) -> int | None:
    ok = isinstance(block, (int, np.integer)) and not isinstance(block, bool) and block >= 1
    if block is not None and not ok:
        raise TraceError(
            f"{source}: hash_block_size is {block!r}; must be an integer >= 1 (tokens per block)"
        )
    return None if block is None else int(block)


def normalize(
    df_like: object, *, source: str, hash_block_size: int | None, context: FileContext | None
) -> tuple[pd.DataFrame, int | None]:
    """Validate and coerce to the canonical columns (input order kept; sorting is the caller's).

    Returns the frame and the hash block size (None when no row has prefix hashes).
    """
    try:
        df = df_like if isinstance(df_like, pd.DataFrame) else pd.DataFrame(df_like)
    except (ValueError, TypeError) as e:
        raise TraceError(
            f"{source}: not a table of requests ({' '.join(str(e).split())})"
        ) from None
    ctx = context or FileContext()
    block = _check_block(hash_block_size, source)
    _check_columns(df, source, ctx)
    if len(df) == 0:
        raise TraceError(f"{source}: no requests; a trace needs at least one data row")
    rep = _Report(source, ctx, len(df))
    out = {
        "request_id": _request_ids(rep, df),
        "arrival_s": _arrivals(rep, df),
        # a prompt or output of more than MAX_TOKENS is no request any model serves (and the
        # fast core keeps token counts in int32)
        "prompt_tokens": _int_column(rep, df, "prompt_tokens", 1, high=MAX_TOKENS),
        "output_tokens": _int_column(rep, df, "output_tokens", 1, high=MAX_TOKENS),
        "lane": _str_column(df, "lane", DEFAULT_LANE),
    }
    out["priority"] = _int_column(rep, df, "priority", None, default=0)
    out["tenant"] = _str_column(df, "tenant", "")
    out["prefix_hashes"] = _prefix_hashes(rep, df, out["prompt_tokens"], block)
    rep.raise_first()
    chains = out["prefix_hashes"]
    has_chains = (any(c is not None for c in chains) if not isinstance(chains, np.ndarray)
                  else bool(np.not_equal(chains, None).any()))
    return build_frame(out), (block if has_chains else None)


def plain_frame(columns: Mapping[str, object]) -> pd.DataFrame | None:
    """The canonical frame of a large table of only the required columns, as ``normalize``
    makes it, when every value is valid and the arrivals are in order (a generated workload:
    no per-row objects while checking); None otherwise (``normalize`` then says what is
    wrong, or sorts)."""
    if set(columns) != set(REQUIRED):
        return None
    a = np.asarray(columns["arrival_s"])
    p, o = np.asarray(columns["prompt_tokens"]), np.asarray(columns["output_tokens"])
    n = len(a)
    if n < COMPACT_ROWS or len(p) != n or len(o) != n or a.dtype.kind != "f" or any(
            x.dtype.kind not in "iu" for x in (p, o)):
        return None
    if not (np.isfinite(a).all() and (a >= 0).all() and (a[1:] >= a[:-1]).all()):
        return None
    if not all(((x >= 1) & (x <= MAX_TOKENS)).all() for x in (p, o)):
        return None
    import pyarrow as pa

    return build_frame({
        "request_id": _text(pa.array(np.arange(n), pa.int64()).cast(pa.string())),
        "arrival_s": a, "prompt_tokens": p, "output_tokens": o,
        "lane": _default_text(n, DEFAULT_LANE), "priority": np.zeros(n, dtype=np.int64),
        "tenant": _default_text(n, ""), "prefix_hashes": np.full(n, None, dtype=object)})


def build_frame(columns: Mapping[str, object]) -> pd.DataFrame:
    """The canonical frame from already-valid column arrays (dtypes fixed here, once)."""
    def text(col) -> pd.Series:
        if isinstance(col, pd.Series) and col.dtype == _text([]).dtype:
            return col  # already text (COMPACT_ROWS)
        return pd.Series(col, dtype=object).astype(str)

    chains = columns["prefix_hashes"]
    df = pd.DataFrame(
        {
            "request_id": text(columns["request_id"]),
            "arrival_s": np.asarray(columns["arrival_s"], dtype=np.float64),
            "prompt_tokens": np.asarray(columns["prompt_tokens"], dtype=np.int64),
            "output_tokens": np.asarray(columns["output_tokens"], dtype=np.int64),
            "lane": text(columns["lane"]),
            "priority": np.asarray(columns["priority"], dtype=np.int64),
            "tenant": text(columns["tenant"]),
            "prefix_hashes": pd.Series(chains if isinstance(chains, np.ndarray) else list(chains),
                                       dtype=object),
        }
    )
    return df
