"""A run killed while it swaps its result in: the earlier result is intact or the new one is
complete, and the next run leaves no staging folder behind.

The swap is made slow with a test hook (SERVESIM_TEST_SWAP_PAUSE): the run prints the
phase it is about to pause in, the test kills it there with SIGKILL (or SIGTERM).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from sim.cli import main
from sim.report.staging import NO_EXCHANGE_ENV, SWAP_PAUSE_ENV
from tests.cli.sentinels import Sentinels, assert_complete, hidden_helpers, scenario

FAST = ["-q", "--no-plots"]


def _run_until(phase: str, sc, out, env_extra: dict, sig: int = signal.SIGKILL) -> int:
    """Start a run with a slow swap, send ``sig`` when it pauses at ``phase``."""
    env = {**os.environ, SWAP_PAUSE_ENV: f"{phase}:60", **env_extra}
    cmd = [sys.executable, "-m", "sim.cli", "run", str(sc), "--out", str(out), *FAST,
           "--set", "seed=2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        for line in proc.stdout:
            if line.strip() == f"servesim: test: swap {phase}":
                proc.send_signal(sig)
                break
        else:
            pytest.fail(f"the run ended before phase {phase}: {proc.stderr.read()}")
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# (mode, phase, whose result must be at --out right after the kill: 1 earlier, 2 new)
CASES = [
    ("exchange", "exchange", 1),  # killed before the swap
    ("exchange", "remove", 2),  # killed after the swap, the old folder not yet removed
    ("aside", "aside", None),  # old renamed aside, new not yet in: the next run restores
]


@pytest.mark.parametrize("mode,phase,expect", CASES, ids=[c[1] for c in CASES])
def test_sigkill_during_swap(tmp_path, capsys, mode, phase, expect):
    guard = Sentinels(tmp_path)
    sc, out = scenario(tmp_path), tmp_path / "r"
    assert main(["run", str(sc), "--out", str(out), *FAST, "--set", "seed=1"]) == 0
    env = {NO_EXCHANGE_ENV: "1"} if mode == "aside" else {}
    assert _run_until(phase, sc, out, env) == -signal.SIGKILL
    if expect is None:
        assert not out.exists()  # the window: the earlier result lies aside, whole
        assert any(".servesim-old-" in n for n in hidden_helpers(tmp_path))
        assert main(["run", str(sc), "--out", str(tmp_path / "other"), *FAST]) == 0
        assert_complete(out, seed=1)  # put back by the next run in the folder
    else:
        assert_complete(out, seed=expect)
        assert hidden_helpers(tmp_path), "the killed run left its helpers (cleaned next)"
        assert main(["run", str(sc), "--out", str(out), *FAST, "--set", "seed=3"]) == 0
        assert_complete(out, seed=3)
    assert hidden_helpers(tmp_path) == []
    guard.check()


def test_sigterm_cleans_up_at_once(tmp_path, capsys):
    sc, out = scenario(tmp_path), tmp_path / "r"
    assert main(["run", str(sc), "--out", str(out), *FAST, "--set", "seed=1"]) == 0
    assert _run_until("exchange", sc, out, {}, signal.SIGTERM) == 128 + signal.SIGTERM
    assert_complete(out, seed=1)
    assert hidden_helpers(tmp_path) == []
