"""A sweep's output folder: one file per finished point, consolidated into points.parquet.

    DIR/manifest.json   what was asked (scenario, grid, loads, seeds, SLOs): --resume checks it
    DIR/points/<id>.json  one finished point, written atomically (temp file + rename)
    DIR/points.parquet  every finished point, one row each, in plan order (rewritten atomically)

A sweep killed at any moment leaves finished points whole and nothing else (a temp file
at most, removed on resume); ``--resume`` runs only the points without a file.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from sim.report.lock import acquire
from sim.report.outpath import SWEEP_MANIFEST, OutPathError, check_out, holds, is_result
from traces.errors import InputError, clip_path
from traces.files import read_bytes, read_parquet

MANIFEST = SWEEP_MANIFEST
POINTS = "points"
PARQUET = "points.parquet"
MANIFEST_MAX_BYTES = 64 << 20  # a manifest holds the scenario and the plan
MANIFEST_KEYS = ("kind", "scenario", "source", "base_dir", "load_key", "seeds")
FIXED = ("point_id", "config_id", "config")  # first columns, then parameters, then metrics


_POINT_FILE = re.compile(r"[0-9a-f]{16}\.json")  # a point's record: its digest id
_OWN_TMP = re.compile(r"\.[^/]+\.json\.[0-9]+\.tmp")  # write_atomic's temp names


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _not_a_run(out: Path) -> None:
    """A sweep writes into its folder (points, manifest, the chosen run below it) instead of
    replacing it, so a `run` result is no place for one: refused before anything runs."""
    if is_result(out):
        raise OutPathError(f"--out {clip_path(out)!r}: is the result of a `servesim run`; a "
                           "sweep or capacity search writes a folder of its own: choose "
                           "another --out")


def check_folder(out: Path) -> None:
    """What ``PointStore.open`` refuses at ``out`` when no sweep is there (a run's result, and
    whatever `run`'s --out refuses), checked touching nothing: a command can say it before
    anything else."""
    if not is_sweep(out):
        _not_a_run(out)
        check_out(out)


def _differences(old: dict, new: dict) -> list[str]:
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


class PointStore:
    """The folder of one sweep or capacity search."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.dir = self.out / POINTS
        self._lock = None

    def open(self, manifest: dict, *, resume: bool) -> None:
        """Create the folder, or (``resume``) check it holds the same sweep; lock it for the
        whole sweep (``close`` releases). Anything else at ``out`` is refused as `run`'s
        --out is (sim.report.outpath): a user's folder, a file, a device, under a file."""
        path = self.out / MANIFEST
        if is_sweep(self.out):
            try:
                self._lock = acquire(self.out)
            except OSError as e:  # its lock file goes beside it: a parent it cannot write
                raise OutPathError(f"--out {clip_path(self.out)!r}: cannot lock it from "
                                   f"{clip_path(self.out.parent)} ({e.strerror or e}); the "
                                   "folder that holds a sweep must be writable") from None
            try:
                self._same_sweep(manifest, resume)
            except BaseException:
                self.close()
                raise
        else:
            check_folder(self.out)
            if resume:
                warnings.warn(f"--resume: no sweep in {clip_path(self.out)} to continue; a "
                              "new one starts there", stacklevel=2)
            self._lock = None
        try:
            if self._lock is None:
                self.out.parent.mkdir(parents=True, exist_ok=True)
                self._lock = acquire(self.out)
                _not_a_run(self.out)
                check_out(self.out)  # again, now that no other sweep can change it
            self.dir.mkdir(parents=True, exist_ok=True)
            for tmp in self.dir.glob(".*.json.*.tmp"):  # write_atomic's, cut by a kill:
                if _OWN_TMP.fullmatch(tmp.name):  # that point reruns (a user's file stays)
                    tmp.unlink()
            write_atomic(path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        except BaseException as e:
            self.close()
            if not isinstance(e, OSError):
                raise
            raise OutPathError(f"--out {clip_path(self.out)!r}: cannot write there "
                               f"({e.strerror or e})") from None

    def _same_sweep(self, manifest: dict, resume: bool) -> None:
        old = read_manifest(self.out, ("kind",))
        if not resume:
            raise InputError(f"{clip_path(self.out)}: holds a {old.get('kind', 'sweep')} "
                             "already; pass --resume to continue it, or choose another --out")
        diff = _differences(old, manifest)
        if diff:
            raise InputError(f"{clip_path(self.out)}: --resume with {', '.join(diff)} "
                             "different from the sweep there; use another --out")

    def close(self) -> None:
        """Release the folder's lock (the kernel drops it if the process dies)."""
        lock, self._lock = getattr(self, "_lock", None), None
        if lock is not None:
            lock.release()

    def done(self) -> dict[str, dict]:
        """Every finished point's record, by point id; an unreadable point file (cut or
        edited) is left to be run again (and replaced) with a warning."""
        out = {}
        for f in sorted(self.dir.glob("*.json")):
            if not _POINT_FILE.fullmatch(f.name):  # not a point's name: not servesim's
                warnings.warn(f"{clip_path(f)}: not a point file (points are named by their "
                              "16-hex-digit id); left alone", stacklevel=2)
                continue
            try:
                rec = json.loads(f.read_text(encoding="utf-8"))
                if not isinstance(rec, dict) or rec.get("id") != f.stem:
                    raise ValueError("not a point record")
            except (OSError, ValueError) as e:
                warnings.warn(f"{clip_path(f)}: unreadable point ({type(e).__name__}); "
                              "it runs again", stacklevel=2)
                continue
            out[f.stem] = rec
        return out

    def put(self, rec: dict) -> None:
        # key order kept: a resumed folder lists columns as an uninterrupted one does
        write_atomic(self.dir / f"{rec['id']}.json", json.dumps(rec) + "\n")

    def consolidate(self, order: Iterable[str], records: dict[str, dict]) -> Path:
        """Write points.parquet: the finished points among ``order``, in that order."""
        rows = [row(records[i]) for i in order if i in records]
        df = pd.DataFrame(rows)
        tmp = self.out / f".{PARQUET}.{os.getpid()}.tmp"
        df.to_parquet(tmp, index=False)
        os.replace(tmp, self.out / PARQUET)
        return self.out / PARQUET


def row(rec: dict) -> dict:
    """A record as one table row: ids, parameters (dotted keys), then every metric."""
    params, metrics = rec["params"], rec["metrics"]
    clash = sorted(set(params) & set(metrics))
    if clash:
        raise InputError(f"--grid {clash[0]}: the name of a result column; vary another key")
    return {"point_id": rec["id"], "config_id": rec["config_id"], "config": rec["config"],
            **params, "load": rec["load"], **metrics}


def is_sweep(out: Path) -> bool:
    """A real folder (not a link) holding a manifest.json file."""
    return holds(out, MANIFEST)


def read_manifest(out: Path, keys: tuple[str, ...] = MANIFEST_KEYS) -> dict:
    """The folder's manifest.json, with ``keys`` (the commands that read it need them)."""
    where = clip_path(Path(out) / MANIFEST)
    try:
        raw = read_bytes(Path(out) / MANIFEST, "a sweep manifest", MANIFEST_MAX_BYTES)
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise InputError(f"{where}: not a servesim manifest ({type(e).__name__}); was the "
                         "folder written by `servesim sweep` or `capacity`?") from None
    missing = [k for k in keys if not isinstance(doc, dict) or k not in doc]
    if missing:
        raise InputError(f"{where}: not a servesim manifest (no {missing[0]!r}); was the "
                         "folder written by `servesim sweep` or `capacity`?")
    if len(keys) > 1 and not (isinstance(doc["scenario"], dict) and isinstance(
            doc["seeds"], list) and doc["seeds"] and isinstance(doc["base_dir"], str)):
        raise InputError(f"{where}: not a servesim manifest (scenario, seeds or base_dir of "
                         "the wrong type)")
    return doc


def load_points(out: Path) -> tuple[dict, pd.DataFrame]:
    """(manifest, points table) of a finished or partial sweep folder."""
    out = Path(out)
    ppath = out / PARQUET
    if not is_sweep(out):
        raise InputError(f"{clip_path(out)}: not a sweep or capacity folder (no {MANIFEST})")
    manifest = read_manifest(out)
    if not os.path.isfile(ppath):
        raise InputError(f"{clip_path(out)}: no finished points yet ({PARQUET} missing)")
    df = read_parquet(ppath, "; rerun the sweep with --resume")
    missing = [c for c in FIXED if c not in df]
    if missing:
        raise InputError(f"{clip_path(ppath)}: not a servesim points table (no column "
                         f"{missing[0]!r})")
    return manifest, df
