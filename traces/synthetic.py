"""Synthetic workloads: one import point for the generators, plus `synthesize` and `mix`.

All random generators take a `numpy.random.Generator`; derive them from one scenario seed with
`traces.rng.Streams` so that the same seed gives identical output.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traces.arrivals import constant, gamma, poisson, replay, spread_buckets
from traces.errors import TraceError
from traces.lengths import (
    Lengths,
    azure_conv_like,
    fixed,
    lognormal,
    resample,
    sharegpt_like,
)
from traces.prefix import shared_prefix
from traces.schema import Trace, make_trace

__all__ = [
    "Lengths",
    "azure_conv_like",
    "constant",
    "fixed",
    "gamma",
    "lognormal",
    "mix",
    "poisson",
    "replay",
    "resample",
    "shared_prefix",
    "sharegpt_like",
    "spread_buckets",
    "synthesize",
]


def synthesize(arrival_s: np.ndarray, lengths: Lengths, *, source: str) -> Trace:
    """A trace from arrival times (s) and per-request lengths; request ids "0".."n-1"."""
    if not (len(arrival_s) == len(lengths.prompt) == len(lengths.output)):
        raise TraceError(f"{source}: arrival times and lengths differ in count")
    columns = {
        "arrival_s": arrival_s,
        "prompt_tokens": lengths.prompt,
        "output_tokens": lengths.output,
    }
    return make_trace(columns, source=source)


def _shift_chains(chains: pd.Series, offset: int) -> list:
    if offset == 0:
        return chains.tolist()
    return [None if c is None else [x + offset for x in c] for c in chains]


def mix(*traces: Trace, source: str | None = None) -> Trace:
    """Merge traces by arrival time (stable: ties keep the input order of the traces).

    Request ids become "<k>:<id>" where k is the 0-based position of the input trace. Prefix
    hash ids of input k are offset past those of inputs 0..k-1, so blocks of different inputs
    never count as shared. Inputs with chains must agree on hash_block_size.
    """
    if not traces:
        raise TraceError("mix needs at least one trace")
    blocks = sorted({t.hash_block_size for t in traces if t.hash_block_size is not None})
    if len(blocks) > 1:
        raise TraceError(f"cannot mix traces with different hash_block_size values {blocks}")
    frames, offset = [], 0
    for k, t in enumerate(traces):
        chains = t.df["prefix_hashes"]
        frames.append(
            t.df.assign(
                request_id=f"{k}:" + t.df["request_id"],
                prefix_hashes=_shift_chains(chains, offset),
            )
        )
        ids = [max(c) for c in chains if c is not None]
        offset += max(ids) + 1 if ids else 0
    df = pd.concat(frames, ignore_index=True)
    df = df.iloc[np.argsort(df["arrival_s"].to_numpy(), kind="stable")]
    name = source or "mix(" + ", ".join(t.source for t in traces) + ")"
    return make_trace(df, source=name, hash_block_size=blocks[0] if blocks else None)
