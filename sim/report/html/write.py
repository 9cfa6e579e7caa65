"""report.html into a results folder: under the folder's lock, atomically, replacing only a
report servesim wrote.

The results folder is servesim's, but report.html may sit in it beside a user's own files
(a copy, a note): an existing report.html is replaced only when it starts with the
report's signature or carries servesim's file mark (sim.report.outfile); anything else at
that name is refused. The lock (sim.report.lock) is the one a run, sweep or capacity search
holds while it writes the folder, so the page never mixes two results, and a run never
swaps a result in while its report is being written.
"""

from __future__ import annotations

import os
from pathlib import Path

from sim.report.html import folder
from sim.report.html.page import SIGNATURE, render
from sim.report.lock import acquire
from sim.report.outfile import is_servesim_file, write_file
from sim.report.outpath import OutPathError
from traces.errors import InputError, clip, clip_path

REPORT = "report.html"


def write_report(path: str | Path) -> Path:
    """Write DIR/report.html for the results folder ``path``; returns its path. Bad input
    (no such folder, not servesim's, a foreign report.html) raises InputError first."""
    out = Path(os.path.abspath(folder.check(path)))
    target = out / REPORT
    _check_target(target)
    try:
        lock = acquire(out)
    except OSError as e:
        raise OutPathError(f"{clip_path(out)}: cannot lock it to write {REPORT} "
                           f"({e.strerror or e})") from None
    try:
        page = _render(folder.read(out))  # read under the lock: one result, whole
        _check_target(target)
        with write_file(target, "report", own_folder=True) as tmp:
            tmp.write_text(page, encoding="utf-8")
    finally:
        lock.release()
    return target


def _render(found: folder.Folder) -> str:
    """The page; a folder whose files parse but lack what the report reads (a summary
    without ``kv_cache``, a config without ``derived``, a frontier.csv of other columns:
    edited or cut short, not as servesim wrote them) is an InputError naming the folder."""
    try:
        return render(found)
    except InputError:  # already one line naming what is wrong
        raise
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
        what = f"{type(e).__name__}: {e}" if not isinstance(e, KeyError) else f"no {e}"
        raise InputError(f"{clip_path(found.path)}: its summary.json, config.json or tables "
                         f"lack what the report reads ({clip(what)}); not as servesim wrote "
                         "them: rerun the command that wrote the folder") from None


def check_room(out: str | Path) -> None:
    """Before a sweep or capacity search runs with --report: a foreign report.html in its
    folder is refused now, not after the work."""
    _check_target(Path(out) / REPORT)


def _check_target(target: Path) -> None:
    if os.path.lexists(target) and not is_servesim_file(target, SIGNATURE):
        raise OutPathError(f"{clip_path(target)}: a file servesim did not write is in the way "
                           f"of the report; servesim replaces only its own {REPORT}: move it")
