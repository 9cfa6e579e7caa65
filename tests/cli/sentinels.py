"""Sentinel files around the paths a test uses: nothing outside a servesim result may vanish.

    guard = Sentinels(tmp_path)          # plants files in tmp_path, a user folder, nested
    ...run servesim...
    guard.check()                        # every sentinel still there with its content
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli_errors import GOOD

MARKER = ".servesim-result"
RESULT_FILES = {"summary.json", "config.json", "requests.parquet", "steps.parquet", MARKER}


class Sentinels:
    def __init__(self, root: Path, extra: tuple[Path, ...] = ()):
        self.files: dict[Path, str] = {}
        for folder in (root, root / "user", root / "user" / "deep", *extra):
            folder.mkdir(parents=True, exist_ok=True)
            for name in ("sentinel.txt", ".hidden-sentinel"):
                path = folder / name
                path.write_text(f"keep {path}")
                self.files[path] = f"keep {path}"

    def check(self) -> None:
        for path, text in self.files.items():
            assert path.is_file() and path.read_text() == text, f"sentinel lost: {path}"


def strict_json(path: Path):
    """Parse as RFC 8259 JSON: NaN and Infinity are not JSON."""
    def refuse(name):
        raise ValueError(f"{path}: non-standard JSON constant {name}")
    return json.loads(path.read_text(), parse_constant=refuse)


def assert_complete(out: Path, seed: int | None = None) -> dict:
    """``out`` is one whole result (every file, the marker, parseable JSON); its config."""
    names = {p.name for p in out.iterdir()}
    assert RESULT_FILES <= names, names
    assert ".servesim-owner" not in names
    strict_json(out / "summary.json")
    cfg = strict_json(out / "config.json")
    if seed is not None:
        assert cfg["seed"] == seed
    return cfg


def hidden_helpers(folder: Path) -> list[str]:
    """servesim's staging/aside/lock entries left in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if ".servesim-" in p.name)


def scenario(tmp_path: Path, extra: str = "", name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(GOOD + extra)
    return path
