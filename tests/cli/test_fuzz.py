"""The fuzz corpus (tests/cli/fuzz_cases.py): every malformed input ends with exit status 2,
one line under 300 characters naming the file, field or row, no traceback, nothing written,
no sentinel file touched; the edge cases that succeed write strict JSON.

Cases run in-process through ``main(argv)`` under a per-case timer and address-space cap;
the few that could block or run long run as subprocesses under a timeout.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from sim.cli import main
from tests.cli.fuzz_cases import OUT, all_cases
from tests.cli.sentinels import Sentinels, assert_complete, hidden_helpers

CASES = all_cases()
CASE_TIMEOUT_S = 60  # in-process (the slowest case takes about a second on a loaded machine)
PROC_TIMEOUT_S = 90  # subprocess, start-up included
MEMORY_CAP = 6 << 30  # bytes of address space a case may add to the test process


class CaseTimeout(Exception):
    pass


@contextmanager
def limits():
    """A per-case timer (SIGALRM raises in the test's thread) and an address-space cap."""
    def expire(signum, frame):
        raise CaseTimeout(f"the case ran longer than {CASE_TIMEOUT_S} s")

    old_handler = signal.signal(signal.SIGALRM, expire)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    used = _vm_bytes()
    if soft == resource.RLIM_INFINITY and used:
        resource.setrlimit(resource.RLIMIT_AS, (used + MEMORY_CAP, hard))
    signal.setitimer(signal.ITIMER_REAL, CASE_TIMEOUT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _vm_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _run(case, folder: Path, capsys) -> tuple[int, str]:
    argv = case.build(folder)
    if case.proc:
        proc = subprocess.run([sys.executable, "-m", "sim.cli", *argv], capture_output=True,
                              text=True, timeout=PROC_TIMEOUT_S, stdin=subprocess.DEVNULL)
        return proc.returncode, proc.stderr
    capsys.readouterr()
    with limits():
        code = main(argv)
    return code, capsys.readouterr().err


def _check_error(case, code: int, err: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("servesim: error: ")]
    assert code == 2, (code, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    assert len(errors) == 1 and lines[-1] == errors[0], err[-2000:]
    line = errors[0]
    assert len(line) < 300, line
    for needle in case.needles:
        assert needle in line, (needle, line)


@pytest.fixture(scope="module", autouse=True)
def _warm(tmp_path_factory):
    """Import and build every lazily built piece once, outside the per-case timer (a timer
    firing inside pydantic's first schema build would break later cases)."""
    folder = tmp_path_factory.mktemp("warm")
    assert main(["run", "--out", str(folder / "out"), "-q", "--no-plots",
                 "--set", "workload.num_requests=5"]) == 0
    assert main(["trace", "stats", str(folder / "out" / "requests.parquet")]) in (0, 2)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fuzz_case(case, tmp_path, capsys):
    folder = tmp_path / "case"
    guard = Sentinels(folder)
    code, err = _run(case, folder, capsys)
    guard.check()
    planted = {".r.servesim-lock"} if case.id == "out-lock-link" else set()
    assert set(hidden_helpers(folder)) == planted, "a staging folder or lock file was left"
    if case.ok:
        assert code == 0, err[-2000:]
        assert_complete(folder / OUT)
        return
    _check_error(case, code, err)
    assert not os.path.lexists(folder / OUT), "a failed run wrote its --out"
    created = {p.name for p in folder.iterdir()} - set(guard.names)
    assert created <= {"s.yaml", "trace.csv", "trace.jsonl", "trace.parquet", "t.csv", "fifo",
                       "link", "res", "loop.yaml", ".r.servesim-lock"}, created


def test_corpus_size():
    assert len(CASES) >= 200
    assert len([c for c in CASES if c.proc]) <= 6  # the rest run in-process (fast)
