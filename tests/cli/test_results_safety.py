"""Results never cost a user a file: --out checks, safe names, the lock, stale staging folders,
strict JSON, normal permissions (the kill-during-swap tests are in test_results_kill.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sim.cli import main
from sim.report import lock
from sim.report.outpath import default_out, slug
from sim.report.write import ResultWriter
from tests.cli.sentinels import Sentinels, assert_complete, hidden_helpers, scenario, strict_json
from tests.cli.test_cli_errors import assert_one_line_error

FAST = ["-q", "--no-plots"]


def run(args, capsys):
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def _refused(tmp_path, capsys, out, *needles):
    guard = Sentinels(tmp_path)
    sc = scenario(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, err = run(["run", sc, "--out", out, *FAST], capsys)
    assert_one_line_error(code, err, "--out", *needles)
    guard.check()
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("out,needles", [
    (".", ["current folder"]), ("", ["current folder"]), ("/", ["root"]),
    ("user", ["did not write", ".servesim-result"]),
    ("user/deep", ["did not write"]),
    ("sentinel.txt", ["is a file"]), ("sentinel.txt/sub", ["under", "is a file"]),
    ("user/..", ["current folder"]), ("..", ["current folder"]),
])
def test_out_refused_before_simulating(tmp_path, capsys, monkeypatch, out, needles):
    monkeypatch.chdir(tmp_path)
    _refused(tmp_path, capsys, out, *needles)


def test_out_fifo_link_and_device_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    _refused(tmp_path, capsys, "fifo", "is a FIFO")
    (tmp_path / "link").symlink_to(tmp_path / "user")
    _refused(tmp_path, capsys, "link", "symbolic link")
    _refused(tmp_path, capsys, "/dev/null", "is a device")
    _refused(tmp_path, capsys, "/proc/servesim-out", "cannot")
    _refused(tmp_path, capsys, ".x.servesim-staging-0123abcd", "staging")


def test_out_inside_a_result_refused(tmp_path, capsys):
    sc = scenario(tmp_path)
    assert main(["run", str(sc), "--out", str(tmp_path / "r"), *FAST]) == 0
    capsys.readouterr()
    code, err = run(["run", sc, "--out", tmp_path / "r" / "sub", *FAST], capsys)
    assert_one_line_error(code, err, "inside the servesim result")
    assert_complete(tmp_path / "r")


def test_a_parent_another_run_makes_meanwhile_is_used(tmp_path, capsys,
                                                                monkeypatch):
    # two runs into new folders under one new parent: the other run makes the parent
    # between this run's look and its mkdir (it failed with "File exists"); the run goes on
    parent = tmp_path / "runs"
    real_mkdir = os.mkdir

    def racing_mkdir(p, mode=0o777):
        if Path(p) == parent and not parent.exists():
            real_mkdir(p, mode)  # the other run, first
        return real_mkdir(p, mode)

    monkeypatch.setattr(os, "mkdir", racing_mkdir)
    code, err = run(["run", scenario(tmp_path), "--out", parent / "a", *FAST], capsys)
    assert code == 0, err
    assert_complete(parent / "a")


def test_unwritable_parent_refused(tmp_path, capsys):
    """A read-only folder (for root, which writes anywhere, sysfs: it refuses new entries)."""
    sc = scenario(tmp_path)
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        code, err = run(["run", sc, "--out", ro / "res", *FAST], capsys)
        assert_one_line_error(code, err, "not writable")
        assert list(ro.iterdir()) == []
    code, err = run(["run", sc, "--out", "/sys/servesim-res", *FAST], capsys)
    assert_one_line_error(code, err, "/sys")
    assert not os.path.lexists("/sys/servesim-res")


@pytest.mark.parametrize("name,folder", [
    ('""', "scenario"), ("/", "scenario"), ("..", "scenario"), ("../x", "x"),
    ("/abs/dir", "abs-dir"), ('"a\\0b"', "a-b"), ("'.hidden'", "hidden"),
    ("'x y/../../z'", "x-y-z"),
])
def test_scenario_names_become_safe_folders(tmp_path, capsys, monkeypatch, name, folder):
    monkeypatch.chdir(tmp_path)
    guard = Sentinels(tmp_path)
    sc = scenario(tmp_path, f"name: {name}\n").read_text().replace("name: t\n", "")
    (tmp_path / "s.yaml").write_text(sc)
    code, err = run(["run", "s.yaml", *FAST], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [folder]
    assert_complete(tmp_path / "results" / folder)
    guard.check()


def test_slugs():
    assert slug("llama 3/8b:tp2") == "llama-3-8b-tp2"
    assert slug("a" * 300) != slug("a" * 299) and len(slug("a" * 300)) <= 120
    assert default_out("d", ("engine.max_num_seqs=64",)) == Path(
        "results/d,engine.max_num_seqs=64")
    assert default_out("d", (), "/x/conv.csv") == Path("results/d,trace=conv.csv")


def test_set_without_out_keeps_the_base_result(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sc = scenario(tmp_path)
    assert main(["run", str(sc), *FAST]) == 0
    base = (tmp_path / "results" / "t" / "summary.json").read_bytes()
    assert main(["run", str(sc), *FAST, "--set", "engine.max_num_seqs=2"]) == 0
    assert "results: results/t,engine.max_num_seqs=2" in capsys.readouterr().out
    assert (tmp_path / "results" / "t" / "summary.json").read_bytes() == base
    cfg = assert_complete(tmp_path / "results" / "t,engine.max_num_seqs=2")
    assert cfg["engine"]["max_num_seqs"] == 2


def test_replace_an_earlier_result_with_normal_permissions(tmp_path, capsys):
    guard = Sentinels(tmp_path)
    sc, out = scenario(tmp_path), tmp_path / "r"
    assert main(["run", str(sc), "--out", str(out), *FAST, "--set", "seed=1"]) == 0
    assert main(["run", str(sc), "--out", str(out), *FAST, "--set", "seed=2"]) == 0
    assert_complete(out, seed=2)
    umask = os.umask(0)
    os.umask(umask)
    assert (out.stat().st_mode & 0o777) == 0o777 & ~umask
    assert ((out / "summary.json").stat().st_mode & 0o777) == 0o666 & ~umask
    assert hidden_helpers(tmp_path) == []
    guard.check()


def test_concurrent_run_fails_fast(tmp_path, capsys):
    sc, out = scenario(tmp_path), tmp_path / "r"
    first = ResultWriter(out)  # a run in progress (holds the lock, has a staging folder)
    try:
        code, err = run(["run", sc, "--out", out, *FAST], capsys)
        assert_one_line_error(code, err, "another servesim run", f"pid {os.getpid()}")
        assert not out.exists()
        assert len(hidden_helpers(tmp_path)) == 2  # the first run's lock and staging folder
    finally:
        first.abort()
    assert hidden_helpers(tmp_path) == []
    assert main(["run", str(sc), "--out", str(out), *FAST]) == 0


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _fake_helper(parent: Path, name: str, role: str, out: str, **owner) -> Path:
    folder = parent / f".{out}.servesim-{role}-{name}"
    folder.mkdir()
    (folder / "big.bin").write_bytes(b"x" * 1000)
    if owner:
        rec = {"host": socket.gethostname(), "start": None, "out": out, "role": role, **owner}
        (folder / ".servesim-owner").write_text(json.dumps(rec))
    return folder


def test_next_run_cleans_only_dead_runs_staging(tmp_path, capsys):
    sc = scenario(tmp_path)
    dead = _fake_helper(tmp_path, "0000000a", "staging", "r", pid=_dead_pid())
    dead_other = _fake_helper(tmp_path, "0000000b", "staging", "q", pid=_dead_pid())
    live = _fake_helper(tmp_path, "0000000c", "staging", "r", pid=os.getpid(),
                        start=lock._start_ticks(os.getpid()))
    unowned = _fake_helper(tmp_path, "0000000d", "staging", "r")
    remote = _fake_helper(tmp_path, "0000000e", "staging", "r", pid=_dead_pid(),
                          host="another-host")
    (tmp_path / ".q.servesim-lock").write_text("{}")  # left by a killed run
    assert main(["run", str(sc), "--out", str(tmp_path / "r"), *FAST]) == 0
    assert not dead.exists() and not dead_other.exists()
    assert live.exists() and unowned.exists() and remote.exists()
    assert hidden_helpers(tmp_path) == sorted([live.name, unowned.name, remote.name])


def test_result_renamed_aside_by_a_killed_run_is_put_back(tmp_path, capsys):
    sc, out = scenario(tmp_path), tmp_path / "r"
    assert main(["run", str(sc), "--out", str(out), *FAST, "--set", "seed=3"]) == 0
    aside = tmp_path / ".r.servesim-old-0000000f"
    out.rename(aside)  # the state a kill between the two renames of the swap leaves
    assert main(["run", str(sc), "--out", str(tmp_path / "other"), *FAST]) == 0
    assert_complete(out, seed=3)
    assert hidden_helpers(tmp_path) == []


def test_summary_is_strict_json_when_nothing_finishes(tmp_path, capsys):
    sc, out = scenario(tmp_path), tmp_path / "r"
    assert main(["run", str(sc), "--out", str(out), *FAST, "--set", "horizon_s=0.001"]) == 0
    summary = strict_json(out / "summary.json")
    assert summary["requests"]["finished"] == 0
    assert summary["throughput"]["request_per_s"] in (0, 0.0, None)


def test_planted_lock_link_is_not_followed(tmp_path, capsys):
    sc, victim = scenario(tmp_path), tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / ".r.servesim-lock").symlink_to(victim)
    code, err = run(["run", sc, "--out", tmp_path / "r", *FAST], capsys)
    assert_one_line_error(code, err, "--out", "cannot write there")
    assert victim.read_text() == "precious" and not (tmp_path / "r").exists()


def test_a_result_holding_a_users_files_is_not_replaced(tmp_path, capsys):
    """Replacing a result deletes it whole: with a user's note or folder in it, the run is
    refused before simulating (exit 2, one line naming them) and both stay; servesim's own
    report.html does not count, a user's report.html does."""
    sc, out = scenario(tmp_path), tmp_path / "r"
    assert main(["run", str(sc), "--out", str(out), *FAST, "--set", "seed=1",
                 "--report"]) == 0
    (out / "notes.txt").write_text("mine")
    (out / "mine").mkdir()
    (out / "mine" / "f").write_text("mine too")
    capsys.readouterr()
    code, err = run(["run", sc, "--out", out, *FAST, "--set", "seed=2"], capsys)
    assert_one_line_error(code, err, "--out", "mine/, notes.txt", "did not write")
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "mine" / "f").read_text() == "mine too"
    assert_complete(out, seed=1)
    assert hidden_helpers(tmp_path) == []
    (out / "notes.txt").unlink()
    (out / "mine" / "f").unlink()
    (out / "mine").rmdir()
    assert main(["run", str(sc), "--out", str(out), *FAST, "--set", "seed=2"]) == 0
    assert_complete(out, seed=2)
    (out / "report.html").write_text("<html>my own page</html>")
    capsys.readouterr()
    code, err = run(["run", sc, "--out", out, *FAST, "--set", "seed=3"], capsys)
    assert_one_line_error(code, err, "report.html")
    assert (out / "report.html").read_text() == "<html>my own page</html>"


def test_the_marker_lists_what_the_run_wrote(tmp_path):
    sc, out = scenario(tmp_path), tmp_path / "r"
    assert main(["run", str(sc), "--out", str(out), *FAST, "--step-log"]) == 0
    marker = json.loads((out / ".servesim-result").read_text())
    assert marker["files"] == sorted(p.name for p in out.iterdir()
                                     if p.name != ".servesim-result")
    assert "steps.jsonl" in marker["files"]


@pytest.mark.parametrize("cmd", [["sweep", "--rate", "1,2", "-j", "1"],
                                 ["capacity", "-j", "1"]])
def test_a_sweep_into_a_run_result_is_refused_before_running(tmp_path, capsys, cmd):
    sc, out = scenario(tmp_path), tmp_path / "r"
    assert main(["run", str(sc), "--out", str(out), *FAST]) == 0
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    code = main([cmd[0], str(sc), *cmd[1:], "--out", str(out), "-q"])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("servesim: error: ")]
    assert code == 2 and len(lines) == 1, err
    assert "result of a `servesim run`" in lines[0] and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == before


def test_an_older_marker_without_the_list_allows_a_runs_own_names(tmp_path, capsys):
    """A result written before markers listed their files is replaced when it holds only a
    run's own names; anything else is named, and said not to be in the marker's list."""
    sc, out = scenario(tmp_path), tmp_path / "r"
    assert main(["run", str(sc), "--out", str(out), *FAST]) == 0
    (out / ".servesim-result").write_text('{"servesim": "0.1.0", "result": "r"}\n')
    assert main(["run", str(sc), "--out", str(out), *FAST, "--set", "seed=2"]) == 0
    (out / ".servesim-result").write_text('{"servesim": "0.1.0", "result": "r"}\n')
    (out / "profile.parquet").write_bytes(b"x")
    capsys.readouterr()
    code, err = run(["run", sc, "--out", out, *FAST, "--set", "seed=3"], capsys)
    assert_one_line_error(code, err, "profile.parquet", "older servesim")
    assert (out / "profile.parquet").read_bytes() == b"x"


def test_a_run_into_a_sweep_folder_says_what_is_there(tmp_path, capsys):
    sc, out = scenario(tmp_path), tmp_path / "sw"
    assert main(["sweep", str(sc), "--rate", "1,2", "-j", "1", "-q", "--no-plots",
                 "--out", str(out)]) == 0
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    code, err = run(["run", sc, "--out", out, *FAST], capsys)
    assert_one_line_error(code, err, "is a sweep or capacity folder", "manifest.json")
    assert sorted(p.name for p in out.iterdir()) == before
