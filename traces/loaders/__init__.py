"""Trace loaders: one module per file format, a registry, format detection and `load_trace`.

    FORMATS["azure" | "vllm-bench" | "vllm-result" | "jsonl" | "mooncake" | "vidur" | "lengths"
            | "native"] -> Format
    load_trace(path, format="auto", *, arrivals=None, seed=0, **options) -> Trace

Every loader validates through traces.schema.make_trace, so every bad file raises a one-line
TraceError naming the file, the row and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from traces.errors import TraceError
from traces.loaders import azure, jsonl, lengths, mooncake, native, vidur, vllm_bench, vllm_result
from traces.loaders.common import (
    GZIP_TEXT,
    PARQUET_MAGIC,
    check_file,
    first_line,
    gzipped,
    starts_with,
)
from traces.loaders.native import write_trace
from traces.rng import Streams
from traces.schema import Trace
from traces.spec import ArrivalSpec, validated

__all__ = ["FORMATS", "Format", "detect_format", "load_trace", "open_trace", "write_trace"]


@dataclass(frozen=True)
class Format:
    """A trace file format: how to recognise it and how to read it."""

    name: str
    read: Callable[..., Trace]  # read(path, *, streams, **options) -> Trace
    sniff: Callable[[str, str], bool]  # sniff(lower-case suffix, first non-blank line)
    timed: bool  # False: the file has no arrival times (read() returns them all as 0)
    options: tuple[str, ...] = field(default=())  # keyword options read() accepts

    def __call__(self, path: str | Path, **kwargs: Any) -> Trace:
        """Same as load_trace(path, format=self.name, **kwargs)."""
        return load_trace(path, self.name, **kwargs)


def _format(module: ModuleType) -> Format:
    return Format(module.NAME, module.read, module.sniff, module.TIMED, module.OPTIONS)


# detection tries the formats in this order: vllm-bench before mooncake (both JSONL with
# input_length; arrival_s in seconds vs timestamp in ms), vidur before lengths (a Vidur trace
# is a length-only CSV plus the arrived_at column); jsonl (prompt_len, max_tokens)
# before mooncake
FORMATS: dict[str, Format] = {
    m.NAME: _format(m)
    for m in (azure, vllm_bench, vllm_result, jsonl, mooncake, vidur, lengths, native)
}
ALLOWED = ", ".join(["auto", *FORMATS])


def detect_format(path: str | Path) -> str:
    """The format name of `path`, from its extension and its first non-blank line."""
    path = Path(path)
    check_file(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet" and not starts_with(path, PARQUET_MAGIC):
        raise TraceError(f"{path}: named .parquet but not a Parquet file (it does not start "
                         "with PAR1)")
    line = first_line(path)
    for name, fmt in FORMATS.items():
        if fmt.sniff(suffix, line):
            return name
    if gzipped(path) and not line.startswith("{"):  # read inside the gzip stream: not JSONL
        raise TraceError(f"{path}: {GZIP_TEXT}")
    what = "the file is empty" if not line else f"first line {line[:60]!r}"
    raise TraceError(
        f"{path}: cannot detect the trace format ({what}); give it (--format, or "
        f"workload.format) as one of {', '.join(FORMATS)}"
    )


def get_format(name: str, path: str | Path) -> Format:
    """The Format for `name` ("auto" detects it from the file)."""
    if name == "auto":
        name = detect_format(path)
    if name not in FORMATS:
        raise TraceError(f"{path}: unknown trace format {name!r}; allowed: {ALLOWED}")
    return FORMATS[name]


def open_trace(
    path: str | Path, format: str = "auto", *, streams: Streams, **options: Any
) -> tuple[Trace, Format]:
    """Read a file as is (untimed formats come back with every arrival at 0) and its Format."""
    path = Path(path)
    check_file(path)
    fmt = get_format(format, path)
    for key in options:
        if key not in fmt.options:
            allowed = ", ".join(fmt.options) or "none"
            raise TraceError(
                f"{path}: option {key!r} does not apply to format {fmt.name!r} (its options: "
                f"{allowed})"
            )
    return fmt.read(path, streams=streams, **options), fmt


def load_trace(
    path: str | Path,
    format: str = "auto",
    *,
    arrivals: Mapping[str, Any] | Any | None = None,
    seed: int = 0,
    **options: Any,
) -> Trace:
    """Load a trace file into the canonical schema.

    format: "auto" (sniff extension + first line) or a key of FORMATS.
    arrivals: an ArrivalSpec (or a dict of its fields). Required for formats without arrival
        times ("lengths"); for timed formats it REPLACES the file's times, rows kept in order.
        Process "replay" keeps the file's own times.
    seed: root of the random streams (traces.rng): "arrivals" for generated times and
        Mooncake spreading, "lengths" for row shuffling.
    options: format options, e.g. spread_s=3.0 (mooncake), shuffle=True (lengths).
    """
    streams = Streams(seed)
    trace, fmt = open_trace(path, format, streams=streams, **options)
    spec = None if arrivals is None else validated(ArrivalSpec, arrivals, f"{path}: arrivals")
    if spec is None or spec.process == "replay":
        if not fmt.timed:
            raise TraceError(
                f"{path}: format {fmt.name!r} has no arrival times; pass arrivals= (an "
                "ArrivalSpec such as {'process': 'poisson', 'rate': 5.0})"
            )
        return trace
    return trace.with_arrivals(spec.sample(n=len(trace), rng=streams.rng("arrivals")))
