"""Step rows of a long run, streamed to a Parquet file as the run goes (steps.parquet).

A run that records more than ``STREAM_STEPS`` engine steps (about 230,000 requests of the
default scenario; no shipped scenario or test comes near) does not keep its step rows in
memory: every ``STREAM_STEPS`` steps the fast core's recorder (sim/fast/record.py) appends
them to the run's steps.parquet table (row groups of ``READ_ROWS``), in its own columns
(``steps_frame``), and keeps only what it needs to go on. What reads the rows afterwards
(the summary, the plots, ``Recorder.steps()``) reads them back in row groups
(``StepSpill.chunks``); the result writer moves the file into the results folder, so the
streamed steps.parquet holds the same rows as the table a run kept in memory would.

The file lives in a private folder (``spill_dir``: the results' staging folder when the run
writes results, else the system's temporary folder), removed with the recorder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

STREAM_STEPS = 1 << 20  # steps kept in memory before the rows are streamed, and per row group
READ_ROWS = 1 << 18  # rows read back at a time
SPILL_NAME = "steps.parquet"


def steps_frame(steps: dict, kv_total_blocks: int, first_step: int = 0) -> pd.DataFrame:
    """The steps.parquet rows of ``steps`` (Recorder.steps() columns), numbered from
    ``first_step``, with the KV figures derived per row."""
    return pd.DataFrame(_columns(steps, kv_total_blocks, first_step))


def _columns(steps: dict, kv_total_blocks: int, first_step: int) -> dict:
    """steps.parquet's columns: the step number, ``steps``, the KV figures per row."""
    n = len(steps["start_s"])
    used, waiting = np.asarray(steps["kv_blocks_used"]), np.asarray(steps["num_waiting"])
    return {"step": np.arange(first_step, first_step + n, dtype=np.int64), **steps,
            "kv_blocks_total": np.full(n, kv_total_blocks, dtype=np.int64),
            "kv_used_fraction": used / max(kv_total_blocks, 1),
            # the waiting queue while admission was stopped for lack of KV blocks (the
            # summary's waiting.mean_waiting_on_kv_memory, step by step)
            "num_waiting_on_kv_memory": np.where(np.asarray(steps["blocked"]) == "kv_memory",
                                                 waiting, 0)}


def _remove(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)


class StepSpill:
    """The streamed step rows of one run: written row group by row group, then read back."""

    def __init__(self, kv_total_blocks: int, spill_dir: str | Path | None = None):
        self.kv_total_blocks = kv_total_blocks
        self._folder = tempfile.mkdtemp(prefix=".servesim-steps-", dir=spill_dir)
        self._cleanup = weakref.finalize(self, _remove, self._folder)
        self.path = Path(self._folder) / SPILL_NAME
        self._writer = None
        self._schema = None
        self.rows = 0

    def write(self, steps: dict) -> None:
        """Append rows (Recorder.steps() columns) in row groups of ``READ_ROWS``: the rows of
        ``steps_frame``, made column by column (no DataFrame of the chunk), in the schema
        pandas gives that frame (the file reads back as the table a run in memory writes)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        n, total = len(steps["start_s"]), self.kv_total_blocks
        if self._writer is None:
            head = steps_frame({c: v[:1] for c, v in steps.items()}, total)
            self._schema = pa.Table.from_pandas(head, preserve_index=False).schema
            self._writer = pq.ParquetWriter(self.path, self._schema)
        cols = _columns(steps, total, self.rows)
        arrays = [pa.array(cols[f.name], type=f.type) for f in self._schema]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=self._schema),
                                 row_group_size=READ_ROWS)  # read back a group at a time
        self.rows += n

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def move_to(self, dest: Path) -> None:
        """Put the file at ``dest`` (the results' steps.parquet) and read it from there on;
        its private folder goes."""
        self.close()
        try:
            os.replace(self.path, dest)
        except OSError:  # another file system
            shutil.copyfile(self.path, dest)
            os.unlink(self.path)
        self.path = Path(dest)
        self._cleanup()

    def relocate(self, path: Path) -> None:
        """The file was moved with its folder (the results folder swapped in)."""
        self.path = Path(path)

    def chunks(self, columns: list[str] | None = None) -> Iterator[dict[str, np.ndarray]]:
        """The rows, a row group (``READ_ROWS``) at a time, as numpy columns (``blocked`` as
        str objects, one per reason, shared by the rows). Read group by group on this
        thread, Arrow's pool emptied after each: iter_batches holds several groups."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.close()
        f = pq.ParquetFile(self.path, read_dictionary=["blocked"])
        pool = pa.default_memory_pool()
        for i in range(f.num_row_groups):
            t = f.read_row_group(i, columns=columns, use_threads=False)
            out = {name: _numpy(t.column(name)) for name in t.column_names}
            del t
            yield out
            del out
            pool.release_unused()

    def frame(self) -> pd.DataFrame:
        """Every row, as steps.parquet holds them."""
        self.close()
        return pd.read_parquet(self.path)


def release_memory() -> None:
    """Hand freed memory back to the system: Arrow's pool and, with glibc, the C heap (a
    long run's chunks and dicts leave hundreds of MB there otherwise)."""
    import ctypes

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):  # not glibc
        pass


def _numpy(col) -> np.ndarray:
    import pyarrow as pa

    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(col.type):  # the reasons, each once
        names = np.asarray(col.dictionary.to_pylist(), dtype=object)
        return names[col.indices.to_numpy(zero_copy_only=False)]
    return col.to_numpy(zero_copy_only=False)
