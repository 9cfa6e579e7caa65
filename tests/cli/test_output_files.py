"""One output policy for every command's files and folders (sim/report/outfile.py, outpath.py):
servesim writes a new path or replaces what it wrote itself; a user's file, a folder, a
device, a place under a file are refused with exit 2 before any work; a default output never
replaces an existing file; no staging file is left; JSON is strict."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sim.cli import main
from sim.report.outfile import check_file, free_default, is_servesim_file, write_text
from sim.report.outpath import OutPathError
from tests.calibrate.test_steps import records, write_jsonl
from tests.cli.sentinels import Sentinels, strict_json
from tests.cli.test_cli_errors import GOOD, assert_one_line_error, write


def cli(capsys, *args) -> tuple[int, str]:
    capsys.readouterr()
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def no_staging(folder: Path) -> None:
    assert not [p for p in folder.iterdir() if ".servesim-" in p.name]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("runs")
    sc = write(d, GOOD)
    for name in ("a", "b"):
        assert main(["run", str(sc), "-o", str(d / name), "-q", "--no-plots"]) == 0
    return d / "a", d / "b"


# ---- the policy itself ----------------------------------------------------------------
def test_a_file_servesim_wrote_is_replaced_a_users_is_not(tmp_path):
    mine, theirs = tmp_path / "mine.json", tmp_path / "theirs.json"
    write_text(mine, "--json", "{}\n")
    assert is_servesim_file(mine)
    write_text(mine, "--json", "[]\n")
    assert mine.read_text() == "[]\n"
    theirs.write_text("keep")
    with pytest.raises(OutPathError, match="servesim did not write"):
        write_text(theirs, "--json", "{}\n")
    assert theirs.read_text() == "keep"
    no_staging(tmp_path)


@pytest.mark.parametrize("where, why", [
    ("/dev/null", "is a device"), ("/dev/full", "is a device"), (".", "is a folder"),
    ("f/x.png", "which is a file"), ("nope/x.png", "does not exist"), ("x/", "folder"),
    ("link.png", "symbolic link"),
])
def test_refused_before_anything_is_written(tmp_path, monkeypatch, where, why):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f").write_text("file")
    (tmp_path / "x").mkdir()
    os.symlink(tmp_path / "f", tmp_path / "link.png")
    with pytest.raises(OutPathError, match=why):
        check_file(where, "--plot")
    assert (tmp_path / "f").read_text() == "file"


def test_a_failed_write_leaves_the_old_file_and_no_staging(tmp_path):
    p = tmp_path / "x.json"
    write_text(p, "--json", "old\n")
    with pytest.raises(RuntimeError):
        from sim.report.outfile import write_file

        with write_file(p, "--json") as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert p.read_text() == "old\n"
    no_staging(tmp_path)


def test_a_default_never_replaces_an_existing_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert free_default("compare.png") == Path("compare.png")
    Path("compare.png").write_text("user")
    Path("compare-2.png").write_text("user")
    assert free_default("compare.png") == Path("compare-3.png")


# ---- each command -----------------------------------------------------------------------
def test_compare_default_png_keeps_the_users_file(two_runs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("compare.png").write_bytes(b"my own picture")
    code, err = cli(capsys, "compare", *two_runs)
    assert code == 0, err
    assert Path("compare.png").read_bytes() == b"my own picture"
    assert Path("compare-2.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    no_staging(tmp_path)


@pytest.mark.parametrize("flag, where, needle", [
    ("--plot", "DIR", "is a folder"), ("--plot", "/dev/full", "is a device"),
    ("--json", "/dev/full", "is a device"), ("--json", "USER", "servesim did not write"),
])
def test_compare_refuses_bad_outputs_first(two_runs, tmp_path, capsys, flag, where, needle):
    guard = Sentinels(tmp_path)
    (tmp_path / "user.json").write_text("mine")
    target = {"DIR": str(tmp_path / "user"), "USER": str(tmp_path / "user.json")}.get(where, where)
    code, err = cli(capsys, "compare", *two_runs, flag, target, *(
        ["--no-plot"] if flag == "--json" else []))
    assert_one_line_error(code, err, flag, needle)
    guard.check()
    assert (tmp_path / "user.json").read_text() == "mine"
    assert not (tmp_path / "user.png").exists()


def test_compare_json_is_strict_also_for_a_run_against_itself(two_runs, tmp_path, capsys):
    out = tmp_path / "c.json"
    code, err = cli(capsys, "compare", two_runs[0], two_runs[0], "--no-plot", "--json", out)
    assert code == 0, err
    doc = strict_json(out)
    assert doc["matched"] > 0


def test_fit_steps_keeps_a_users_model_yaml_and_devices(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    log = write_jsonl(tmp_path / "s.jsonl", records(n=300))
    Path("model.yaml").write_text("# my model\n")
    code, err = cli(capsys, "calibrate", "fit-steps", log)
    assert code == 0, err
    assert Path("model.yaml").read_text() == "# my model\n"
    assert is_servesim_file(tmp_path / "model-2.yaml")
    for bad, needle in (("/dev/null", "is a device"), (str(tmp_path), "is a folder"),
                        ("model.yaml", "servesim did not write")):
        code, err = cli(capsys, "calibrate", "fit-steps", log, "-o", bad)
        assert_one_line_error(code, err, "--out", needle)
    assert os.path.exists("/dev/null") and not Path("/dev/null").is_file()
    no_staging(tmp_path)


def test_trace_export_replaces_only_its_own_file(tmp_path, capsys):
    sc = write(tmp_path, GOOD)
    out = tmp_path / "w.jsonl"
    for _ in range(2):  # the second replaces the first: servesim wrote it
        code, err = cli(capsys, "trace", "export", sc, "-o", out)
        assert code == 0, err
    assert len(out.read_text().splitlines()) == 20
    user = tmp_path / "u.jsonl"
    user.write_text("mine")
    for bad, needle in ((user, "servesim did not write"), ("/dev/null", "is a device"),
                        (tmp_path, "is a folder"), (user / "x", "which is a file")):
        code, err = cli(capsys, "trace", "export", sc, "-o", bad)
        assert_one_line_error(code, err, "--out", needle)
    assert user.read_text() == "mine"
    no_staging(tmp_path)


@pytest.mark.parametrize("what", ["user folder", "file", "under a file"])
def test_sweep_and_fidelity_out_follow_runs_policy(tmp_path, capsys, what):
    sc = write(tmp_path, GOOD)
    guard = Sentinels(tmp_path)
    (tmp_path / "f").write_text("file")
    out = {"user folder": tmp_path / "user", "file": tmp_path / "f",
           "under a file": tmp_path / "f" / "x"}[what]
    code, err = cli(capsys, "sweep", sc, "--rate", "1,2", "-o", out, "-j", "1", "-q")
    assert_one_line_error(code, err, "--out")
    code, err = cli(capsys, "fidelity", sc, "-o", out, "-q")
    assert_one_line_error(code, err, "--out")
    guard.check()
    assert (tmp_path / "f").read_text() == "file"
    no_staging(tmp_path)
    assert sorted(p.name for p in (tmp_path / "user").iterdir()) == [
        ".hidden-sentinel", "deep", "sentinel.txt"]


def test_sweep_resume_skips_a_corrupt_point_and_is_strict(tmp_path, capsys):
    sc = write(tmp_path, GOOD)
    out = tmp_path / "sw"
    assert cli(capsys, "sweep", sc, "--rate", "1,2", "-o", out, "-j", "1", "-q",
               "--no-plots")[0] == 0
    first = sorted((out / "points").glob("*.json"))[0]
    first.write_text("{half")
    rel = os.path.relpath(sc)  # the same scenario named another way is the same sweep
    code, err = cli(capsys, "sweep", rel, "--rate", "1,2", "-o", out, "-j", "1", "-q",
                    "--no-plots", "--resume")
    assert code == 0, err
    assert "unreadable point" in err
    assert json.loads(first.read_text())["id"] == first.stem
    no_staging(tmp_path)


@pytest.fixture
def read_only(tmp_path):
    """A folder nobody may write to, root included (the immutable attribute), or a skip."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if shutil.which("chattr") is None or subprocess.run(
            ["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_read_only_places_are_one_line_before_work(read_only, two_runs, tmp_path, capsys):
    sc = write(tmp_path, GOOD)
    for args, flag in (
            (["trace", "export", sc, "-o", read_only / "w.jsonl"], "--out"),
            (["compare", *two_runs, "--no-plot", "--json", read_only / "c.json"], "--json"),
            (["compare", *two_runs, "--plot", read_only / "c.png"], "--plot"),
            (["calibrate", "fit-steps", write_jsonl(tmp_path / "s.jsonl", records(n=50)),
              "-o", read_only / "m.yaml"], "--out"),
            (["sweep", sc, "--rate", "1", "-j", "1", "-q", "-o", read_only / "sw"], "--out")):
        code, err = cli(capsys, *args)
        assert_one_line_error(code, err, flag, "not writable")
    assert not list(read_only.iterdir())


def test_plot_of_a_read_only_sweep_is_one_line(tmp_path, capsys):
    sc = write(tmp_path, GOOD)
    sw = tmp_path / "sw"
    assert cli(capsys, "sweep", sc, "--rate", "1", "-j", "1", "-q", "--no-plots",
               "-o", sw)[0] == 0
    if subprocess.run(["chattr", "+i", str(sw)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        code, err = cli(capsys, "plot", sw)
    finally:
        subprocess.run(["chattr", "-i", str(sw)], check=True)
    # the chosen point is simulated again (into sw/chosen) before any plot is drawn
    assert_one_line_error(code, err, "sw is not writable")


def test_a_resume_waits_for_no_one_a_running_sweep_holds_its_folder(tmp_path, capsys):
    from sim.report.lock import acquire

    sc = write(tmp_path, GOOD)
    sw = tmp_path / "sw"
    assert cli(capsys, "sweep", sc, "--rate", "1", "-j", "1", "-q", "--no-plots",
               "-o", sw)[0] == 0
    before = sorted(p.name for p in (sw / "points").iterdir())
    held = acquire(sw)  # as a sweep still running there holds it
    try:
        code, err = cli(capsys, "sweep", sc, "--rate", "1", "-j", "1", "-q", "--no-plots",
                        "-o", sw, "--resume")
    finally:
        held.release()
    assert_one_line_error(code, err, "another servesim run")
    assert sorted(p.name for p in (sw / "points").iterdir()) == before
    no_staging(tmp_path)
