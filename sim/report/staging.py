"""Staging folders, the per-result lock, the atomic swap and the cleanup of dead runs.

Next to a result ``results/x`` a run keeps, while it runs:

    results/.x.servesim-lock                 flock held for the whole run (fail fast)
    results/.x.servesim-staging-<hex>/       the new result being written
        .servesim-owner                      {"pid", "host", "start", "out", "role"}

Swap (``swap_in``): the complete staging folder gets the marker and loses its owner
record (from then on the lock alone guards it), then replaces the old result in one
``renameat2(RENAME_EXCHANGE)`` where the kernel and file system offer it, so
``results/x`` always names one complete result; elsewhere the old result is renamed aside
(``.x.servesim-old-<hex>``), the new one renamed in. The old one is then removed. A run
never writes into the folder at ``results/x``; only `servesim report` adds one file there
(report.html, renamed in under the same lock: sim.report.html.write).

Cleanup (``clean_stale``, by the next run in the same parent folder): a helper folder is
dead when no run holds its result's lock and either its owner record names a process of
this host that is gone, or it has no owner record but holds the marker (a complete result
that a killed run had swapped out or not yet swapped in). Dead folders are removed, except
an old result renamed aside whose place is still empty: that one is renamed back.

Invariant: servesim deletes only helper folders that are dead by this rule and result
folders holding the marker.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import time
from pathlib import Path

from sim.report.lock import (
    OWNER,
    OutLock,
    acquire,
    lock_path,
    owner_dead,
    owner_record,
    read_owner,
    write_owner,
)
from sim.report.outpath import INTERNAL, MARKER, OutPathError, is_result, refuse_foreign
from traces.errors import clip_path

SWAP_PAUSE_ENV = "SERVESIM_TEST_SWAP_PAUSE"  # test hook "<phase>:<seconds>": a slow swap
NO_EXCHANGE_ENV = "SERVESIM_TEST_NO_EXCHANGE"  # test hook: use the rename-aside swap
_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2


# ---- folders ------------------------------------------------------------------------
def result_name(helper: str) -> str:
    """The result a helper belongs to: ``.x.servesim-staging-<hex>`` -> ``x``."""
    return helper[1:].rsplit(".servesim-", 1)[0]


def helper_path(out: Path, role: str) -> Path:
    return out.parent / f".{out.name}.servesim-{role}-{secrets.token_hex(4)}"


def make_staging(out: Path, role: str = "staging") -> Path:
    """A new hidden sibling folder with normal permissions (0777 minus the umask) and an
    owner record."""
    for _ in range(100):
        path = helper_path(out, role)
        try:
            os.mkdir(path, 0o777)
        except FileExistsError:
            continue
        write_owner(path, owner_record(out, role))
        return path
    raise OutPathError(f"{out.parent}: cannot create a staging folder")


def remove_tree(path: Path) -> None:
    """Delete a folder, its marker and owner record last: killed half-way, the rest is still
    recognisable as servesim's and the next run finishes the job."""
    for entry in os.scandir(path):
        if entry.name in (OWNER, MARKER):
            continue
        if entry.is_dir(follow_symlinks=False):
            remove_tree(Path(entry.path))
        else:
            os.unlink(entry.path)
    for name in (MARKER, OWNER):
        try:
            os.unlink(path / name)
        except FileNotFoundError:
            pass
    os.rmdir(path)


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """renameat2(2); False when the kernel, libc or file system lacks it."""
    if os.environ.get(NO_EXCHANGE_ENV):
        return False
    fn = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if fn is None:
        return False
    at_fdcwd = -100
    if fn(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def _hook(phase: str) -> None:
    """Test hook: announce ``phase`` and pause there (exchange, aside or remove)."""
    wanted, _, seconds = os.environ.get(SWAP_PAUSE_ENV, "").partition(":")
    if wanted == phase:
        print(f"servesim: test: swap {phase}", flush=True)
        time.sleep(float(seconds))


def swap_in(staging: Path, out: Path) -> None:
    """Make the complete, marked folder ``staging`` the result at ``out`` (module doc)."""
    os.unlink(staging / OWNER)  # from here the lock alone guards it
    if not os.path.lexists(out):
        if not _renameat2(staging, out, _RENAME_NOREPLACE):
            os.rename(staging, out)
        return
    if not is_result(out):  # checked before the run; re-checked under the lock
        raise OutPathError(f"--out {clip_path(out)!r}: is no longer a servesim result")
    refuse_foreign(str(out), out)  # a file put there during the run is not servesim's
    _hook("exchange")
    if _renameat2(staging, out, _RENAME_EXCHANGE):
        old = staging
    else:
        old = helper_path(out, "old")
        os.rename(out, old)
        _hook("aside")
        try:
            os.rename(staging, out)
        except OSError:
            os.rename(old, out)
            raise
    _hook("remove")
    remove_tree(old)


# ---- cleanup of dead runs -----------------------------------------------------------
def clean_stale(parent: Path, held: Path) -> list[str]:
    """Remove (or restore) helper folders of dead runs in ``parent``; ``held`` is the result
    whose lock this run holds. Returns what was done, for the log."""
    done = []
    try:
        entries = [e for e in os.scandir(parent) if INTERNAL.match(e.name)]
    except OSError:
        return done
    for e in entries:
        if e.name.endswith(".servesim-lock"):
            if not _tidy_lock(Path(e.path)):
                continue
        elif e.is_dir(follow_symlinks=False):
            action = _clean_folder(Path(e.path), held)
            if action:
                done.append(f"{action} {e.name}")
    return done


def _tidy_lock(path: Path) -> bool:
    """Remove a lock file nobody holds (left by a killed run)."""
    lock = OutLock(path)
    try:
        if lock.try_acquire() is None:
            lock.release()
            return True
    except OSError:
        pass
    return False


def _clean_folder(path: Path, held: Path) -> str | None:
    rec = read_owner(path)
    if rec is None and not is_result(path):
        return None  # not provably servesim's (or being created this very moment)
    if rec is not None and not owner_dead(rec):
        return None
    out = path.parent / result_name(path.name)
    lock = None
    if out != held:
        lock = OutLock(lock_path(out))
        if lock.try_acquire() is not None:
            return None
    try:
        if ".servesim-old-" in path.name and is_result(path) and not os.path.lexists(out):
            os.rename(path, out)  # a swap killed between its two renames: put the old back
            return "restored"
        remove_tree(path)
        return "removed"
    except OSError:
        return None
    finally:
        if lock is not None:
            lock.release()


__all__ = ["MARKER", "OWNER", "OutLock", "acquire", "clean_stale", "make_staging",
           "remove_tree", "swap_in"]
