"""The immutable description of every request in a run (struct of arrays).

Built once from a trace; every component reads it, nobody writes it. Request
index ``i`` (0..n-1, in arrival order) is how components name a request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def _ro(a, dtype) -> np.ndarray:
    arr = np.ascontiguousarray(a, dtype=dtype)
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True)
class RequestSpecs:
    request_id: np.ndarray  # str per request
    arrival_s: np.ndarray  # float64 seconds, non-decreasing
    prompt_tokens: np.ndarray  # int64 tokens >= 1
    output_tokens: np.ndarray  # int64 tokens >= 1 (max_tokens: generation always runs to it)
    priority: np.ndarray  # int64, lower is more urgent (vLLM convention)
    lane: np.ndarray  # int64 code into lane_names
    lane_names: tuple[str, ...]
    prefix_hashes: tuple  # per request: int64 array of hash ids, or None
    hash_block_size: int | None  # tokens covered by one prefix hash id

    def __len__(self) -> int:
        return len(self.arrival_s)

    def head(self, n: int) -> RequestSpecs:
        """The first ``n`` requests (those arriving before a horizon)."""
        if n >= len(self):
            return self
        return RequestSpecs(
            self.request_id[:n], self.arrival_s[:n], self.prompt_tokens[:n],
            self.output_tokens[:n], self.priority[:n], self.lane[:n], self.lane_names,
            self.prefix_hashes[:n], self.hash_block_size,
        )

    @staticmethod
    def from_arrays(arrival_s, prompt_tokens, output_tokens, *, priority=None, lane=None,
                    request_id=None, prefix_hashes=None, hash_block_size=None) -> RequestSpecs:
        """Build specs from plain arrays (tests, synthetic runs)."""
        n = len(arrival_s)
        lanes = np.asarray(lane if lane is not None else ["default"] * n, dtype=object)
        names, codes = np.unique(lanes.astype(str), return_inverse=True)
        return RequestSpecs(
            request_id=np.asarray(
                request_id if request_id is not None else [str(i) for i in range(n)], dtype=object
            ),
            arrival_s=_ro(arrival_s, np.float64),
            prompt_tokens=_ro(prompt_tokens, np.int64),
            output_tokens=_ro(output_tokens, np.int64),
            priority=_ro(priority if priority is not None else np.zeros(n), np.int64),
            lane=_ro(codes, np.int64),
            lane_names=tuple(str(x) for x in names),
            prefix_hashes=tuple(prefix_hashes) if prefix_hashes is not None else (None,) * n,
            hash_block_size=hash_block_size,
        )

    @staticmethod
    def from_trace(trace) -> RequestSpecs:
        """Build specs from a ``traces.Trace`` (already sorted by arrival)."""
        df = trace.df
        hashes = None
        if "prefix_hashes" in df and df["prefix_hashes"].notna().any():
            hashes = [None if h is None else np.asarray(h, dtype=np.int64)
                      for h in df["prefix_hashes"]]
        if len(df) >= COMPACT_ROWS and hashes is None:
            return RequestSpecs._compact(df, trace.hash_block_size)
        return RequestSpecs.from_arrays(
            df["arrival_s"].to_numpy(), df["prompt_tokens"].to_numpy(),
            df["output_tokens"].to_numpy(), priority=df["priority"].to_numpy(),
            lane=df["lane"].to_numpy(), request_id=df["request_id"].to_numpy(),
            prefix_hashes=hashes, hash_block_size=trace.hash_block_size,
        )

    @staticmethod
    def _compact(df, hash_block_size) -> RequestSpecs:
        """``from_trace`` for a large trace without prefix chains, in less memory: ids as
        numpy StringDType (``ids_text`` reads them), a tag every request shares (lane,
        priority) held once (a read-only broadcast array), no copy of the frame kept."""
        import pandas as pd

        n = len(df)
        ids = np.empty(n, dtype=np.dtypes.StringDType())
        col = df["request_id"]
        for lo in range(0, n, COMPACT_ROWS):  # no Python string per request at once
            ids[lo:lo + COMPACT_ROWS] = col.iloc[lo:lo + COMPACT_ROWS].to_numpy(dtype=object)
        ids.flags.writeable = False
        codes, names = pd.factorize(df["lane"], sort=True)
        return RequestSpecs(
            request_id=ids,
            arrival_s=_ro(np.array(df["arrival_s"].to_numpy(), dtype=np.float64), np.float64),
            prompt_tokens=_ro(np.array(df["prompt_tokens"].to_numpy(), dtype=np.int64),
                              np.int64),
            output_tokens=_ro(np.array(df["output_tokens"].to_numpy(), dtype=np.int64),
                              np.int64),
            priority=_shared(df["priority"].to_numpy()),
            lane=_shared(codes),
            lane_names=tuple(str(x) for x in names),
            prefix_hashes=NoChains(n),
            hash_block_size=hash_block_size,
        )


COMPACT_ROWS = 1 << 20  # from this many requests on, specs are built compact (_compact)


class NoChains(Sequence):
    """``prefix_hashes`` of requests without prefix chains: None for each, in no memory."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return NoChains(len(range(*i.indices(self.n))))
        if not -self.n <= i < self.n:
            raise IndexError(i)
        return None

    def __eq__(self, other) -> bool:
        return len(other) == self.n and all(x is None for x in other) if isinstance(
            other, Sequence) else NotImplemented

    def __repr__(self) -> str:
        return f"NoChains({self.n})"


def _shared(a: np.ndarray) -> np.ndarray:
    """int64 ``a``, held once (read-only broadcast) when every value is the same."""
    if len(a) and (a == a[0]).all():
        return np.broadcast_to(np.int64(a[0]), a.shape)
    return _ro(np.array(a, dtype=np.int64), np.int64)


def ids_text(ids: np.ndarray) -> np.ndarray:
    """Request ids as text a DataFrame takes (object ids as str, StringDType as objects)."""
    return ids.astype(str) if ids.dtype == object else ids.astype(object)
