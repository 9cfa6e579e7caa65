"""Shared plumbing for the loaders: file checks, CSV reading as text cells, format sniffing."""

from __future__ import annotations

import codecs
import csv
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from traces.errors import TraceError, clip


def one_line(error: BaseException) -> str:
    """An exception's message squeezed onto one line."""
    return " ".join(str(error).split()) or type(error).__name__


def check_file(path: Path) -> None:
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if not path.is_file():
        raise TraceError(f"{path}: not a regular file")


_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
         (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))
PARQUET_MAGIC = b"PAR1"


def check_text(path: Path, head: bytes | None = None) -> None:
    """A text trace must be UTF-8: name UTF-16/32 (by a byte-order mark or the NUL bytes of
    ASCII text); other binary data fails UTF-8 decoding, which names the byte."""
    if head is None:
        with open(path, "rb") as f:
            head = f.read(65536)
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            raise TraceError(f"{path}: the file is {encoding} text; save it as UTF-8")
    if head.count(b"\0") * 4 >= len(head) > 0:  # ASCII in UTF-16/32 is 50-75% NUL bytes
        raise TraceError(f"{path}: the file looks like UTF-16/32 text without a byte-order "
                         "mark (a quarter or more NUL bytes); save it as UTF-8")


def starts_with(path: Path, magic: bytes) -> bool:
    """Whether the file starts with ``magic`` (False if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(magic)) == magic
    except OSError:
        return False


def gzipped(path: Path) -> bool:
    """Whether the file starts with the gzip magic bytes."""
    return starts_with(path, b"\x1f\x8b")


GZIP_TEXT = ("is gzip-compressed; servesim reads gzip for JSONL traces only (jsonl, mooncake): "
             "gunzip it first")


def read_jsonl_text(path: Path) -> str:
    """A JSON-lines file as UTF-8 text (a leading BOM dropped), gunzipped when it starts
    with the gzip magic bytes, whatever its name."""
    import gzip
    import zlib

    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise TraceError(f"{path}: not a readable gzip file ({one_line(e)})") from None
    check_text(path, raw[:65536])
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset "
                         f"{e.start}); save the file as UTF-8") from None


def not_utf8(path: Path, e: UnicodeDecodeError) -> TraceError:
    if gzipped(path):  # a .csv.gz: CSV formats are read as plain text
        return TraceError(f"{path}: {GZIP_TEXT}")
    return TraceError(f"{path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset "
                      f"{e.start}); save the file as UTF-8")


def _check_header(path: Path, skiprows: int) -> None:
    """Refuse a header naming one column twice (pandas would rename the second 'x.1')."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        for _ in range(skiprows):
            f.readline()
        names = [n.strip() for n in next(csv.reader([f.readline()]), [])]
    seen: dict[str, int] = {}
    for i, name in enumerate(names, start=1):
        if name in seen and name:
            raise TraceError(f"{path}: column {name[:60]!r} appears twice in the header "
                             f"(columns {seen[name]} and {i}); rename or drop one")
        seen[name] = i


def read_csv_cells(path: Path, *, skiprows: int = 0) -> pd.DataFrame:
    """Every cell as text, exactly as in the file (no NA guessing); column names stripped.

    Numbers are parsed later by traces.validate, which names the first bad cell.
    """
    check_text(path)
    try:
        _check_header(path, skiprows)
    except UnicodeDecodeError as e:
        raise not_utf8(path, e) from None
    except csv.Error:
        pass  # pandas reports a malformed header below
    try:
        with warnings.catch_warnings():
            # a row longer than the header would otherwise silently become the index
            warnings.simplefilter("error", pd.errors.ParserWarning)
            df = pd.read_csv(
                path,
                dtype=str,
                na_filter=False,
                skiprows=skiprows,
                encoding="utf-8",
                index_col=False,
            )
    except pd.errors.ParserWarning:
        raise TraceError(
            f"{path}: not a readable CSV file (a row has more fields than the header)"
        ) from None
    except pd.errors.EmptyDataError:
        raise TraceError(f"{path}: the file is empty; expected a CSV header line") from None
    except UnicodeDecodeError as e:
        raise not_utf8(path, e) from None
    except (pd.errors.ParserError, ValueError, csv.Error) as e:
        raise TraceError(f"{path}: not a readable CSV file ({one_line(e)})") from None
    df.columns = [str(c).strip() for c in df.columns]
    return df


def require_columns(df: pd.DataFrame, path: Path, columns: tuple[str, ...]) -> None:
    for col in columns:
        if col not in df.columns:
            raise TraceError(
                f"{path}: missing column '{col}'; required columns: {', '.join(columns)}"
            )


def row_ids(n: int) -> np.ndarray:
    """Request ids "0".."n-1": the 0-based data row index as text."""
    return np.arange(n).astype(str).astype(object)


def first_line(path: Path, limit: int = 65536) -> str:
    """The first non-blank line of the file (BOM and line ending removed), '' if none."""
    with open(path, "rb") as f:
        head = f.read(limit)
    if head[:2] == b"\x1f\x8b":  # gzip (the jsonl format reads it): look inside
        import gzip

        with gzip.open(path, "rb") as f:
            try:
                head = f.read(limit)
            except (OSError, EOFError) as e:  # cut short or not gzip inside
                raise TraceError(f"{path}: gzip data that cannot be read ({clip(str(e))}); "
                                 "recompress the trace or give it uncompressed") from None
    if head.startswith(PARQUET_MAGIC):
        return ""
    check_text(path, head)
    try:
        head.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # not just a character cut by the read limit
            raise not_utf8(path, e) from None
    text = head.decode("utf-8-sig", errors="replace")
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def header_fields(line: str) -> set[str]:
    """The names in a CSV header line (quotes and spaces stripped)."""
    return {field.strip().strip('"').strip() for field in line.split(",")}
