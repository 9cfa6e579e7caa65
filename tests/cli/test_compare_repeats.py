"""The engine's noise floor: compare over recorded repeats of one case prints their spread
and judges a replay's error against it; validate-steps holds a case's repeats out together
(sim/report/spread.py, calibrate/validate_steps.py)."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import pytest

from calibrate.validate_steps import case_rotation, cases
from sim.cli import main
from sim.report.spread import judge, spread_pct, spread_table

RUNS = Path(__file__).resolve().parents[2] / "benchmarks" / "engine" / "runs"
pytestmark = pytest.mark.xdist_group("engine-runs")


def repeat(tmp_path: Path, name: str, factor: float, run: str = "light-long-r1") -> Path:
    """A copy of a committed run whose client saw every token ``factor`` times as late."""
    dst = tmp_path / name
    shutil.copytree(RUNS / run, dst)
    p = dst / "requests.jsonl.gz"
    rows = [json.loads(x) for x in gzip.decompress(p.read_bytes()).decode().splitlines()]
    for r in rows:
        r["token_delays_us"] = [round(d * factor) for d in r["token_delays_us"]]
    p.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    return dst


def test_spread_is_the_largest_pairwise_difference():
    assert spread_pct([100.0, 103.0, 98.0]) == pytest.approx((103 / 98 - 1) * 100)
    assert math.isnan(spread_pct([100.0])) and math.isnan(spread_pct([100.0, float("nan")]))
    assert judge(-2.0, 3.0) == "within the engine's own spread"
    assert judge(5.5, 3.0) == "beyond it by 2.50 points"
    assert judge(1.0, float("nan")) == "no repeats"


def test_spread_table_judges_the_candidate_against_the_repeats_mean():
    t = spread_table([{"m": 100.0}, {"m": 104.0}], {"m": 110.0}, ("m",)).iloc[0]
    assert t["mean"] == 102.0 and t["spread_pct"] == pytest.approx(4.0)
    assert t["error_pct"] == pytest.approx((110 / 102 - 1) * 100)
    assert t["judgement"] == f"beyond it by {(110 / 102 - 1) * 100 - 4.0:.2f} points"


def test_compare_of_repeats_prints_the_engine_spread(tmp_path, capsys):
    r2 = repeat(tmp_path, "r2", 1.04)
    js = tmp_path / "c.json"
    assert main(["compare", str(RUNS / "light-long-r1"), str(r2), "--no-plot", "--json",
                 str(js)]) == 0
    out = capsys.readouterr().out
    assert "engine vs engine: 2 repeats" in out
    spread = {r["metric"]: r for r in json.loads(js.read_text())["spread"]}
    assert spread["E2EL mean ms"]["spread_pct"] == pytest.approx(4.0, abs=0.05)
    assert spread["steps"]["spread_pct"] == 0.0 and "error_pct" not in spread["steps"]


def test_compare_judges_a_replay_against_three_repeats(tmp_path, capsys):
    reps = [RUNS / "light-long-r1", repeat(tmp_path, "r2", 1.03), repeat(tmp_path, "r3", 0.98)]
    sim = tmp_path / "sim"
    assert main(["run", str(RUNS / "light-long-r1" / "scenario.yaml"), "-o", str(sim), "-q",
                 "--no-plots"]) == 0
    js = tmp_path / "c.json"
    assert main(["compare", *map(str, reps), str(sim), "--no-plot", "--json", str(js)]) == 0
    doc = json.loads(js.read_text())
    assert doc["b"] == str(sim) and len(doc["repeats"]) == 3
    row = {r["metric"]: r for r in doc["spread"]}["E2EL mean ms"]
    assert row["spread_pct"] == pytest.approx((1.03 / 0.98 - 1) * 100, abs=0.05)
    assert row["judgement"] == judge(row["error_pct"], row["spread_pct"])


def test_compare_refuses_two_folders_that_are_not_repeats(tmp_path, capsys):
    sim = tmp_path / "sim"
    assert main(["run", str(RUNS / "light-long-r1" / "scenario.yaml"), "-o", str(sim), "-q",
                 "--no-plots"]) == 0
    capsys.readouterr()
    assert main(["compare", str(RUNS / "light-long-r1"), str(sim), str(RUNS / "kv-tight-r1"),
                 "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert "is not a recorded repeat" in err and len(err.strip().splitlines()) == 1


def test_validate_steps_holds_a_cases_repeats_out_together(tmp_path):
    ll = [RUNS / "light-long-r1", repeat(tmp_path, "ll-2", 1.05)]
    groups = cases([*ll, RUNS / "light-short-r1"])
    assert [len(g) for g in groups] == [2, 1]
    t = case_rotation([*ll, RUNS / "light-short-r1"], ll).set_index("metric")
    assert set(t["repeats"]) == {2} and set(t["case"]) == {"light-long"}
    assert t.loc["E2EL mean ms", "spread_pct"] == pytest.approx(5.0, abs=0.05)
    for m, r in t.iterrows():
        assert r["judgement"] == judge(r["error_pct"], r["spread_pct"]), m


def test_validate_steps_cli_prints_the_spread_beside_the_error(tmp_path, capsys):
    runs = [RUNS / "light-long-r1", repeat(tmp_path, "ll-2", 1.05), RUNS / "light-short-r1"]
    assert main(["calibrate", "validate-steps", *map(str, runs)]) == 0
    out = capsys.readouterr().out
    assert "engine spread %" in out and ("within the engine" in out or "beyond it by" in out)
    assert "over h" in out  # the hours the repeats were recorded over
    assert "no repeats" in out  # light-short has none
    assert main(["calibrate", "validate-steps", str(runs[0]), str(runs[1])]) == 2
    assert "every run is a repeat of one case" in capsys.readouterr().err
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "run.json").write_text("{")  # there, but not JSON: said so
    assert main(["calibrate", "validate-steps", str(runs[0]), str(tmp_path / "cut")]) == 2
    assert "cut: its run.json is not the JSON benchmarks/engine writes" in \
        capsys.readouterr().err
