"""A sweep killed with SIGKILL takes its pool with it: forkserver, workers and resource
tracker are gone within seconds (sim/plan/executors/orphans.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.capacity.helpers import TINY

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the parent-death signal is Linux's")


def session(sid: int) -> dict[int, str]:
    """Live (not zombie) processes of session ``sid``: pid -> state."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, session_id = fields[0], int(fields[3])
        if session_id == sid and state != "Z":
            out[int(entry)] = state
    return out


def wait_for(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def test_sigkill_of_a_parallel_sweep_leaves_no_process(tmp_path):
    heavy = tmp_path / "heavy.yaml"
    heavy.write_text(TINY.read_text().replace("num_requests: 300", "num_requests: 200000"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "sim.cli", "sweep", str(heavy), "--rate", "1,2,3,4,5,6",
         "-o", str(tmp_path / "sw"), "-j", "2", "-q", "--no-plots"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        # the parent, the resource tracker, the forkserver and two workers
        assert wait_for(lambda: len(session(proc.pid)) >= 5, 120), session(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert wait_for(lambda: not session(proc.pid), 15), session(proc.pid)
    finally:
        for pid in session(proc.pid):
            os.kill(pid, signal.SIGKILL)


def test_a_process_whose_parent_is_gone_before_it_asks_exits_at_once():
    # the race behind a worker forked as the forkserver is killed: by the time it asks, it
    # has been re-parented, so it must compare with the parent it was forked by
    code = ("import os; from sim.plan.executors.orphans import die_with_parent; "
            "die_with_parent({parent}); print('alive')")
    gone = subprocess.run([sys.executable, "-c", code.format(parent=2**22 + 1)],
                          capture_output=True, text=True, timeout=60)
    assert (gone.returncode, gone.stdout) == (1, "")
    here = subprocess.run([sys.executable, "-c", code.format(parent="os.getppid()")],
                          capture_output=True, text=True, timeout=60)
    assert (here.returncode, here.stdout) == (0, "alive\n")
