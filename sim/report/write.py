"""Write a run's results to a folder, all or nothing, never over anything but a result.

Files: summary.json, config.json (the resolved scenario with derived values),
requests.parquet, steps.parquet, ttft_cdf.png, kv_vs_waiting.png, steps.jsonl with
--step-log, and the marker ``.servesim-result``.

    ResultWriter(out)   checks --out (sim.report.outpath), locks it, cleans up after dead
                        runs, opens a hidden staging folder next to it     (before simulating)
    .write(...)         fills the staging folder
    .commit()           marks it complete and swaps it in atomically (sim.report.staging)
    .abort()            removes the staging folder and any parent folders it created

JSON is strict (RFC 8259): a metric with no value (NaN, an infinite rate) is written as null.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from sim.report import plots, staging
from sim.report.outpath import MARKER, OutPathError, check_out
from sim.report.tables import ROW_GROUP, requests_table, steps_table, write_requests
from sim.runner import RunResult
from traces.errors import clip_path


def finite(obj):
    """``obj`` with numpy values made plain and NaN/infinities replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return finite(obj.tolist())
    return obj


def dump_json(obj, path: Path) -> None:
    text = json.dumps(finite(obj), indent=2, sort_keys=True, allow_nan=False)
    path.write_text(text + "\n")


def _latency_columns(res: RunResult):
    """The requests table's columns the TTFT plot reads (lane, ttft_s)."""
    import pandas as pd

    s = res.specs
    lane = pd.Categorical.from_codes(np.asarray(s.lane, dtype=np.int32), s.lane_names)
    return pd.DataFrame({"lane": lane, "ttft_s": res.recorder.first_token_s - s.arrival_s})


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("servesim")
    except PackageNotFoundError:
        return "unknown"


class ResultWriter:
    """Stages files in a hidden sibling folder; ``commit`` swaps it in (see module doc)."""

    def __init__(self, out: Path):
        self.out = check_out(out)
        self.tmp: Path | None = None
        self._spills: list = []  # streamed step files moved in (sim/metrics/spill.py)
        self._lock: staging.OutLock | None = None
        self._made: list[Path] = []  # parent folders this run created
        try:
            self._open()
        except OSError as e:
            self.abort()
            raise OutPathError(f"--out {clip_path(out)!r}: cannot write there "
                               f"({e.strerror or e})") from None
        except BaseException:
            self.abort()
            raise

    def _open(self) -> None:
        missing = []
        p = self.out.parent
        while not os.path.lexists(p):
            missing.append(p)
            p = p.parent
        for p in reversed(missing):
            try:
                os.mkdir(p, 0o777)
            except FileExistsError:  # another run made it meanwhile: not ours to remove
                if not p.is_dir():
                    raise
                continue
            self._made.append(p)
        self._lock = staging.acquire(self.out)
        check_out(self.out)  # again, now that no other run can change it
        staging.clean_stale(self.out.parent, self.out)
        self.tmp = staging.make_staging(self.out)

    def path(self, name: str) -> Path:
        return self.tmp / name

    def write(self, res: RunResult, summary: dict, config: dict, *, plot: bool = True) -> None:
        """Fill the staging folder. A long run's tables are written a row group at a time:
        requests.parquet (``write_requests``), steps.parquet moved in from the file its rows
        were streamed to (sim/metrics/spill.py), which the recorder reads from then on."""
        dump_json(summary, self.path("summary.json"))
        dump_json(config, self.path("config.json"))
        rec = res.recorder
        if len(res.specs) <= ROW_GROUP and not rec.streamed:  # everything in memory
            req, steps = requests_table(res), steps_table(res)
            req.to_parquet(self.path("requests.parquet"), index=False)
            steps.to_parquet(self.path("steps.parquet"), index=False)
        else:
            write_requests(res, self.path("requests.parquet"))
            req = _latency_columns(res)
            if rec.streamed:
                rec.spill.move_to(self.path("steps.parquet"))
                self._spills.append(rec.spill)
                steps = None
            else:
                steps = steps_table(res)
                steps.to_parquet(self.path("steps.parquet"), index=False)
        if plot:
            title = res.resolved.scenario.name
            plots.ttft_cdf(req, self.path("ttft_cdf.png"), f"{title}: time to first token",
                           slo_ms=res.resolved.scenario.slo.ttft_ms)
            if steps is None:
                starts = [c["start_s"] for c in rec.spill.chunks(["start_s"])]
                steps = plots.KvSeries.of_chunks(
                    lambda: rec.spill.chunks(plots.STREAM_COLUMNS), float(starts[0][0]),
                    float(starts[-1][-1]))
            plots.kv_vs_waiting(steps, self.path("kv_vs_waiting.png"),
                                f"{title}: KV occupancy vs waiting on KV memory")

    def commit(self) -> Path:
        """Mark the staged folder complete and swap it in; the lock is released after."""
        try:
            # the entries this run wrote: a later run replaces the result only while it
            # holds nothing else (sim.report.outpath.foreign_entries)
            files = sorted(set(os.listdir(self.tmp)) - {staging.OWNER, MARKER})
            dump_json({"servesim": _version(), "result": self.out.name, "files": files},
                      self.path(MARKER))
            staging.swap_in(self.tmp, self.out)
            for spill in self._spills:  # a recorder reads its steps from the result now
                spill.relocate(self.out / spill.path.name)
            self.tmp = None
        except BaseException:
            self.abort()
            raise
        self._release()
        return self.out

    def abort(self) -> None:
        """Remove what this run created; never anything else."""
        if self.tmp is not None and os.path.isdir(self.tmp):
            try:
                staging.remove_tree(self.tmp)
            except OSError:
                pass  # left with its owner record: the next run removes it
        self.tmp = None
        self._release()
        for p in reversed(self._made):
            try:
                os.rmdir(p)  # only if still empty
            except OSError:
                break
        self._made = []

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
