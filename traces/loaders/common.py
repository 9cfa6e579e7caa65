"""Shared plumbing for the loaders: file checks, CSV reading as text cells, format sniffing."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from traces.errors import TraceError


def one_line(error: BaseException) -> str:
    """An exception's message squeezed onto one line."""
    return " ".join(str(error).split()) or type(error).__name__


def check_file(path: Path) -> None:
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if not path.is_file():
        raise TraceError(f"{path}: not a regular file")


def read_csv_cells(path: Path, *, skiprows: int = 0) -> pd.DataFrame:
    """Every cell as text, exactly as in the file (no NA guessing); column names stripped.

    Numbers are parsed later by traces.validate, which names the first bad cell.
    """
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
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, csv.Error) as e:
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
            except (OSError, EOFError):
                return ""
    text = head.decode("utf-8-sig", errors="replace")
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def header_fields(line: str) -> set[str]:
    """The names in a CSV header line (quotes and spaces stripped)."""
    return {field.strip().strip('"').strip() for field in line.split(",")}
