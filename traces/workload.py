"""Build a Trace from a WorkloadSpec (entry point: build_workload, at the end).

Rules, in order, for one (non-mix) workload:
1. `trace` is loaded (relative to base_dir) and cut to `window_s` (re-zeroed to its start).
2. Arrival times: process replay = the trace's times divided by `rate_scale`; otherwise times
   are generated from the "arrivals" stream, for num_requests / duration_s, or (lengths dist
   "trace" without a count) one per trace row, else for the default duration
   (traces.sizing: 5 minutes, or 1,000 requests when that is longer).
3. Lengths: dist "trace" = the trace rows in file order (or shuffled by the "lengths" stream),
   one per arrival, with their prefix chains; more arrivals than rows is a TraceError. Other
   dists draw from the "lengths" stream and DROP the trace's prefix chains (they describe the
   original prompts).
4. prompt_scale / output_scale multiply the lengths (rounded half up, at least 1; a scaled
   prompt drops its prefix chain), then shared_prefix (the "prefix" stream), then lane /
   priority / tenant tags.
A mix builds sub-workload i with Streams.child(i) and merges them (traces.synthetic.mix).
Finally max_requests keeps the first N requests by arrival.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from traces.arrivals import replay
from traces.errors import TraceError
from traces.limits import check_span
from traces.loaders import open_trace
from traces.prefix import shared_prefix
from traces.rng import Streams
from traces.schema import Trace, make_trace
from traces.sizing import check_warmup
from traces.spec import WorkloadSpec
from traces.synthetic import mix, synthesize


def build(spec: WorkloadSpec, *, seed: int, base_dir: Path) -> Trace:
    return _build(spec, Streams(seed), base_dir)


def _build(spec: WorkloadSpec, streams: Streams, base_dir: Path) -> Trace:
    if spec.mix is not None:
        trace = _scaled(mix(*(_build(s, streams.child(i), base_dir)
                              for i, s in enumerate(spec.mix))), spec)
    else:
        trace = _tag(_prefixed(_scaled(_leaf(spec, streams, base_dir), spec), spec, streams),
                     spec)
    return trace.head(spec.max_requests) if spec.max_requests else trace


def _load(spec: WorkloadSpec, streams: Streams, base_dir: Path) -> Trace | None:
    if spec.trace is None:
        return None
    path = Path(spec.trace).expanduser()
    path = path if path.is_absolute() else base_dir / path
    options = {"spread_s": spec.spread_s} if spec.spread_s else {}
    trace, fmt = open_trace(path, spec.format, streams=streams, **options)
    timed_needed = spec.window_s is not None or spec.arrival.process == "replay"
    if timed_needed and not fmt.timed:
        raise TraceError(
            f"{path}: format {fmt.name!r} has no arrival times, so it cannot be replayed or "
            "windowed; set workload.arrival.process to poisson, gamma or constant"
        )
    return trace.window(*spec.window_s) if spec.window_s is not None else trace


def _leaf(spec: WorkloadSpec, streams: Streams, base_dir: Path) -> Trace:
    base = _load(spec, streams, base_dir)
    dist = spec.lengths.dist
    if spec.arrival.process == "replay":
        timed = replay(base, spec.rate_scale)
        times = timed.arrival_s
    elif spec.num_requests is None and spec.generated_duration_s is None:  # one per row
        times = spec.arrival.sample(n=len(base), rng=streams.rng("arrivals"))
    else:
        times = spec.arrival.sample(
            n=spec.num_requests, duration_s=spec.generated_duration_s,
            rng=streams.rng("arrivals"))
    if dist == "trace":
        rows = base.shuffled(streams.rng("lengths")) if spec.lengths.shuffle else base
        if len(times) > len(rows):
            raise TraceError(
                f"{base.source}: the workload needs {len(times)} requests but the trace has "
                f"{len(rows)} rows; use lengths dist 'resample' to draw with replacement"
            )
        return rows.head(len(times)).with_arrivals(times)
    lengths = spec.lengths.sample(len(times), streams.rng("lengths"), trace=base)
    source = _describe(spec, base)
    if spec.arrival.process == "replay":  # keep ids and tags of the replayed rows
        df = timed.df.assign(
            prompt_tokens=lengths.prompt, output_tokens=lengths.output, prefix_hashes=None
        )
        return make_trace(df, source=source)
    return synthesize(times, lengths, source=source)


def _scaled(trace: Trace, spec: WorkloadSpec) -> Trace:
    """Prompt / output tokens times prompt_scale / output_scale (rounded half up, at least 1).
    Scaled prompts drop the trace's prefix chains: they describe the original prompts."""
    if spec.prompt_scale == 1.0 and spec.output_scale == 1.0:
        return trace

    def times(v: np.ndarray, s: float) -> np.ndarray:
        return v if s == 1.0 else np.maximum(1, np.floor(v * s + 0.5)).astype(np.int64)

    df = trace.df.assign(prompt_tokens=times(trace.prompt_tokens, spec.prompt_scale),
                         output_tokens=times(trace.output_tokens, spec.output_scale))
    chains = trace.hash_block_size if spec.prompt_scale == 1.0 else None
    if chains is None:
        df = df.assign(prefix_hashes=None)
    return make_trace(df, source=trace.source, hash_block_size=chains)


def _describe(spec: WorkloadSpec, base: Trace | None) -> str:
    a = spec.arrival
    arrival = a.process + "".join(
        f" {k}={v}" for k, v in (("rate", a.rate), ("cv", a.cv)) if v is not None
    )
    origin = f"{base.source}: " if base is not None else "synthetic: "
    d = spec.generated_duration_s if spec.arrival.process != "replay" else None
    span = "" if d is None or spec.num_requests is not None else (
        f" for {d:g} s" + (" (the default duration)" if spec.duration_s is None else ""))
    return f"{origin}arrival {arrival}{span}, lengths {spec.lengths.dist}"


def _prefixed(trace: Trace, spec: WorkloadSpec, streams: Streams) -> Trace:
    p = spec.shared_prefix
    if p is None:
        return trace
    return shared_prefix(
        trace, p.tokens, p.hash_block_size, p.num_prefixes, rng=streams.rng("prefix")
    )


def _tag(trace: Trace, spec: WorkloadSpec) -> Trace:
    if spec.lane is not None:
        trace = trace.with_lane(spec.lane)
    if spec.priority is not None:
        trace = trace.with_priority(spec.priority)
    if spec.tenant is not None:
        trace = trace.with_tenant(spec.tenant)
    return trace


def build_workload(spec: WorkloadSpec | dict, *, seed: int, base_dir: str | Path) -> Trace:
    """The request trace described by `spec` (the rules above), its span and warm-up checked.

    seed: the ONE scenario seed; streams per part are derived in traces.rng, so changing the
    lengths spec never changes the arrival times. Same seed => identical trace.
    """
    if not isinstance(spec, WorkloadSpec):
        spec = WorkloadSpec.model_validate(spec)
    return check_warmup(check_span(build(spec, seed=seed, base_dir=Path(base_dir))),
                        spec.warmup_s)
