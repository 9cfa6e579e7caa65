"""The request-trace schema the simulator consumes: one row per request, sorted by arrival.

Columns (all present, in this order; index 0..n-1):
  request_id     str     unique per trace
  arrival_s      float64 seconds, >= 0, non-decreasing (absolute-timestamp formats are shifted so
                         the earliest arrival is 0; relative formats keep their own zero)
  prompt_tokens  int64   >= 1
  output_tokens  int64   >= 1 (tokens to generate, including the first)
  lane           str     scheduling lane tag, default "default" (e.g. "interactive", "batch")
  priority       int64   default 0; lower = more urgent (vLLM convention)
  tenant         str     default ""
  prefix_hashes  object  list[int] per row or None: one id per `hash_block_size`-token block of
                         the prompt, ceil(prompt_tokens / hash_block_size) ids; equal ids at equal
                         positions mean equal KV (Mooncake semantics, see traces.hashes)

Build traces with `make_trace` (validates); the `Trace` methods derive new valid traces. A Trace
always has at least one row.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traces.errors import TraceError, TraceWarning
from traces.hashes import to_arrays
from traces.validate import FileContext, normalize, plain_frame

COLUMNS = (
    "request_id",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "lane",
    "priority",
    "tenant",
    "prefix_hashes",
)


@dataclass(frozen=True, eq=False)  # eq=False: comparing DataFrames with == is ambiguous
class Trace:
    """An immutable, validated request trace (see the module docstring for the columns)."""

    df: pd.DataFrame
    hash_block_size: int | None  # tokens per prefix hash id; None when no row has prefix_hashes
    source: str  # file path, or a description of the synthetic spec that made it

    def __len__(self) -> int:
        return len(self.df)

    @property
    def arrival_s(self) -> np.ndarray:
        """Arrival times in seconds (float64, non-decreasing)."""
        return self.df["arrival_s"].to_numpy()

    @property
    def prompt_tokens(self) -> np.ndarray:
        return self.df["prompt_tokens"].to_numpy()

    @property
    def output_tokens(self) -> np.ndarray:
        return self.df["output_tokens"].to_numpy()

    @property
    def priority(self) -> np.ndarray:
        return self.df["priority"].to_numpy()

    @property
    def lanes(self) -> np.ndarray:
        """Lane tag per request (object array of str)."""
        return self.df["lane"].to_numpy(dtype=object)

    @functools.cached_property
    def prefix_hashes(self) -> list[np.ndarray | None]:
        """Per request: read-only int64 array of block hash ids, or None (computed once)."""
        return to_arrays(self.df["prefix_hashes"].tolist())

    def _derive(self, df: pd.DataFrame) -> Trace:
        """A Trace over rows of this one (already valid and sorted; callers ensure both)."""
        if len(df) == 0:
            raise TraceError(f"{self.source}: selects no requests")
        chains = df["prefix_hashes"].notna().any()
        block = self.hash_block_size if chains else None
        return Trace(df.reset_index(drop=True), block, self.source)

    def with_lane(self, lane: str) -> Trace:
        """The same requests, all tagged with `lane`."""
        if not isinstance(lane, str) or not lane:
            raise TraceError(f"{self.source}: lane is {lane!r}; must be a non-empty string")
        return self._derive(self.df.assign(lane=lane).astype({"lane": str}))

    def with_priority(self, priority: int) -> Trace:
        """The same requests, all with `priority` (lower = more urgent)."""
        if isinstance(priority, bool) or not isinstance(priority, (int, np.integer)):
            raise TraceError(f"{self.source}: priority is {priority!r}; must be an integer")
        return self._derive(self.df.assign(priority=np.int64(priority)))

    def with_tenant(self, tenant: str) -> Trace:
        """The same requests, all tagged with `tenant`."""
        if not isinstance(tenant, str):
            raise TraceError(f"{self.source}: tenant is {tenant!r}; must be a string")
        return self._derive(self.df.assign(tenant=tenant).astype({"tenant": str}))

    def head(self, n: int) -> Trace:
        """The first `n` requests by arrival (n >= 1); arrival times unchanged."""
        if n < 1:
            raise TraceError(f"{self.source}: head({n}); must keep at least 1 request")
        return self._derive(self.df.iloc[:n])

    def window(self, start_s: float, end_s: float) -> Trace:
        """Requests arriving in [start_s, end_s), RE-ZEROED: arrival_s -= start_s.

        Re-zeroing to `start_s` (not to the first selected arrival) keeps any idle time at the
        start of the window. An empty selection is a TraceError.
        """
        if not (0 <= start_s < end_s):
            raise TraceError(f"{self.source}: window [{start_s}, {end_s}) s; need 0 <= start < end")
        t = self.df["arrival_s"]
        df = self.df[(t >= start_s) & (t < end_s)]
        span = f"[{start_s}, {end_s}) s (trace spans {t.iloc[0]:.6g} to {t.iloc[-1]:.6g} s)"
        if len(df) == 0:
            raise TraceError(f"{self.source}: window {span} selects no requests")
        return self._derive(df.assign(arrival_s=df["arrival_s"] - start_s))

    def with_arrivals(self, arrival_s: Sequence[float] | np.ndarray) -> Trace:
        """Give row i the arrival time arrival_s[i], then re-sort by time (stable, no warning)."""
        t = np.asarray(arrival_s, dtype=np.float64)
        if t.shape != (len(self),) or not np.all(np.isfinite(t)) or np.any(t < 0):
            raise TraceError(
                f"{self.source}: {t.size} arrival times for {len(self)} requests; "
                "need one finite time >= 0 (seconds) per request"
            )
        order = np.argsort(t, kind="stable")
        return self._derive(self.df.assign(arrival_s=t).iloc[order])

    def shuffled(self, rng: np.random.Generator) -> Trace:
        """Rows in a random order; the sequence of arrival times stays where it was.

        Row i of the result is a random original row and gets the i-th arrival time, so the
        arrival process is unchanged while lengths (and prefix chains) are reassigned.
        """
        order = rng.permutation(len(self))
        return self._derive(self.df.iloc[order].assign(arrival_s=self.arrival_s))


def make_trace(
    df_like: object,
    *,
    source: str,
    hash_block_size: int | None = None,
    context: FileContext | None = None,
) -> Trace:
    """Validate `df_like` (DataFrame, dict of columns, list of records), fill defaults, sort.

    Required columns: arrival_s, prompt_tokens, output_tokens. Defaults: request_id = the
    0-based input position as text, lane "default", priority 0, tenant "", prefix_hashes None
    (blank cells also take the default). Bad input raises a one-line TraceError for the first
    bad row; rows out of arrival order are stably sorted with a TraceWarning. `context` lets a
    loader name the file's own rows and columns in messages.
    """
    df = plain_frame(df_like) if isinstance(df_like, dict) and hash_block_size is None else None
    if df is not None:  # a large generated table, valid and in order
        return Trace(df, None, source)
    df, block = normalize(df_like, source=source, hash_block_size=hash_block_size, context=context)
    t = df["arrival_s"].to_numpy()
    descents = int(np.count_nonzero(t[1:] < t[:-1]))
    if descents:
        warnings.warn(
            TraceWarning(
                f"{source}: {descents} row(s) out of order (earlier arrival than the row "
                "before); sorted the trace by arrival time (stable)"
            ),
            stacklevel=2,
        )
        df = df.iloc[np.argsort(t, kind="stable")].reset_index(drop=True)
    return Trace(df, block, source)
