"""A sweep killed mid-way (SIGKILL to the whole process group) resumes with --resume: every
point appears exactly once, points finished before the kill are not run again, and the
result equals an uninterrupted sweep's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd

from .helpers import TINY, cli

ARGS = ["sweep", str(TINY), "--rate", "4:20:2", "--jobs", "1", "-q", "--no-plots"]
POINTS = 9


def _kill_after(out, finished: int) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "sim.cli", *ARGS, "--out", str(out)],
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(list((out / "points").glob("*.json"))) < finished:
            assert proc.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.005)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_killed_sweep_resumes_losing_and_redoing_nothing(tmp_path):
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    _kill_after(killed, 2)
    done = {p.name: p.stat().st_mtime_ns for p in (killed / "points").glob("*.json")}
    assert 2 <= len(done) < POINTS

    assert cli(*ARGS, "--out", killed, "--resume") == 0
    assert cli(*ARGS, "--out", clean) == 0

    after = {p.name: p.stat().st_mtime_ns for p in (killed / "points").glob("*.json")}
    assert len(after) == POINTS
    assert {k: after[k] for k in done} == done  # finished points were not run again
    resumed = pd.read_parquet(killed / "points.parquet")
    assert resumed["point_id"].is_unique and len(resumed) == POINTS
    pd.testing.assert_frame_equal(resumed, pd.read_parquet(clean / "points.parquet"))
