"""The fuzz corpus of every other command (tests/cli/fuzz_commands.py): each failing case
exits 2 with exactly one line on stderr naming the input or output, no traceback, and
changes nothing (its folder and the shared fixtures are byte-for-byte as before, sentinels
included, no staging file or folder left); each ok case creates only what it says and writes
strict JSON. Cases run in-process, in their own folder as the current folder (so a default
output would land there and be seen), under the run corpus's timer and memory cap."""

from __future__ import annotations

import collections
import json
import os
import re
import stat
from pathlib import Path

import pytest

from sim.cli import main
from tests.cli.fuzz_commands import Fixtures, all_cases, build_fixtures
from tests.cli.sentinels import Sentinels
from tests.cli.test_fuzz import limits

CASES = all_cases()
HELPER = re.compile(r"\.servesim-(staging-|old-|lock$)")  # servesim's temporaries
MIN_PER_COMMAND = 25


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): kind, and size and mtime of files."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(folder) / name
            st = os.lstat(p)
            key = str(p.relative_to(root))
            if stat.S_ISREG(st.st_mode):
                out[key] = ("file", st.st_size, st.st_mtime_ns)
            else:
                out[key] = (stat.S_IFMT(st.st_mode),)
    return out


def strict(text: str, where: str):
    def refuse(name):
        raise AssertionError(f"{where}: non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory) -> Fixtures:
    return build_fixtures(tmp_path_factory.mktemp("fixtures"), main)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_command_case(case, fixtures, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "case"
    guard = Sentinels(folder)
    monkeypatch.chdir(folder)
    argv = case.build(folder, fixtures)
    before, shared = snapshot(folder), snapshot(fixtures.root)
    capsys.readouterr()
    with limits():
        code = main(argv)
    out, err = capsys.readouterr()
    guard.check()
    assert snapshot(fixtures.root) == shared, "a shared fixture was changed"
    after = snapshot(folder)
    staging = [k for k in after if HELPER.search(k)]
    assert not staging, staging
    if case.ok:
        assert code == 0, err[-2000:]
        changed = {k.split(os.sep)[0] for k in set(after) ^ set(before)}
        changed |= {k.split(os.sep)[0] for k in before if k in after and after[k] != before[k]}
        assert changed <= set(case.writes), changed
        for k in after:
            if k.endswith(".json") and after[k] != before.get(k):
                strict((folder / k).read_text(), k)
        if case.stdout_json:
            strict(out, "stdout")
        return
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (code, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    assert len(lines) == 1 and lines[0].startswith("servesim: error: "), err[-2000:]
    assert len(lines[0]) < 300, lines[0]
    for needle in case.needles:
        assert needle in lines[0], (needle, lines[0])
    assert after == before, sorted(set(after) ^ set(before)) or "a file was modified"


def test_every_command_has_enough_cases():
    per = collections.Counter(c.command for c in CASES)
    assert set(per) == {"replay-bench", "compare", "fit-steps", "trace export", "sweep",
                        "capacity", "plot", "fidelity", "check"}
    assert min(per.values()) >= MIN_PER_COMMAND, per
