"""Reading a user's file without trusting it: regular files only, bounded size, one line
per problem (file and what is allowed).

    read_bytes(path, what, limit)    the bytes of a regular file of at most ``limit`` bytes
    read_data(path, what, limit)     the same, gunzipped when it starts with the gzip magic
                                     bytes (the decompressed size bounded too)
    read_utf8(path, what, limit)     read_data as UTF-8 text, the encoding named otherwise

A FIFO, device or folder is refused before it is read (a FIFO would block, /dev/zero never
ends). Shared by scenarios (sim/config/yamlsafe.py), measured results (vllm bench JSON),
step logs (calibrate/steplog.py) and sweep manifests.
"""

from __future__ import annotations

import os
import stat
import zlib
from pathlib import Path

from traces.errors import InputError, clip_path

MEASURED_MAX_BYTES = 1 << 30  # a measured result or step log (a 100k-request run: ~100 MB)
GZIP_MAGIC = b"\x1f\x8b"


def kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _size(limit: int) -> str:
    return f"{limit >> 20:,} MiB" if limit > 1 << 24 else f"{limit >> 10:,} KiB"


def check_regular(path: Path, what: str) -> None:
    """``path`` is a regular file this process can open (for readers that open it again
    themselves, e.g. pyarrow)."""
    os.close(_open_regular(path, what))


def read_parquet(path: Path, then: str = "", what: str = "Parquet file"):
    """The Parquet table at ``path`` (a pandas DataFrame); InputError naming it when it is not
    a regular file (a FIFO would block pyarrow) or not Parquet; ``then``: what to do."""
    import pandas as pd

    check_regular(path, path.name)
    try:
        return pd.read_parquet(path)
    except Exception as e:  # pyarrow's errors share no base below Exception
        raise InputError(f"{clip_path(path)}: not a readable {what} ({type(e).__name__})"
                         f"{then}") from None


def _open_regular(path: Path, what: str) -> int:
    name = clip_path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block here
    except (OSError, ValueError) as e:
        raise InputError(f"{name}: cannot read {what} ({getattr(e, 'strerror', None) or e})"
                         ) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError(f"{name}: {what} must be a regular file, not {kind(mode)}")
    return fd


def read_bytes(path: Path, what: str, limit: int) -> bytes:
    """The file's bytes, refusing anything but a regular file of at most ``limit`` bytes."""
    name = clip_path(path)
    fd = _open_regular(path, what)
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise InputError(f"{name}: cannot read {what} ({e.strerror or e})") from None
    if len(data) > limit:
        raise InputError(f"{name}: {what} is larger than {_size(limit)}; is this the right "
                         "file?")
    return data


def read_data(path: Path, what: str, limit: int = MEASURED_MAX_BYTES) -> bytes:
    """``read_bytes``, gunzipped when the file starts with the gzip magic bytes."""
    raw = read_bytes(path, what, limit)
    if raw[:2] != GZIP_MAGIC:
        return raw
    d = zlib.decompressobj(wbits=31)  # gzip framing
    try:
        data = d.decompress(raw, limit + 1)
    except zlib.error as e:
        raise InputError(f"{clip_path(path)}: not a readable gzip file ({e})") from None
    if len(data) > limit:
        raise InputError(f"{clip_path(path)}: {what} is larger than {_size(limit)} "
                         "uncompressed; is this the right file?")
    if not d.eof:
        raise InputError(f"{clip_path(path)}: not a readable gzip file (truncated)")
    return data


def read_utf8(path: Path, what: str, limit: int = MEASURED_MAX_BYTES) -> str:
    """``read_data`` as UTF-8 text; a binary or UTF-16 file is named as such."""
    data = read_data(path, what, limit)
    if b"\0" in data[:65536]:
        raise InputError(f"{clip_path(path)}: {what} contains NUL bytes (binary, or UTF-16/32 "
                         "text); expected UTF-8 text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{clip_path(path)}: {what} is not UTF-8 text (byte "
                         f"0x{data[e.start]:02x} at offset {e.start})") from None
