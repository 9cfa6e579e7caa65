"""The profile: one parquet row per timed shape, written as it is measured, resumable.

Parquet files cannot be appended to, so after each measured row the whole file is
rewritten to a temporary name and renamed over the old one (atomic on POSIX): the file on
disk is always complete, and an interrupted run loses at most the row being timed. A
default profile has a few hundred rows, so the rewrites cost milliseconds. Resuming reads
the file and skips every shape whose ``key`` is already there.

Passes: with ``passes`` = P > 1 the shapes timed in a run are swept P times, a whole sweep
apart, and each row keeps the pass with the lowest median (its median, p10, p90 and
``repeats`` are that pass's). Contention from other processes only ever slows a call down
and comes in bursts longer than one shape's repeats, so the median of consecutive repeats
does not remove it, while the quietest of P passes spread over the run does. The cpu
profile, used on shared machines, defaults to 3 passes; cuda to 1. Rows are written after
the first pass and rewritten when a later pass is quieter, so the file stays complete.

Columns (README "Profile format"): the Shape fields, then key, flops, bytes, median_ms,
p10_ms, p90_ms, repeats, tflops, gbps, device, backend, versions, source, measured_at.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from calibrate.shapes import Shape
from calibrate.timing import Timing
from traces.errors import InputError

SHAPE_COLUMNS = [f.name for f in fields(Shape)]
COLUMNS = SHAPE_COLUMNS + ["key", "flops", "bytes", "median_ms", "p10_ms", "p90_ms",
                           "repeats", "tflops", "gbps", "device", "backend", "versions",
                           "source", "measured_at"]
OPS = ("gemm", "prefill_attn", "decode_attn", "allreduce", "step_overhead")


class ProfileError(InputError):
    """A profile file that is missing or does not have the profile columns."""


def make_row(shape: Shape, t: Timing, device: str, backend: str, versions: dict[str, str],
             source: str) -> dict:
    """A profile row: the shape, its work, the timing and achieved rates, provenance."""
    flops, nbytes = shape.work()
    sec = t.median_ms * 1e-3
    return {**asdict(shape), "key": shape.key(), "flops": flops, "bytes": nbytes,
            "median_ms": t.median_ms, "p10_ms": t.p10_ms, "p90_ms": t.p90_ms,
            "repeats": t.repeats, "tflops": flops / sec / 1e12 if sec > 0 else 0.0,
            "gbps": nbytes / sec / 1e9 if sec > 0 else 0.0, "device": device,
            "backend": backend, "versions": json.dumps(versions, sort_keys=True),
            "source": source,
            "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def read_profile(path: str | Path) -> pd.DataFrame:
    """Read a profile; ProfileError naming the file and the problem if it is not one."""
    p = Path(path)
    if not p.exists():
        raise ProfileError(f"{p}: profile not found")
    try:
        df = pd.read_parquet(p)
    except Exception as e:  # pyarrow raises several types for a non-parquet file
        raise ProfileError(f"{p}: not a parquet profile ({e.__class__.__name__})") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ProfileError(f"{p}: not a servesim profile, missing columns: {', '.join(missing)}")
    bad = sorted(set(df["op"]) - set(OPS))
    if bad:
        raise ProfileError(f"{p}: unknown op {bad[0]!r} (allowed: {', '.join(OPS)})")
    if not np.all(np.isfinite(df["median_ms"])) or (df["median_ms"] <= 0).any():
        raise ProfileError(f"{p}: median_ms must be positive and finite in every row")
    return df


def write_profile(df: pd.DataFrame, path: str | Path) -> None:
    """Write ``df`` atomically (temporary file, then rename)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    df[COLUMNS].to_parquet(tmp, index=False)
    tmp.replace(p)


def profile_hash(df: pd.DataFrame) -> str:
    """sha256 over the rows' keys and medians (order-independent): identifies a profile."""
    items = sorted(zip(df["key"].astype(str), df["median_ms"].round(9).astype(str)))
    return hashlib.sha256("\n".join(f"{k} {v}" for k, v in items).encode()).hexdigest()


class ProfileWriter:
    """Appends rows to a profile file, rewriting it atomically after each one."""

    def __init__(self, path: str | Path, device: str):
        self.path = Path(path)
        self.rows: list[dict] = []
        if self.path.exists():
            old = read_profile(self.path)
            other = sorted(set(old["device"]) - {device})
            if other:
                raise ProfileError(f"{self.path}: holds timings of {other[0]!r}, not {device!r}; "
                                   "choose another --out to profile this device")
            self.rows = old[COLUMNS].to_dict("records")
        self.keys = {r["key"] for r in self.rows}

    def append(self, row: dict) -> None:
        self.rows.append(row)
        self.keys.add(row["key"])
        self._write()

    def replace(self, row: dict) -> None:
        """Replace the row with ``row``'s key (a later, quieter pass of the same shape)."""
        self.rows = [row if r["key"] == row["key"] else r for r in self.rows]
        self._write()

    def _write(self) -> None:
        write_profile(pd.DataFrame(self.rows, columns=COLUMNS), self.path)


@dataclass
class ProfileRun:
    measured: int  # rows timed in this run
    skipped: int  # shapes already in the file
    remaining: int  # shapes left (interrupted by max_rows)
    failed: list[str]  # shapes that could not run, with the reason


def run_profile(shapes: Iterable[Shape], path: str | Path, device: str, *, warmup: int = 3,
                repeats: int = 10, passes: int = 1, max_rows: int | None = None,
                timer: Callable[..., Timing] | None = None, builder=None,
                progress: Callable[[int, int, str], None] | None = None) -> ProfileRun:
    """Time every shape not yet in ``path`` and append its row. ``max_rows`` stops after
    that many new rows (resume by running again). ``passes`` > 1 times the shapes measured
    in this run again, in later sweeps over the whole list, and keeps each shape's quietest
    pass (README "Profile format"). ``timer``/``builder`` default to
    calibrate.timing.measure / calibrate.ops.build (tests substitute counting wrappers)."""
    from calibrate import ops, timing

    timer = timer or timing.measure
    builder = builder or ops.build
    with ops.cpu_threads(device):
        name, vers = ops.device_name(device), ops.versions(device)
        loop = _Loop(device, name, vers, warmup, repeats, timer, builder, progress)
        return loop.run(shapes, path, max_rows, passes)


@dataclass
class _Loop:
    """The measuring loop of run_profile (device threads already set)."""

    device: str
    name: str
    vers: dict[str, str]
    warmup: int
    repeats: int
    timer: Callable[..., Timing]
    builder: Callable
    progress: Callable[[int, int, str], None] | None

    def run(self, shapes, path, max_rows, passes) -> ProfileRun:
        writer = ProfileWriter(path, self.name)
        shapes = list(shapes)
        todo = [s for s in shapes if s.key() not in writer.keys]
        run = ProfileRun(0, len(shapes) - len(todo), 0, [])
        total = len(todo) * passes
        done: list[tuple[Shape, Timing]] = []
        for i, shape in enumerate(todo):
            if max_rows is not None and run.measured >= max_rows:
                run.remaining = len(todo) - i
                break
            self._tick(i, total, shape)
            t = self._time(shape)
            if isinstance(t, str):
                run.failed.append(f"{shape.key()}: {t}")
                continue
            writer.append(self._row(shape, t))
            done.append((shape, t))
            run.measured += 1
        # later passes: the same shapes again, each sweep a whole pass apart in time, so a
        # burst of contention that inflated one pass of a shape rarely inflates all of them
        for k in range(1, passes):
            for j, (shape, best) in enumerate(done):
                self._tick(k * len(todo) + j, total, shape)
                t = self._time(shape)  # a failure here keeps the first pass's row
                if not isinstance(t, str) and t.median_ms < best.median_ms:
                    done[j] = (shape, t)
                    writer.replace(self._row(shape, t))
        self._tick(total, total, None)
        return run

    def _tick(self, i: int, n: int, shape: Shape | None) -> None:
        if self.progress:
            self.progress(i, n, "done" if shape is None else f"{shape.op} {shape.name}")

    def _time(self, shape: Shape) -> Timing | str:
        """The shape's timing, or why it could not run."""
        try:
            fn, wall = self.builder(shape, self.device)
            return self.timer(fn, self.device, warmup=self.warmup, repeats=self.repeats,
                              wall=wall)
        except (RuntimeError, ValueError, MemoryError) as e:
            return str(e)

    def _row(self, shape: Shape, t: Timing) -> dict:
        return make_row(shape, t, self.name, self.device, self.vers,
                        "servesim calibrate profile")
