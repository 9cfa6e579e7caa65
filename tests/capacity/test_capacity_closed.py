"""A closed loop's load is its clients (`vllm bench serve --max-concurrency C`): sweeps
and capacity searches step whole numbers of clients, the answer's rate is what they sent."""

from __future__ import annotations

import pandas as pd
import pytest

from sim.config.load import load_scenario
from sim.plan.capacity import Probe, Search, Tolerance
from sim.plan.grid import CONC_KEY, RATE_KEY, load_axis, make_plan
from traces.errors import InputError

from .helpers import cli

CLOSED = ("workload.num_requests=300", "workload.arrival={process: closed, concurrency: 8}")


def _probe(load, ok):
    return Probe(load, (), None if ok else "TTFT p95")


def test_the_load_axis_of_a_closed_loop_is_its_clients():
    assert load_axis(load_scenario(None, CLOSED).scenario) == (CONC_KEY, 8.0)
    capped = load_scenario(None, ("workload.arrival.concurrency=4",)).scenario
    assert load_axis(capped)[0] == RATE_KEY  # a cap on a Poisson stream: still its rate


def test_an_integer_search_doubles_halves_and_bisects_whole_clients():
    s = Search((), 8.0, Tolerance(0.02, True), integer=True)
    assert s.next_loads(1) == [8.0]
    s.probes.append(_probe(8.0, True))
    assert s.next_loads(3) == [16.0, 32.0, 64.0]
    s.probes.append(_probe(16.0, False))
    assert s.next_loads(3) == [10.0, 12.0, 14.0]  # k-section at whole numbers
    s.probes += [_probe(10.0, True), _probe(12.0, True), _probe(14.0, False)]
    assert s.next_loads(3) == [13.0]  # the only whole number left between 12 and 14
    s.probes.append(_probe(13.0, False))
    assert s.next_loads(1) == [] and s.status == "found"
    assert s.lo.load == 12.0 and s.hi.load == 13.0


def test_an_integer_search_stops_at_one_client():
    s = Search((), 4.0, Tolerance(0.02, True), integer=True)
    s.probes.append(_probe(4.0, False))
    assert s.next_loads(4) == [2.0, 1.0]  # 0.5 and 0.25 round up to 1: probed once
    s.probes += [_probe(2.0, False), _probe(1.0, False)]
    assert s.status == "none"


def test_sweep_options_for_a_closed_loop_are_checked():
    sc = load_scenario(None, CLOSED).scenario
    with pytest.raises(InputError, match="closed loop's load is its clients"):
        make_plan(sc, None, "4,8", None, 1)
    with pytest.raises(InputError, match="whole numbers"):
        make_plan(sc, [f"{CONC_KEY}=2.5"], None, None, 1)
    plan = make_plan(sc, [f"{CONC_KEY}=4,16"], None, None, 1)
    assert plan.load_key == CONC_KEY and plan.loads == (4.0, 16.0)


@pytest.mark.parametrize("fleet", [(), ("--set", "cluster={replicas: 2}")])
def test_capacity_of_a_closed_loop_is_a_whole_number_of_clients(tmp_path, fleet):
    out = tmp_path / "c"
    sets = [a for s in CLOSED for a in ("--set", s)]
    assert cli("capacity", *sets, *fleet, "--slo", "tpot_p95=12ms", "--seeds", "1",
               "--out", out, "--no-plots") == 0
    row = pd.read_csv(out / "frontier.csv").iloc[0]
    assert row["status"] == "found"
    assert row["max_load"] == int(row["max_load"]) >= 1
    assert row["next_load_failed"] == row["max_load"] + 1  # whole clients: bracket of one
    assert row["rate_mean_req_s"] > 0  # the rate its clients sent
    assert row["binding"] == "TPOT p95"
    pts = pd.read_parquet(out / "points.parquet")
    assert (pts["load"] == pts["load"].round()).all()


def test_sizing_a_closed_loop_for_a_rate_says_why_not(tmp_path, capsys):
    sets = [a for s in CLOSED for a in ("--set", s)]
    assert cli("capacity", *sets, "--target-rate", "20", "--out", tmp_path / "s") == 2
    err = capsys.readouterr().err
    assert "closed loop has no arrival rate to size for" in err
    assert "Traceback" not in err
    assert not (tmp_path / "s").exists()  # nothing half-written
