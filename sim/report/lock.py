"""Owner records and the per-result lock (see sim.report.staging for the whole picture).

    results/.x.servesim-lock       an exclusive, non-blocking flock for the whole run
    <helper folder>/.servesim-owner {"pid", "host", "start", "out", "role"}

The kernel drops a flock when its process dies, so a killed run never blocks the next one;
the owner record lets the next run prove a helper folder's process is gone.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import stat
from pathlib import Path

from sim.report.outpath import OutPathError
from traces.errors import clip

OWNER = ".servesim-owner"


# ---- owners -------------------------------------------------------------------------
def _start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), to tell a reused pid apart."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])  # a zombie counts as dead


def owner_record(out: Path, role: str) -> dict:
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "start": _start_ticks(pid),
            "out": out.name, "role": role}


def write_owner(folder: Path, record: dict) -> None:
    tmp = folder / f"{OWNER}.tmp"
    tmp.write_text(json.dumps(record))
    os.replace(tmp, folder / OWNER)


def read_owner(folder: Path) -> dict | None:
    try:
        rec = json.loads((folder / OWNER).read_text())
        return rec if isinstance(rec, dict) and isinstance(rec.get("pid"), int) else None
    except (OSError, ValueError):
        return None


def owner_dead(rec: dict) -> bool:
    """True only when the owner is provably gone: same host, and no such process (or a
    different one under the same pid)."""
    pid = rec["pid"]
    if rec.get("host") != socket.gethostname() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    except (OverflowError, ValueError):
        return False
    now = _start_ticks(pid)
    if now is None:
        return Path("/proc/self").exists()  # /proc says the pid is gone (or a zombie)
    return rec.get("start") is not None and now != rec["start"]


# ---- the lock -----------------------------------------------------------------------
def lock_path(out: Path) -> Path:
    return out.parent / f".{out.name}.servesim-lock"


class OutLock:
    """An exclusive, non-blocking flock on a lock file next to the result; the kernel
    drops it when the process dies, so a killed run never blocks the next one."""

    def __init__(self, path: Path):
        self.path, self.fd = path, None

    def try_acquire(self) -> dict | None:
        """None when acquired; else the holder's record (or {} if unreadable)."""
        while True:  # never through a link, never anything but a plain file
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK,
                         0o644)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise OutPathError(f"{clip(str(self.path))}: the lock file is not a file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 4096)
                os.close(fd)
                try:
                    rec = json.loads(holder)
                except ValueError:
                    return {}
                return rec if isinstance(rec, dict) else {}
            try:  # the file we locked must still be the one at the path (see release)
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
                return None
            os.close(fd)

    def write(self, record: dict) -> None:
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps(record).encode(), 0)

    def release(self) -> None:
        """Unlink, then unlock: a waiter that locked the unlinked file sees the mismatch."""
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None


def acquire(out: Path) -> OutLock:
    lock = OutLock(lock_path(out))
    holder = lock.try_acquire()
    if holder is not None:
        who = f"pid {holder.get('pid')} on {holder.get('host')}" if holder else "another run"
        raise OutPathError(f"--out {clip(str(out))!r}: another servesim run ({who}) is "
                           "writing this result now; wait for it or choose another --out")
    lock.write(owner_record(out, "lock"))
    return lock
