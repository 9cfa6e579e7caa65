"""Where results go, and whether servesim may write there.

    default_out(name, sets, trace) -> results/<slug>      (a safe folder under results/)
    check_out(out) -> absolute path, or OutPathError       (pure: touches nothing)

servesim only ever replaces a folder it wrote itself: one holding the marker file
``.servesim-result``, and only whole: the marker lists the entries the run wrote, and a
result holding anything else (a user's note, a copied trace, a folder) is refused too, since
replacing it would delete what servesim did not create. Everything else that exists at
``--out`` (a user's folder, the current folder, a file, a FIFO, a link) is refused before
anything is simulated.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path

from traces.errors import InputError, clip_path

MARKER = ".servesim-result"  # present in every complete result folder servesim wrote
RESULTS = Path("results")
# what a run's folder holds when its marker predates the list of entries (servesim's own
# names, sim/report/write.py); report.html is servesim's when it starts with REPORT_SIGNATURE
RUN_FILES = frozenset({"summary.json", "config.json", "requests.parquet", "steps.parquet",
                       "ttft_cdf.png", "kv_vs_waiting.png", "steps.jsonl", "live_steps.parquet"})
REPORT = "report.html"
REPORT_SIGNATURE = b"<!DOCTYPE html>\n<!-- servesim report -->\n"  # sim/report/html/page.py
XATTR = "user.servesim-result"  # set on every file servesim writes (sim/report/outfile.py)
_MARKER_MAX = 1 << 20  # bytes of a marker read back (it lists a run's entries)
SWEEP_MANIFEST = "manifest.json"  # a sweep's or capacity search's folder (sim/plan/store.py)
# hidden helpers next to a result: .<name>.servesim-staging-<hex>, -old-<hex>, .servesim-lock
INTERNAL = re.compile(r"^\..*\.servesim-(staging-[0-9a-f]{8}|old-[0-9a-f]{8}|lock)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]+")
NAME_MAX = 200  # bytes of a result folder's name (its helpers add 26; file systems allow 255)
SLUG_MAX = 120  # characters of a generated folder name (file systems allow 255 bytes)


class OutPathError(InputError):
    """``--out`` names a place servesim must not write to."""


def slug(text: str, fallback: str = "scenario") -> str:
    """``text`` as one safe path component: no separators, no leading dot, <= SLUG_MAX chars.

    Long slugs keep a hash of the full text so that different inputs stay apart.
    """
    s = _UNSAFE.sub("-", text).strip(".-")
    s = re.sub(r"-{2,}", "-", re.sub(r"\.{2,}", "-", s)).strip(".-")
    if len(s) > SLUG_MAX:
        digest = hashlib.sha1(text.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        s = s[: SLUG_MAX - 9].rstrip(".-") + "-" + digest
    return s or fallback


def default_out(name: str, sets: tuple[str, ...] = (), trace: str | None = None) -> Path:
    """``results/<name>``; with ``--set``/``--trace``, a folder named after them too, so a
    variant never silently replaces the scenario's own result."""
    parts = [name] + [s.strip() for s in sets]
    if trace is not None:
        parts.append(f"trace={Path(trace).name}")
    return RESULTS / slug(",".join(parts))


def _regular(path: Path) -> bool:
    """A regular file, not a link to one."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


def holds(path: Path, name: str) -> bool:
    """A real directory (not a link) holding ``name`` as a regular file."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode) and _regular(Path(path) / name)
    except (OSError, ValueError):
        return False


def is_result(path: Path) -> bool:
    """A folder servesim wrote: a real directory holding the marker as a regular file."""
    return holds(path, MARKER)


def is_servesim_file(path: Path, signature: bytes | None = None) -> bool:
    """A regular file (not a link) marked as written by servesim, or starting with
    ``signature`` (a header servesim writes in every file of that kind, e.g. model YAML's
    first line: such a file copied or checked out keeps it, not the attribute)."""
    if not _regular(path):
        return False
    try:
        if signature is not None:
            with open(path, "rb") as f:
                if f.read(len(signature)) == signature:
                    return True
        return os.getxattr(path, XATTR, follow_symlinks=False).startswith(b"servesim")
    except (OSError, ValueError):
        return False


def _written(path: Path) -> frozenset[str] | None:
    """The entries the marker of result ``path`` says its run wrote; None for a marker
    without the list (an older servesim's) or one that cannot be read."""
    try:
        with open(path / MARKER, "rb") as fh:
            files = json.loads(fh.read(_MARKER_MAX)).get("files")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return frozenset(files)


def foreign_entries(path: Path) -> list[str]:
    """Entries of result folder ``path`` that servesim did not write (sorted): replacing
    the result would delete them. An older marker lists nothing: a run's own names then."""
    written = (_written(path) or RUN_FILES) | {MARKER}
    out = []
    for e in sorted(os.scandir(path), key=lambda e: e.name):
        if e.name in written:
            continue
        if e.name == REPORT and is_servesim_file(Path(e.path), REPORT_SIGNATURE):
            continue
        out.append(e.name + ("/" if e.is_dir(follow_symlinks=False) else ""))
    return out


def refuse_foreign(raw: str, path: Path) -> None:
    """OutPathError when result ``path`` holds entries servesim did not write."""
    try:
        foreign = foreign_entries(path)
    except OSError as e:
        raise _refuse(raw, f"cannot be listed ({e.strerror})") from None
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3
                                          else "")
        why = ("which servesim did not write" if _written(path) is not None else
               "which its marker (an older servesim's) does not list as written by the run")
        raise _refuse(raw, f"is a servesim result that also holds {shown}, {why}; replacing "
                      "the result would delete them: move them out or choose another --out")


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISREG, "a file"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return what
    return "not a folder"


def _refuse(raw: str, why: str) -> OutPathError:
    return OutPathError(f"--out {clip_path(raw)!r}: {why}")


def check_out(out: str | Path) -> Path:
    """The absolute results folder for ``out``, or OutPathError saying why not."""
    raw = str(out)
    if not raw.strip() or raw.strip() == ".":
        raise _refuse(raw, "is the current folder; give a new folder path, e.g. results/run1")
    if "\0" in raw:
        raise _refuse(raw, "contains a NUL character")
    p = Path(os.path.abspath(raw))
    if p == Path(p.anchor) or not p.name:
        raise _refuse(raw, "is the file system root")
    if len(os.fsencode(p.name)) > NAME_MAX:
        raise _refuse(raw, f"the folder name is longer than {NAME_MAX} bytes")
    if INTERNAL.match(p.name):
        raise _refuse(raw, "is a name servesim uses for its own staging files")
    _check_not_cwd(raw, p)
    _check_existing(raw, p)
    _check_parent(raw, p)
    return p


def _check_not_cwd(raw: str, p: Path) -> None:
    try:
        real, cwd = p.parent.resolve() / p.name, Path.cwd().resolve()
    except OSError:
        return
    if real == cwd or real in cwd.parents:
        raise _refuse(raw, "is the current folder or contains it; give a new folder path")


def _check_existing(raw: str, p: Path) -> None:
    try:
        mode = os.lstat(p).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing there (or under a file: _check_parent says so)
    except OSError as e:
        raise _refuse(raw, f"cannot be checked ({e.strerror})") from None
    if not stat.S_ISDIR(mode):
        raise _refuse(raw, f"is {_kind(mode)}; servesim writes a results folder there only "
                      "if nothing or an earlier servesim result is in the way")
    if not is_result(p):
        if _regular(p / SWEEP_MANIFEST):
            raise _refuse(raw, f"is a sweep or capacity folder (its {SWEEP_MANIFEST}); a run "
                          "writes a result folder of its own: choose another --out")
        raise _refuse(raw, f"is a folder servesim did not write (no {MARKER} marker); "
                      "servesim replaces only its own results: choose another --out")
    if os.path.ismount(p):
        raise _refuse(raw, "is a mount point")
    refuse_foreign(raw, p)


def _check_parent(raw: str, p: Path) -> None:
    """The nearest existing ancestor is a writable folder and no ancestor is a result."""
    anc = p.parent
    while not os.path.lexists(anc) and anc != anc.parent:
        anc = anc.parent
    try:
        mode = os.stat(anc).st_mode
    except OSError as e:
        raise _refuse(raw, f"{clip_path(anc)} cannot be read ({e.strerror})") from None
    if not stat.S_ISDIR(mode):
        raise _refuse(raw, f"is under {clip_path(anc)}, which is {_kind(mode)}")
    for a in (anc, *anc.parents):
        if is_result(a):
            raise _refuse(raw, f"is inside the servesim result {clip_path(a)}, which a later "
                          "run would replace; choose a folder outside it")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise _refuse(raw, f"{clip_path(anc)} is not writable")
