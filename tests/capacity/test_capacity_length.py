"""A capacity found on runs too short to judge says so, once, after the best line: a
count fixed whatever the rate (tiny.yaml's 300 requests) is 24 s of traffic at its
capacity. A workload sized by duration is long enough at any rate and says nothing."""

from __future__ import annotations

from .helpers import TINY, cli


def _capacity(tmp_path, capsys, *sets: str) -> tuple[str, str]:
    args = ["capacity", TINY, "--seeds", "1", "--no-plots", "--out", tmp_path / "c", "-q"]
    for s in sets:
        args += ["--set", s]
    assert cli(*args) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_a_capacity_on_short_runs_says_so_once(tmp_path, capsys):
    out, err = _capacity(tmp_path, capsys)
    assert "best: base: 12.22 req/s" in out
    assert ("note: at the capacity, the run is too short to judge: 23.8 s of arrivals, under "
            "60 s") in out
    assert "too short" not in err  # the chosen run's own warning is not repeated


def test_a_workload_sized_by_duration_is_long_enough(tmp_path, capsys):
    out, err = _capacity(tmp_path, capsys, "workload.num_requests=null",
                         "workload.duration_s=90")
    assert "best: base: " in out and "too short" not in out + err
