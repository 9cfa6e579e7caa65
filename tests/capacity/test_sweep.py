"""`servesim sweep`: one row per point, every metric, plots, and bad input refused."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from sim.plan.store import MANIFEST, PointStore

from .helpers import TINY, cli


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "s"
    assert cli("sweep", TINY, "--grid", "engine.max_num_seqs=8,64", "--rate", "6:12:6",
               "--seeds", "2", "--jobs", "2", "--out", out, "-q") == 0
    return out


def test_one_row_per_point_with_parameters_and_every_metric(swept):
    df = pd.read_parquet(swept / "points.parquet")
    assert len(df) == 2 * 2 * 2 and df["point_id"].is_unique
    assert list(df.columns[:3]) == ["point_id", "config_id", "config"]
    for col in ("engine.max_num_seqs", "workload.arrival.rate", "seed", "load",
                "latency_ms.ttft.p95", "latency_ms.tpot.p99", "throughput.output_token_per_s",
                "kv_cache.peak_used_fraction", "preemption.count", "stability.verdict",
                "slo.met", "offered_rate_mean", "offered_rate_peak_minute",
                "output_token_per_s_per_gpu", "user_output_token_per_s", "engine_sustains"):
        assert col in df.columns, col
    # plan order: configuration, then load, then seed
    assert df[["engine.max_num_seqs", "load", "seed"]].values.tolist() == [
        [8, 6, 0], [8, 6, 1], [8, 12, 0], [8, 12, 1],
        [64, 6, 0], [64, 6, 1], [64, 12, 0], [64, 12, 1]]
    assert (df["requests.total"] == 300).all()


def test_a_row_holds_what_a_single_run_reports(swept, tmp_path):
    df = pd.read_parquet(swept / "points.parquet")
    row = df[(df["engine.max_num_seqs"] == 64) & (df["load"] == 12) & (df["seed"] == 1)].iloc[0]
    assert cli("run", TINY, "--set", "engine.max_num_seqs=64", "--set",
               "workload.arrival.rate=12", "--set", "seed=1", "--out", tmp_path / "r", "-q",
               "--no-plots") == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert row["latency_ms.ttft.p95"] == summary["latency_ms"]["ttft"]["p95"]
    assert row["throughput.request_per_s"] == summary["throughput"]["request_per_s"]
    assert row["stability.verdict"] == summary["stability"]["verdict"]


def test_points_too_short_to_judge_are_said_once_without_plots(tmp_path, capsys):
    """Without plots no point runs in this process, so nothing said the workload was too
    short to judge (with plots the chosen point's run says it)."""
    assert cli("sweep", TINY, "--set", "workload.num_requests=30", "--rate", "4,8",
               "--out", tmp_path / "s", "-q", "--no-plots") == 0
    err = capsys.readouterr().err
    assert err.count("too short to judge") == 1
    assert "warning: 2 of 2 points; the first of them: the run is too short to judge: " in err


def test_plots_are_written_as_png_and_svg(swept):
    names = {p.name for p in (swept / "plots").iterdir()}
    for stem in ("rate_curves", "frontier", "kv_timeline", "ttft_cdf", "tpot_cdf"):
        assert {f"{stem}.png", f"{stem}.svg"} <= names, stem
    assert (swept / "chosen" / "steps.parquet").exists()


def test_a_finished_sweep_resumes_without_running_anything(swept, capsys):
    before = {p.name: p.stat().st_mtime_ns for p in (swept / "points").iterdir()}
    assert cli("sweep", TINY, "--grid", "engine.max_num_seqs=8,64", "--rate", "6:12:6",
               "--seeds", "2", "--out", swept, "--resume", "-q", "--no-plots") == 0
    assert "(0 simulated, 8 reused" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in (swept / "points").iterdir()} == before


def test_a_folder_holding_a_sweep_is_not_overwritten(swept, capsys):
    assert cli("sweep", TINY, "--rate", "6", "--out", swept, "-q") == 2
    assert "pass --resume" in capsys.readouterr().err


def test_resume_with_another_sweep_is_refused(swept, capsys):
    assert cli("sweep", TINY, "--rate", "6:18:6", "--out", swept, "--resume", "-q") == 2
    err = capsys.readouterr().err
    assert "different" in err and "loads" in err


@pytest.mark.parametrize("args, needle", [
    (["--grid", "engine.max_num_seq=8,64"], "max_num_seq"),
    (["--grid", "engine.max_num_seqs=8,-1"], "max_num_seqs"),
    (["--rate-scale", "1,2"], "--rate"),
    (["--seeds", "0"], "--seeds"),
    (["--jobs", "0"], "--jobs"),
    (["--executor", "dask"], "--executor"),
    (["-c", "x.yaml"], "first argument"),
])
def test_bad_sweeps_fail_with_one_line_and_write_nothing(tmp_path, capsys, args, needle):
    out = tmp_path / "s"
    assert cli("sweep", TINY, *args, "--out", out, "-q") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("servesim: error: ") and needle in err[0]
    assert not out.exists()


def test_temp_files_left_by_a_kill_are_removed_on_resume(tmp_path):
    store = PointStore(tmp_path / "s")
    store.open({"kind": "sweep"}, resume=False)
    (store.dir / ".abc.json.123.tmp").write_text("{half")
    (store.dir / ".mine.tmp").write_text("a user's")  # not servesim's: it stays
    (store.dir / "mine.json").write_text("{}")  # not a point's name: left alone, said so
    store.close()
    store.open({"kind": "sweep"}, resume=True)
    assert sorted(p.name for p in store.dir.iterdir()) == [".mine.tmp", "mine.json"]
    with pytest.warns(UserWarning, match=r"mine.json: not a point file .*; left alone"):
        assert store.done() == {}
    assert (tmp_path / "s" / MANIFEST).exists()


def test_a_sweep_it_cannot_lock_is_refused_in_one_line(tmp_path, monkeypatch):
    """--resume locks an existing sweep from its parent folder; one the user cannot write
    was a PermissionError traceback."""
    import sim.plan.store as store_module
    from sim.report.outpath import OutPathError

    store = PointStore(tmp_path / "s")
    store.open({"kind": "sweep"}, resume=False)
    store.close()

    def denied(out):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(store_module, "acquire", denied)
    with pytest.raises(OutPathError, match=r"cannot lock it from .* \(Permission denied\); "
                       "the folder that holds a sweep must be writable"):
        PointStore(tmp_path / "s").open({"kind": "sweep"}, resume=True)


@pytest.mark.parametrize("cmd", [("sweep", "--rate", "4"), ("capacity", "--seeds", "1")])
def test_a_users_report_html_is_refused_before_anything_runs(tmp_path, capsys, cmd):
    out = tmp_path / "o"
    assert cli(cmd[0], TINY, *cmd[1:], "--out", out, "-q", "--no-plots") == 0
    (out / "report.html").write_text("mine")
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    assert cli(cmd[0], TINY, *cmd[1:], "--out", out, "--resume", "--report", "-q",
               "--no-plots") == 2  # was: the whole search again, then this refusal
    assert "a file servesim did not write is in the way" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before
    assert (out / "report.html").read_text() == "mine"


def test_plot_redraws_the_timeline_of_another_point(swept, capsys):
    df = pd.read_parquet(swept / "points.parquet")
    other = df[(df["engine.max_num_seqs"] == 8) & (df["load"] == 6) & (df["seed"] == 1)]
    pid = other["point_id"].iloc[0]
    assert cli("plot", swept, "--point", pid) == 0
    chosen = json.loads((swept / "chosen" / "point.json").read_text())
    assert chosen["id"] == pid and chosen["label"] == "max_num_seqs=8"
    assert "kv_timeline.png" in capsys.readouterr().out
    assert cli("plot", swept, "--point", "0000") == 2
    (swept / "chosen" / "mine.txt").write_text("a user's")  # plot has no --out to name
    try:
        assert cli("plot", swept, "--point", pid) == 2
        err = capsys.readouterr().err
        assert "chosen: is a servesim result that also holds mine.txt" in err
        assert "--out" not in err and err.rstrip().endswith("move them out")
    finally:
        (swept / "chosen" / "mine.txt").unlink()
