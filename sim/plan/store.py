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
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from traces.errors import InputError

MANIFEST = "manifest.json"
POINTS = "points"
PARQUET = "points.parquet"
FIXED = ("point_id", "config_id", "config")  # first columns, then parameters, then metrics


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _differences(old: dict, new: dict) -> list[str]:
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


class PointStore:
    """The folder of one sweep or capacity search."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.dir = self.out / POINTS

    def open(self, manifest: dict, *, resume: bool) -> None:
        """Create the folder, or (``resume``) check it holds the same sweep."""
        path = self.out / MANIFEST
        if path.exists():
            old = json.loads(path.read_text())
            if not resume:
                raise InputError(f"{self.out}: holds a {old.get('kind', 'sweep')} already; pass "
                                 "--resume to continue it, or choose another --out")
            diff = _differences(old, manifest)
            if diff:
                raise InputError(f"{self.out}: --resume with a different {', '.join(diff)} "
                                 "than the sweep there; use another --out")
        elif self.out.exists() and any(self.out.iterdir()):
            raise InputError(f"{self.out}: exists and is not a servesim sweep folder; "
                             "choose another --out")
        self.dir.mkdir(parents=True, exist_ok=True)
        for tmp in self.dir.glob(".*.tmp"):  # a write cut by a kill: that point reruns
            tmp.unlink()
        write_atomic(path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")

    def done(self) -> dict[str, dict]:
        """Every finished point's record, by point id."""
        out = {}
        for f in sorted(self.dir.glob("*.json")):
            out[f.stem] = json.loads(f.read_text())
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


def load_points(out: Path) -> tuple[dict, pd.DataFrame]:
    """(manifest, points table) of a finished or partial sweep folder."""
    out = Path(out)
    mpath, ppath = out / MANIFEST, out / PARQUET
    if not mpath.exists():
        raise InputError(f"{out}: not a sweep or capacity folder (no {MANIFEST})")
    manifest = json.loads(mpath.read_text())
    if not ppath.exists():
        raise InputError(f"{out}: no finished points yet ({PARQUET} missing)")
    return manifest, pd.read_parquet(ppath)
