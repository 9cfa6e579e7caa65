"""What a results folder holds, read back without simulating anything.

    run       DIR/.servesim-result + summary.json, config.json, *.png   (`servesim run`)
    sweep     DIR/manifest.json (kind sweep) + points.parquet, plots/*.png, chosen/
    capacity  the same (kind capacity) + frontier.csv, chosen.yaml
    sizing    the same (kind sizing: capacity --target-rate) + sizing.yaml

Anything else (no folder, a file, a folder servesim did not write) is an InputError naming
the path and what is expected. Files are read bounded and as regular files only
(traces.files); a plot that is not a PNG is left out with a warning, never embedded.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from sim.plan.store import is_sweep, load_points
from sim.report.outpath import MARKER, is_result
from traces.errors import InputError, clip_path
from traces.files import read_bytes

JSON_MAX = 64 << 20  # a summary with many lanes or a fleet's replicas stays far below
PNG_MAX = 32 << 20  # a plot servesim draws is ~100 KB at 110 dpi
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EXPECTED = ("give the folder `servesim run`, `sweep` or `capacity` wrote (it holds "
            f"{MARKER} or manifest.json)")
# plots in the order a reader wants them; any other PNG servesim wrote follows by name
ORDER = ("rate_curves", "frontier", "ttft_cdf", "tpot_cdf", "kv_vs_waiting", "kv_timeline")


@dataclass(frozen=True)
class Folder:
    path: Path
    kind: str  # "run", "sweep", "capacity" or "sizing"
    summary: dict | None = None  # the run's summary.json (a sweep's: its chosen point's)
    config: dict | None = None  # config.json of that run: the resolved scenario
    config_file: Path | None = None
    chosen_text: str | None = None  # capacity's chosen.yaml as written
    sizing_text: str | None = None  # capacity --target-rate's sizing.yaml as written
    chosen: dict | None = None
    manifest: dict | None = None
    points: pd.DataFrame | None = None
    frontier: pd.DataFrame | None = None
    plots: tuple[tuple[str, bytes], ...] = ()  # (file name, PNG bytes), in ORDER
    warnings: tuple[str, ...] = field(default=())  # found while reading (a skipped plot)


def check(path: str | Path) -> Path:
    """``path`` if it is a folder servesim wrote (a run result or a sweep folder), else
    InputError; touches nothing."""
    p = Path(path)
    _check_folder(p)
    if not (is_result(p) or is_sweep(p)):
        raise InputError(f"{clip_path(p)}: not a servesim results folder; {EXPECTED}")
    return p


def read(path: str | Path) -> Folder:
    """The results folder at ``path`` (module doc), or InputError."""
    p = check(path)
    return _run(p) if is_result(p) else _plan(p)


def _check_folder(p: Path) -> None:
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise InputError(f"{clip_path(p)}: no such folder; {EXPECTED}") from None
    except (OSError, ValueError) as e:
        raise InputError(f"{clip_path(p)}: cannot be read ({getattr(e, 'strerror', e)})"
                         ) from None
    if not stat.S_ISDIR(mode):
        raise InputError(f"{clip_path(p)}: not a folder; {EXPECTED}")


def _json(path: Path, what: str) -> dict:
    if not os.path.lexists(path):
        raise InputError(f"{clip_path(path)}: missing; the folder is not a complete servesim "
                         "result (rerun the command that wrote it)")
    try:
        doc = json.loads(read_bytes(path, what, JSON_MAX).decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise InputError(f"{clip_path(path)}: not {what} ({type(e).__name__}); rerun the "
                         "command that wrote it") from None
    if not isinstance(doc, dict):
        raise InputError(f"{clip_path(path)}: not {what} (a JSON object is expected)")
    return doc


def _run_files(p: Path) -> dict:
    summary = _json(p / "summary.json", "a servesim summary")
    if not isinstance(summary.get("latency_ms"), dict) or "requests" not in summary:
        raise InputError(f"{clip_path(p / 'summary.json')}: not a servesim summary (no "
                         "latency_ms or requests)")
    return {"summary": summary, "config": _json(p / "config.json", "a servesim config"),
            "config_file": p / "config.json"}


def _run(p: Path) -> Folder:
    plots, skipped = _plots(p)
    return Folder(p, "run", **_run_files(p), plots=plots, warnings=skipped)


def _plan(p: Path) -> Folder:
    manifest, points = load_points(p)  # InputError on a partial or foreign folder
    kind = manifest.get("kind") if manifest.get("kind") in ("capacity", "sizing") else "sweep"
    chosen = p / "chosen"
    run = _run_files(chosen) if is_result(chosen) else {}
    plots, skipped = _plots(p / "plots")
    extra = {}
    if kind == "capacity" and os.path.isfile(p / "frontier.csv"):
        extra["frontier"] = _csv(p / "frontier.csv")
    if kind == "capacity" and os.path.isfile(p / "chosen.yaml"):
        extra.update(_chosen(p / "chosen.yaml"))
    if kind == "sizing" and os.path.isfile(p / "sizing.yaml"):
        extra["sizing_text"] = _text(p / "sizing.yaml", "a sizing.yaml")
    return Folder(p, kind, **run, manifest=manifest, points=points, plots=plots,
                  warnings=skipped, **extra)


def _csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (ValueError, OSError) as e:
        raise InputError(f"{clip_path(path)}: not a readable frontier table "
                         f"({type(e).__name__}); rerun the capacity search") from None


def _text(path: Path, what: str) -> str:
    return read_bytes(path, what, JSON_MAX).decode("utf-8", "replace")


def _chosen(path: Path) -> dict:
    text = _text(path, "a chosen.yaml")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        raise InputError(f"{clip_path(path)}: not YAML; rerun the capacity search") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("locked"), dict):
        raise InputError(f"{clip_path(path)}: no locked section; not the chosen.yaml "
                         "servesim capacity writes")
    return {"chosen_text": text, "chosen": doc}


def _rank(path: Path) -> tuple[int, str]:
    return (ORDER.index(path.stem) if path.stem in ORDER else len(ORDER), path.name)


def _plots(folder: Path) -> tuple[tuple[tuple[str, bytes], ...], tuple[str, ...]]:
    """The PNGs directly in ``folder`` (regular files, not links: servesim writes none),
    and why any was left out."""
    if folder.is_symlink() or not folder.is_dir():
        return (), ()
    keep, skipped = [], []
    for f in sorted(folder.glob("*.png"), key=_rank):
        if not stat.S_ISREG(os.lstat(f).st_mode):
            skipped.append(f"{f.name}: not a regular file; left out")
            continue
        try:
            data = read_bytes(f, "a plot", PNG_MAX)
        except InputError as e:
            skipped.append(f"{e}; left out")
            continue
        if data[:8] != PNG_MAGIC:
            skipped.append(f"{f.name}: not a PNG image; left out")
            continue
        keep.append((f.name, data))
    return tuple(keep), tuple(skipped)
