"""Output files (PNG, JSON, YAML, JSONL): the result-folder policy of `run`, for one file.

    check_file(path, flag)        -> absolute path, or OutPathError  (pure: touches nothing)
    free_default(path)            -> path, or the first free ``name-2.ext``, ``name-3.ext``...
    with write_file(path, flag) as tmp: ...   fills ``tmp``; renamed over ``path`` on success

servesim replaces only a file it wrote itself: one carrying the extended attribute
``user.servesim-result`` (set on every file written here, before the rename). Anything
else at the path (a user's file, a folder, a device such as /dev/null or /dev/full, a FIFO,
a link, a place under a file) is refused with exit 2 before any work, naming the path. The
new file is written to a hidden sibling ``.<name>.servesim-staging-<hex>`` and renamed over
the target in one step, so the target is always the old file or the whole new one; the
sibling is removed on any failure. Where the file system keeps no user attributes the file
is written unmarked, and a later write to the same path is refused (remove it first).

A command's default output (``compare.png``, ``model.yaml``, ``workload.jsonl``) never
replaces an existing file: ``free_default`` picks the next free numbered name.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from sim.report.outpath import (
    INTERNAL,
    NAME_MAX,
    XATTR,
    OutPathError,
    _kind,
    is_result,
    is_servesim_file,
)
from traces.errors import clip_path

DEFAULT_TRIES = 1000


def _refuse(flag: str, raw: object, why: str) -> OutPathError:
    return OutPathError(f"{flag} {clip_path(raw)!r}: {why}")


def check_file(path: str | Path, flag: str, *, own_folder: bool = False,
               signature: bytes | None = None) -> Path:
    """The absolute path servesim may write the file ``path`` to, or OutPathError.
    ``own_folder``: the folder is servesim's (a staging folder, a sweep's plots/), so a
    regular file there is its own too (written before files were marked)."""
    raw = str(path)
    if not raw.strip() or "\0" in raw:
        raise _refuse(flag, raw, "is empty or contains a NUL character; give a file path")
    p = Path(os.path.abspath(raw))
    if not p.name or p == Path(p.anchor):
        raise _refuse(flag, raw, "is the file system root; give a file path")
    if raw.endswith(os.sep):
        raise _refuse(flag, raw, "ends with a slash (a folder); give a file path")
    if len(os.fsencode(p.name)) > NAME_MAX:
        raise _refuse(flag, raw, f"the file name is longer than {NAME_MAX} bytes")
    if INTERNAL.match(p.name) or ".servesim-staging-" in p.name:
        raise _refuse(flag, raw, "is a name servesim uses for its own staging files")
    _check_existing_file(flag, raw, p, own_folder, signature)
    _check_file_parent(flag, raw, p, own_folder)
    return p


def _check_existing_file(flag: str, raw: str, p: Path, own_folder: bool,
                         signature: bytes | None) -> None:
    try:
        mode = os.lstat(p).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as e:
        raise _refuse(flag, raw, f"cannot be checked ({e.strerror})") from None
    if stat.S_ISDIR(mode):
        raise _refuse(flag, raw, "is a folder; give a file path")
    if not stat.S_ISREG(mode):
        raise _refuse(flag, raw, f"is {_kind(mode)}; servesim writes only a new file or "
                      "replaces one it wrote itself")
    if not own_folder and not is_servesim_file(p, signature):
        raise _refuse(flag, raw, "is a file servesim did not write; servesim replaces only "
                      "its own files: remove it or choose another path")


def _check_file_parent(flag: str, raw: str, p: Path, own_folder: bool) -> None:
    try:
        mode = os.stat(p.parent).st_mode
    except FileNotFoundError:
        raise _refuse(flag, raw, f"folder {clip_path(p.parent)} does not exist") from None
    except NotADirectoryError:
        raise _refuse(flag, raw, "is under a file, not a folder") from None
    except OSError as e:
        raise _refuse(flag, raw, f"{clip_path(p.parent)} cannot be read ({e.strerror})"
                      ) from None
    if not stat.S_ISDIR(mode):
        raise _refuse(flag, raw, f"is under {clip_path(p.parent)}, which is {_kind(mode)}")
    for a in () if own_folder else (p.parent, *p.parent.parents):
        if is_result(a):
            raise _refuse(flag, raw, f"is inside the servesim result {clip_path(a)}, which a "
                          "later run would replace; choose a path outside it")
    if not os.access(p.parent, os.W_OK | os.X_OK):
        raise _refuse(flag, raw, f"folder {clip_path(p.parent)} is not writable")


def free_default(path: str | Path) -> Path:
    """``path`` when nothing is there, else ``<stem>-2<suffix>``, ``-3``...: a default output
    never replaces an existing file."""
    p = Path(path)
    if not os.path.lexists(p):
        return p
    for n in range(2, DEFAULT_TRIES):
        cand = p.with_name(f"{p.stem}-{n}{p.suffix}")
        if not os.path.lexists(cand):
            return cand
    raise OutPathError(f"{clip_path(p)}: {DEFAULT_TRIES} numbered files of that name exist; "
                       "give the output path")


def _mark(path: Path) -> None:
    from sim import version

    try:
        os.setxattr(path, XATTR, f"servesim {version()}".encode(), follow_symlinks=False)
    except OSError:
        pass  # no user attributes here: written unmarked (module doc)


@contextlib.contextmanager
def write_file(path: str | Path, flag: str, *, own_folder: bool = False,
               signature: bytes | None = None) -> Iterator[Path]:
    """Yield a staging path beside ``path``; on success mark it and rename it over ``path``
    (checked again first); on any failure remove it. OSError becomes one OutPathError."""
    target = check_file(path, flag, own_folder=own_folder, signature=signature)
    tmp = target.parent / f".{target.name[:NAME_MAX]}.servesim-staging-{secrets.token_hex(4)}"
    try:
        yield tmp
        if not os.path.lexists(tmp):
            raise OutPathError(f"{flag} {clip_path(path)!r}: nothing was written")
        _fsync(tmp)
        _mark(tmp)
        check_file(target, flag, own_folder=own_folder, signature=signature)  # still ours
        os.replace(tmp, target)
    except OSError as e:
        raise _refuse(flag, path, f"cannot write there ({e.strerror or e})") from None
    finally:
        with contextlib.suppress(OSError):
            if os.path.lexists(tmp):
                os.unlink(tmp)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text(path: str | Path, flag: str, text: str, signature: bytes | None = None) -> Path:
    """``text`` (UTF-8) to ``path`` under this policy."""
    with write_file(path, flag, signature=signature) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(os.path.abspath(path))


__all__ = ["XATTR", "check_file", "free_default", "is_servesim_file", "write_file",
           "write_text"]
