"""Fixtures for the traces tests: tiny inline trace files written to tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def write(tmp_path: Path):
    """write(name, content) -> path of a new file in tmp_path (str written byte-exact)."""

    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        data = content.encode("utf-8") if isinstance(content, str) else content
        path.write_bytes(data)
        return path

    return _write
